// Integer-valued values of a program (see integer_values.h).
#include "exec/integer_values.h"

#include <cmath>
#include <set>

namespace coconet::exec {
namespace {

using model::BinaryOp;
using model::ExprKind;
using model::OpKind;

bool is_integer(double v) { return std::isfinite(v) && v == std::floor(v); }

// Whether `e` is an integer wherever the tensors it reads (but those in `inexact`) are.
bool keeps_integers(const model::Expr& e, const model::Program& p, const std::set<std::string>& inexact) {
  const auto all_args = [&] {
    for (const auto& a : e->args)
      if (!keeps_integers(a, p, inexact)) return false;
    return true;
  };
  switch (e->kind) {
    case ExprKind::constant: return is_integer(e->value);
    case ExprKind::scalar: {
      const auto it = p.scalars.find(e->name);
      return it != p.scalars.end() && is_integer(it->second);
    }
    case ExprKind::tensor: return !inexact.contains(e->name);
    case ExprKind::unary: return (e->unary == model::UnaryOp::neg || e->unary == model::UnaryOp::abs) && all_args();
    case ExprKind::binary: return e->binary != BinaryOp::div && e->binary != BinaryOp::pow && all_args();
    case ExprKind::select:
    case ExprKind::cast: return all_args();
    case ExprKind::dropout: return e->value == 0.0 && all_args();
  }
  return false;
}

bool reduces(const model::Stmt& s) {
  return s.op == OpKind::allreduce || s.op == OpKind::reducescatter || s.op == OpKind::reduce;
}

bool sums(const model::Stmt& s) {
  if (s.op == OpKind::matmul) return true;
  return reduces(s) && (s.reduce == model::ReduceOp::sum || s.reduce == model::ReduceOp::mean);
}

// A mean divides the sum by the group's size: no integer whatever it reads.
bool averages(const model::Stmt& s) { return reduces(s) && s.reduce == model::ReduceOp::mean; }

}  // namespace

bool sums_non_integers(const model::Program& p) {
  std::set<std::string> inexact;
  for (const auto& s : p.stmts) {
    bool reads_inexact = false;
    for (const auto& r : model::Program::reads(s)) reads_inexact = reads_inexact || inexact.contains(r);
    if (sums(s) && reads_inexact) return true;
    const bool exact = model::is_elementwise(s.op) ? keeps_integers(s.expr, p, inexact)
                                                   : s.op != OpKind::norm && !averages(s) && !reads_inexact;
    if (!exact) inexact.insert(s.name);
  }
  return false;
}

}  // namespace coconet::exec
