// A typed view of device memory: where the elements are, how many, and their
// storage type. Kernels take views rather than raw pointers so that one entry
// point serves f16, bf16 and f32 tensors and checks sizes before launching.
#pragma once

#include <cstdint>
#include <string>

#include "model/error.h"
#include "model/types.h"

namespace coconet::kernels::cuda {

// Bytes per element of a storage type (f16 and bf16: 2, f32: 4).
[[nodiscard]] constexpr int storage_bytes(model::DType t) { return t == model::DType::f32 ? 4 : 2; }

struct DeviceView {
  void* data = nullptr;
  std::int64_t size = 0;
  model::DType dtype = model::DType::f32;
};

// Throws UserError naming `what` unless `v` holds exactly `n` elements.
inline void require_size(const DeviceView& v, std::int64_t n, const std::string& what) {
  if (v.size != n)
    throw UserError(what + ": expected " + std::to_string(n) + " elements, got " +
                    std::to_string(v.size) + "; pass views of one shard each");
}

// Throws UserError naming `what` unless `a` and `b` share a storage type.
inline void require_same_dtype(const DeviceView& a, const DeviceView& b, const std::string& what) {
  if (a.dtype != b.dtype)
    throw UserError(what + ": the views must share one storage type (f16, bf16 or f32)");
}

}  // namespace coconet::kernels::cuda
