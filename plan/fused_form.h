// The shape of a fused stage as one op, read from the statements themselves
// (no formula is recognised): a head collective, element-wise passes over
// the head's result, norms between passes, and the allgathers that finish it.
//
//   fuse(AR-C)     head allreduce  -> pass(es)
//   fuse(RS-C-AG)  head reducescatter -> pass(es) on this rank's slice -> allgathers
//   fuse(P2P-C)    head send/recv  -> pass(es) on the receiving group
//
// Every pass runs one compiled element-wise program (model/elementwise_program.h)
// over the head's rows, piece by piece, so that piece k computes while piece
// k+1's head collective and piece k-1's allgathers run. A norm of a value the
// stage computes ends a pass (its sum of squares needs the whole slice, and
// an allreduce of the partial sums over the group when the value is sliced);
// a norm of a value from before the stage runs first.
//
// Values that live only inside the stage are never materialised whole: the
// head's result is received piece by piece into scratch, and a result that is
// only gathered is written straight into the gather's output at this rank's
// place (the allgather then runs in place). `scratch` names them; every other
// value the stage defines is written to its own buffer.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/elementwise_program.h"
#include "model/schedule.h"
#include "plan/views.h"

namespace coconet::plan {

struct FusedNorm {
  std::string stmt;   // the norm statement
  std::string input;  // the value it measures
  bool across_group = false;  // a sliced value: partial sums allreduced over the group
  friend bool operator==(const FusedNorm&, const FusedNorm&) = default;
};

struct FusedPass {
  std::vector<std::string> stmts;       // element-wise statements, program order
  model::ElementwiseProgram program;  // compiled from them
  std::vector<FusedNorm> norms_after;   // norms of this pass's results, before the next pass
};

struct FusedForm {
  std::vector<FusedNorm> norms_before;  // norms of values from before the stage
  std::string head;                     // the leading allreduce, reducescatter or send
  std::vector<FusedPass> passes;        // at least one
  std::vector<std::string> gathers;     // trailing allgathers, in order (after the last pass)
  std::set<std::string> scratch;        // values held per piece only (see above)
  int pieces = 1;                       // pieces each chunk of the op is pipelined in
};

// The allgather of `form` that gathers `value` ("" when none gathers it).
[[nodiscard]] std::string gather_of(const FusedForm& form, const model::Program& program, const std::string& value);

// The fused form of `stage` (a StageKind::fused stage of `program`), or
// nullopt with the reason in `why` when the stage is not of the shapes above
// (a matmul among its computations, a computation over other rows than the
// head's). `views` are the per-rank views the plan is lowered with.
[[nodiscard]] std::optional<FusedForm> fused_form(const model::Program& program, const model::Stage& stage,
                                                  const std::map<std::string, ValueView>& views, std::string& why);

}  // namespace coconet::plan
