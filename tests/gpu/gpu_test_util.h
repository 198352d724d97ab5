// Helpers of the GPU tests: a fixture that skips (visibly) without a GPU,
// device arrays filled from host doubles, random data, and comparison with a
// tolerance fit for the storage type.
#pragma once

#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "exec/cuda/cuda_backend.h"
#include "exec/cuda/host_convert.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/view.h"

namespace coconet::gpu_test {

using model::DType;

// A skip by design (the test cannot apply where it runs: one GPU outside
// mpirun, a GPU present where the no-GPU path is tested). The test declares
// it itself: the gtest property `expected_skip` (a key of the test case in
// --gtest_output=json, which scripts/gpu_check_summary.py reads) and the
// marker in the skip message. Any other skip on a GPU machine fails the
// GPU check.
inline constexpr const char* kExpectedSkipProperty = "expected_skip";
inline constexpr const char* kExpectedSkipMarker = "[expected skip] ";
#define COCONET_EXPECTED_SKIP(reason)                                                       \
  do {                                                                                      \
    const std::string coconet_skip_reason_ = (reason);                                     \
    ::testing::Test::RecordProperty(::coconet::gpu_test::kExpectedSkipProperty,            \
                                    coconet_skip_reason_);                                  \
    GTEST_SKIP() << ::coconet::gpu_test::kExpectedSkipMarker << coconet_skip_reason_;      \
  } while (false)

// Skips every test of a suite on a machine without a usable GPU, saying why
// (not an expected skip: on the GPU machine it fails the check).
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const exec::cuda::Availability a = exec::cuda::probe();
    if (!a.ok) GTEST_SKIP() << "no GPU: " << a.reason;
  }
};

// Device memory holding values stored as `dtype`, optionally starting
// `offset` elements into its allocation (offset 1 forces the scalar path).
class DeviceArray {
 public:
  DeviceArray(const std::vector<double>& values, DType dtype, int offset = 0)
      : dtype_(dtype), count_(static_cast<std::int64_t>(values.size())), offset_(offset) {
    const std::size_t bytes =
        static_cast<std::size_t>(count_ + offset_ + 1) * kernels::cuda::storage_bytes(dtype);
    COCONET_CUDA_CHECK(cudaMalloc(&base_, bytes));
    COCONET_CUDA_CHECK(cudaMemset(base_, 0, bytes));
    const auto host = exec::cuda::encode(values, dtype);
    if (!host.empty())
      COCONET_CUDA_CHECK(cudaMemcpy(data(), host.data(), host.size(), cudaMemcpyHostToDevice));
  }
  ~DeviceArray() { (void)cudaFree(base_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  [[nodiscard]] void* data() const {
    return static_cast<char*>(base_) + offset_ * kernels::cuda::storage_bytes(dtype_);
  }
  [[nodiscard]] kernels::cuda::DeviceView view() const { return {data(), count_, dtype_}; }
  [[nodiscard]] std::vector<double> read() const {
    COCONET_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(count_) *
                                    kernels::cuda::storage_bytes(dtype_));
    if (!bytes.empty())
      COCONET_CUDA_CHECK(cudaMemcpy(bytes.data(), data(), bytes.size(), cudaMemcpyDeviceToHost));
    return exec::cuda::decode(bytes, dtype_, count_);
  }

 private:
  void* base_ = nullptr;
  DType dtype_;
  std::int64_t count_;
  int offset_;
};

// Uniform values in [lo, hi), rounded to what `dtype` can hold.
inline std::vector<double> random_values(std::int64_t n, double lo, double hi, DType dtype,
                                         std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& x : v) x = dist(gen);
  return exec::cuda::decode(exec::cuda::encode(v, dtype), dtype, n);
}

// Relative tolerance of one rounding to `dtype` plus f32 arithmetic slack.
inline double tolerance(DType t) {
  switch (t) {
    case DType::f16: return 2e-3;   // 2^-10 unit roundoff, twice
    case DType::bf16: return 1.6e-2;  // 2^-7, twice
    case DType::f32: break;
  }
  return 2e-5;
}

// Every element within rtol (relative to max(|expected|, 1)); names the first miss.
inline ::testing::AssertionResult close(const std::vector<double>& actual,
                                        const std::vector<double>& expected, double rtol) {
  if (actual.size() != expected.size()) return ::testing::AssertionFailure() << "size differs";
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double scale = std::max(std::fabs(expected[i]), 1.0);
    if (!(std::fabs(actual[i] - expected[i]) <= rtol * scale))
      return ::testing::AssertionFailure() << "element " << i << ": got " << actual[i]
                                           << ", expected " << expected[i];
  }
  return ::testing::AssertionSuccess();
}

}  // namespace coconet::gpu_test
