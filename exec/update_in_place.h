// Which values of a program a rank writes in place over the state tensor they
// update: `m1 = update(m, ...)` gives m's new value, so m1 may live in m's
// buffer rather than beside it (the DSL's meaning of update, and what an
// optimizer does: BERT-large Adam on 2 ranks holds 12 bytes an element less,
// 3.75 GiB a rank). A value is written in place when
//  - it is an update of an input `t` held on this rank, of t's dtype, whose
//    part lies inside t's part (the same part, or this rank's slice of a
//    replicated t: a schedule's sliced update `m1.s`), at an offset into it;
//  - or it is the allgather of such a sliced update (or of one a fused op
//    keeps in scratch and writes at the gather's own place) whose part is
//    t's part: the gather then runs in place (its input is its own part);
//  - and every other statement that reads t is one the update depends on
//    (transitively): t's old values are read before the new ones are written.
//    Statements run in program order within a compiled element-wise program
//    (model/elementwise_program.h), so a kernel that both reads t and writes
//    the update reads each element before it writes it
//    (check_reads_before_writes holds each program to that).
// After a step the updated inputs hold their new values: a second step
// refills them first (Executor::run_step), so that every step starts from
// the same inputs.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "model/elementwise_program.h"
#include "model/program.h"
#include "plan/views.h"

namespace coconet::exec {

struct InPlace {
  std::string target;       // the input whose buffer holds the value
  std::int64_t offset = 0;  // elements into the target's part
};

// The values of `p` this rank writes in place (by value name), given every
// value's view on this rank; `scratch` names the values a fused op keeps in
// scratch (no buffer of their own).
[[nodiscard]] std::map<std::string, InPlace> in_place_values(
    const model::Program& p, const std::map<std::string, plan::ValueView>& views,
    const std::set<std::string>& scratch = {});

// Throws InternalError when `program` stores a value written in place (one
// of `in_place`) before its last load of the target it overwrites.
void check_reads_before_writes(const model::ElementwiseProgram& program,
                               const std::map<std::string, InPlace>& in_place);

}  // namespace coconet::exec
