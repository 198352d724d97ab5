// A StepPlan as tasks: one task per launch (op, chunk) of the plan, in the
// order the executor issues them, each with the time it takes alone (a fixed
// latency part and a work part), what it asks of the shared resources of its
// GPU while it works (SMs held, HBM, NVLink, network bandwidth: a collective
// asks each resource its algorithm crosses, sim/collective.h traffic_of), and the
// tasks it waits for: the launch before it on the same stream of the same
// rank, its producers' launch of the same chunk, and the whole unit before
// (the executor synchronises between units). The analytic model (the longest
// path through these tasks, alone) and the event simulator (the same tasks
// with contention) both start from them.
#pragma once

#include <string>
#include <vector>

#include "model/schedule.h"
#include "plan/step_plan.h"
#include "sim/collective.h"
#include "sim/compute.h"
#include "sim/context.h"
#include "sim/ranks.h"

namespace coconet::sim {

enum class Resource { hbm, nvlink, network, count_ };
inline constexpr int kResources = static_cast<int>(Resource::count_);

struct Task {
  int op = 0;      // plan op id
  int unit = 0;
  int stage = 0;
  int chunk = 0;
  int chunks = 1;
  int rank = 0;    // the class of ranks it runs on (sim/ranks.h): its first, for a collective over several
  int peer = -1;   // a send's receiving class (its resources are used too): the first
  // Every class it runs on (a collective over a group with several classes
  // is one bulk-synchronous task on all of them: it starts when each is
  // ready and ends for all together) and every class receiving (a send).
  std::vector<int> ranks;
  std::vector<int> peers;
  bool is_gate = false;   // no work: a join of the unit before (the executor's sync between units)
  int stream = 0;  // 0 compute, 1 comm (plan::Stream)
  std::string name;
  double latency_us = 0;  // launch and collective latency: uses no bandwidth
  double work_us = 0;     // at full rate
  double demand_GBps[kResources] = {0, 0, 0};
  double sms_held = 0;    // a collective's compute units: channels x its op's sms_per_channel (sim/collective.h)
  bool is_gemm = false;   // its rate follows the SMs left to it
  bool is_compute = false;  // a kernel (GEMM or element-wise): needs the SMs collectives leave
  bool is_comm = false;   // a collective, send or fused collective
  GemmShape gemm;
  std::string detail;     // algorithm/protocol, bottleneck
  std::vector<int> after;  // tasks that must end before it starts

  [[nodiscard]] double duration_us() const { return latency_us + work_us; }
};

// Per-stage summary of the analytic model.
struct StageCost {
  std::string code;
  double time_us = 0;      // the stage's tasks alone, one after another
  double latency_us = 0;
  double compute_us = 0;   // kernel bodies (element-wise, GEMM)
  double comm_us = 0;      // collective transfers
  std::string detail;
};

struct Prediction {
  double time_us = 0;
  std::vector<StageCost> stages;
};

// The tasks of a resolved plan (each collective call at the algorithm,
// protocol and channels the plan states: sim/resolve.h), unit by unit in
// issue order, on the classes of ranks given (sim/ranks.h; a task's rank is
// an index into them), or on the context's classes. A plan not resolved is
// an InternalError: pricing chooses nothing. `describe` false leaves every
// task's name and detail empty (a caller that reads the times only).
[[nodiscard]] std::vector<Task> make_tasks(const plan::StepPlan& p, const Context& ctx,
                                           const std::vector<RankClass>& classes, bool describe = true);
[[nodiscard]] std::vector<Task> make_tasks(const plan::StepPlan& p, const Context& ctx);

// The analytic model: the longest path through the tasks, each alone.
[[nodiscard]] Prediction predict_analytic(const plan::StepPlan& p, const Context& ctx);
[[nodiscard]] Prediction predict_analytic(const plan::StepPlan& p, const Context& ctx,
                                          const std::vector<RankClass>& classes);
// Lowers `s` (its knobs) for the context's backend, then predicts it.
[[nodiscard]] Prediction predict_analytic(const model::Schedule& s, const Context& ctx);

// The barrier a tile unit's resident collective crosses per block before
// reading the peers' block (Capabilities::tile_one_collective, the cuda
// backend's communication kernel, kernels/cuda/tile_gemm.h: an LSA barrier,
// flags written across the NVLink team and polled): one NVLink step's latency
// at the LL protocol's (a flag store and its read, no bulk data).
[[nodiscard]] double tile_block_barrier_us(const Topology& t);

// The plan of `s` (its knobs) on the context's backend, ranks and sizes,
// its collectives resolved on the context (sim/resolve.h).
[[nodiscard]] plan::StepPlan lower_for(const model::Schedule& s, const Context& ctx);

// Resource capacities of one GPU, GB/s (HBM achievable, NVLink, its share of the NICs).
[[nodiscard]] double capacity_GBps(const Context& ctx, Resource r);
// The same for a GPU of class `c` on its topology scaled by the class's scales
// (Topology::scaled): its node's NICs shared by `node_peers` GPUs.
[[nodiscard]] double capacity_GBps(const Topology& scaled, const RankClass& c, Resource r);
// The context a class's own work is priced in: the topology with its scales.
[[nodiscard]] Context class_context(const Context& ctx, const RankScales& s);

}  // namespace coconet::sim
