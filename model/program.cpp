// Programs: lookup helpers, type inference and checking of every statement.
#include "model/program.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/core.h>

#include "model/set_flag.h"
#include "model/enum_names.h"
#include "model/error.h"
#include "model/limits.h"
#include "model/yaml_util.h"

namespace coconet::model {

std::string to_string(OpKind k) {
  switch (k) {
    case OpKind::compute: return "compute";
    case OpKind::update: return "update";
    case OpKind::matmul: return "matmul";
    case OpKind::norm: return "norm";
    case OpKind::rowreduce: return "rowreduce";
    case OpKind::allreduce: return "allreduce";
    case OpKind::reducescatter: return "reducescatter";
    case OpKind::allgather: return "allgather";
    case OpKind::broadcast: return "broadcast";
    case OpKind::reduce: return "reduce";
    case OpKind::alltoall: return "alltoall";
    case OpKind::send: return "send";
  }
  return "?";
}

bool is_collective(OpKind k) {
  return k == OpKind::allreduce || k == OpKind::reducescatter || k == OpKind::allgather ||
         k == OpKind::broadcast || k == OpKind::reduce || k == OpKind::alltoall;
}
bool is_communication(OpKind k) { return is_collective(k) || k == OpKind::send; }
bool is_elementwise(OpKind k) { return k == OpKind::compute || k == OpKind::update; }

std::string to_string(ReduceOp op) {
  static constexpr EnumName<ReduceOp> kReduceOps[] = {
      {ReduceOp::sum, "sum"}, {ReduceOp::max, "max"}, {ReduceOp::min, "min"}, {ReduceOp::mean, "mean"}};
  return std::string(name_of(kReduceOps, op));
}

const TensorDecl* Program::find_input(const std::string& n) const {
  for (const auto& t : inputs)
    if (t.name == n) return &t;
  return nullptr;
}

const Stmt* Program::find_stmt(const std::string& n) const {
  const int i = stmt_index(n);
  return i < 0 ? nullptr : &stmts[static_cast<std::size_t>(i)];
}

int Program::stmt_index(const std::string& n) const {
  for (std::size_t i = 0; i < stmts.size(); ++i)
    if (stmts[i].name == n) return static_cast<int>(i);
  return -1;
}

const TensorType& Program::type_of(const std::string& n) const {
  if (const auto* s = find_stmt(n)) return s->type;
  if (const auto* t = find_input(n)) return t->type;
  throw UserError(fmt::format("'{}' is not defined in program '{}': declare it under tensors or "
                              "define it with a statement before its first use",
                              n, name));
}

int Program::groups() const {
  int g = 0;
  for (const auto& t : inputs) g = std::max(g, t.type.group);
  for (const auto& s : stmts) g = std::max(g, s.type.group);
  return g + 1;
}

std::vector<std::string> Program::reads(const Stmt& s) {
  std::vector<std::string> out = s.operands;
  if (s.expr)
    for (auto& n : tensors_read(s.expr))
      if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(std::move(n));
  return out;
}

std::vector<int> Program::users(const std::string& n) const {
  std::vector<int> out;
  for (std::size_t i = 0; i < stmts.size(); ++i) {
    const auto r = reads(stmts[i]);
    if (std::find(r.begin(), r.end(), n) != r.end()) out.push_back(static_cast<int>(i));
  }
  return out;
}

namespace {
std::string known_names(const Program& p) {
  std::string out;
  for (const auto& [k, v] : p.params) out += (out.empty() ? "" : ", ") + k;
  for (const auto& [k, v] : p.scalars) out += (out.empty() ? "" : ", ") + k;
  return out.empty() ? "(none)" : out;
}
}  // namespace

Bindings Program::bind(const Bindings& overrides) const {
  Bindings b = params;
  for (const auto& [k, v] : overrides) {
    if (!params.count(k))
      throw UserError(fmt::format("workload '{}' has no size '{}': its sizes are {}", name, k,
                                  known_names(*this)));
    if (v <= 0) throw UserError(fmt::format("size {}={} must be positive", k, v));
    b[k] = v;
  }
  return b;
}

void override_value(Program& p, const std::string& name, const std::string& value) {
  if (p.params.count(name)) {
    p.params[name] = parse_size(name, value);
    return;
  }
  if (p.scalars.count(name)) {
    p.scalars[name] = parse_scalar(name, value);
    return;
  }
  throw unknown_name(name, value, std::span<const Program>(&p, 1));
}

// ---------------------------------------------------------------------------
// Type inference

namespace {

class Checker {
 public:
  explicit Checker(Program& p) : p_(p) {}

