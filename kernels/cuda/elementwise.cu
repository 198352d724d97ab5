// The generic element-wise kernel (see elementwise.h).
//
// Design notes
// - The program travels in the kernel's parameters (constant bank), so every
//   thread reads the same instruction at the same time: a broadcast, no
//   divergence, no device allocation per launch.
// - eval_element is the very function the cpu backend's interpreter follows,
//   so rounding and dropout agree bit for bit; loads widen natively (exact),
//   stores narrow values already rounded by the program (exact).
// - Vector path: when every operand is contiguous over the block (element e
//   at base + e) or one broadcast scalar, a thread takes kVecElems
//   consecutive elements with 16-byte loads and stores (vec.cuh), after a
//   scalar head of at most kVecElems - 1 elements that brings every
//   operand's address to a 16-byte boundary (misaligned pieces: a fused op's
//   piece starts anywhere), and before a scalar ragged tail. When no head
//   aligns every operand (f16 and f32 operands misaligned differently), or
//   an operand is strided or broadcast along one dimension, every element
//   goes through the scalar path: one element per thread, grid-stride.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/check.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/grid.h"
#include "kernels/cuda/occupancy.h"
#include "kernels/cuda/vec.cuh"
#include "kernels/cuda/view.h"
#include "model/error.h"

namespace coconet::kernels::cuda {
namespace {

struct LaunchProgram {
  model::Instr code[kMaxProgramLength];
  model::DType output_types[model::kMaxOutputs];
  ElementwiseOperand inputs[model::kMaxInputs];
  ElementwiseOperand outputs[model::kMaxOutputs];
  int length;
  int n_inputs;
  int n_outputs;
  model::Block block;
  int vec_head;  // scalar elements before the 16-byte aligned groups; -1: scalar path only
};

__device__ __forceinline__ float load_any(const ElementwiseOperand& o, std::int64_t k) {
  return load_elem(o.data, o.dtype, k);
}

__device__ __forceinline__ void store_any(const ElementwiseOperand& o, std::int64_t k, float x) {
  store_elem(o.data, o.dtype, k, x);
}

// Element e of the block (row-major), every operand through its access.
__device__ __forceinline__ void one_element(const LaunchProgram& p, std::int64_t e) {
  const std::int64_t i = e / p.block.cols;
  const std::int64_t j = e % p.block.cols;
  float out[model::kMaxOutputs];
  auto load = [&](int slot) { return load_any(p.inputs[slot], p.inputs[slot].access.at(i, j)); };
  model::eval_element(p.code, p.length, p.output_types, load, p.block.global_index(i, j), out);
  for (int k = 0; k < p.n_outputs; ++k) store_any(p.outputs[k], p.outputs[k].access.at(i, j), out[k]);
}

__device__ __forceinline__ bool is_scalar(const ElementwiseOperand& o) {
  return o.access.row_stride == 0 && o.access.col_stride == 0;
}

// kVecElems elements of a contiguous operand from element `e` on (16-byte aligned there).
__device__ __forceinline__ void load_group(const ElementwiseOperand& o, std::int64_t e, float (&v)[kVecElems]) {
  if (is_scalar(o)) {
    const float x = load_any(o, o.access.base);
#pragma unroll
    for (int k = 0; k < kVecElems; ++k) v[k] = x;
    return;
  }
  load_vec_at(o.data, o.dtype, o.access.base + e, v);
}

__device__ __forceinline__ void store_group(const ElementwiseOperand& o, std::int64_t e, const float (&v)[kVecElems]) {
  store_vec_at(o.data, o.dtype, o.access.base + e, v);
}

// Elements [e, e + kVecElems): 16-byte loads, the program per element, 16-byte stores.
__device__ __forceinline__ void one_group(const LaunchProgram& p, std::int64_t e) {
  float in[model::kMaxInputs][kVecElems];
  float out[model::kMaxOutputs][kVecElems];
  for (int s = 0; s < p.n_inputs; ++s) load_group(p.inputs[s], e, in[s]);
#pragma unroll
  for (int k = 0; k < kVecElems; ++k) {
    const std::int64_t x = e + k;
    float o[model::kMaxOutputs];
    auto load = [&](int slot) { return in[slot][k]; };
    model::eval_element(p.code, p.length, p.output_types, load, p.block.global_index(x / p.block.cols, x % p.block.cols),
                 o);
    for (int s = 0; s < p.n_outputs; ++s) out[s][k] = o[s];
  }
  for (int s = 0; s < p.n_outputs; ++s) store_group(p.outputs[s], e, out[s]);
}

__global__ void __launch_bounds__(kBlockThreads) elementwise_kernel(const __grid_constant__ LaunchProgram p) {
  const std::int64_t n = p.block.rows * p.block.cols;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t tid = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p.vec_head < 0) {
    for (std::int64_t e = tid; e < n; e += stride) one_element(p, e);
    return;
  }
  const std::int64_t head = p.vec_head < n ? p.vec_head : n;
  const std::int64_t groups = (n - head) / kVecElems;
  const std::int64_t tail = head + groups * kVecElems;
  if (tid < head) one_element(p, tid);
  for (std::int64_t q = tid; q < groups; q += stride) one_group(p, head + q * kVecElems);
  for (std::int64_t e = tail + tid; e < n; e += stride) one_element(p, e);
}

// Whether element e of the block is element base + e of the operand.
bool contiguous(const ElementwiseOperand& o, const model::Block& b) {
  return o.access.col_stride == 1 && (o.access.row_stride == b.cols || b.rows == 1);
}

// The scalar head that aligns every contiguous operand to 16 bytes, or -1
// when an operand is strided or broadcast along a dimension, or no head of
// fewer than kVecElems elements aligns them all.
int vector_head(std::span<const ElementwiseOperand> inputs, std::span<const ElementwiseOperand> outputs,
                const model::Block& b) {
  const auto fits = [&](const ElementwiseOperand& o, int head) {
    if (o.access.row_stride == 0 && o.access.col_stride == 0) return true;
    if (!contiguous(o, b)) return false;
    const auto at = reinterpret_cast<std::uintptr_t>(o.data) +
                    static_cast<std::uintptr_t>(o.access.base + head) * storage_bytes(o.dtype);
    return at % kVecBytes == 0;
  };
  for (int head = 0; head < kVecElems; ++head) {
    bool all = true;
    for (const auto& o : inputs) all = all && fits(o, head);
    for (const auto& o : outputs) all = all && fits(o, head) && !(o.access.row_stride == 0 && o.access.col_stride == 0);
    if (all) return head;
  }
  return -1;
}

}  // namespace

