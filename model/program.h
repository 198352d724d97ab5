// A program: one training or inference step as typed SSA statements over
// tensors, computation and communication alike. `check` infers every
// statement's type (dtype, shape, layout, process group) and rejects programs
// that break a layout rule, naming the statement and the rule.
//
// Layout rules (P ranks per group):
//   element-wise: operands all replicated -> replicated; any sliced(d) (with
//     replicated operands read through their slice) -> sliced(d); any local
//     (with replicated operands) -> local; sliced mixed with local is an error;
//     rank-0 tensors (scalars such as norms) broadcast.
//   matmul(a[...,K], b[K,N]): (sliced(last), sliced(0)) -> local partial sums;
//     (replicated|local, replicated) -> a's layout; (sliced(0), replicated) -> sliced(0).
//   batched matmul(a[..., M, K], b[..., K, N]), equal leading (batch)
//     dimensions: (sliced(d), sliced(d)) for a batch dimension d -> sliced(d),
//     each rank multiplying its own batches (attention heads over ranks);
//     (sliced(last), sliced(K)) -> local partial sums; (replicated|local,
//     replicated) -> a's layout; (sliced(M), replicated) -> sliced(M);
//     (replicated, sliced(last)) -> sliced(last). Nothing else.
//   norm(x) -> rank-0; replicated unless x is local.
//   rowsum(x), rowmax(x): the sum or max over x's last dimension, keeping it
//     as a dimension of size 1 (x [N, H] -> [N, 1], [B, S, H] -> [B, S, 1]),
//     so that `x - m` broadcasts m back over the columns; replicated, local
//     and sliced(d) for d before the last stay as they are; sliced along the
//     last dimension gives each rank's partial result over its columns:
//     local, to be completed by allreduce(sum|max) (as matmul's partial sums).
//   Broadcasting: operands align from the right; each of their dimensions
//     equals the result's or is the constant 1 (size-1 dimensions, such as a
//     row reduction's, repeat). A sliced operand has the result's rank and
//     is not broadcast along its sliced dimension.
//   allreduce(local) -> replicated; reducescatter(local) -> sliced(0);
//   allgather(sliced(d)) -> replicated; broadcast(any) -> replicated;
//   reduce(local) -> replicated (meaningful on the root only);
//   send(x): same layout, next process group.
//   alltoall(x, d): sliced(e) -> sliced(d), d != e, the same global tensor
//     re-sliced (each rank sends every other rank the part of its slice that
//     rank holds afterwards: Ulysses-style sequence parallelism).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/expr.h"
#include "model/types.h"

namespace coconet::model {

enum class OpKind {
  compute,        // element-wise expression
  update,         // new value of a state tensor: element-wise expression, stored into `target`
  matmul,         // operands a, b
  norm,           // L2 norm of operand, a rank-0 tensor
  rowreduce,      // rowsum (reduce = sum) or rowmax (reduce = max) over the last dimension
  allreduce,
  reducescatter,
  allgather,
  broadcast,
  reduce,
  alltoall,       // operand x re-sliced along `dim`
  send,           // to the same position in the next process group
};
[[nodiscard]] std::string to_string(OpKind k);
[[nodiscard]] bool is_collective(OpKind k);     // allreduce .. reduce, alltoall
[[nodiscard]] bool is_communication(OpKind k);  // collectives and send
[[nodiscard]] bool is_elementwise(OpKind k);    // compute, update

// mean: the sum divided by the group's size (NCCL's ncclAvg); allreduce,
// reducescatter and reduce take every one, a row reduction sum or max.
enum class ReduceOp { sum, max, min, mean };
[[nodiscard]] std::string to_string(ReduceOp op);

struct Stmt {
  std::string name;                   // the SSA value it defines
  OpKind op = OpKind::compute;
  Expr expr;                          // compute, update
  std::string target;                 // update: the state tensor it replaces
  std::vector<std::string> operands;  // matmul (a, b), norm, collectives, send
  ReduceOp reduce = ReduceOp::sum;    // allreduce, reducescatter, reduce (any), rowreduce (sum or max)
  int root = 0;                       // broadcast, reduce
  int dim = 0;                        // alltoall: the dimension the result is sliced along
  TensorType type;                    // inferred by check()
  std::string source;                 // the statement as written (for messages), may be empty
  std::string location;               // "file:line:column" when parsed from YAML, may be empty
};

// Tensors the step reads: gradients, weights, optimizer state, activations.
struct TensorDecl {
  std::string name;
  TensorType type;
  bool shardable = false;  // optimizer state that may stay sliced for good (as_slice)
};

struct Program {
  std::string name;
  std::string description;
  Bindings params;                         // default values of the symbolic sizes
  std::map<std::string, double> scalars;   // scalar parameters (lr, beta1, ...)
  std::vector<TensorDecl> inputs;
  std::vector<Stmt> stmts;
  std::vector<std::string> outputs;

  [[nodiscard]] const TensorDecl* find_input(const std::string& n) const;
  [[nodiscard]] const Stmt* find_stmt(const std::string& n) const;
  [[nodiscard]] int stmt_index(const std::string& n) const;  // -1 when absent
  // Type of an input or a statement's value; throws UserError when undefined.
  [[nodiscard]] const TensorType& type_of(const std::string& n) const;
  // Number of process groups (pipeline stages) the program spans.
  [[nodiscard]] int groups() const;
  // Statements that read value `n` (indices, in order).
  [[nodiscard]] std::vector<int> users(const std::string& n) const;
  // Values a statement reads (tensor operands and tensors in its expression).
  [[nodiscard]] static std::vector<std::string> reads(const Stmt& s);
  // Sizes with `overrides` applied on top of the defaults; throws on unknown names.
  [[nodiscard]] Bindings bind(const Bindings& overrides = {}) const;
};

// Sets a size or a scalar parameter by name, as `--set NAME=VALUE` does, by
// the rules of model/set_flag.h; throws UserError naming the known sizes and
// scalars when `name` is neither, or when the value breaks the rules.
void override_value(Program& p, const std::string& name, const std::string& value);

// Infers the type of every statement in place and checks the whole program:
// names defined once and before use, layouts, dtypes, shapes, outputs.
// Throws UserError naming the statement and the rule that failed.
void check(Program& p);

// Human-readable listing, one statement per line with its inferred type.
[[nodiscard]] std::string to_string(const Program& p);

}  // namespace coconet::model
