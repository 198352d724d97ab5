// The generic element-wise kernel (see elementwise.h).
//
// Design notes
// - The program travels in the kernel's parameters (constant bank), so every
//   thread reads the same instruction at the same time: a broadcast, no
//   divergence, no device allocation per launch.
// - eval_element is the very function the cpu backend's interpreter follows,
//   so rounding and dropout agree bit for bit; loads widen natively (exact),
//   stores narrow values already rounded by the program (exact).
// - One element per thread, grid-stride over rows x cols. Operands may be
//   strided or broadcast, so loads are scalar; the optimizer and epilogue
//   kernels cover the bandwidth-critical stages with 16-byte vectors.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/check.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/launch.h"
#include "model/error.h"

namespace coconet::kernels::cuda {
namespace {

struct LaunchProgram {
  Instr code[kMaxProgramLength];
  model::DType output_types[kMaxOutputs];
  ElementwiseOperand inputs[kMaxInputs];
  ElementwiseOperand outputs[kMaxOutputs];
  int length;
  int n_outputs;
  Block block;
};

__device__ __forceinline__ float load_any(const ElementwiseOperand& o, std::int64_t k) {
  switch (o.dtype) {
    case model::DType::f16: return __half2float(static_cast<const __half*>(o.data)[k]);
    case model::DType::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(o.data)[k]);
    case model::DType::f32: break;
  }
  return static_cast<const float*>(o.data)[k];
}

__device__ __forceinline__ void store_any(const ElementwiseOperand& o, std::int64_t k, float x) {
  switch (o.dtype) {
    case model::DType::f16: static_cast<__half*>(o.data)[k] = __float2half_rn(x); return;
    case model::DType::bf16:
      static_cast<__nv_bfloat16*>(o.data)[k] = __float2bfloat16_rn(x);
      return;
    case model::DType::f32: break;
  }
  static_cast<float*>(o.data)[k] = x;
}

__global__ void __launch_bounds__(kBlockThreads) elementwise_kernel(const __grid_constant__ LaunchProgram p) {
  const std::int64_t n = p.block.rows * p.block.cols;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += stride) {
    const std::int64_t i = e / p.block.cols;
    const std::int64_t j = e % p.block.cols;
    float out[kMaxOutputs];
    auto load = [&](int slot) { return load_any(p.inputs[slot], p.inputs[slot].access.at(i, j)); };
    eval_element(p.code, p.length, p.output_types, load, p.block.global_index(i, j), out);
    for (int k = 0; k < p.n_outputs; ++k) store_any(p.outputs[k], p.outputs[k].access.at(i, j), out[k]);
  }
}

}  // namespace

void validate(const ElementwiseProgram& program, std::span<const ElementwiseOperand> inputs,
              std::span<const ElementwiseOperand> outputs) {
  if (static_cast<int>(program.code.size()) > kMaxProgramLength)
    throw UserError("cuda element-wise stage: " + std::to_string(program.code.size()) +
                    " instructions exceed the limit of " + std::to_string(kMaxProgramLength) +
                    "; fuse fewer statements into this stage");
  if (program.stack_depth > kMaxStack || inputs.size() > static_cast<std::size_t>(kMaxInputs) ||
      outputs.size() > static_cast<std::size_t>(kMaxOutputs))
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

void elementwise(const ElementwiseProgram& program, std::span<const ElementwiseOperand> inputs,
                 std::span<const ElementwiseOperand> outputs, const Block& block,
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
  p.n_outputs = static_cast<int>(outputs.size());
  p.block = block;
  elementwise_kernel<<<blocks_for(n, kBlockThreads), kBlockThreads, 0, stream>>>(p);
  COCONET_CUDA_CHECK_LAUNCH();
}

}  // namespace coconet::kernels::cuda
