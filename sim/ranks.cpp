// Grouping ranks by what the simulator can see of them: their group, their
// scales and their node's GPU count. A symmetric cluster is found without
// visiting every rank (one class per group), so the fast path stays as cheap
// at 4096 GPUs as at 8.
#include "sim/ranks.h"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/core.h>

#include "sim/collective.h"

namespace coconet::sim {

namespace {

std::string ranges_text(const std::vector<std::pair<int, int>>& ranges) {
  std::string s;
  for (const auto& [a, b] : ranges) s += fmt::format("{}{}", s.empty() ? "" : ", ", a == b ? fmt::format("{}", a)
                                                                                           : fmt::format("{}-{}", a, b));
  return s;
}

std::string scales_text(const RankScales& s) {
  std::string out;
  const auto add = [&](const char* what, double v) {
    if (v != 1.0) out += fmt::format("{}{} x{:g}", out.empty() ? "" : ", ", what, v);
  };
  add("compute", s.compute);
  add("HBM", s.hbm);
  add("NVLink", s.nvlink);
  add("network", s.network);
  return out;
}

void name(RankClass& c) {
  const std::string ranks = c.count == 1 ? fmt::format("rank {}", c.first_rank())
                                         : fmt::format("ranks {}", ranges_text(c.ranges));
  std::string extra = scales_text(c.scales);
  if (!extra.empty()) extra = ", " + extra;
  c.label = fmt::format("{} (group {}{})", ranks, c.group, extra);
}

// The GPUs of a group that share the node of `rank` (its NICs' users).
int node_peers(const Topology& t, const Placement& where, int rank) {
  return std::min(where.per_node, t.gpus_on_node(t.node_of(rank)));
}

void add_rank(RankClass& c, int rank) {
  if (!c.ranges.empty() && c.ranges.back().second == rank - 1) c.ranges.back().second = rank;
  else c.ranges.emplace_back(rank, rank);
  ++c.count;
}

}  // namespace

std::vector<RankClass> rank_classes(const Topology& t, int ranks_per_group, int groups, RankMode mode) {
  const Placement where = place(t, ranks_per_group);
  std::vector<RankClass> out;
  for (int g = 0; g < groups; ++g) {
    const int first = g * ranks_per_group;
    if (mode == RankMode::classes && !t.asymmetry.any()) {
      RankClass c;
      c.group = g;
      c.ranges = {{first, first + ranks_per_group - 1}};
      c.count = ranks_per_group;
      c.node_peers = where.per_node;
      name(c);
      out.push_back(std::move(c));
      continue;
    }
    std::map<std::tuple<RankScales, int, int>, std::size_t> index;  // (scales, peers, own) -> class
    const std::size_t begin = out.size();
    for (int r = first; r < first + ranks_per_group; ++r) {
      const RankScales s = t.scales_of(r);
      const int peers = node_peers(t, where, r);
      const auto key = std::make_tuple(s, peers, mode == RankMode::every_rank ? r : -1);
      auto [it, fresh] = index.try_emplace(key, out.size());
      if (fresh) {
        RankClass c;
        c.group = g;
        c.scales = s;
        c.node_peers = peers;
        out.push_back(std::move(c));
      }
      add_rank(out[it->second], r);
    }
    for (std::size_t i = begin; i < out.size(); ++i) name(out[i]);
  }
  return out;
}

}  // namespace coconet::sim
