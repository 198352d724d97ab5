// The capabilities of the two backends, stated once.
#include "plan/capabilities.h"

#include <fmt/core.h>

#include "model/enum_names.h"
#include "model/error.h"

namespace coconet::plan {

namespace {
constexpr model::EnumName<BackendKind> kBackends[] = {{BackendKind::cuda, "cuda"}, {BackendKind::cpu, "cpu"}};
}  // namespace

std::string to_string(BackendKind b) { return std::string(model::name_of(kBackends, b)); }

BackendKind parse_backend(const std::string& name, const std::string& flag) {
  if (const auto b = model::value_named(kBackends, name)) return *b;
  throw UserError(fmt::format("{} {}: unknown backend; use {}", flag, name, model::names_or(kBackends)));
}

namespace {
constexpr double kMiB = 1024.0 * 1024.0;
// cuda: each piece is one host call of each NCCL collective (a few us of
// launch and synchronisation latency, docs/cost-model.md); 32 MiB moves in
// about 100 us at an H100's NVLink ring bandwidth (370 GB/s busbw,
// reference/published.yaml), so the latency stays a few percent of a piece.
constexpr double kCudaFusedPieceBytes = 32 * kMiB;
// cpu: a piece's received result is read back by the program from the cache
// it was received into: 256 KiB fits a core's L2 (1-2 MiB on current x86
// server cores) beside the lines of the program's other operands.
constexpr double kCpuFusedPieceBytes = 256 * 1024.0;
}  // namespace

Capabilities cuda_capabilities() {
  Capabilities c;
  c.backend = BackendKind::cuda;
  c.resident_overlap = false;  // exec/executor.cpp issues one NCCL call per chunk
  c.fused_piece_bytes = kCudaFusedPieceBytes;
  // kernels/cuda/tile_gemm.h: the project's tiled GEMM publishes each block
  // in device memory, one communication kernel on NCCL's device API (LSA)
  // takes the blocks as they complete. A backend instance turns it off where
  // its group is not one LSA team (CudaBackend::capabilities, with the reason).
  c.tile_overlap = true;
  c.tile_one_collective = true;
  c.tile_fused = false;  // the communication kernel runs a plain reduce-scatter or allreduce
  return c;
}

Capabilities cpu_capabilities() {
  Capabilities c;
  c.backend = BackendKind::cpu;
  c.resident_overlap = false;  // one MPI call per chunk
  c.fused_piece_bytes = kCpuFusedPieceBytes;
  // exec/cpu/comm_thread.h: one thread per rank, pinned with it to one core.
  // Measured on cpu-local (2 ranks, chunks = 1): every ol(X,fuse(...)) ran
  // 3.5-6 us slower than X then fuse(...) while its program ran there.
  c.comm_stream_computes = false;
  // exec/cpu/cpu_backend.cpp: the caller's GEMM publishes each block, the
  // comm thread's collective of that block waits for it.
  c.tile_overlap = true;
  return c;
}

Capabilities capabilities_of(BackendKind b) {
  return b == BackendKind::cuda ? cuda_capabilities() : cpu_capabilities();
}

std::string describe(const Capabilities& c) {
  const std::string piece = c.fused_piece_bytes >= kMiB ? fmt::format("{:.0f} MiB", c.fused_piece_bytes / kMiB)
                                                        : fmt::format("{:.0f} KiB", c.fused_piece_bytes / 1024);
  return fmt::format("{} (fused ops pipelined in pieces of {}; overlapped collectives: {}; overlapped fused ops' "
                     "programs: {}; overlap tile: {})",
                     to_string(c.backend), piece, c.resident_overlap ? "resident, latency once" : "one call per chunk",
                     c.comm_stream_computes ? "on the comm stream" : "on the caller unless their unit computes after them",
                     c.tile_overlap ? "runs" : "not run");
}

}  // namespace coconet::plan
