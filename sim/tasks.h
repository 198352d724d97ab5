// A schedule as tasks: each stage cut into its chunks (stages of an overlap
// group are cut into `knobs.chunks` pieces, others stay whole), each task with
// the time it takes alone (a fixed latency part and a work part) and what it
// asks of the shared resources of its GPU while it works (SMs held, HBM,
// NVLink, network bandwidth). The analytic model and the event simulator both
// start from these tasks, so they agree wherever nothing runs concurrently.
#pragma once

#include <string>
#include <vector>

#include "model/schedule.h"
#include "sim/collective.h"
#include "sim/stage_work.h"

namespace coconet::sim {

enum class Resource { hbm, nvlink, network, count_ };
inline constexpr int kResources = static_cast<int>(Resource::count_);

struct Task {
  int stage = 0;
  int chunk = 0;
  int chunks = 1;
  int rank = 0;    // representative rank: one per process group
  int peer = -1;   // a send's receiving rank (its resources are used too)
  int stream = 0;
  std::string name;
  double latency_us = 0;  // launch and collective latency: uses no bandwidth
  double work_us = 0;     // at full rate
  double demand_GBps[kResources] = {0, 0, 0};
  double sms_held = 0;    // a collective's compute units: channels x nccl.sms_per_channel
  bool is_gemm = false;   // its rate follows the SMs left to it
  bool is_compute = false;  // a kernel (GEMM or element-wise): needs the SMs collectives leave
  GemmShape gemm;
  std::string detail;     // algorithm/protocol, bottleneck

  [[nodiscard]] double duration_us() const { return latency_us + work_us; }
};

// Per-stage summary of the analytic model.
struct StageCost {
  std::string code;
  double time_us = 0;      // the stage alone (all its chunks, one after another)
  double latency_us = 0;
  double compute_us = 0;   // kernel bodies (element-wise, GEMM)
  double comm_us = 0;      // collective transfers
  std::string detail;
};

struct Prediction {
  double time_us = 0;
  std::vector<StageCost> stages;
};

// The tasks of every stage, in stage order then chunk order.
[[nodiscard]] std::vector<Task> make_tasks(const std::vector<StageWork>& work,
                                           const std::vector<model::OverlapGroup>& overlaps,
                                           const Context& ctx, const model::Knobs& knobs);

// The analytic model: stages in sequence; an overlap group as a pipeline of its
// stages' chunks without contention (its longest path: with equal chunks, one
// chunk of each stage + (chunks-1) x the slowest chunk).
[[nodiscard]] Prediction predict_analytic(const std::vector<StageWork>& work,
                                          const std::vector<model::OverlapGroup>& overlaps,
                                          const Context& ctx, const model::Knobs& knobs);
[[nodiscard]] Prediction predict_analytic(const model::Schedule& s, const Context& ctx);

// Resource capacities of one GPU, GB/s (HBM achievable, NVLink, its share of the NICs).
[[nodiscard]] double capacity_GBps(const Context& ctx, Resource r);

}  // namespace coconet::sim
