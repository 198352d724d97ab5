// Device-side storage types and 16-byte vector loads/stores: values are kept
// in f16, bf16 or f32 and every kernel computes in f32. Private to the .cu
// files of kernels/cuda.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/grid.h"
#include "model/types.h"

namespace coconet::kernels::cuda {

template <typename T>
__device__ __forceinline__ float to_f32(T x) {
  return static_cast<float>(x);
}
template <>
__device__ __forceinline__ float to_f32<__half>(__half x) {
  return __half2float(x);
}
template <>
__device__ __forceinline__ float to_f32<__nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

template <typename T>
__device__ __forceinline__ T from_f32(float x) {
  return static_cast<T>(x);
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// 16 bytes of T, as one vector register set.
template <typename T>
struct alignas(kVecBytes) Vec16 {
  static constexpr int kCount = kVecBytes / static_cast<int>(sizeof(T));
  T v[kCount];
};

// Loads kVecElems consecutive elements at a 16-byte aligned address into f32.
template <typename T>
__device__ __forceinline__ void load_vec(const T* p, float (&out)[kVecElems]) {
  constexpr int per = Vec16<T>::kCount;
#pragma unroll
  for (int k = 0; k < kVecElems / per; ++k) {
    const Vec16<T> q = reinterpret_cast<const Vec16<T>*>(p)[k];
#pragma unroll
    for (int j = 0; j < per; ++j) out[k * per + j] = to_f32(q.v[j]);
  }
}

// Stores kVecElems f32 values as T at a 16-byte aligned address.
template <typename T>
__device__ __forceinline__ void store_vec(T* p, const float (&in)[kVecElems]) {
  constexpr int per = Vec16<T>::kCount;
#pragma unroll
  for (int k = 0; k < kVecElems / per; ++k) {
    Vec16<T> q;
#pragma unroll
    for (int j = 0; j < per; ++j) q.v[j] = from_f32<T>(in[k * per + j]);
    reinterpret_cast<Vec16<T>*>(p)[k] = q;
  }
}

// Element k of an array of `t` values, as f32.
__device__ __forceinline__ float load_elem(const void* p, model::DType t, std::int64_t k) {
  switch (t) {
    case model::DType::f16: return __half2float(static_cast<const __half*>(p)[k]);
    case model::DType::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[k]);
    case model::DType::f32: break;
  }
  return static_cast<const float*>(p)[k];
}

// Stores x as element k of an array of `t` values (16-bit types round to nearest even).
__device__ __forceinline__ void store_elem(void* p, model::DType t, std::int64_t k, float x) {
  switch (t) {
    case model::DType::f16: static_cast<__half*>(p)[k] = __float2half_rn(x); return;
    case model::DType::bf16: static_cast<__nv_bfloat16*>(p)[k] = __float2bfloat16_rn(x); return;
    case model::DType::f32: break;
  }
  static_cast<float*>(p)[k] = x;
}

// kVecElems elements of an array of `t` values from element k on (16-byte aligned there), as f32.
__device__ __forceinline__ void load_vec_at(const void* p, model::DType t, std::int64_t k, float (&v)[kVecElems]) {
  switch (t) {
    case model::DType::f16: return load_vec(static_cast<const __half*>(p) + k, v);
    case model::DType::bf16: return load_vec(static_cast<const __nv_bfloat16*>(p) + k, v);
    case model::DType::f32: break;
  }
  load_vec(static_cast<const float*>(p) + k, v);
}

// Stores kVecElems f32 values as `t` from element k on (16-byte aligned there).
__device__ __forceinline__ void store_vec_at(void* p, model::DType t, std::int64_t k, const float (&v)[kVecElems]) {
  switch (t) {
    case model::DType::f16: return store_vec(static_cast<__half*>(p) + k, v);
    case model::DType::bf16: return store_vec(static_cast<__nv_bfloat16*>(p) + k, v);
    case model::DType::f32: break;
  }
  store_vec(static_cast<float*>(p) + k, v);
}

// Calls f(index) for every index of [0, n) grid-stride, one element at a time.
template <typename F>
__device__ __forceinline__ void for_each_scalar(std::int64_t n, F&& f) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    f(i);
}

// Calls f(first) for every full group of kVecElems elements grid-stride, then
// g(index) for each element of the ragged tail.
template <typename F, typename G>
__device__ __forceinline__ void for_each_vec(std::int64_t n, F&& f, G&& g) {
  const std::int64_t groups = n / kVecElems;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t tid = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::int64_t q = tid; q < groups; q += stride) f(q * kVecElems);
  for (std::int64_t i = groups * kVecElems + tid; i < n; i += stride) g(i);
}

// Dispatches a storage dtype to its device type: f(T{}) with T one of
// __half, __nv_bfloat16, float.
template <typename F>
decltype(auto) with_storage(model::DType t, F&& f) {
  switch (t) {
    case model::DType::f16: return f(__half{});
    case model::DType::bf16: return f(__nv_bfloat16{});
    case model::DType::f32: break;
  }
  return f(float{});
}

}  // namespace coconet::kernels::cuda
