// Element-wise expression nodes: construction, printing, traversal, evaluation.
#include "model/expr.h"

#include <algorithm>

#include <fmt/core.h>

#include "model/error.h"

namespace coconet::model {

namespace {
Expr make(ExprNode n) { return std::make_shared<const ExprNode>(std::move(n)); }

void require(const Expr& e, const char* what) {
  COCONET_ASSERT(e != nullptr, std::string("null operand in ") + what);
}
}  // namespace

Expr make_const(double v) { return make({.kind = ExprKind::constant, .value = v}); }
Expr make_scalar(std::string name) {
  COCONET_ASSERT(!name.empty(), "scalar without a name");
  return make({.kind = ExprKind::scalar, .name = std::move(name)});
}
Expr make_tensor(std::string name) {
  COCONET_ASSERT(!name.empty(), "tensor reference without a name");
  return make({.kind = ExprKind::tensor, .name = std::move(name)});
}
Expr make_unary(UnaryOp op, Expr a) {
  require(a, "unary");
  return make({.kind = ExprKind::unary, .unary = op, .args = {std::move(a)}});
}
Expr make_binary(BinaryOp op, Expr a, Expr b) {
  require(a, "binary");
  require(b, "binary");
  return make({.kind = ExprKind::binary, .binary = op, .args = {std::move(a), std::move(b)}});
}
Expr make_select(Expr c, Expr a, Expr b) {
  require(c, "select");
  require(a, "select");
  require(b, "select");
  return make({.kind = ExprKind::select, .args = {std::move(c), std::move(a), std::move(b)}});
}
Expr make_cast(DType t, Expr a) {
  require(a, "cast");
  return make({.kind = ExprKind::cast, .dtype = t, .args = {std::move(a)}});
}
Expr make_dropout(Expr a, double p, std::uint64_t seed) {
  require(a, "dropout");
  if (!(p >= 0.0 && p < 1.0))
    throw UserError(fmt::format("dropout probability {} is out of range: use 0 <= p < 1", p));
  return make({.kind = ExprKind::dropout, .value = p, .seed = seed, .args = {std::move(a)}});
}

std::string to_string(UnaryOp op) {
  switch (op) {
    case UnaryOp::neg: return "-";
    case UnaryOp::sqrt: return "sqrt";
    case UnaryOp::rsqrt: return "rsqrt";
    case UnaryOp::abs: return "abs";
    case UnaryOp::exp: return "exp";
    case UnaryOp::log: return "log";
    case UnaryOp::tanh: return "tanh";
    case UnaryOp::gelu: return "gelu";
  }
  return "?";
}

std::string to_string(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "+";
    case BinaryOp::sub: return "-";
    case BinaryOp::mul: return "*";
    case BinaryOp::div: return "/";
    case BinaryOp::pow: return "pow";
    case BinaryOp::max: return "max";
    case BinaryOp::min: return "min";
    case BinaryOp::lt: return "<";
    case BinaryOp::le: return "<=";
    case BinaryOp::gt: return ">";
    case BinaryOp::ge: return ">=";
    case BinaryOp::eq: return "==";
    case BinaryOp::ne: return "!=";
  }
  return "?";
}

namespace {
bool is_function_call(BinaryOp op) {
  return op == BinaryOp::pow || op == BinaryOp::max || op == BinaryOp::min;
}
}  // namespace

std::string to_string(const Expr& e) {
  switch (e->kind) {
    case ExprKind::constant: return fmt::format("{}", e->value);
    case ExprKind::scalar:
    case ExprKind::tensor: return e->name;
    case ExprKind::unary:
      if (e->unary == UnaryOp::neg) return fmt::format("-{}", to_string(e->args[0]));
      return fmt::format("{}({})", to_string(e->unary), to_string(e->args[0]));
    case ExprKind::binary:
      if (is_function_call(e->binary))
        return fmt::format("{}({}, {})", to_string(e->binary), to_string(e->args[0]),
                           to_string(e->args[1]));
      return fmt::format("({} {} {})", to_string(e->args[0]), to_string(e->binary),
                         to_string(e->args[1]));
    case ExprKind::select:
      return fmt::format("select({}, {}, {})", to_string(e->args[0]), to_string(e->args[1]),
                         to_string(e->args[2]));
    case ExprKind::cast: return fmt::format("cast({}, {})", to_string(e->args[0]), to_string(e->dtype));
    case ExprKind::dropout: return fmt::format("dropout({}, {})", to_string(e->args[0]), e->value);
  }
  return "?";
}

