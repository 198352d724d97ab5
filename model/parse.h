// The YAML front end: workloads written in coconet's DSL, and the expression
// parser for statements such as `m1 = update(m, beta1*m + (1-beta1)*g1)`.
// Every error names the file, line and column (yaml-cpp marks) or the
// statement, says what is wrong and what would be right.
//
// Workload keys: name, description, params {SIZE: int}, scalars {NAME: float},
// tensors {NAME: {dtype, shape, layout, group?, shardable?}}, program [stmt],
// outputs [name]. Unknown keys are errors.
#pragma once

#include <string>

#include "model/program.h"

namespace coconet::model {

// Parses and checks a workload from YAML text; `origin` names it in messages.
[[nodiscard]] Program parse_program(const std::string& yaml_text, const std::string& origin);
[[nodiscard]] Program load_program(const std::string& path);

// Parses one statement's right-hand side into `stmt` (op, expr, operands...).
// `seed_counter` numbers dropout sites so each gets its own stream.
void parse_statement(const std::string& text, Stmt& stmt, std::uint64_t& seed_counter);

// Parses an element-wise expression (for tests and the builder).
[[nodiscard]] Expr parse_expr(const std::string& text);

}  // namespace coconet::model
