// The generated single-kernel fused op over an LSA team (see
// fused_program_lsa.h).
//
// Design notes
// - The program travels in the kernel's parameters like the generic
//   element-wise kernel's (elementwise.cu); dtypes are read at run time per
//   operand, so one compiled kernel serves every program and dtype mix.
// - Bytes per element of the shard: the reduced input read from every peer
//   (a reduce-scatter's reads), the local state read and written once, each
//   gathered output written to every peer (an allgather's writes). No
//   intermediate shard is stored, as in the hand-written kernel.
// - Vector path: after a scalar head (planned on the host, lsa_program_plan.h)
//   that brings every operand to a 16-byte boundary, kVecElems elements per
//   thread with 16-byte loads and stores, then a scalar ragged tail; when no
//   head aligns every operand, every element goes through the scalar path.
// - Barriers: as fused_allreduce.cu (entry: peers' inputs visible; exit:
//   peers' stores into this rank's windows visible to later work).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>

#include <string>
#include <vector>

#include "kernels/cuda/check.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/fused_program_lsa.h"
#include "kernels/cuda/lsa_comm_impl.cuh"
#include "kernels/cuda/vec.cuh"
#include "kernels/cuda/view.h"
#include "model/error.h"

namespace coconet::kernels::cuda {

namespace {

using model::DType;

struct LsaProgramParams {
  model::Instr code[kMaxProgramLength];
  DType in_types[model::kMaxInputs];
  DType out_types[model::kMaxOutputs];
  void* in_local[model::kMaxInputs];
  void* out_local[model::kMaxOutputs];      // nullptr: not written locally
  ncclWindow_t out_win[model::kMaxOutputs];  // nullptr: not gathered
  ncclWindow_t reduced_win;
  int reduced_slot;
  int length;
  int n_in;
  int n_out;
  std::int64_t shard_begin;
  std::int64_t shard_size;
  std::int64_t global_first;  // global index of element 0 of the range (dropout's key)
  int vec_head;  // -1: scalar path only
};

// Element `gi` of a window on `peer`, as a local (load/store) address.
__device__ __forceinline__ void* peer_at(ncclWindow_t w, DType t, std::int64_t gi, int peer) {
  return ncclGetLsaPointer(w, static_cast<size_t>(gi) * storage_bytes(t), peer);
}

__device__ __forceinline__ float reduced_element(const ncclDevComm& dev, const LsaProgramParams& p,
                                                 std::int64_t gi) {
  const DType t = p.in_types[p.reduced_slot];
  float sum = 0.0f;
  for (int q = 0; q < dev.lsaSize; ++q) sum += load_elem(peer_at(p.reduced_win, t, gi, q), t, 0);
  return model::round_to(t, sum);
}

__device__ __forceinline__ void store_outputs(const ncclDevComm& dev, const LsaProgramParams& p, int s,
                                              std::int64_t i, float x) {
  const DType t = p.out_types[s];
  if (p.out_local[s] != nullptr) store_elem(p.out_local[s], t, i, x);
  if (p.out_win[s] == nullptr) return;
  for (int q = 0; q < dev.lsaSize; ++q) store_elem(peer_at(p.out_win[s], t, p.shard_begin + i, q), t, 0, x);
}

// Element i of the shard.
__device__ __forceinline__ void one_element(const ncclDevComm& dev, const LsaProgramParams& p, std::int64_t i) {
  const std::int64_t gi = p.shard_begin + i;
  const float reduced = reduced_element(dev, p, gi);
  auto load = [&](int slot) {
    return slot == p.reduced_slot ? reduced : load_elem(p.in_local[slot], p.in_types[slot], i);
  };
  float out[model::kMaxOutputs];
  model::eval_element(p.code, p.length, p.out_types, load, static_cast<std::uint64_t>(p.global_first + gi), out);
  for (int s = 0; s < p.n_out; ++s) store_outputs(dev, p, s, i, out[s]);
}

// Elements [i, i + kVecElems) of the shard, every operand 16-byte aligned there.
__device__ __forceinline__ void one_group(const ncclDevComm& dev, const LsaProgramParams& p, std::int64_t i) {
  const std::int64_t gi = p.shard_begin + i;
  float in[model::kMaxInputs][kVecElems];
  for (int s = 0; s < p.n_in; ++s) {
    if (s != p.reduced_slot) {
      load_vec_at(p.in_local[s], p.in_types[s], i, in[s]);
      continue;
    }
    const DType t = p.in_types[s];
    float part[kVecElems];
#pragma unroll
    for (int k = 0; k < kVecElems; ++k) in[s][k] = 0.0f;
    for (int q = 0; q < dev.lsaSize; ++q) {
      load_vec_at(peer_at(p.reduced_win, t, gi, q), t, 0, part);
#pragma unroll
      for (int k = 0; k < kVecElems; ++k) in[s][k] += part[k];
    }
#pragma unroll
    for (int k = 0; k < kVecElems; ++k) in[s][k] = model::round_to(t, in[s][k]);
  }
  float out[model::kMaxOutputs][kVecElems];
#pragma unroll
  for (int k = 0; k < kVecElems; ++k) {
    float o[model::kMaxOutputs];
    auto load = [&](int slot) { return in[slot][k]; };
    model::eval_element(p.code, p.length, p.out_types, load, static_cast<std::uint64_t>(p.global_first + gi + k), o);
    for (int s = 0; s < p.n_out; ++s) out[s][k] = o[s];
  }
  for (int s = 0; s < p.n_out; ++s) {
    const DType t = p.out_types[s];
    if (p.out_local[s] != nullptr) store_vec_at(p.out_local[s], t, i, out[s]);
    if (p.out_win[s] == nullptr) continue;
    for (int q = 0; q < dev.lsaSize; ++q) store_vec_at(peer_at(p.out_win[s], t, gi, q), t, 0, out[s]);
  }
}

__global__ void __launch_bounds__(kBlockThreads)
    fused_program_lsa_kernel(ncclDevComm dev, const __grid_constant__ LsaProgramParams p) {
  ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), dev, ncclTeamTagLsa(), blockIdx.x);
  bar.sync(ncclCoopCta(), ::cuda::memory_order_acq_rel);
  const std::int64_t n = p.shard_size;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t tid = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p.vec_head < 0) {
    for (std::int64_t i = tid; i < n; i += stride) one_element(dev, p, i);
  } else {
    const std::int64_t head = p.vec_head < n ? p.vec_head : n;
    const std::int64_t groups = (n - head) / kVecElems;
    const std::int64_t tail = head + groups * kVecElems;
    if (tid < head) one_element(dev, p, tid);
    for (std::int64_t q = tid; q < groups; q += stride) one_group(dev, p, head + q * kVecElems);
    for (std::int64_t i = tail + tid; i < n; i += stride) one_element(dev, p, i);
  }
  bar.sync(ncclCoopCta(), ::cuda::memory_order_acq_rel);
}

