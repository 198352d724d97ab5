// The tuner: lowers every schedule for the context's backend and predicts its
// plan under every knob setting of a knob space (chunks, algorithm, protocol,
// channels) with the event simulator, keeps the best setting of each schedule
// and ranks the schedules by it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/schedule.h"
#include "plan/step_plan.h"
#include "sim/simulator.h"
#include "sim/context.h"

namespace coconet::sim {

struct KnobSpace {
  std::vector<int> chunks = {1};               // used by schedules with an overlap group (the counts >= 2)
  std::vector<model::Algo> algos = {model::Algo::auto_};
  std::vector<model::Proto> protos = {model::Proto::auto_};
  std::vector<int> channels = {0};             // 0: the topology's NCCL default
  // Overlap grains, for schedules with an overlap group; tile only where
  // plan::why_not_tile allows it on the context's capabilities.
  std::vector<model::Grain> overlaps = {model::Grain::chunk};
};
// What `predict` searches: chunk counts and both overlap grains for overlapped schedules, NCCL's own choices otherwise.
[[nodiscard]] KnobSpace predict_space();
// What `tune` searches: every algorithm, protocol, a range of channels and chunks, both overlap grains.
[[nodiscard]] KnobSpace tune_space(const Topology& t);

struct Candidate {
  int schedule = 0;  // index into the schedules given
  std::string name;
  model::Knobs knobs;
  double time_us = 0;      // simulated
  double analytic_us = 0;  // the analytic model, same knobs
  std::vector<StageTiming> stages;
};

struct TuneResult {
  std::vector<Candidate> ranked;  // best setting of each schedule, fastest first
  int evaluated = 0;              // (schedule, knobs) pairs simulated
};

[[nodiscard]] TuneResult tune(const std::vector<model::Schedule>& schedules, const Context& ctx,
                              const KnobSpace& space);

// Each schedule lowered for the context's sizes, ranks and backend
// capabilities in one chunk, unresolved: what tune lowers first. Contexts
// that differ only in how a plan is priced (the topology's rates,
// Context::fp8_gemms) lower alike, so a caller tuning the same schedules at
// the same sizes in several of them lowers once (step/layer_block.h).
[[nodiscard]] std::vector<plan::StepPlan> lower_unchunked(const std::vector<model::Schedule>& schedules,
                                                          const Context& ctx);

// Schedules with their programs shared: the plans lowered from them, at any
// sizes, point at these programs (plan::StepPlan::program) rather than each
// holding a copy of its schedule's.
struct ScheduleList {
  std::vector<model::Schedule> schedules;
  std::vector<std::shared_ptr<const model::Program>> programs;  // programs[i]: a copy of schedules[i].program
  std::vector<plan::ScheduleFacts> facts;  // facts[i]: plan::schedule_facts of schedule i, found once
  // values_of[i]: the first schedule whose program has plan::same_values as
  // schedule i's (i itself, or before it): a lowering sizes the values once per such program.
  std::vector<std::size_t> values_of;
};
[[nodiscard]] ScheduleList share_programs(std::vector<model::Schedule> schedules);
// lower_unchunked(list.schedules, ctx), each plan with the list's program and facts.
[[nodiscard]] std::vector<plan::StepPlan> lower_unchunked(const ScheduleList& list, const Context& ctx);

struct TuneOptions {
  // false: Candidate::analytic_us is left 0 (a caller that reads only the
  // simulated times skips the analytic model).
  bool analytic = true;
  // false: the candidates' stages carry no detail (sim::SimOptions::describe;
  // dominant_stage then names no bound), for a caller that reads the times only.
  bool describe = true;
};

// tune, with `unchunked` = lower_unchunked(schedules, c) for a context `c`
// with ctx's sizes, ranks and capabilities: the same result as tune(schedules,
// ctx, space) (with analytic_us 0 when o.analytic is false). The plans are
// resolved in place, not copied: afterwards each holds the last setting
// tried. They can be tuned again, in any such context: resolution rewrites
// every collective choice and the knobs before a plan is priced.
[[nodiscard]] TuneResult tune(const std::vector<model::Schedule>& schedules,
                              std::vector<plan::StepPlan>& unchunked, const Context& ctx,
                              const KnobSpace& space, const TuneOptions& o = {});

// One line naming the stage that dominates a candidate's time, e.g.
// "AR takes 71% (allreduce 671 MB ring/simple, network-bound)".
[[nodiscard]] std::string dominant_stage(const Candidate& c);

}  // namespace coconet::sim
