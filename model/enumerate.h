// Enumeration of every distinct legal schedule of a program: all combinations
// of split, reorder and as_slice, then every legal fuse and overlap, deduplicated
// by canonical name. The original program (e.g. AR-C) comes first.
#pragma once

#include <vector>

#include "model/schedule.h"

namespace coconet::model {

[[nodiscard]] std::vector<Schedule> enumerate_schedules(const Program& p);

// The paper's baseline for a program: the unscheduled program.
[[nodiscard]] Schedule baseline(const Program& p);

}  // namespace coconet::model