  void run() {
    check_inputs();
    for (auto& s : p_.stmts) check_stmt(s);
    check_outputs();
  }

 private:
  Program& p_;
  std::set<std::string> defined_;
  std::set<std::string> updated_;
  // Types of the inputs and of the statements checked so far, by name: each
  // lookup is a tree search, so checking is O(n log n) in the program's size.
  std::map<std::string, const TensorType*> types_;
  std::map<std::string, const TensorDecl*> inputs_;

  [[noreturn]] void fail(const Stmt& s, const std::string& what) const {
    const std::string text = s.source.empty() ? s.name : s.source;
    const std::string where = s.location.empty() ? "" : s.location + ": ";
    throw LocatedError(fmt::format("{}in program '{}', statement '{}': {}", where, p_.name, text, what));
  }

  void check_inputs() {
    for (const auto& t : p_.inputs) {
      if (p_.scalars.count(t.name) || p_.params.count(t.name))
        throw UserError(fmt::format("in program '{}': tensor '{}' has the name of a size or "
                                    "scalar; rename one of them",
                                    p_.name, t.name));
      if (!defined_.insert(t.name).second)
        throw UserError(fmt::format("in program '{}': tensor '{}' is declared twice", p_.name,
                                    t.name));
      types_.emplace(t.name, &t.type);
      inputs_.emplace(t.name, &t);
      if (t.type.layout.is_sliced() &&
          t.type.layout.dim >= static_cast<int>(t.type.shape.size()))
        throw UserError(fmt::format("in program '{}': tensor '{}' is sliced({}) but has only {} "
                                    "dimension(s); slice a dimension in 0..{}",
                                    p_.name, t.name, t.type.layout.dim, t.type.shape.size(),
                                    static_cast<int>(t.type.shape.size()) - 1));
      if (t.type.group >= kMaxGroups)
        throw UserError(fmt::format("in program '{}': tensor '{}' has group {}, more than the limit of {} "
                                    "process groups (0..{})",
                                    p_.name, t.name, t.type.group, kMaxGroups, kMaxGroups - 1));
      if (t.type.group < 0)
        throw UserError(fmt::format("in program '{}': tensor '{}' has group {}; groups are 0, 1, ...",
                                    p_.name, t.name, t.type.group));
      for (const auto& d : t.type.shape)
        for (const auto& sym : d.symbols)
          if (!p_.params.count(sym))
            throw UserError(fmt::format("in program '{}': tensor '{}' uses size '{}' that is not "
                                        "in params; add it there with its default value",
                                        p_.name, t.name, sym));
      if (t.shardable && !t.type.layout.is_replicated())
        throw UserError(fmt::format("in program '{}': tensor '{}' is shardable but {}; only "
                                    "replicated optimizer state can be kept sliced",
                                    p_.name, t.name, to_string(t.type.layout)));
    }
  }

  const TensorType& operand(const Stmt& s, const std::string& n) const {
    if (!defined_.count(n)) {
      if (p_.scalars.count(n))
        fail(s, fmt::format("'{}' is a scalar parameter, but this operation needs a tensor", n));
      fail(s, fmt::format("'{}' is not defined before this statement: declare it under tensors "
                          "or compute it in an earlier statement",
                          n));
    }
    return *types_.at(n);
  }

