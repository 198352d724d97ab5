// fuse: consecutive stages become one kernel. Two shapes are legal: a
// collective (allreduce, reducescatter, send) with the computations that
// consume it (fuse(AR-C), fuse(P2P-C)), and a reducescatter, the computations
// on its slices and the allgathers of their results: a fused allreduce
// (fuse(RS-C-AG)). Statements keep their names, so only the stages change.
#include <fmt/core.h>

#include <set>

#include "model/error.h"
#include "model/transforms.h"

namespace coconet::model {

namespace {

const Stmt& first_stmt(const Program& p, const Stage& st) { return *p.find_stmt(st.stmts.front()); }

bool leads_fusion(const Program& p, const Stage& st) {
  if (st.kind != StageKind::collective) return false;
  const OpKind k = first_stmt(p, st).op;
  return k == OpKind::allreduce || k == OpKind::reducescatter || k == OpKind::send;
}

bool is_gather(const Program& p, const Stage& st) {
  return st.kind == StageKind::collective && first_stmt(p, st).op == OpKind::allgather;
}

bool reads_any(const Program& p, const Stage& st, const std::set<std::string>& values) {
  for (const auto& n : st.stmts)
    for (const auto& r : Program::reads(*p.find_stmt(n)))
      if (values.contains(r)) return true;
  return false;
}

// Whether stages [i, j] form a legal fused group; empty when legal, else why not.
std::string illegal_reason(const Program& p, const std::vector<Stage>& stages, int i, int j) {
  const auto& lead = stages[static_cast<std::size_t>(i)];
  if (!leads_fusion(p, lead))
    return fmt::format(
        "it starts with a {} stage; a fused group starts with an allreduce, a "
        "reducescatter or a send",
        lead.code(p));
  std::set<std::string> produced(lead.stmts.begin(), lead.stmts.end());
  const bool scatter = first_stmt(p, lead).op == OpKind::reducescatter;
  int k = i + 1;
  for (; k <= j && stages[static_cast<std::size_t>(k)].kind == StageKind::compute; ++k) {
    const auto& st = stages[static_cast<std::size_t>(k)];
    if (!reads_any(p, st, produced))
      return fmt::format("stage {} does not consume what the stages before it produce", k);
    produced.insert(st.stmts.begin(), st.stmts.end());
  }
  if (k == i + 1)
    return "no computation follows the collective (fuse(AR-C), fuse(P2P-C) and fuse(RS-C-AG) "
           "need one)";
  for (; k <= j; ++k) {
    const auto& st = stages[static_cast<std::size_t>(k)];
    if (!scatter || !is_gather(p, st))
      return fmt::format(
          "stage {} ({}) cannot join it: after the computations only the "
          "allgathers of their results may follow, and only after a "
          "reducescatter (a fused allreduce)",
          k, st.code(p));
    if (!reads_any(p, st, produced))
      return fmt::format("stage {} gathers a value the group does not compute", k);
  }
  return {};
}

std::pair<int, int> stage_range(const Schedule& s, const std::string& first,
                                const std::string& last, const char* what) {
  const int i = s.stage_of(first);
  const int j = s.stage_of(last);
  if (i < 0 || j < 0)
    throw UserError(fmt::format("{} {} {}: '{}' is not a statement of the schedule", what, first,
                                last, i < 0 ? first : last));
  if (i >= j)
    throw UserError(
        fmt::format("{} {} {}: name a statement of an earlier stage first and one of "
                    "a later stage second (they are in stages {} and {})",
                    what, first, last, i, j));
  for (int k = i; k <= j; ++k)
    if (s.overlap_of(k) >= 0)
      throw UserError(
          fmt::format("{} {} {}: stage {} already overlaps with others; fuse first, "
                      "then overlap",
                      what, first, last, k));
  return {i, j};
}

}  // namespace

Schedule fuse(Schedule s, const std::string& first_stmt_name, const std::string& last_stmt_name) {
  const auto [i, j] = stage_range(s, first_stmt_name, last_stmt_name, "fuse");
  for (int k = i; k <= j; ++k)
    if (s.stages[static_cast<std::size_t>(k)].kind == StageKind::fused)
      throw UserError(
          fmt::format("fuse {} {}: stage {} is already fused", first_stmt_name, last_stmt_name, k));
  const std::string why = illegal_reason(s.program, s.stages, i, j);
  if (!why.empty())
    throw UserError(fmt::format("fuse {} {}: stages {}..{} cannot be fused: {}", first_stmt_name,
                                last_stmt_name, i, j, why));
  Stage fused{StageKind::fused, {}};
  for (int k = i; k <= j; ++k) {
    const auto& names = s.stages[static_cast<std::size_t>(k)].stmts;
    fused.stmts.insert(fused.stmts.end(), names.begin(), names.end());
  }
  s.stages.erase(s.stages.begin() + i + 1, s.stages.begin() + j + 1);
  s.stages[static_cast<std::size_t>(i)] = std::move(fused);
  for (auto& g : s.overlaps)
    if (g.first > j) {
      g.first -= j - i;
      g.last -= j - i;
    }
  s.history.push_back(Fuse{first_stmt_name, last_stmt_name});
  return s;
}

}  // namespace coconet::model
