// Enumeration of a program's schedules, in three breadth-first phases:
// program-level transformations (split each allreduce, reorder each allgather
// that a split made, as_slice of every shardable state together), then fusion
// (the largest legal group from each collective), then overlap (each maximal
// chain of stages that the paper overlaps). Each phase starts from everything
// the previous one found; illegal directives are skipped; schedules are
// deduplicated by canonical name; the unscheduled program comes first.
#include "model/enumerate.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <set>

#include <fmt/core.h>

#include "model/catalog.h"
#include "model/error.h"
#include "model/schedule_file.h"
#include "model/transforms.h"

namespace coconet::model {

namespace {

// A move is a sequence of directives applied together (as_slice of all states).
using Move = std::vector<Directive>;
using MoveGenerator = std::vector<Move> (*)(const Schedule&);

bool applied(const Schedule& s, const Directive& d) {
  return std::find(s.history.begin(), s.history.end(), d) != s.history.end();
}

template <typename D>
bool applied_any(const Schedule& s) {
  return std::any_of(s.history.begin(), s.history.end(),
                     [](const Directive& d) { return std::holds_alternative<D>(d); });
}

std::vector<Move> program_moves(const Schedule& s) {
  std::vector<Move> moves;
  for (const auto& st : s.program.stmts) {
    if (st.op == OpKind::allreduce) moves.push_back({Split{st.name}});
    // split turns `y = allreduce` into `y = allgather(y.rs)`: the allgather keeps the name
    if (st.op == OpKind::allgather && applied(s, Split{st.name}) && !applied(s, Reorder{st.name}))
      moves.push_back({Reorder{st.name}});
  }
  Move slice_all;
  for (const auto& in : s.program.inputs)
    if (in.shardable && in.type.layout.is_replicated()) slice_all.push_back(AsSlice{in.name});
  if (!slice_all.empty() && !applied_any<AsSlice>(s)) moves.push_back(slice_all);
  return moves;
}

std::optional<Schedule> try_move(const Schedule& s, const Move& m) {
  try {
    Schedule out = s;
    for (const auto& d : m) out = apply(std::move(out), d);
    return out;
  } catch (const UserError&) {
    return std::nullopt;
  }
}

const std::string& first_of(const Schedule& s, int stage) {
  return s.stages[static_cast<std::size_t>(stage)].stmts.front();
}
const std::string& last_of(const Schedule& s, int stage) {
  return s.stages[static_cast<std::size_t>(stage)].stmts.back();
}

// From each collective stage, the largest legal fused group.
std::vector<Move> fuse_moves(const Schedule& s) {
  std::vector<Move> moves;
  const int n = static_cast<int>(s.stages.size());
  for (int i = 0; i < n; ++i) {
    if (s.stages[static_cast<std::size_t>(i)].kind != StageKind::collective) continue;
    for (int j = n - 1; j > i; --j) {
      const Move m{Fuse{first_of(s, i), last_of(s, j)}};
      if (try_move(s, m)) {
        moves.push_back(m);
        break;
      }
    }
  }
  return moves;
}

// The leading operation of a stage, e.g. reducescatter for fuse(RS-C-AG).
OpKind lead_op(const Schedule& s, int stage) { return s.program.find_stmt(first_of(s, stage))->op; }

// Pairs the paper overlaps: a matmul with the collective (or fused collective)
// on its output, a collective with the send after it, a send with the
// allgather after it.
bool overlap_edge(const Schedule& s, int a, int b) {
  const OpKind x = lead_op(s, a);
  const OpKind y = lead_op(s, b);
  const bool b_comm = s.stages[static_cast<std::size_t>(b)].kind != StageKind::compute &&
                      s.stages[static_cast<std::size_t>(b)].kind != StageKind::matmul;
  if (x == OpKind::matmul) return b_comm && (y == OpKind::allreduce || y == OpKind::reducescatter);
  if (is_collective(x) && s.stages[static_cast<std::size_t>(a)].kind == StageKind::collective)
    return y == OpKind::send;
  if (x == OpKind::send) return y == OpKind::allgather;
  return false;
}

std::vector<Move> overlap_moves(const Schedule& s) {
  std::vector<Move> moves;
  const int n = static_cast<int>(s.stages.size());
  for (int i = 0; i + 1 < n; ++i) {
    const bool head = i == 0 || !overlap_edge(s, i - 1, i);
    if (!head || !overlap_edge(s, i, i + 1)) continue;
    int j = i + 1;
    while (j + 1 < n && overlap_edge(s, j, j + 1)) ++j;
    moves.push_back({Overlap{first_of(s, i), last_of(s, j)}});
  }
  return moves;
}

// Everything reachable from `seeds` by `moves`, seeds first, breadth first.
std::vector<Schedule> closure(std::vector<Schedule> seeds, MoveGenerator moves,
                              std::set<std::string>& seen) {
  std::vector<Schedule> out;
  std::deque<Schedule> queue(seeds.begin(), seeds.end());
  while (!queue.empty()) {
    Schedule s = std::move(queue.front());
    queue.pop_front();
    for (const auto& m : moves(s))
      if (auto next = try_move(s, m); next && seen.insert(next->name()).second)
        queue.push_back(std::move(*next));
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

std::vector<Schedule> enumerate_schedules(const Program& p) {
  Schedule initial = initial_schedule(p);
  std::set<std::string> seen{initial.name()};
  auto all = closure({std::move(initial)}, program_moves, seen);
  all = closure(std::move(all), fuse_moves, seen);
  return closure(std::move(all), overlap_moves, seen);
}

Schedule baseline(const Program& p) { return initial_schedule(p); }

Schedule find_schedule(const Program& p, const std::string& name_or_yaml) {
  if (is_schedule_file(name_or_yaml)) {
    const auto docs = read_schedule_documents(name_or_yaml);
    std::vector<const ScheduleDocument*> mine;
    std::string listed;
    for (const auto& d : docs) {
      if (d.workload == p.name) mine.push_back(&d);
      listed += "\n  " + (d.point ? d.point->text() : d.workload);
    }
    if (mine.size() == 1) return schedule_from_node(p, mine.front()->root, name_or_yaml);
    if (mine.empty() && docs.size() == 1) return schedule_from_node(p, docs.front().root, name_or_yaml);
    if (mine.empty())
      throw UserError(fmt::format("{} has no schedule for workload '{}'; it has:{}", name_or_yaml, p.name, listed));
    throw UserError(fmt::format("{} has {} schedules for '{}', one per point; `run` and `simulate` pick the one "
                                "of their point; it has:{}",
                                name_or_yaml, mine.size(), p.name, listed));
  }
  std::string names;
  for (auto& s : enumerate_schedules(p)) {
    if (s.name() == name_or_yaml) return std::move(s);
    names += "\n  " + s.name();
  }
  throw UserError(fmt::format("workload '{}' has no schedule named '{}'; its schedules:{}", p.name,
                              name_or_yaml, names));
}

}  // namespace coconet::model
