// The bound analysis of value magnitudes (see value_bounds.h).
#include "model/value_bounds.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

namespace coconet::model {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kF16Max = 65504.0;  // IEEE 754 binary16: (2 - 2^-10) * 2^15
// bf16 keeps f32's exponent: (2 - 2^-7) * 2^127.
constexpr double kBf16Max = 3.3895313892515355e38;
constexpr double kF32Max = static_cast<double>(std::numeric_limits<float>::max());
// The minimum of gelu(x) = x * Phi(x): -0.16997 at x = -0.75179 (Hendrycks
// and Gimpel 2016, figure 1); rounded away from zero.
constexpr double kGeluMin = -0.17;

const Interval kUnbounded{-kInf, kInf};

// A kept element's factor, 1/(1-p) with 1-p in f32 as model/ops.h computes it
// (1/0.9f is 5e-8 above 1/0.9).
double dropout_scale(double p) { return 1.0 / static_cast<double>(1.0f - static_cast<float>(p)); }

Interval hull(Interval a, Interval b) { return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)}; }
bool is_zero(Interval a) { return a.lo == 0.0 && a.hi == 0.0; }
bool holds_zero(Interval a) { return a.lo <= 0.0 && a.hi >= 0.0; }

// min and max of candidate ends; any NaN (inf - inf, 0 * inf) makes the result unbounded.
Interval from_candidates(std::initializer_list<double> c) {
  Interval out{kInf, -kInf};
  for (double v : c) {
    if (std::isnan(v)) return kUnbounded;
    out.lo = std::min(out.lo, v);
    out.hi = std::max(out.hi, v);
  }
  return out;
}

Interval add(Interval a, Interval b) { return from_candidates({a.lo + b.lo, a.hi + b.hi}); }
Interval sub(Interval a, Interval b) { return from_candidates({a.lo - b.hi, a.hi - b.lo}); }
Interval mul(Interval a, Interval b) {
  if (is_zero(a) || is_zero(b)) return {0.0, 0.0};
  return from_candidates({a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi});
}
Interval square(Interval a) {
  const double m = a.magnitude();
  const double least = holds_zero(a) ? 0.0 : std::min(std::fabs(a.lo), std::fabs(a.hi));
  return {least * least, m * m};
}
Interval scale(Interval a, double k) { return mul(a, {k, k}); }
Interval magnitudes(Interval a) {  // |x| for x in a
  return {holds_zero(a) ? 0.0 : std::min(std::fabs(a.lo), std::fabs(a.hi)), a.magnitude()};
}
// f applied to a monotone non-decreasing function's ends.
template <typename F>
Interval monotone(Interval a, F f) {
  return from_candidates({f(a.lo), f(a.hi)});
}

// What the analysis knows of a statement beyond its interval: which value it
// reduces by row, for the softmax rules.
struct RowFact {
  ReduceOp reduce = ReduceOp::sum;
  std::string of;
};

// A value rsqrt(rowsum(T * T) / C + c): T's normaliser, C at most `count`.
struct Normaliser {
  std::string of;
  double count = 0.0;
};

class Analysis {
 public:
  Analysis(const Program& p, const Bindings& sizes, int ranks) : p_(p), sizes_(sizes), ranks_(ranks) {}

  ValueBounds run(const std::vector<InputRange>& ranges) {
    for (std::size_t i = 0; i < p_.inputs.size(); ++i) {
      const InputRange r = i < ranges.size() ? ranges[i] : classic_input_range(p_.inputs[i].type.layout.is_local());
      const double unit = std::ldexp(1.0, -r.shift);
      out_.values[p_.inputs[i].name] = {static_cast<double>(r.lo) * unit, static_cast<double>(r.hi) * unit};
    }
    for (const auto& s : p_.stmts) {
      stmt_ = &s;
      inner_ = 0.0;
      const Interval v = statement(s);
      out_.values[s.name] = v;
      if (is_elementwise(s.op)) out_.inner[s.name] = std::max(inner_, v.magnitude());
    }
    return std::move(out_);
  }

 private:
  Interval value(const std::string& name) const {
    const auto it = out_.values.find(name);
    return it == out_.values.end() ? kUnbounded : it->second;
  }

