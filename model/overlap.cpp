// overlap: consecutive stages run concurrently, chunk by chunk, each consuming
// the chunks the one before it produces (a matmul and the collective on its
// output, a reducescatter and the send of its slices, ...). Values do not
// change; only the stages' timing does, so this is schedule data only.
#include <fmt/core.h>

#include <algorithm>
#include <set>

#include "model/error.h"
#include "model/transforms.h"

namespace coconet::model {

namespace {

// Pieces an overlapped group is cut into when the knobs do not say: enough to
// hide most of one stage behind the other (the CoCoNet paper tunes this per
// size; the tuner in sim/ searches it), few enough that each chunk stays large.
constexpr int kDefaultOverlapChunks = 4;

bool communicates(const Stage& st) {
  return st.kind == StageKind::collective || st.kind == StageKind::fused;
}

bool has_op(const Program& p, const Stage& st, OpKind op) {
  return std::any_of(st.stmts.begin(), st.stmts.end(), [&](const auto& n) { return p.find_stmt(n)->op == op; });
}

bool consumes(const Program& p, const Stage& consumer, const Stage& producer) {
  const std::set<std::string> made(producer.stmts.begin(), producer.stmts.end());
  for (const auto& n : consumer.stmts)
    for (const auto& r : Program::reads(*p.find_stmt(n)))
      if (made.contains(r)) return true;
  return false;
}

std::string illegal_reason(const Schedule& s, int i, int j) {
  const Program& p = s.program;
  bool any_comm = false;
  for (int k = i; k <= j; ++k) {
    const Stage& st = s.stages[static_cast<std::size_t>(k)];
    if (s.overlap_of(k) >= 0) return fmt::format("stage {} is already in an overlap group", k);
    if (has_op(p, st, OpKind::norm))
      return fmt::format(
          "stage {} computes a norm, which needs its whole input before its "
          "readers can run, so it cannot be cut into chunks",
          k);
    if (has_op(p, st, OpKind::alltoall))
      return fmt::format(
          "stage {} is an alltoall, which exchanges whole slices between every pair of ranks; "
          "cutting it into row chunks is not supported",
          k);
    if (k > i && !consumes(p, st, s.stages[static_cast<std::size_t>(k - 1)]))
      return fmt::format("stage {} ({}) does not read what stage {} produces", k, st.code(p),
                         k - 1);
    any_comm = any_comm || communicates(st);
  }
  if (!any_comm) return "none of them communicates; overlap hides communication behind work";
  return {};
}

}  // namespace

Schedule overlap(Schedule s, const std::string& first_stmt, const std::string& last_stmt) {
  const int i = s.stage_of(first_stmt);
  const int j = s.stage_of(last_stmt);
  if (i < 0 || j < 0)
    throw UserError(fmt::format("overlap {} {}: '{}' is not a statement of the schedule",
                                first_stmt, last_stmt, i < 0 ? first_stmt : last_stmt));
  if (i >= j)
    throw UserError(
        fmt::format("overlap {} {}: name a statement of an earlier stage first and one "
                    "of a later stage second (they are in stages {} and {})",
                    first_stmt, last_stmt, i, j));
  const std::string why = illegal_reason(s, i, j);
  if (!why.empty())
    throw UserError(fmt::format("overlap {} {}: stages {}..{} cannot overlap: {}", first_stmt,
                                last_stmt, i, j, why));
  s.overlaps.push_back({i, j});
  std::sort(s.overlaps.begin(), s.overlaps.end(),
            [](const OverlapGroup& a, const OverlapGroup& b) { return a.first < b.first; });
  if (s.knobs.chunks == 1) s.knobs.chunks = kDefaultOverlapChunks;
  s.history.push_back(Overlap{first_stmt, last_stmt});
  return s;
}

}  // namespace coconet::model
