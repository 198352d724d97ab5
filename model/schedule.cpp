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
// - Directives are typed records. The YAML names of their ops are the records'
//   own (kOp); make_directive walks the alternatives of Directive to find the
//   one an op names, so a new transformation is a new record, an alternative
//   of the variant and its line in apply(), which does not compile without it.
#include "model/schedule.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <type_traits>

#include "model/enum_names.h"
#include "model/error.h"
#include "model/kernel_fusion.h"
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
    case StageKind::kernel:
      return "kernel";
  }
  return "?";
}

// States kept sliced by as_slice, in the order the program declares them.
std::vector<std::string> as_sliced_states(const Schedule& s) {
  std::vector<std::string> states;
  for (const auto& d : s.history)
    if (const auto* a = std::get_if<AsSlice>(&d)) states.push_back(a->state);
  auto decl_index = [&](const std::string& n) {
    for (std::size_t i = 0; i < s.program.inputs.size(); ++i)
      if (s.program.inputs[i].name == n) return i;
    return s.program.inputs.size();
  };
  std::stable_sort(states.begin(), states.end(),
                   [&](const auto& a, const auto& b) { return decl_index(a) < decl_index(b); });
  return states;
}

// Directive D from its YAML arguments, when `op` names it; the count checked.
template <typename D>
std::optional<Directive> directive_if(const std::string& op, const std::vector<std::string>& args) {
  if (op != D::kOp) return std::nullopt;
  const std::size_t arity = D{}.args().size();
  if (args.size() != arity)
    throw UserError(
        fmt::format("directive '{}' takes {} statement name(s), got {}: write e.g. {}: {}", op,
                    arity, args.size(), op, D::kExample));
  if constexpr (requires { D{args[0], args[1], args[2]}; })
    return D{args[0], args[1], args[2]};
  else if constexpr (requires { D{args[0], args[1]}; })
    return D{args[0], args[1]};
  else
    return D{args[0]};
}

// What is done once per kind of directive: over the alternatives of Directive.
template <typename V>
struct EachDirective;

template <typename... Ds>
struct EachDirective<std::variant<Ds...>> {
  // "split, reorder, as_slice, fuse or overlap".
  static std::string ops() {
    const std::vector<std::string> all{std::string(Ds::kOp)...};
    return join(std::vector<std::string>(all.begin(), all.end() - 1), ", ") + " or " + all.back();
  }
  // The directive that `op` names with `args`; empty when `op` names none.
  static std::optional<Directive> make(const std::string& op,
                                       const std::vector<std::string>& args) {
    std::optional<Directive> d;
    (void)((d = directive_if<Ds>(op, args)).has_value() || ...);
    return d;
  }
};

// The visitor of one lambda per directive kind.
template <typename... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
// Spelled out for compilers without C++20's deduction for aggregates (clang 14).
template <typename... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

}  // namespace

std::string op_code(OpKind k) {
  switch (k) {
    case OpKind::compute:
    case OpKind::update:
    case OpKind::norm:
    case OpKind::rowreduce:
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
    case OpKind::alltoall:
      return "A2A";
    case OpKind::send:
      return "P2P";
  }
  return "?";
}

std::string_view op_of(const Directive& d) {
  return std::visit([](const auto& x) { return std::decay_t<decltype(x)>::kOp; }, d);
}

std::vector<std::string> args_of(const Directive& d) {
  return std::visit([](const auto& x) { return x.args(); }, d);
}

Directive make_directive(const std::string& op, const std::vector<std::string>& args) {
  if (auto d = EachDirective<Directive>::make(op, args)) return *std::move(d);
  throw UserError(
      fmt::format("unknown transformation '{}': use {}", op, EachDirective<Directive>::ops()));
}