  // The fewest and most terms a rank sums along dimension `d` of value
  // `name` (its slice where sliced there: the first rank's is the largest,
  // the last rank's the smallest).
  struct Terms {
    double least = 0.0, most = 0.0;
  };
  Terms terms(const std::string& name, std::size_t d) const {
    const TensorType& t = p_.type_of(name);
    const std::int64_t n = t.shape.at(d).eval(sizes_);
    if (!t.layout.is_sliced() || static_cast<std::size_t>(t.layout.dim) != d)
      return {static_cast<double>(n), static_cast<double>(n)};
    return {static_cast<double>(slice_extent(n, ranks_, ranks_ - 1).size),
            static_cast<double>(slice_extent(n, ranks_, 0).size)};
  }
  static Interval sum_of(Interval x, Terms k) { return hull(scale(x, k.least), scale(x, k.most)); }
  Terms row_terms(const std::string& x) const { return terms(x, p_.type_of(x).shape.size() - 1); }

  Interval statement(const Stmt& s) {
    switch (s.op) {
      case OpKind::compute:
      case OpKind::update: {
        record_facts(s);
        return expr(s.expr);
      }
      case OpKind::matmul: {
        const std::string& a = s.operands.at(0);
        return sum_of(mul(value(a), value(s.operands.at(1))), row_terms(a));
      }
      case OpKind::norm: {
        const std::string& x = s.operands.at(0);
        const auto n = static_cast<double>(numel(eval_shape(p_.type_of(x).shape, sizes_)));
        return scale(magnitudes(value(x)), std::sqrt(n));
      }
      case OpKind::rowreduce: {
        const std::string& x = s.operands.at(0);
        row_facts_[s.name] = RowFact{s.reduce, x};
        if (s.reduce != ReduceOp::sum) return value(x);
        return sum_of(value(x), row_terms(x));
      }
      case OpKind::allreduce:
      case OpKind::reducescatter:
      case OpKind::reduce: {
        const Interval x = value(s.operands.at(0));
        return s.reduce == ReduceOp::sum ? sum_of(x, {1.0, static_cast<double>(ranks_)}) : x;
      }
      case OpKind::allgather:
      case OpKind::broadcast:
      case OpKind::alltoall:
      case OpKind::send: return value(s.operands.at(0));
    }
    return kUnbounded;
  }

  // T * T (a square) and a normaliser, by the statement's name.
  void record_facts(const Stmt& s) {
    const Expr& e = s.expr;
    if (e->kind == ExprKind::binary && e->binary == BinaryOp::mul && e->args[0]->kind == ExprKind::tensor &&
        same_tensor(e->args[0], e->args[1]))
      squares_[s.name] = e->args[0]->name;
    if (const auto n = normaliser(e)) normalisers_[s.name] = *n;
  }

  Interval problem(const std::string& what, Interval operand) {
    const std::string where = stmt_->location.empty() ? "" : fmt::format(" ({})", stmt_->location);
    out_.problems.push_back(fmt::format("statement '{}'{}: {} of a value in [{:g}, {:g}]", stmt_->name, where, what,
                                        operand.lo, operand.hi));
    return kUnbounded;
  }

  Interval expr(const Expr& e) {
    const Interval v = node(e);
    inner_ = std::max(inner_, v.magnitude());
    return v;
  }

  Interval node(const Expr& e) {
    switch (e->kind) {
      case ExprKind::constant: return {e->value, e->value};
      case ExprKind::scalar: {
        const auto it = p_.scalars.find(e->name);
        return it == p_.scalars.end() ? kUnbounded : Interval{it->second, it->second};
      }
      case ExprKind::tensor: return value(e->name);
      case ExprKind::unary: return unary(e->unary, expr(e->args.at(0)));
      case ExprKind::binary: return binary(e);
      case ExprKind::select: {
        (void)expr(e->args.at(0));
        return hull(expr(e->args.at(1)), expr(e->args.at(2)));
      }
      case ExprKind::cast: return expr(e->args.at(0));
      case ExprKind::dropout: return hull({0.0, 0.0}, scale(expr(e->args.at(0)), dropout_scale(e->value)));
    }
    return kUnbounded;
  }

