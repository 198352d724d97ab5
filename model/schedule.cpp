// Schedules: knob names, stage codes, canonical names in the paper's notation,
// the default stages of a program, and the replay of one recorded directive.
//
// Design notes
// - A name is derived, never stored: stage codes joined with '-', overlap
//   groups written ol(A,B,...), runs of identical codes collapsed (three
//   allgathers of moved state read as one AG, as in the paper's RS-C-AG), and
//   the states kept sliced by as_slice appended as +asSlice(m,v).
// - Whether stage-level transformations were applied is read off the history,
//   so it survives any rebuilding of the stages.
#include "model/schedule.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>

#include "model/error.h"
#include "model/transforms.h"

namespace coconet::model {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

void append_collapsed(std::vector<std::string>& out, std::string code) {
  if (out.empty() || out.back() != code) out.push_back(std::move(code));
}

std::string op_code(OpKind k) {
  switch (k) {
    case OpKind::compute:
    case OpKind::update:
    case OpKind::norm:
      return "C";
    case OpKind::matmul:
      return "MM";
    case OpKind::allreduce:
      return "AR";
    case OpKind::reducescatter:
      return "RS";
    case OpKind::allgather:
      return "AG";
    case OpKind::broadcast:
      return "BC";
    case OpKind::reduce:
      return "RD";
    case OpKind::send:
      return "P2P";
  }
  return "?";
}

const Stmt& stmt_named(const Program& p, const std::string& n) {
  const Stmt* s = p.find_stmt(n);
  COCONET_ASSERT(s != nullptr, "stage names unknown statement '" + n + "'");
  return *s;
}

StageKind stage_kind_of(OpKind k) {
  if (k == OpKind::matmul) return StageKind::matmul;
  if (is_communication(k)) return StageKind::collective;
  return StageKind::compute;
}

std::string to_string(StageKind k) {
  switch (k) {
    case StageKind::compute:
      return "compute";
    case StageKind::matmul:
      return "matmul";
    case StageKind::collective:
      return "collective";
    case StageKind::fused:
      return "fused";
  }
  return "?";
}

// States kept sliced by as_slice, in the order the program declares them.
std::vector<std::string> as_sliced_states(const Schedule& s) {
  std::vector<std::string> states;
  for (const auto& d : s.history)
    if (d.op == "as_slice" && !d.args.empty()) states.push_back(d.args.front());
  auto decl_index = [&](const std::string& n) {
    for (std::size_t i = 0; i < s.program.inputs.size(); ++i)
      if (s.program.inputs[i].name == n) return i;
    return s.program.inputs.size();
  };
  std::stable_sort(states.begin(), states.end(),
                   [&](const auto& a, const auto& b) { return decl_index(a) < decl_index(b); });
  return states;
}

void require_args(const Directive& d, std::size_t n, const char* example) {
  if (d.args.size() != n)
    throw UserError(fmt::format("directive '{}' takes {} statement name(s), got {}: write e.g. {}",
                                d.op, n, d.args.size(), example));
}

}  // namespace

std::string to_string(Algo a) {
  switch (a) {
    case Algo::auto_:
      return "auto";
    case Algo::ring:
      return "ring";
    case Algo::tree:
      return "tree";
    case Algo::nvls:
      return "nvls";
    case Algo::hierarchical:
      return "hierarchical";
  }
  return "?";
}

std::string to_string(Proto p) {
  switch (p) {
    case Proto::auto_:
      return "auto";
    case Proto::ll:
      return "ll";
    case Proto::ll128:
      return "ll128";
    case Proto::simple:
      return "simple";
  }
  return "?";
}

Algo parse_algo(const std::string& s) {
  for (Algo a : {Algo::auto_, Algo::ring, Algo::tree, Algo::nvls, Algo::hierarchical})
    if (lower(s) == to_string(a)) return a;
  throw UserError(
      fmt::format("unknown algorithm '{}': use auto, ring, tree, nvls or hierarchical", s));
}

Proto parse_proto(const std::string& s) {
  for (Proto p : {Proto::auto_, Proto::ll, Proto::ll128, Proto::simple})
    if (lower(s) == to_string(p)) return p;
  throw UserError(fmt::format("unknown protocol '{}': use auto, ll, ll128 or simple", s));
}