namespace {
void collect_tensors(const Expr& e, std::vector<std::string>& out) {
  if (e->kind == ExprKind::tensor) {
    for (const auto& n : out)
      if (n == e->name) return;
    out.push_back(e->name);
    return;
  }
  for (const auto& a : e->args) collect_tensors(a, out);
}
}  // namespace

std::vector<std::string> tensors_read(const Expr& e) {
  std::vector<std::string> out;
  collect_tensors(e, out);
  return out;
}

Expr rename_tensors(const Expr& e, const std::function<std::string(const std::string&)>& rename) {
  if (e->kind == ExprKind::tensor) {
    std::string n = rename(e->name);
    return n == e->name ? e : make_tensor(std::move(n));
  }
  if (e->args.empty()) return e;
  ExprNode copy = *e;
  bool changed = false;
  for (auto& a : copy.args) {
    Expr r = rename_tensors(a, rename);
    changed = changed || r != a;
    a = std::move(r);
  }
  return changed ? make(std::move(copy)) : e;
}

int expr_depth(const Expr& e) {
  int deepest = 0;
  std::vector<std::pair<const ExprNode*, int>> todo;
  if (e) todo.emplace_back(e.get(), 1);
  while (!todo.empty()) {
    const auto [n, d] = todo.back();
    todo.pop_back();
    deepest = std::max(deepest, d);
    for (const auto& a : n->args) todo.emplace_back(a.get(), d + 1);
  }
  return deepest;
}

namespace {

void add_cost(const Expr& e, ElementCost& c) {
  const auto costly = [&](CostlyOp op) { ++c.costly[static_cast<std::size_t>(op)]; };
  switch (e->kind) {
    case ExprKind::unary:
      switch (e->unary) {
        case UnaryOp::sqrt: costly(CostlyOp::sqrt); break;
        case UnaryOp::rsqrt: costly(CostlyOp::rsqrt); break;
        case UnaryOp::exp: costly(CostlyOp::exp); break;
        case UnaryOp::log: costly(CostlyOp::log); break;
        case UnaryOp::tanh: costly(CostlyOp::tanh); break;
        case UnaryOp::gelu:
          c.flops += kGeluArithmetic;
          costly(CostlyOp::tanh);
          break;
        case UnaryOp::neg:
        case UnaryOp::abs: c.flops += 1; break;
      }
      break;
    case ExprKind::binary:
      if (e->binary == BinaryOp::pow) costly(CostlyOp::pow);
      else c.flops += 1;
      break;
    case ExprKind::select: c.flops += 1; break;
    case ExprKind::dropout:
      c.flops += 2;  // the compare and the scale
      costly(CostlyOp::dropout_hash);
      break;
    default: break;
  }
  for (const auto& a : e->args) add_cost(a, c);
}

}  // namespace

ElementCost element_cost(const Expr& e) {
  ElementCost c;
  add_cost(e, c);
  return c;
}

std::string to_string(CostlyOp op) {
  switch (op) {
    case CostlyOp::sqrt: return "sqrt";
    case CostlyOp::rsqrt: return "rsqrt";
    case CostlyOp::exp: return "exp";
    case CostlyOp::log: return "log";
    case CostlyOp::tanh: return "tanh";
    case CostlyOp::pow: return "pow";
    case CostlyOp::dropout_hash: return "dropout";
    case CostlyOp::norm_element: return "norm";
  }
  return "?";
}

double eval(const Expr& e, const ElementContext& ctx) {
  switch (e->kind) {
    case ExprKind::constant: return e->value;
    case ExprKind::scalar: return ctx.scalar(e->name);
    case ExprKind::tensor: return ctx.tensor(e->name);
    case ExprKind::unary: return apply_unary(e->unary, eval(e->args[0], ctx));
    case ExprKind::binary:
      return apply_binary(e->binary, eval(e->args[0], ctx), eval(e->args[1], ctx));
    case ExprKind::select:
      return eval(e->args[0], ctx) != 0.0 ? eval(e->args[1], ctx) : eval(e->args[2], ctx);
    case ExprKind::cast: return eval(e->args[0], ctx);  // the interpreter keeps double precision
    case ExprKind::dropout:
      return dropout(eval(e->args[0], ctx), static_cast<float>(e->value), e->seed,
                     ctx.global_index);
  }
  return 0.0;
}

}  // namespace coconet::model
