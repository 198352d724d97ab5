// Enumeration of every distinct legal schedule of a program: all combinations
// of split, reorder and as_slice, then every legal fuse and overlap, deduplicated
// by canonical name. The original program (e.g. AR-C) comes first.
#pragma once

#include <string>
#include <vector>

#include "model/schedule.h"

namespace coconet::model {

[[nodiscard]] std::vector<Schedule> enumerate_schedules(const Program& p);

// The schedule of `p` called `name_or_yaml`: an enumerated schedule's name
// (e.g. "fuse(RS-C-AG)"), or a schedule YAML file (*.yaml) replayed on `p`.
// Throws UserError listing the program's schedules when there is none.
[[nodiscard]] Schedule find_schedule(const Program& p, const std::string& name_or_yaml);

// The paper's baseline for a program: the unscheduled program.
[[nodiscard]] Schedule baseline(const Program& p);

}  // namespace coconet::model
