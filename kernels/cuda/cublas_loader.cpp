// dlopen + dlsym of the seven cuBLAS functions coconet calls (see cublas_loader.h).
#include "kernels/cuda/cublas_loader.h"

#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <string>

#include "kernels/check.h"

namespace coconet::kernels::cuda {
using kernels::DeviceError;
}

namespace coconet::kernels::cuda {
namespace {

const std::string kLibrary = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);

std::atomic<bool> g_loaded{false};

template <typename F>
F symbol(void* lib, const char* name) {
  void* f = ::dlsym(lib, name);
  if (f == nullptr) throw DeviceError(kLibrary + " has no " + name + ": " + ::dlerror());
  return reinterpret_cast<F>(f);
}

CublasApi load() {
  void* lib = ::dlopen(kLibrary.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr)
    throw DeviceError("cannot load " + kLibrary + " (cuBLAS, for the GEMMs): " + ::dlerror() +
                      "; install cuBLAS (the CUDA toolkit, or pip nvidia-cublas) and put its lib folder on "
                      "LD_LIBRARY_PATH");
  CublasApi api;
  api.create = symbol<decltype(api.create)>(lib, "cublasCreate_v2");
  api.destroy = symbol<decltype(api.destroy)>(lib, "cublasDestroy_v2");
  api.set_stream = symbol<decltype(api.set_stream)>(lib, "cublasSetStream_v2");
  api.set_math_mode = symbol<decltype(api.set_math_mode)>(lib, "cublasSetMathMode");
  api.gemm_ex = symbol<decltype(api.gemm_ex)>(lib, "cublasGemmEx");
  api.gemm_strided_batched_ex = symbol<decltype(api.gemm_strided_batched_ex)>(lib, "cublasGemmStridedBatchedEx");
  api.status_string = symbol<decltype(api.status_string)>(lib, "cublasGetStatusString");
  return api;  // the library stays loaded for the life of the process
}

}  // namespace

const CublasApi& cublas() {
  static const CublasApi api = [] {
    CublasApi a = load();
    g_loaded = true;
    return a;
  }();
  return api;
}

bool cublas_loaded() { return g_loaded; }

}  // namespace coconet::kernels::cuda
