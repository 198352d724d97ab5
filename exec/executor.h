// Running a StepPlan (plan/step_plan.h) on a backend: every value of this
// rank's process group allocated by its per-rank view, inputs filled with the
// reference interpreter's values (model/input_pattern.h), then each step the
// plan's units one after another, each unit's launches in the plan's issue
// order (plan::issue_order), skipping the ops this rank takes no part in.
//
// A launch runs one op on one chunk of rows: computation on the backend's
// compute stream, communication on its comm stream, with an event per
// (op, chunk) so that a consumer waits for its producers' chunk across
// streams and chunk k's collective runs while chunk k+1 computes. In slice
// mode chunk k is the k-th piece of every rank's slice, so the layouts the
// program states hold chunk by chunk. A fused op goes to the backend whole
// (Backend::fused) as the calls exec/fused_builder.h makes of it, built once
// with the scratch it needs; the values it keeps in scratch get no buffer.
//
// The executor does not lower anything: what it runs is the plan it was
// given, and it records what it issued (ran()) so that tests can hold the
// two together.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "exec/fused_builder.h"
#include "exec/launch_recorder.h"
#include "exec/rank_values.h"
#include "exec/bytes_touched.h"
#include "model/input_pattern.h"
#include "plan/step_plan.h"

namespace coconet::exec {

// One launch as this rank issued it: the plan's op and chunk, and the
// elements of each backend call it made (a collective's local input, a
// kernel's block, a matmul's output rows x columns).
struct RanLaunch {
  int op = 0;
  int chunk = 0;
  std::vector<std::int64_t> elements;
  friend bool operator==(const RanLaunch&, const RanLaunch&) = default;
};

class Executor {
 public:
  // Inputs are drawn from `inputs` (one range per program input), or, when
  // absent, from the ranges model/input_ranges.h chooses for the plan's
  // program: a schedule's run passes its reference's (References::inputs).
  Executor(Backend& backend, plan::StepPlan plan, std::uint64_t seed = 1,
           std::optional<std::vector<model::InputRange>> inputs = std::nullopt);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Names of the units in order: a stage's code ("AR", "fuse(RS-C-AG)") or an
  // overlap group's ("ol(MM,AR)").
  [[nodiscard]] std::vector<std::string> unit_names() const;
  // Runs one step; returns each unit's wall time on this rank (us), measured
  // between synchronisations of the backend. Every step starts from the same
  // inputs: prepare_step() first, unless the caller did.
  std::vector<double> run_step();
  // Refills the inputs the last step overwrote with their updates (values
  // written in place, exec/update_in_place.h); nothing before the first
  // step. Untimed: call it before the step's barrier.
  void prepare_step();
  // The backend's now_us() when the last step started on this rank.
  [[nodiscard]] double step_start_us() const { return step_start_us_; }
  [[nodiscard]] const plan::StepPlan& plan() const { return plan_; }
  [[nodiscard]] const RankValues& values() const { return values_; }
  // Bytes of the program's values the last step's backend calls read and
  // wrote on this rank (exec/bytes_touched.h).
  [[nodiscard]] std::int64_t bytes_touched() const { return touched_.bytes(); }
  // The launches of the last step, in the order this rank issued them.
  [[nodiscard]] const std::vector<RanLaunch>& ran() const { return ran_; }
  // Records every launch's start and end into `r` from now on (nullptr: stop);
  // the recorder must outlive the steps it records.
  void set_recorder(LaunchRecorder* r) { recorder_ = r; }
  // This rank's part of a value from its local element `first` on, out.size()
  // elements of it, as f32, which holds every f16, bf16 and f32 value exactly
  // (Backend::read_f32 of that view).
  void read_f32(const std::string& value, std::int64_t first, std::span<float> out);
  // The same values in place where the backend holds them as f32 on the
  // host (Backend::host_f32), else nullopt.
  [[nodiscard]] std::optional<std::span<const float>> host_f32(const std::string& value, std::int64_t first,
                                                               std::int64_t count);
  // Elements of this rank's part of a value (0 when it lives in another group).
  [[nodiscard]] std::int64_t part_count(const std::string& value) const;

  // Bytes one rank allocates for `program` at `sizes` (the largest group's;
  // nothing allocated), on a backend that writes updates in place or not.
  [[nodiscard]] static std::int64_t bytes_needed(const model::Program& program, const model::Bindings& sizes,
                                                 int ranks_per_group, bool in_place);

 private:
  // Fills the program's inputs (only those named in `only`, when given).
  void fill_inputs(const std::optional<std::set<std::string>>& only = std::nullopt);
  // Every element-wise program it runs (fused ops' included) reads a state
  // before it writes that state's update over it (check_reads_before_writes);
  // nothing to check where no update is written in place.
  void check_in_place_order() const;
  void run_unit(const plan::Unit& u);
  // A tile unit (plan::Unit::tile): every block's collective queued behind
  // its block's event, then the one GEMM.
  void run_tiled_unit(const plan::Unit& u);
  // A tile unit whose collective is one call over the blocks
  // (plan::Capabilities::tile_one_collective: the cuda backend).
  void run_resident_tile_unit(const plan::Unit& u);
  // Issues launch (op, chunk) of unit `u` on the op's stream (a fused op
  // whole, others through the op runner) and returns the event that marks its end.
  Event launch(const plan::Unit& u, const plan::Op& op, int chunk);

  Backend& backend_;
  plan::StepPlan plan_;
  double step_start_us_ = 0;
  std::uint64_t seed_ = 1;
  std::vector<model::InputRange> ranges_;  // one per program input
  bool stepped_ = false;                   // a step ran since the inputs were last filled
  RankValues values_;
  BytesTouched touched_;
  std::map<int, FusedOpCalls> fused_calls_;  // by op id
  std::vector<RanLaunch> ran_;
  LaunchRecorder* recorder_ = nullptr;  // not owned; optional
};

}  // namespace coconet::exec
