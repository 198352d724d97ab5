// Where a schedule is priced: the cluster, the ranks of each process group,
// the values of the program's symbolic sizes, the backend whose StepPlan
// is priced (by default the one that runs on the topology's device: cuda on
// GPUs, cpu on a calibrated CPU topology), and whether ranks that are alike
// are simulated once (sim/ranks.h).
#pragma once

#include <optional>

#include "model/program.h"
#include "plan/capabilities.h"
#include "sim/collective.h"
#include "sim/ranks.h"
#include "sim/topology.h"

namespace coconet::sim {

struct Context {
  Topology topology;
  int ranks = 1;  // ranks per process group
  model::Bindings sizes;
  std::optional<plan::BackendKind> backend;  // nullopt: default_backend(topology)
  RankMode rank_mode = RankMode::classes;    // every_rank: each rank simulated on its own
  // Where the group sits when it is not `ranks` consecutive ranks packed onto
  // nodes (place()): e.g. a data-parallel group beside tensor parallelism has
  // fewer members per node. Its ranks must equal `ranks`.
  std::optional<Placement> where;
  // The software runs a kernel stage as one kernel (model/kernel_fusion.h,
  // plan::Capabilities::fused_kernels): Megatron-LM's fused kernels and flash
  // attention, as `coconet step` predicts. The project's executors do not.
  bool fused_kernels = false;
  // The linear layers' GEMMs (a GEMM of one product: weights are 2-D; the
  // attention's batched GEMMs stay 16-bit, Transformer Engine's default) run
  // in FP8 with the cast of their first operand (sim::GemmShape::fp8).
  bool fp8_gemms = false;
  // overlap: tile (model::Grain) is priced on every backend, as its design
  // runs it (one GEMM whose blocks the collective takes as they complete),
  // also where the backend's executor does not run it yet (the cuda backend:
  // plan::Capabilities::tile_overlap). False: only where the backend runs it,
  // as `run` tunes the schedules it will execute.
  bool tile_designs = true;
  // False: the backend that will run refuses tiles here (its instance's
  // plan::Capabilities::tile_overlap, e.g. a cuda group that is not one LSA
  // team); with tile_designs false the tuner then keeps to chunks.
  bool tile_here = true;

  [[nodiscard]] Placement placement() const { return where ? *where : place(topology, ranks); }
  [[nodiscard]] plan::Capabilities capabilities() const;
};

// The backend that runs on a topology's device: cuda on GPUs, cpu on CPUs.
[[nodiscard]] plan::BackendKind default_backend(const Topology& t);

}  // namespace coconet::sim