  // Identifiers that name scalar parameters become scalar nodes.
  Expr resolve_scalars(const Stmt& s, const Expr& e) const {
    if (e->kind == ExprKind::tensor) {
      if (defined_.count(e->name)) return e;
      if (p_.scalars.count(e->name)) return make_scalar(e->name);
      if (p_.params.count(e->name))
        fail(s, fmt::format("'{}' is a size; sizes cannot appear in element-wise expressions "
                            "(declare a scalar instead)",
                            e->name));
      fail(s, fmt::format("'{}' is not defined: declare it under tensors or scalars, or compute "
                          "it in an earlier statement",
                          e->name));
    }
    if (e->args.empty()) return e;
    ExprNode copy = *e;
    for (auto& a : copy.args) a = resolve_scalars(s, a);
    return std::make_shared<const ExprNode>(std::move(copy));
  }

  static bool is_one(const Dim& d) { return d.constant == 1 && d.symbols.empty(); }

  // The shape every operand broadcasts to (aligned from the right, a
  // dimension equal to the result's or the constant 1), or the failure.
  Shape broadcast_shape(const Stmt& s, const std::vector<std::string>& names) const {
    Shape out;
    for (const auto& n : names) {
      const Shape& t = operand(s, n).shape;
      if (t.size() > out.size()) out.insert(out.begin(), t.size() - out.size(), Dim{});
      for (std::size_t k = 0; k < t.size(); ++k) {
        Dim& o = out[out.size() - t.size() + k];
        if (is_one(o)) o = t[k];
      }
    }
    for (const auto& n : names) {
      const Shape& t = operand(s, n).shape;
      for (std::size_t k = 0; k < t.size(); ++k)
        if (!is_one(t[k]) && !(t[k] == out[out.size() - t.size() + k]))
          fail(s, fmt::format("'{}' has shape {} which does not broadcast against {}: an operand "
                              "must have the full shape, a trailing part of it, size-1 dimensions "
                              "where it repeats (as a rowsum's [N, 1]), or be a scalar",
                              n, to_string(t), to_string(out)));
    }
    return out;
  }

  TensorType infer_elementwise(const Stmt& s) const {
    const auto names = tensors_read(s.expr);
    if (names.empty()) fail(s, "an element-wise statement must read at least one tensor");
    TensorType out;
    bool have = false;
    for (const auto& n : names) {
      const auto& t = operand(s, n);
      if (have && out.group != t.group)
        fail(s, fmt::format("'{}' lives on process group {} but other operands on group {}; send "
                            "it first",
                            n, t.group, out.group));
      out.group = t.group;
      out.dtype = have ? promote(out.dtype, t.dtype) : t.dtype;
      have = true;
    }
    out.shape = broadcast_shape(s, names);
    Layout layout = Layout::replicated();
    std::string layout_from;
    for (const auto& n : names) {
      const auto& t = operand(s, n);
      if (t.layout.is_replicated() || t.shape.empty()) continue;
      if (t.layout.is_sliced() &&
          (t.shape.size() != out.shape.size() ||
           !(t.shape[static_cast<std::size_t>(t.layout.dim)] == out.shape[static_cast<std::size_t>(t.layout.dim)])))
        fail(s, fmt::format("'{}' is sliced but broadcast; slice the full-shape operand instead", n));
      if (layout.is_replicated()) {
        layout = t.layout;
        layout_from = n;
      } else if (!(layout == t.layout)) {
        fail(s, fmt::format("layout mismatch: '{}' is {} but '{}' is {}; element-wise operands "
                            "must share a layout (replicated ones may mix with either){}",
                            layout_from, to_string(layout), n, to_string(t.layout),
                            layout.is_local() || t.layout.is_local()
                                ? " - allreduce or reducescatter the local one first"
                                : ""));
      }
    }
    out.layout = layout;
    if (s.expr->kind == ExprKind::cast) out.dtype = s.expr->dtype;
    return out;
  }