void check_window(const LsaOperand& o, DType t, std::int64_t n, const std::string& name) {
  if (o.window == nullptr)
    throw UserError("fused op (single kernel over the LSA team): '" + name + "' needs a symmetric window");
  const DeviceView v = o.window->view();
  if (v.dtype != t || v.size < n)
    throw UserError("fused op (single kernel over the LSA team): the window of '" + name + "' holds " +
                    std::to_string(v.size) + " elements of another dtype or size than the program's " +
                    std::to_string(n));
}

std::vector<LsaOperandPlace> places(std::span<const LsaOperand> ops) {
  std::vector<LsaOperandPlace> out;
  for (const auto& o : ops) out.push_back({o.role, reinterpret_cast<std::uintptr_t>(o.local)});
  return out;
}

}  // namespace

void fused_program_lsa(const LsaComm& comm, const model::ElementwiseProgram& program,
                       std::span<const LsaOperand> inputs, std::span<const LsaOperand> outputs,
                       std::int64_t n, cudaStream_t stream, std::int64_t global_first) {
  const auto in_places = places(inputs), out_places = places(outputs);
  const LsaShardPlan plan =
      plan_lsa_shard(program, in_places, out_places, n, comm.lsa_size(), comm.lsa_rank());
  LsaProgramParams p{};
  p.reduced_slot = reduced_slot(in_places);
  for (std::size_t k = 0; k < program.code.size(); ++k) p.code[k] = program.code[k];
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const auto& o = inputs[k];
    p.in_types[k] = program.input_types[k];
    if (o.role == LsaRole::reduced) {
      check_window(o, program.input_types[k], n, program.input_names[k]);
      p.reduced_win = o.window->window();
    } else if (o.local == nullptr && plan.shard.size > 0) {
      throw UserError("fused op (single kernel over the LSA team): input '" + program.input_names[k] +
                      "' has no shard in local memory");
    }
    p.in_local[k] = o.local;
  }
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const auto& o = outputs[k];
    p.out_types[k] = program.output_types[k];
    p.out_local[k] = o.local;
    if (o.role == LsaRole::gathered) {
      check_window(o, program.output_types[k], n, program.output_names[k]);
      if (o.window->window() == p.reduced_win)
        throw UserError("fused op (single kernel over the LSA team): output '" + program.output_names[k] +
                        "' is gathered into the window the reduction reads; give it its own window");
      p.out_win[k] = o.window->window();
    } else if (o.local == nullptr && plan.shard.size > 0) {
      throw UserError("fused op (single kernel over the LSA team): output '" + program.output_names[k] +
                      "' has no shard in local memory");
    }
  }
  p.length = static_cast<int>(program.code.size());
  p.n_in = static_cast<int>(inputs.size());
  p.n_out = static_cast<int>(outputs.size());
  p.shard_begin = plan.shard.begin;
  p.shard_size = plan.shard.size;
  p.global_first = global_first;
  p.vec_head = plan.vec_head;
  // Every CTA takes part in the barriers, even with nothing to compute.
  fused_program_lsa_kernel<<<kFusedCtas, kBlockThreads, 0, stream>>>(comm.impl().dev, p);
  COCONET_CUDA_CHECK_LAUNCH();
}

}  // namespace coconet::kernels::cuda