std::string Stage::code(const Program& p) const {
  COCONET_ASSERT(!stmts.empty(), "empty stage");
  if (kind != StageKind::fused) return op_code(stmt_named(p, stmts.front()).op);
  std::vector<std::string> parts;
  for (const auto& n : stmts) append_collapsed(parts, op_code(stmt_named(p, n).op));
  return "fuse(" + join(parts, "-") + ")";
}

std::string Schedule::name() const {
  std::vector<std::string> items;
  for (int i = 0; i < static_cast<int>(stages.size());) {
    const int g = overlap_of(i);
    if (g < 0) {
      append_collapsed(items, stages[static_cast<std::size_t>(i)].code(program));
      ++i;
      continue;
    }
    std::vector<std::string> inner;
    const auto& group = overlaps[static_cast<std::size_t>(g)];
    for (int k = group.first; k <= group.last; ++k)
      inner.push_back(stages[static_cast<std::size_t>(k)].code(program));
    append_collapsed(items, "ol(" + join(inner, ",") + ")");
    i = group.last + 1;
  }
  std::string out = join(items, "-");
  const auto sliced = as_sliced_states(*this);
  if (!sliced.empty()) out += "+asSlice(" + join(sliced, ",") + ")";
  return out;
}

int Schedule::stage_of(const std::string& stmt) const {
  for (std::size_t i = 0; i < stages.size(); ++i)
    for (const auto& n : stages[i].stmts)
      if (n == stmt) return static_cast<int>(i);
  return -1;
}

int Schedule::overlap_of(int stage) const {
  for (std::size_t g = 0; g < overlaps.size(); ++g)
    if (overlaps[g].first <= stage && stage <= overlaps[g].last) return static_cast<int>(g);
  return -1;
}

bool Schedule::has_stage_transforms() const {
  return std::any_of(history.begin(), history.end(),
                     [](const Directive& d) { return d.op == "fuse" || d.op == "overlap"; });
}

std::vector<Stage> default_stages(const Program& p) {
  std::vector<Stage> stages;
  for (const auto& st : p.stmts) {
    const StageKind kind = stage_kind_of(st.op);
    const bool joins_run =
        kind == StageKind::compute && !stages.empty() && stages.back().kind == StageKind::compute;
    if (joins_run)
      stages.back().stmts.push_back(st.name);
    else
      stages.push_back(Stage{kind, {st.name}});
  }
  return stages;
}

Schedule initial_schedule(const Program& p) {
  Schedule s;
  s.program = p;
  s.stages = default_stages(p);
  return s;
}

std::string describe(const Schedule& s) {
  std::string out = fmt::format("  - {}\n", s.name());
  for (std::size_t i = 0; i < s.stages.size(); ++i) {
    const auto& st = s.stages[i];
    const int g = s.overlap_of(static_cast<int>(i));
    out += fmt::format("      stage {}: {} ({}) [{}]{}\n", i, st.code(s.program), to_string(st.kind),
                       join(st.stmts, ", "), g < 0 ? "" : fmt::format("  overlap group {}", g));
  }
  out += fmt::format("      knobs: chunks={} algo={} proto={} channels={}\n", s.knobs.chunks,
                     to_string(s.knobs.algo), to_string(s.knobs.proto), s.knobs.channels);
  return out;
}

Schedule apply(Schedule s, const Directive& d) {
  if (d.op == "split") {
    require_args(d, 1, "split: [g1]");
    return split(std::move(s), d.args[0]);
  }
  if (d.op == "reorder") {
    require_args(d, 1, "reorder: [g1]");
    return reorder(std::move(s), d.args[0]);
  }
  if (d.op == "as_slice") {
    require_args(d, 1, "as_slice: [m]");
    return as_slice(std::move(s), d.args[0]);
  }
  if (d.op == "fuse") {
    require_args(d, 2, "fuse: [g1.rs, w1]");
    return fuse(std::move(s), d.args[0], d.args[1]);
  }
  if (d.op == "overlap") {
    require_args(d, 2, "overlap: [y, z]");
    return overlap(std::move(s), d.args[0], d.args[1]);
  }
  throw UserError(fmt::format(
      "unknown transformation '{}': use split, reorder, as_slice, fuse or overlap", d.op));
}

}  // namespace coconet::model
