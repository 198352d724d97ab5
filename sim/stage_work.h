// What each stage of a schedule asks of one GPU, computed from the statement
// types: the bytes an element-wise kernel moves (unique inputs read once,
// values needed later written once), its FLOPs, a GEMM's shape, a collective's
// size. Sizes are rank 0's local sizes: with ragged slices rank 0 holds the
// largest slice, so it is the slowest rank and the one the model follows.
#pragma once

#include <string>
#include <vector>

#include "model/schedule.h"
#include "sim/collective.h"
#include "sim/compute.h"
#include "sim/topology.h"

namespace coconet::sim {

// Where a schedule runs: the cluster, the ranks of each process group and the
// values of the program's symbolic sizes.
struct Context {
  Topology topology;
  int ranks = 1;  // ranks per process group
  model::Bindings sizes;

  [[nodiscard]] Placement placement() const { return place(topology, ranks); }
};

// The ranks per group when an experiment does not say: all GPUs over the groups.
[[nodiscard]] int default_group_size(const Topology& t, const model::Program& p);

struct CollectiveWork {
  CollOp op = CollOp::allreduce;
  double bytes = 0;  // nccl-tests size (see collective.h)
  std::string stmt;
};

struct StageWork {
  model::StageKind kind = model::StageKind::compute;
  std::string code;          // the paper's code: AR, C, MM, fuse(RS-C-AG), ...
  std::vector<std::string> stmts;
  int group = 0;             // process group it runs on (a send: the sender's)
  int dest_group = -1;       // a send's receiving group
  double hbm_bytes = 0;      // element-wise bytes moved (fused: besides the collective's own)
  double flops = 0;          // element-wise FLOPs
  bool has_gemm = false;
  GemmShape gemm;
  std::vector<CollectiveWork> collectives;  // in order (a fused allreduce: RS then AG)
  int sliced_norms = 0;      // norms over slices: each needs a scalar allreduce
};

// One StageWork per stage of `s`, in order.
[[nodiscard]] std::vector<StageWork> stage_work(const model::Schedule& s, const Context& ctx);

}  // namespace coconet::sim