void validate(const model::ElementwiseProgram& program, std::span<const ElementwiseOperand> inputs,
              std::span<const ElementwiseOperand> outputs) {
  if (static_cast<int>(program.code.size()) > kMaxProgramLength)
    throw UserError("cuda element-wise stage: " + std::to_string(program.code.size()) +
                    " instructions exceed the limit of " + std::to_string(kMaxProgramLength) +
                    "; fuse fewer statements into this stage");
  if (program.stack_depth > model::kMaxStack || inputs.size() > static_cast<std::size_t>(model::kMaxInputs) ||
      outputs.size() > static_cast<std::size_t>(model::kMaxOutputs))
    throw UserError("cuda element-wise stage: too many operands or too deep an expression");
  if (inputs.size() != program.input_types.size() || outputs.size() != program.output_types.size())
    throw UserError("cuda element-wise stage: operand count differs from the program's");
  for (std::size_t k = 0; k < inputs.size(); ++k)
    if (inputs[k].dtype != program.input_types[k])
      throw UserError("cuda element-wise stage: input '" + program.input_names[k] +
                      "' is stored in another dtype than the program expects");
  for (std::size_t k = 0; k < outputs.size(); ++k)
    if (outputs[k].dtype != program.output_types[k])
      throw UserError("cuda element-wise stage: output '" + program.output_names[k] +
                      "' is stored in another dtype than the program computes");
}

void elementwise(const model::ElementwiseProgram& program, std::span<const ElementwiseOperand> inputs,
                 std::span<const ElementwiseOperand> outputs, const model::Block& block,
                 cudaStream_t stream) {
  validate(program, inputs, outputs);
  const std::int64_t n = block.rows * block.cols;
  if (n == 0) return;
  LaunchProgram p{};
  for (std::size_t k = 0; k < program.code.size(); ++k) p.code[k] = program.code[k];
  for (std::size_t k = 0; k < inputs.size(); ++k) p.inputs[k] = inputs[k];
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    p.outputs[k] = outputs[k];
    p.output_types[k] = program.output_types[k];
  }
  p.length = static_cast<int>(program.code.size());
  p.n_inputs = static_cast<int>(inputs.size());
  p.n_outputs = static_cast<int>(outputs.size());
  p.block = block;
  p.vec_head = vector_head(inputs, outputs, block);
  elementwise_kernel<<<grid_for_kernel(elementwise_kernel, n), kBlockThreads, 0, stream>>>(p);
  COCONET_CUDA_CHECK_LAUNCH();
}

}  // namespace coconet::kernels::cuda
