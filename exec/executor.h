// One schedule made ready to run on a backend: every value of this rank's
// process group allocated by its layout, inputs filled with the reference
// interpreter's values (model::input_value), and the stages grouped into
// units (a stage, or an overlap group) that run one step at a time.
//
// A unit runs as a list of operations (a fused run of element-wise
// statements, a matmul, a norm, a collective or send) over chunks of rows:
// an overlap group is cut into Knobs::chunks pieces, communication goes to
// the backend's comm stream and computation to its compute stream, with an
// event per (operation, chunk) so chunk k's collective runs while chunk k+1
// computes. When a group holds a reducescatter, allgather or sliced value,
// chunk k is the k-th piece of every rank's slice, so the layouts the
// program states hold chunk by chunk.
//
// A fuse(RS-C-AG) stage that exec/fused_stage.h recognises as an SGD or Adam
// update is first offered whole to Backend::try_fused_allreduce; when the
// backend declines, it runs as its reducescatter, computation and allgather.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "exec/plan.h"
#include "model/schedule.h"

namespace coconet::exec {

class Executor {
 public:
  Executor(Backend& backend, model::Schedule schedule, const model::Bindings& sizes, std::uint64_t seed = 1);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Names of the units in order: a stage's code ("AR", "fuse(RS-C-AG)") or an
  // overlap group's ("ol(MM,AR)").
  [[nodiscard]] std::vector<std::string> unit_names() const;
  // Runs one step; returns each unit's wall time on this rank (us), measured
  // between synchronisations of the backend.
  std::vector<double> run_step();
  [[nodiscard]] const Plan& plan() const { return plan_; }
  // Whether a step ran a fused allreduce as the backend's own kernel.
  [[nodiscard]] bool ran_fused_collective() const { return ran_fused_; }
  [[nodiscard]] const model::Schedule& schedule() const { return schedule_; }
  // This rank's part of a value (empty when it lives in another group).
  [[nodiscard]] std::vector<double> read(const std::string& value);

  // Bytes this rank would allocate for `schedule` at `sizes` (nothing allocated).
  [[nodiscard]] static std::int64_t bytes_needed(const model::Schedule& schedule, const model::Bindings& sizes,
                                                 int ranks_per_group);

  struct Unit;

 private:
  void fill_inputs(std::uint64_t seed);
  void run_unit(Unit& u);

  Backend& backend_;
  model::Schedule schedule_;
  Plan plan_;
  std::vector<std::unique_ptr<Unit>> units_;
  bool ran_fused_ = false;
};

}  // namespace coconet::exec
