// The ladder of input ranges and the choice among them (see input_ranges.h).
#include "model/input_ranges.h"

#include <fmt/core.h>

#include <map>
#include <set>

#include "model/error.h"
#include "model/value_bounds.h"

namespace coconet::model {
namespace {

// The signed rungs' magnitudes, widest first (rungs 1, 2, 3).
constexpr std::int64_t kSignedMagnitudes[] = {3, 2, 1};
constexpr int kSignedRungs = static_cast<int>(std::size(kSignedMagnitudes));

using Deps = std::set<std::size_t>;  // input indices a value depends on

// Tensors read by the operands of `e` that must be positive.
void positive_operands(const Expr& e, std::vector<std::string>& out) {
  const auto take = [&](const Expr& x) {
    for (auto& n : tensors_read(x)) out.push_back(std::move(n));
  };
  if (e->kind == ExprKind::unary &&
      (e->unary == UnaryOp::sqrt || e->unary == UnaryOp::rsqrt || e->unary == UnaryOp::log))
    take(e->args.at(0));
  if (e->kind == ExprKind::binary && e->binary == BinaryOp::div) take(e->args.at(1));
  if (e->kind == ExprKind::binary && e->binary == BinaryOp::pow) take(e->args.at(0));
  for (const auto& a : e->args) positive_operands(a, out);
}

std::string sizes_text(const Bindings& sizes) {
  std::string out;
  for (const auto& [k, v] : sizes) out += fmt::format("{}{}={}", out.empty() ? "" : " ", k, v);
  return out;
}

}  // namespace

std::vector<bool> inputs_needing_positive(const Program& p) {
  std::map<std::string, Deps> deps;
  for (std::size_t i = 0; i < p.inputs.size(); ++i) deps[p.inputs[i].name] = {i};
  std::vector<bool> out(p.inputs.size(), false);
  const auto mark = [&](const std::string& name) {
    for (std::size_t i : deps[name]) out[i] = true;
  };
  for (const auto& s : p.stmts) {
    Deps d;
    for (const auto& r : Program::reads(s)) d.insert(deps[r].begin(), deps[r].end());
    deps[s.name] = std::move(d);
    if (!s.expr) continue;
    std::vector<std::string> positive;
    positive_operands(s.expr, positive);
    for (const auto& n : positive) mark(n);
  }
  return out;
}

int ladder_rungs() { return 1 + kSignedRungs + kMaxInputShift; }

std::vector<InputRange> ladder_ranges(const Program& p, int rung) {
  std::vector<InputRange> out;
  if (rung == 0) {
    for (const auto& in : p.inputs) out.push_back(classic_input_range(in.type.layout.is_local()));
    return out;
  }
  const std::int64_t m = kSignedMagnitudes[std::min(rung, kSignedRungs) - 1];
  const int shift = std::max(rung - kSignedRungs, 0);
  const std::vector<bool> positive = inputs_needing_positive(p);
  for (std::size_t i = 0; i < p.inputs.size(); ++i)
    out.push_back(positive[i] ? InputRange{1, m + 1, shift} : InputRange{-m, m, shift});
  return out;
}

InputChoice choose_inputs(const Program& p, const Bindings& sizes, int ranks) {
  InputChoice last;
  for (int rung = 0; rung < ladder_rungs(); ++rung) {
    InputChoice c;
    c.ranges = ladder_ranges(p, rung);
    c.rung = rung;
    const Headroom h = headroom(p, bound_values(p, sizes, ranks, c.ranges));
    c.headroom = h.ratio;
    c.tightest = h.value;
    if (c.headroom >= kInputHeadroom) return c;
    last = std::move(c);
  }
  throw UserError(fmt::format(
      "no input ranges keep every value of '{}' finite at {} on {} ranks per group: with the narrowest "
      "(integers in [-1, 1] times 2^-{}), {} has a headroom of {:.3g} to its type's largest value, "
      "less than the {:g} needed; pass smaller sizes (or wider dtypes)",
      p.name, sizes_text(sizes), ranks, kMaxInputShift, last.tightest, last.headroom, kInputHeadroom));
}

}  // namespace coconet::model