  TensorType infer_update(const Stmt& s) const {
    const auto it = inputs_.find(s.target);
    const TensorDecl* decl = it == inputs_.end() ? nullptr : it->second;
    if (!decl)
      fail(s, fmt::format("update target '{}' is not a declared tensor: update(t, value) gives "
                          "the new value of a state tensor declared under tensors",
                          s.target));
    if (updated_.count(s.target))
      fail(s, fmt::format("'{}' is updated twice; a step updates each state tensor once", s.target));
    TensorType t = infer_elementwise(s);
    if (!(t.shape == decl->type.shape))
      fail(s, fmt::format("the new value has shape {} but '{}' has shape {}", to_string(t.shape),
                          s.target, to_string(decl->type.shape)));
    if (t.layout.is_local() && !decl->type.layout.is_local())
      fail(s, fmt::format("the new value of {} state '{}' is local (differs per rank); reduce "
                          "its local operands first",
                          to_string(decl->type.layout), s.target));
    t.dtype = decl->type.dtype;
    return t;
  }

  // matmul(a[..., M, K], b[K, N]): b shared by every leading index of a; or
  // batched, matmul(a[..., M, K], b[..., K, N]): one product per index of the
  // leading (batch) dimensions, which a and b share.
  TensorType infer_matmul(const Stmt& s) const {
    if (s.operands.size() != 2) fail(s, "matmul takes two operands: matmul(a, b)");
    const auto& a = operand(s, s.operands[0]);
    const auto& b = operand(s, s.operands[1]);
    if (a.group != b.group) fail(s, "matmul operands live on different process groups");
    const bool batched = b.shape.size() > 2;
    check_matmul_shapes(s, a, b, batched);
    TensorType out{a.dtype, a.shape, matmul_layout(s, a, b, batched), a.group};
    out.shape.back() = b.shape.back();
    return out;
  }

  void check_matmul_shapes(const Stmt& s, const TensorType& a, const TensorType& b, bool batched) const {
    const std::size_t rank = b.shape.size();
    if (batched && !(a.shape.size() == rank && std::equal(a.shape.begin(), a.shape.end() - 2, b.shape.begin())))
      fail(s, fmt::format("batched matmul needs a[..., M, K] and b[..., K, N] with the same batch dimensions; "
                          "got a {} and b {}",
                          to_string(a.shape), to_string(b.shape)));
    if (!batched && (a.shape.size() < 2 || rank != 2))
      fail(s, fmt::format("matmul needs a of rank >= 2 and b of rank 2 (or a[..., M, K] and b[..., K, N] with "
                          "the same batch dimensions); got {} and {}",
                          to_string(a.shape), to_string(b.shape)));
    if (!(a.shape.back() == b.shape[rank - 2]))
      fail(s, fmt::format("matmul inner dimensions differ: a is {} and b is {}; a's last dimension must equal "
                          "b's {}",
                          to_string(a.shape), to_string(b.shape), batched ? "next to last" : "first"));
  }

  // The product's layout; `batched`: a's and b's leading dimensions are batch dimensions they share.
  Layout matmul_layout(const Stmt& s, const TensorType& a, const TensorType& b, bool batched) const {
    const int a_last = static_cast<int>(a.shape.size()) - 1;
    const int b_k = static_cast<int>(b.shape.size()) - 2;  // b's K dimension; its N dimension follows
    const int batch_dims = batched ? b_k : 0;
    const auto& la = a.layout;
    const auto& lb = b.layout;
    if (la.is_sliced() && lb.is_sliced() && la.dim == lb.dim && la.dim < batch_dims)
      return la;  // each rank multiplies its own batches
    if (la.is_sliced() && la.dim == a_last && lb.is_sliced() && lb.dim == b_k)
      return Layout::local();  // each rank holds a partial sum over its slice of K
    if (lb.is_replicated() && (la.is_replicated() || la.is_local())) return la;
    if (lb.is_replicated() && la.is_sliced() && la.dim >= batch_dims && la.dim < a_last)
      return la;  // a sliced on its rows
    if (la.is_replicated() && lb.is_sliced() && lb.dim == b_k + 1) return Layout::sliced(a_last);  // b on its columns
    if (batched)
      fail(s, fmt::format("no batched matmul layout rule for a {} x b {}: slice a batch dimension (0..{}) of "
                          "both operands alike, slice a's last dimension with b's next to last (partial sums), "
                          "or keep b replicated (a sliced on its rows) or a replicated (b sliced on its columns)",
                          to_string(la), to_string(lb), b_k - 1));
    fail(s, fmt::format("no matmul layout rule for a {} x b {}: use a sliced on its last "
                        "dimension with b sliced(0) (partial sums), or a replicated operand",
                        to_string(la), to_string(lb)));
  }