  Interval unary(UnaryOp op, Interval a) {
    switch (op) {
      case UnaryOp::neg: return {-a.hi, -a.lo};
      case UnaryOp::abs: return magnitudes(a);
      case UnaryOp::sqrt:
        if (a.lo < 0.0) return problem("sqrt", a);
        return monotone(a, [](double x) { return std::sqrt(x); });
      case UnaryOp::rsqrt:
        if (a.lo <= 0.0) return problem("rsqrt", a);
        return from_candidates({1.0 / std::sqrt(a.hi), 1.0 / std::sqrt(a.lo)});
      case UnaryOp::exp: return monotone(a, [](double x) { return std::exp(x); });
      case UnaryOp::log:
        if (a.lo <= 0.0) return problem("log", a);
        return monotone(a, [](double x) { return std::log(x); });
      case UnaryOp::tanh: return monotone(a, [](double x) { return std::tanh(x); });
      case UnaryOp::gelu: return {a.lo < 0.0 ? kGeluMin : 0.0, std::max(a.hi, 0.0)};
    }
    return kUnbounded;
  }

  // The row fact of tensor expression `e`, if it names a row reduction.
  const RowFact* row_fact(const Expr& e) const {
    if (e->kind != ExprKind::tensor) return nullptr;
    const auto it = row_facts_.find(e->name);
    return it == row_facts_.end() ? nullptr : &it->second;
  }

  // When `r` is rsqrt(S / C + c) with S = rowsum(T * T), C > 0, c >= 0 (a
  // LayerNorm's or RMSNorm's scale, inline or a statement's value) and `t`
  // is the tensor T: the largest C. Then |t * r| <= sqrt(C), as T_i^2 <= S.
  std::optional<double> normaliser_count(const Expr& r, const Expr& t) const {
    if (t->kind != ExprKind::tensor) return std::nullopt;
    if (r->kind == ExprKind::tensor) {
      const auto it = normalisers_.find(r->name);
      if (it == normalisers_.end() || it->second.of != t->name) return std::nullopt;
      return it->second.count;
    }
    const auto f = normaliser(r);
    if (!f || f->of != t->name) return std::nullopt;
    return f->count;
  }

  std::optional<Normaliser> normaliser(const Expr& r) const {
    if (r->kind != ExprKind::unary || r->unary != UnaryOp::rsqrt) return std::nullopt;
    const Expr& sum = r->args.at(0);
    if (sum->kind != ExprKind::binary || sum->binary != BinaryOp::add) return std::nullopt;
    for (const auto& [ratio, c] : {std::pair{sum->args[0], sum->args[1]}, std::pair{sum->args[1], sum->args[0]}}) {
      const bool c_ok = (c->kind == ExprKind::constant && c->value >= 0.0) ||
                        (c->kind == ExprKind::scalar && p_.scalars.contains(c->name) && p_.scalars.at(c->name) >= 0.0);
      if (!c_ok || ratio->kind != ExprKind::binary || ratio->binary != BinaryOp::div) continue;
      const Expr& s = ratio->args[0];
      const Expr& n = ratio->args[1];
      const RowFact* f = row_fact(s);
      if (!f || f->reduce != ReduceOp::sum || n->kind != ExprKind::tensor) continue;
      const auto sq = squares_.find(f->of);
      const Interval count = value(n->name);
      if (sq == squares_.end() || !(count.lo > 0.0) || !count.bounded()) continue;
      return Normaliser{sq->second, count.hi};
    }
    return std::nullopt;
  }

  static bool same_tensor(const Expr& a, const Expr& b) {
    return a == b || (a->kind == ExprKind::tensor && b->kind == ExprKind::tensor && a->name == b->name);
  }

