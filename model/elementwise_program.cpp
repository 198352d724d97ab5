// Compiles model expressions into an ElementwiseProgram: constants and scalar
// parameters folded in double, everything else emitted in postfix order.
#include "model/elementwise_program.h"

#include <algorithm>
#include <optional>

#include "model/error.h"

namespace coconet::model {
namespace {


class Compiler {
 public:
  Compiler(const std::map<std::string, DType>& input_types,
           const std::map<std::string, double>& scalars, ElementwiseProgram& out)
      : input_types_(input_types), scalars_(scalars), out_(out) {}

  void statement(const ElementwiseStmt& s) {
    emit_expr(s.expr);
    COCONET_ASSERT(static_cast<int>(out_.output_names.size()) < kMaxOutputs,
                   "fused element-wise kernel computes more than kMaxOutputs statements");
    const auto slot = static_cast<std::int32_t>(out_.output_names.size());
    out_.output_names.push_back(s.name);
    out_.output_types.push_back(s.dtype);
    push(Instr{OpCode::store, 0, s.dtype, slot, 0.0f, 0}, -1);
  }

 private:
  // The value of a subexpression that reads no tensor (and draws no dropout).
  std::optional<double> fold(const Expr& e) const {
    switch (e->kind) {
      case ExprKind::constant: return e->value;
      case ExprKind::scalar: return scalar(e->name);
      case ExprKind::tensor:
      case ExprKind::dropout: return std::nullopt;
      case ExprKind::unary: {
        const auto a = fold(e->args[0]);
        if (!a) return std::nullopt;
        return apply_unary(e->unary, *a);
      }
      case ExprKind::binary: {
        const auto a = fold(e->args[0]);
        const auto b = fold(e->args[1]);
        if (!a || !b) return std::nullopt;
        return apply_binary(e->binary, *a, *b);
      }
      case ExprKind::select: {
        const auto c = fold(e->args[0]);
        const auto a = fold(e->args[1]);
        const auto b = fold(e->args[2]);
        if (!c || !a || !b) return std::nullopt;
        return *c != 0.0 ? *a : *b;
      }
      case ExprKind::cast: {
        const auto a = fold(e->args[0]);
        if (!a) return std::nullopt;
        return static_cast<double>(round_to(e->dtype, static_cast<float>(*a)));
      }
    }
    return std::nullopt;
  }

  double scalar(const std::string& name) const {
    const auto it = scalars_.find(name);
    if (it == scalars_.end())
      throw UserError("element-wise expression reads scalar '" + name +
                      "', which the program does not define; add it under `scalars:`");
    return it->second;
  }

  void emit_expr(const Expr& e) {
    if (const auto v = fold(e)) {
      push(Instr{OpCode::constant, 0, DType::f32, 0, static_cast<float>(*v), 0}, +1);
      return;
    }
    switch (e->kind) {
      case ExprKind::tensor: emit_load(e->name); return;
      case ExprKind::unary:
        emit_expr(e->args[0]);
        push(Instr{OpCode::unary, static_cast<std::uint8_t>(e->unary), DType::f32, 0, 0.0f, 0}, 0);
        return;
      case ExprKind::binary:
        emit_expr(e->args[0]);
        emit_expr(e->args[1]);
        push(Instr{OpCode::binary, static_cast<std::uint8_t>(e->binary), DType::f32, 0, 0.0f, 0},
             -1);
        return;
      case ExprKind::select:
        for (const auto& a : e->args) emit_expr(a);
        push(Instr{OpCode::select, 0, DType::f32, 0, 0.0f, 0}, -2);
        return;
      case ExprKind::cast:
        emit_expr(e->args[0]);
        push(Instr{OpCode::round, 0, e->dtype, 0, 0.0f, 0}, 0);
        return;
      case ExprKind::dropout:
        emit_expr(e->args[0]);
        push(Instr{OpCode::dropout, 0, DType::f32, 0, static_cast<float>(e->value), e->seed}, 0);
        return;
      case ExprKind::constant:
      case ExprKind::scalar: break;  // folded above
    }
    throw InternalError("compile_elementwise: unexpected expression " + to_string(e));
  }

  void emit_load(const std::string& name) {
    const auto& outs = out_.output_names;
    if (const auto it = std::find(outs.begin(), outs.end(), name); it != outs.end()) {
      push(Instr{OpCode::load_output, 0, DType::f32, static_cast<std::int32_t>(it - outs.begin()),
                 0.0f, 0},
           +1);
      return;
    }
    auto& ins = out_.input_names;
    auto it = std::find(ins.begin(), ins.end(), name);
    if (it == ins.end()) {
      const auto type = input_types_.find(name);
      if (type == input_types_.end())
        throw UserError("element-wise expression reads tensor '" + name + "', which is not defined");
      COCONET_ASSERT(static_cast<int>(ins.size()) < kMaxInputs,
                     "fused element-wise kernel reads more than kMaxInputs tensors");
      ins.push_back(name);
      out_.input_types.push_back(type->second);
      it = ins.end() - 1;
    }
    push(Instr{OpCode::load, 0, DType::f32, static_cast<std::int32_t>(it - ins.begin()), 0.0f, 0},
         +1);
  }

  void push(const Instr& in, int stack_change) {
    out_.code.push_back(in);
    depth_ += stack_change;
    out_.stack_depth = std::max(out_.stack_depth, depth_);
    COCONET_ASSERT(depth_ <= kMaxStack, "element-wise expression nests deeper than kMaxStack");
  }

  const std::map<std::string, DType>& input_types_;
  const std::map<std::string, double>& scalars_;
  ElementwiseProgram& out_;
  int depth_ = 0;
};

}  // namespace

ElementwiseProgram compile_elementwise(const std::vector<ElementwiseStmt>& stmts,
                                       const std::map<std::string, DType>& input_types,
                                       const std::map<std::string, double>& scalars) {
  ElementwiseProgram program;
  Compiler compiler(input_types, scalars, program);
  for (const auto& s : stmts) compiler.statement(s);
  return program;
}

}  // namespace coconet::model
