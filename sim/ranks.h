// Which ranks the simulator prices separately. Ranks that are provably alike
// (the same process group, the same scales from node overrides and
// stragglers, and as many GPUs sharing their node's NICs) form one class,
// simulated once; on a symmetric cluster that is one class per group, the
// representative rank of the fast path. `every_rank` makes each rank a class
// of its own (what a per-rank simulation of the whole machine costs).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "sim/topology.h"

namespace coconet::sim {

enum class RankMode { classes, every_rank };

struct RankClass {
  int group = 0;
  std::vector<std::pair<int, int>> ranges;  // the global ranks it stands for, [first, last] each
  int count = 0;                            // ranks in it
  RankScales scales;                        // its GPUs' rates over the topology's
  int node_peers = 1;                       // GPUs of its group sharing its node's NICs
  std::string label;                        // e.g. "ranks 0-16, 18-63 (group 0)"

  [[nodiscard]] int first_rank() const { return ranges.front().first; }
};

// The classes of `groups` groups of `ranks_per_group` consecutive ranks on
// `t`, group by group, each group's classes in order of their first rank.
[[nodiscard]] std::vector<RankClass> rank_classes(const Topology& t, int ranks_per_group, int groups,
                                                  RankMode mode = RankMode::classes);

}  // namespace coconet::sim