  TensorType infer_alltoall(const Stmt& s, TensorType t) const {
    const int rank = static_cast<int>(t.shape.size());
    if (!t.layout.is_sliced())
      fail(s, fmt::format("alltoall re-slices a sliced tensor, but '{}' is {}; slice it first (or use allgather "
                          "for a whole copy)",
                          s.operands[0], to_string(t.layout)));
    if (s.dim < 0 || s.dim >= rank)
      fail(s, fmt::format("alltoall dimension {} is out of range: '{}' has {} dimension(s), 0..{}", s.dim,
                          s.operands[0], rank, rank - 1));
    if (s.dim == t.layout.dim)
      fail(s, fmt::format("'{}' is already sliced({}); alltoall must move the slicing to another dimension",
                          s.operands[0], s.dim));
    t.layout = Layout::sliced(s.dim);
    return t;
  }

  TensorType infer_collective(const Stmt& s) const {
    if (s.operands.size() != 1) fail(s, fmt::format("{} takes one tensor", to_string(s.op)));
    TensorType t = operand(s, s.operands[0]);
    const auto need = [&](bool ok, const std::string& what) {
      if (!ok)
        fail(s, fmt::format("{} needs {} operand, but '{}' is {}", to_string(s.op), what,
                            s.operands[0], to_string(t.layout)));
    };
    switch (s.op) {
      case OpKind::allreduce:
        need(t.layout.is_local(), "a local (per-rank partial)");
        t.layout = Layout::replicated();
        break;
      case OpKind::reducescatter:
        need(t.layout.is_local(), "a local (per-rank partial)");
        need(!t.shape.empty(), "a non-scalar");
        t.layout = Layout::sliced(0);
        break;
      case OpKind::allgather:
        need(t.layout.is_sliced(), "a sliced");
        t.layout = Layout::replicated();
        break;
      case OpKind::broadcast:
      case OpKind::reduce:
        if (s.root < 0) fail(s, "the root rank must be >= 0");
        if (s.op == OpKind::reduce) need(t.layout.is_local(), "a local (per-rank partial)");
        t.layout = Layout::replicated();
        break;
      case OpKind::alltoall: return infer_alltoall(s, t);
      case OpKind::send:
        if (t.group + 1 >= kMaxGroups)
          fail(s, fmt::format("send past the last process group: a program has at most {} groups", kMaxGroups));
        t.group += 1;
        break;
      default: COCONET_ASSERT(false, "not a communication op");
    }
    return t;
  }

  TensorType infer(const Stmt& s) const {
    switch (s.op) {
      case OpKind::compute: return infer_elementwise(s);
      case OpKind::update: return infer_update(s);
      case OpKind::matmul: return infer_matmul(s);
      case OpKind::norm: {
        if (s.operands.size() != 1) fail(s, "norm takes one tensor: norm(x)");
        const auto& t = operand(s, s.operands[0]);
        return {DType::f32, {}, t.layout.is_local() ? Layout::local() : Layout::replicated(),
                t.group};
      }
      case OpKind::rowreduce: return infer_rowreduce(s);
      default: return infer_collective(s);
    }
  }

