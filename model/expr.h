// Element-wise expressions: small immutable nodes built through make_* functions
// that check their invariants (after Halide's IR.h). An expression reads
// tensors (by name, at the element being computed), scalar parameters and
// constants; `dropout` is keyed by the element's global index so that a slice
// and the whole tensor see the same mask.
#pragma once

#include <cstdint>
#include <array>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "model/ops.h"
#include "model/types.h"

namespace coconet::model {

enum class ExprKind { constant, scalar, tensor, unary, binary, select, cast, dropout };

struct ExprNode;
using Expr = std::shared_ptr<const ExprNode>;

struct ExprNode {
  ExprKind kind = ExprKind::constant;
  double value = 0.0;        // constant; dropout: probability p
  std::string name;          // scalar parameter or tensor name
  UnaryOp unary = UnaryOp::neg;
  BinaryOp binary = BinaryOp::add;
  DType dtype = DType::f32;  // cast target
  std::uint64_t seed = 0;    // dropout
  std::vector<Expr> args;
};

[[nodiscard]] Expr make_const(double v);
[[nodiscard]] Expr make_scalar(std::string name);
[[nodiscard]] Expr make_tensor(std::string name);
[[nodiscard]] Expr make_unary(UnaryOp op, Expr a);
[[nodiscard]] Expr make_binary(BinaryOp op, Expr a, Expr b);
[[nodiscard]] Expr make_select(Expr cond, Expr a, Expr b);
[[nodiscard]] Expr make_cast(DType t, Expr a);
[[nodiscard]] Expr make_dropout(Expr a, double p, std::uint64_t seed);

[[nodiscard]] std::string to_string(const Expr& e);
[[nodiscard]] std::string to_string(UnaryOp op);
[[nodiscard]] std::string to_string(BinaryOp op);

// Names of the tensors an expression reads, in first-use order, without repeats.
[[nodiscard]] std::vector<std::string> tensors_read(const Expr& e);
// The same expression with tensor references renamed through `rename`.
[[nodiscard]] Expr rename_tensors(const Expr& e,
                                  const std::function<std::string(const std::string&)>& rename);
// Levels of the tree (a leaf is 1), computed without recursion so that any tree can be measured.
[[nodiscard]] int expr_depth(const Expr& e);
// What an expression computes per element, for the cost model: arithmetic
// (adds, multiplies, divisions, comparisons, selects) in FLOPs, and each
// costly operation counted on its own (ops.h CostlyOp).
struct ElementCost {
  int flops = 0;
  std::array<int, kCostlyOps> costly{};
};
[[nodiscard]] ElementCost element_cost(const Expr& e);
[[nodiscard]] std::string to_string(CostlyOp op);

// Evaluates an expression at one element, in double precision.
struct ElementContext {
  std::function<double(const std::string&)> tensor;  // value of a tensor at this element
  std::function<double(const std::string&)> scalar;  // value of a scalar parameter
  std::uint64_t global_index = 0;                    // for dropout
};
[[nodiscard]] double eval(const Expr& e, const ElementContext& ctx);

}  // namespace coconet::model