namespace {
constexpr EnumName<Algo> kAlgos[] = {{Algo::auto_, "auto"},
                                     {Algo::ring, "ring"},
                                     {Algo::tree, "tree"},
                                     {Algo::nvls, "nvls"},
                                     {Algo::hierarchical, "hierarchical"}};
constexpr EnumName<Proto> kProtos[] = {
    {Proto::auto_, "auto"}, {Proto::ll, "ll"}, {Proto::ll128, "ll128"}, {Proto::simple, "simple"}};
constexpr EnumName<Grain> kGrains[] = {{Grain::chunk, "chunk"}, {Grain::tile, "tile"}};
}  // namespace

std::string to_string(Algo a) { return std::string(name_of(kAlgos, a)); }
std::string to_string(Proto p) { return std::string(name_of(kProtos, p)); }
std::string to_string(Grain g) { return std::string(name_of(kGrains, g)); }

Algo parse_algo(const std::string& s) {
  if (const auto a = value_named(kAlgos, lower(s))) return *a;
  throw UserError(fmt::format("unknown algorithm '{}': use {}", s, names_or(kAlgos)));
}

Proto parse_proto(const std::string& s) {
  if (const auto p = value_named(kProtos, lower(s))) return *p;
  throw UserError(fmt::format("unknown protocol '{}': use {}", s, names_or(kProtos)));
}

Grain parse_grain(const std::string& s) {
  if (const auto g = value_named(kGrains, lower(s))) return *g;
  throw UserError(fmt::format("unknown overlap grain '{}': use {}", s, names_or(kGrains)));
}

std::string Stage::code(const Program& p) const {
  COCONET_ASSERT(!stmts.empty(), "empty stage");
  if (kind == StageKind::kernel) {
    // K: element-wise statements and row reductions in one kernel; FA: a flash-attention kernel.
    const bool gemm = std::any_of(stmts.begin(), stmts.end(),
                                  [&](const std::string& n) { return stmt_named(p, n).op == OpKind::matmul; });
    return gemm ? "FA" : "K";
  }
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
  return std::any_of(history.begin(), history.end(), [](const Directive& d) {
    return std::holds_alternative<Fuse>(d) || std::holds_alternative<Overlap>(d) ||
           std::holds_alternative<FuseKernel>(d) || std::holds_alternative<FlashAttention>(d);
  });
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
  out += fmt::format("      knobs: chunks={} algo={} proto={} channels={} overlap={}\n", s.knobs.chunks,
                     to_string(s.knobs.algo), to_string(s.knobs.proto), s.knobs.channels, to_string(s.knobs.overlap));
  return out;
}

Schedule apply(Schedule s, const Directive& d) {
  return std::visit(
      Overloaded{
          [&s](const Split& x) { return split(std::move(s), x.allreduce); },
          [&s](const Reorder& x) { return reorder(std::move(s), x.allgather); },
          [&s](const AsSlice& x) { return as_slice(std::move(s), x.state); },
          [&s](const Fuse& x) { return fuse(std::move(s), x.first, x.last); },
          [&s](const Overlap& x) { return overlap(std::move(s), x.first, x.last); },
          [&s](const FuseKernel& x) { return fuse_kernel(std::move(s), x.first, x.last); },
          [&s](const FlashAttention& x) { return flash_attention(std::move(s), x.first, x.last, x.mask); },
      },
      d);
}

std::vector<std::size_t> predicted_alike(std::span<const double> times) {
  std::vector<std::size_t> alike;
  if (times.empty()) return alike;
  const double fastest = *std::min_element(times.begin(), times.end());
  for (std::size_t i = 0; i < times.size(); ++i)
    // times[i] == fastest: infinite times (none priced) are alike too, where the difference is NaN.
    if (times[i] == fastest || times[i] - fastest <= kPredictedAlike * std::abs(fastest)) alike.push_back(i);
  return alike;
}

std::size_t predicted_best(std::span<const double> times, std::span<const std::size_t> stages) {
  if (times.empty()) return 0;
  std::size_t best = times.size();
  for (const std::size_t i : predicted_alike(times))
    if (best == times.size() || stages[i] < stages[best]) best = i;
  return best;
}

}  // namespace coconet::model