  TensorType infer_rowreduce(const Stmt& s) const {
    const char* fn = s.reduce == ReduceOp::max ? "rowmax" : "rowsum";
    if (s.operands.size() != 1) fail(s, fmt::format("{} takes one tensor: {}(x)", fn, fn));
    if (s.reduce != ReduceOp::sum && s.reduce != ReduceOp::max) fail(s, "a row reduction is rowsum or rowmax");
    TensorType t = operand(s, s.operands[0]);
    if (t.shape.empty())
      fail(s, fmt::format("{} reduces over the last dimension, but '{}' is a scalar; use it as is",
                          fn, s.operands[0]));
    const int last = static_cast<int>(t.shape.size()) - 1;
    t.shape.back() = Dim{};
    // Cut along the reduced dimension, each rank reduces its own columns: partial results.
    if (t.layout.is_sliced() && t.layout.dim == last) t.layout = Layout::local();
    return t;
  }

  void check_stmt(Stmt& s) {
    if (defined_.count(s.name))
      fail(s, fmt::format("'{}' is already defined; statements are single assignments, so give "
                          "the new value a new name",
                          s.name));
    if (p_.scalars.count(s.name) || p_.params.count(s.name))
      fail(s, fmt::format("'{}' is the name of a size or scalar; choose another name", s.name));
    if (s.expr) s.expr = resolve_scalars(s, s.expr);
    s.type = infer(s);
    if (s.op == OpKind::update) updated_.insert(s.target);
    defined_.insert(s.name);
    types_.emplace(s.name, &s.type);
  }

  void check_outputs() {
    if (p_.outputs.empty())
      throw UserError(fmt::format("program '{}' has no outputs: list the values the step "
                                  "produces under outputs",
                                  p_.name));
    std::set<std::string> seen;
    for (const auto& o : p_.outputs) {
      if (!defined_.count(o) || inputs_.count(o))
        throw UserError(fmt::format("program '{}': output '{}' is not computed by any statement",
                                    p_.name, o));
      if (!seen.insert(o).second)
        throw UserError(fmt::format("program '{}': output '{}' is listed twice in outputs; list each "
                                    "value once",
                                    p_.name, o));
    }
  }
};

}  // namespace

void check(Program& p) { Checker(p).run(); }

namespace {
std::string rhs(const Stmt& s) {
  const auto ops = [&] {
    std::string out;
    for (std::size_t i = 0; i < s.operands.size(); ++i) out += (i ? ", " : "") + s.operands[i];
    return out;
  };
  switch (s.op) {
    case OpKind::compute: return to_string(s.expr);
    case OpKind::update: return fmt::format("update({}, {})", s.target, to_string(s.expr));
    case OpKind::allreduce:
    case OpKind::reducescatter:
      return fmt::format("{}({}, {})", to_string(s.op), to_string(s.reduce), ops());
    case OpKind::reduce:
      return fmt::format("reduce({}, {}, {})", to_string(s.reduce), ops(), s.root);
    case OpKind::broadcast: return fmt::format("broadcast({}, {})", ops(), s.root);
    case OpKind::send: return fmt::format("send({}, next)", ops());
    case OpKind::alltoall: return fmt::format("alltoall({}, {})", ops(), s.dim);
    case OpKind::rowreduce: return fmt::format("{}({})", s.reduce == ReduceOp::max ? "rowmax" : "rowsum", ops());
    default: return fmt::format("{}({})", to_string(s.op), ops());
  }
}

std::string type_str(const TensorType& t) {
  return fmt::format("{}{} {}{}", to_string(t.dtype), to_string(t.shape), to_string(t.layout),
                     t.group ? fmt::format(" @group{}", t.group) : "");
}
}  // namespace

std::string to_string(const Program& p) {
  std::string out = fmt::format("program {}", p.name);
  if (!p.params.empty()) {
    out += "  sizes:";
    for (const auto& [k, v] : p.params) out += fmt::format(" {}={}", k, v);
  }
  out += "\n";
  for (const auto& t : p.inputs)
    out += fmt::format("  in   {:<6} : {}{}\n", t.name, type_str(t.type),
                       t.shardable ? " (shardable)" : "");
  for (const auto& s : p.stmts)
    out += fmt::format("  {:<10} = {:<48} : {}\n", s.name, rhs(s), type_str(s.type));
  out += "  outputs:";
  for (const auto& o : p.outputs) out += " " + o;
  return out + "\n";
}

}  // namespace coconet::model