  Interval binary(const Expr& e) {
    const Expr& x = e->args.at(0);
    const Expr& y = e->args.at(1);
    const Interval a = expr(x);
    const Interval b = expr(y);
    switch (e->binary) {
      case BinaryOp::add: return add(a, b);
      case BinaryOp::sub: {
        const RowFact* f = row_fact(y);
        if (f && f->reduce == ReduceOp::max && x->kind == ExprKind::tensor && f->of == x->name)
          return {std::min(a.lo - a.hi, 0.0), 0.0};  // t - rowmax(t)
        return sub(a, b);
      }
      case BinaryOp::mul: {
        if (same_tensor(x, y)) return square(a);
        for (const auto& [t, r] : {std::pair{x, y}, std::pair{y, x}})
          if (const auto n = normaliser_count(r, t)) return {-std::sqrt(*n), std::sqrt(*n)};
        return mul(a, b);
      }
      case BinaryOp::div: {
        const RowFact* f = row_fact(y);
        if (f && f->reduce == ReduceOp::sum && x->kind == ExprKind::tensor && f->of == x->name && a.lo > 0.0)
          return {0.0, 1.0};  // e / rowsum(e), e > 0
        if (holds_zero(b)) return problem("a division by", b);
        return mul(a, from_candidates({1.0 / b.lo, 1.0 / b.hi}));
      }
      case BinaryOp::pow: return power(a, y, b);
      case BinaryOp::max: return {std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
      case BinaryOp::min: return {std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
      case BinaryOp::lt:
      case BinaryOp::le:
      case BinaryOp::gt:
      case BinaryOp::ge:
      case BinaryOp::eq:
      case BinaryOp::ne: return {0.0, 1.0};
    }
    return kUnbounded;
  }

  // a^b: a non-negative integer constant exponent by repeated products,
  // otherwise exp(b * log a) for a > 0.
  Interval power(Interval a, const Expr& exponent, Interval b) {
    const bool whole = exponent->kind == ExprKind::constant && exponent->value >= 0.0 &&
                       exponent->value == std::floor(exponent->value) && exponent->value <= 64.0;
    if (whole) {
      const double n = exponent->value;
      const auto raise = [n](double v) { return std::pow(v, n); };
      // x^n is monotone for odd n, and for even n in |x|.
      return static_cast<std::int64_t>(n) % 2 == 1 ? monotone(a, raise) : monotone(magnitudes(a), raise);
    }
    if (a.lo <= 0.0) return problem("pow with a non-integer exponent", a);
    const Interval l = monotone(a, [](double v) { return std::log(v); });
    return monotone(mul(b, l), [](double v) { return std::exp(v); });
  }

  const Program& p_;
  const Bindings& sizes_;
  int ranks_;
  const Stmt* stmt_ = nullptr;
  double inner_ = 0.0;
  std::map<std::string, RowFact> row_facts_;
  std::map<std::string, std::string> squares_;  // Q -> T for Q = T * T
  std::map<std::string, Normaliser> normalisers_;
  ValueBounds out_;
};

}  // namespace

double Interval::magnitude() const {
  if (std::isnan(lo) || std::isnan(hi)) return kInf;
  return std::max(std::fabs(lo), std::fabs(hi));
}

bool Interval::bounded() const { return std::isfinite(lo) && std::isfinite(hi); }

ValueBounds bound_values(const Program& p, const Bindings& sizes, int ranks, const std::vector<InputRange>& ranges) {
  return Analysis(p, sizes, std::max(ranks, 1)).run(ranges);
}

double max_finite(DType t) {
  switch (t) {
    case DType::f16: return kF16Max;
    case DType::bf16: return kBf16Max;
    case DType::f32: return kF32Max;
  }
  return kF32Max;
}

Headroom headroom(const Program& p, const ValueBounds& b) {
  Headroom h{kInf, ""};
  if (!b.problems.empty()) return {0.0, b.problems.front()};
  const auto consider = [&](const std::string& name, double bound, DType t) {
    const double r = bound > 0.0 ? max_finite(t) / bound : kInf;
    if (r < h.ratio) h = {std::isfinite(bound) ? r : 0.0, name};
  };
  for (const auto& [name, v] : b.values) consider(name, v.magnitude(), p.type_of(name).dtype);
  for (const auto& [name, bound] : b.inner) consider(name + " (a sub-expression, in f32)", bound, DType::f32);
  return h;
}

}  // namespace coconet::model
