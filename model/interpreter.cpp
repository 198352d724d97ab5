// The reference interpreter: every rank of every process group simulated in
// one process, in double precision, each statement evaluated on each rank's
// local part exactly as the layout rules of program.h say.
//
// Design notes
// - Collectives are written out literally and reduce in rank order, so an
//   allreduce and a reducescatter + allgather give bit-identical values.
// - Element-wise statements walk the result's local elements with their
//   global indices; an operand is read at the trailing global indices (a
//   bias [H] on [B*S, H]) through whatever part of it the rank holds.
// - A norm of a sliced value sums squares per rank, then across ranks in rank
//   order; this changes the summation order relative to the norm of the whole
//   tensor, which is why outputs are compared with a (tiny) tolerance.
// - Inputs whose layout differs from the program's declaration (as_slice made
//   a replicated state sliced) are re-laid out from their global value, so the
//   original program's inputs feed every schedule of it.
#include "model/interpreter.h"

#include <fmt/core.h>

#include <cmath>
#include <limits>

#include "model/error.h"
#include "model/input_pattern.h"
#include "model/input_ranges.h"
#include "model/ops.h"

namespace coconet::model {

namespace {

using Dims = std::vector<std::int64_t>;

// Input values: small integers, so sums of up to hundreds of ranks stay exact
// in every dtype (f16 represents integers up to 2048 exactly).
// At most this many mismatches are reported per tensor.
constexpr std::size_t kMaxMismatchesPerTensor = 10;

std::size_t at(std::int64_t i) { return static_cast<std::size_t>(i); }

Dims strides_of(const Dims& d) {
  Dims s(d.size(), 1);
  for (std::size_t k = d.size(); k-- > 1;) s[k - 1] = s[k] * d[k];
  return s;
}

std::int64_t flatten(const Dims& index, const Dims& strides, std::size_t offset = 0) {
  std::int64_t f = 0;
  for (std::size_t k = 0; k < strides.size(); ++k) f += index[k + offset] * strides[k];
  return f;
}

// Calls f(local_flat, global_flat, global_index) for each element rank r of p
// holds of a tensor with global dims `global` and layout `l`, in local order.
template <typename F>
void for_each_element(const Dims& global, const Layout& l, int p, int r, F&& f) {
  const Dims local = local_dims(global, l, p, r);
  const std::int64_t n = numel(local);
  if (n == 0) return;
  Dims base(global.size(), 0);
  if (l.is_sliced()) base[at(l.dim)] = slice_extent(global[at(l.dim)], p, r).begin;
  const Dims gstrides = strides_of(global);
  Dims gi = base;
  for (std::int64_t flat = 0; flat < n; ++flat) {
    f(flat, flatten(gi, gstrides), gi);
    for (std::size_t k = gi.size(); k-- > 0;) {
      if (++gi[k] < base[k] + local[k]) break;
      gi[k] = base[k];
    }
  }
}

int world_size(const Program& p, int ranks_per_group) { return p.groups() * ranks_per_group; }

RankValues empty_value(const TensorType& t, const Bindings& b, int world) {
  RankValues v;
  v.type = t;
  v.global_dims = eval_shape(t.shape, b);
  v.ranks.resize(at(world));
  return v;
}

int rank_of(int group, int ranks_per_group, int position) {
  return group * ranks_per_group + position;
}

std::vector<double>& local(RankValues& v, int group, int p, int r) {
  return v.ranks[at(rank_of(group, p, r))];
}
const std::vector<double>& local(const RankValues& v, int group, int p, int r) {
  COCONET_ASSERT(at(rank_of(group, p, r)) < v.ranks.size(), "value has no part on this rank");
  return v.ranks[at(rank_of(group, p, r))];
}

// The parts of a sliced(d) value put together into its global row-major array.
std::vector<double> assemble(const RankValues& v, int p) {
  const Dims& g = v.global_dims;
  std::vector<double> out(at(numel(g)));
  for (int r = 0; r < p; ++r) {
    const auto& part = local(v, v.type.group, p, r);
    for_each_element(g, v.type.layout, p, r, [&](std::int64_t lf, std::int64_t gf, const Dims&) {
      out[at(gf)] = part[at(lf)];
    });
  }
  return out;
}

// The global array `global` laid out on the ranks of `v`'s group as v.type says.
void distribute(RankValues& v, const std::vector<double>& global, int p) {
  for (int r = 0; r < p; ++r) {
    auto& part = local(v, v.type.group, p, r);
    part.assign(at(numel(local_dims(v.global_dims, v.type.layout, p, r))), 0.0);
    for_each_element(
        v.global_dims, v.type.layout, p, r,
        [&](std::int64_t lf, std::int64_t gf, const Dims&) { part[at(lf)] = global[at(gf)]; });
  }
}

double reduce_op(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::mean:  // summed here, divided by the group's size at the end (reduce_ranks)
      return a + b;
    case ReduceOp::max:
      return a > b ? a : b;
    case ReduceOp::min:
      return a < b ? a : b;
  }
  return a;
}

// Element-wise reduction of the group's local parts, in rank order (mean:
// the sum divided by the group's size).
std::vector<double> reduce_ranks(const RankValues& x, ReduceOp op, int p) {
  std::vector<double> acc = local(x, x.type.group, p, 0);
  for (int r = 1; r < p; ++r) {
    const auto& part = local(x, x.type.group, p, r);
    COCONET_ASSERT(part.size() == acc.size(), "ranks hold parts of different sizes");
    for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = reduce_op(op, acc[i], part[i]);
  }
  if (op == ReduceOp::mean)
    for (double& v : acc) v /= p;
  return acc;
}

// What one rank holds of an operand of an element-wise statement, and how to
// find the element that belongs to a result element.
struct OperandView {
  std::string name;
  const std::vector<double>* data = nullptr;
  Dims strides;            // of the local part
  std::size_t offset = 0;  // result rank minus operand rank (suffix broadcasting)
  std::vector<bool> repeats;  // a size-1 dimension read at index 0 for every result index
  int sliced_dim = -1;
  Extent extent;

  [[nodiscard]] double read(const Dims& result_index) const {
    if (strides.empty()) return (*data)[0];
    std::int64_t f = 0;
    for (std::size_t k = 0; k < strides.size(); ++k) {
      if (repeats[k]) continue;
      std::int64_t i = result_index[k + offset];
      if (static_cast<int>(k) == sliced_dim) {
        i -= extent.begin;
        COCONET_ASSERT(i >= 0 && i < extent.size, "operand '" + name + "' is not held here");
      }
      f += i * strides[k];
    }
    return (*data)[at(f)];
  }
};

OperandView view_of(const std::string& name, const RankValues& v, std::size_t result_rank, int p,
                    int r) {
  OperandView o;
  o.name = name;
  o.data = &local(v, v.type.group, p, r);
  const Dims& g = v.global_dims;
  COCONET_ASSERT(g.size() <= result_rank, "operand '" + name + "' has more dims than the result");
  o.offset = result_rank - g.size();
  o.strides = strides_of(local_dims(g, v.type.layout, p, r));
  for (const auto d : g) o.repeats.push_back(d == 1);
  if (v.type.layout.is_sliced() && !g.empty()) {
    o.sliced_dim = v.type.layout.dim;
    o.extent = slice_extent(g[at(o.sliced_dim)], p, r);
  }
  COCONET_ASSERT(
      static_cast<std::int64_t>(o.data->size()) == numel(local_dims(g, v.type.layout, p, r)),
      "operand '" + name + "' has the wrong local size");
  return o;
}

struct Context {
  const Program& program;
  int p;
  const Bindings& bindings;
  const State& state;

  [[nodiscard]] const RankValues& value(const std::string& n) const {
    const auto it = state.find(n);
    COCONET_ASSERT(it != state.end(), "value '" + n + "' not computed");
    return it->second;
  }
  [[nodiscard]] double scalar(const std::string& n) const {
    const auto it = program.scalars.find(n);
    if (it == program.scalars.end())
      throw UserError(fmt::format("scalar '{}' has no value: add it to the workload's scalars", n));
    return it->second;
  }
};

void eval_elementwise_rank(const Context& c, const Stmt& st, RankValues& out, int r) {
  const Dims& g = out.global_dims;
  std::vector<OperandView> views;
  for (const auto& n : tensors_read(st.expr))
    views.push_back(view_of(n, c.value(n), g.size(), c.p, r));
  const Dims* current = nullptr;
  ElementContext ctx;
  ctx.scalar = [&](const std::string& n) { return c.scalar(n); };
  ctx.tensor = [&](const std::string& n) {
    for (const auto& v : views)
      if (v.name == n) return v.read(*current);
    throw InternalError("tensor '" + n + "' not among the operands");
  };
  auto& part = local(out, out.type.group, c.p, r);
  part.assign(at(numel(local_dims(g, out.type.layout, c.p, r))), 0.0);
  for_each_element(g, out.type.layout, c.p, r,
                   [&](std::int64_t lf, std::int64_t gf, const Dims& gi) {
                     current = &gi;
                     ctx.global_index = static_cast<std::uint64_t>(gf);
                     part[at(lf)] = eval(st.expr, ctx);
                   });
}

// One product per batch index (a 2-D b: one batch, a's leading dimensions
// folded into its rows). Each rank multiplies its local parts: the layout
// rules make them fit (its own batches, rows, columns, or slice of K).
void eval_matmul_rank(const Context& c, const Stmt& st, RankValues& out, int r) {
  const RankValues& a = c.value(st.operands[0]);
  const RankValues& b = c.value(st.operands[1]);
  const Dims ad = local_dims(a.global_dims, a.type.layout, c.p, r);
  const Dims bd = local_dims(b.global_dims, b.type.layout, c.p, r);
  const bool batched = bd.size() > 2;
  COCONET_ASSERT(ad.size() >= 2 && bd.size() >= 2 && ad.back() == bd[bd.size() - 2] &&
                     (!batched || Dims(ad.begin(), ad.end() - 2) == Dims(bd.begin(), bd.end() - 2)),
                 "matmul: local shapes do not fit");
  const std::int64_t k_size = bd[bd.size() - 2];
  const std::int64_t n_size = bd.back();
  const std::int64_t batches = batched ? numel(Dims(bd.begin(), bd.end() - 2)) : 1;
  const std::int64_t m_size = batched ? ad[ad.size() - 2] : numel(Dims(ad.begin(), ad.end() - 1));
  const auto& x = local(a, a.type.group, c.p, r);
  const auto& w = local(b, b.type.group, c.p, r);
  auto& part = local(out, out.type.group, c.p, r);
  part.assign(at(batches * m_size * n_size), 0.0);
  COCONET_ASSERT(static_cast<std::int64_t>(part.size()) ==
                     numel(local_dims(out.global_dims, out.type.layout, c.p, r)),
                 "matmul: result has the wrong local size");
  for (std::int64_t q = 0; q < batches; ++q) {
    const double* xq = x.data() + q * m_size * k_size;
    const double* wq = w.data() + q * k_size * n_size;
    double* oq = part.data() + q * m_size * n_size;
    for (std::int64_t i = 0; i < m_size; ++i)
      for (std::int64_t j = 0; j < n_size; ++j) {
        double acc = 0.0;
        for (std::int64_t k = 0; k < k_size; ++k) acc += xq[i * k_size + k] * wq[k * n_size + j];
        oq[i * n_size + j] = acc;
      }
  }
}

double sum_of_squares(const std::vector<double>& v) {
  double s = 0.0;
  for (double x : v) s += x * x;
  return s;
}

void eval_norm(const Context& c, const Stmt& st, RankValues& out) {
  const RankValues& x = c.value(st.operands.front());
  const int g = x.type.group;
  double total = 0.0;
  for (int r = 0; r < c.p; ++r) {
    const double own = sum_of_squares(local(x, g, c.p, r));
    if (x.type.layout.is_sliced())
      total += own;
    else
      local(out, g, c.p, r) = {std::sqrt(own)};
  }
  if (!x.type.layout.is_sliced()) return;
  for (int r = 0; r < c.p; ++r) local(out, g, c.p, r) = {std::sqrt(total)};
}

// rowsum / rowmax over the last dimension of each rank's part, in column
// order: a part sliced along that dimension gives the rank's partial result
// (an empty part: 0 for a sum, -inf for a max).
void eval_rowreduce_rank(const Context& c, const Stmt& st, RankValues& out, int r) {
  const RankValues& x = c.value(st.operands.front());
  const auto& in = local(x, x.type.group, c.p, r);
  const Dims xd = local_dims(x.global_dims, x.type.layout, c.p, r);
  const std::int64_t inner = xd.back();
  auto& part = local(out, out.type.group, c.p, r);
  part.assign(at(numel(local_dims(out.global_dims, out.type.layout, c.p, r))), 0.0);
  COCONET_ASSERT(static_cast<std::int64_t>(in.size()) == static_cast<std::int64_t>(part.size()) * inner,
                 "rowreduce: local shapes do not fit");
  const bool max = st.reduce == ReduceOp::max;
  for (std::size_t i = 0; i < part.size(); ++i) {
    double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
    for (std::int64_t k = 0; k < inner; ++k) acc = reduce_op(st.reduce, acc, in[i * at(inner) + at(k)]);
    part[i] = acc;
  }
}

void eval_reducescatter(const Context& c, const Stmt& st, RankValues& out) {
  const RankValues& x = c.value(st.operands.front());
  const std::vector<double> sum = reduce_ranks(x, st.reduce, c.p);
  distribute(out, sum, c.p);
}

void eval_allreduce(const Context& c, const Stmt& st, RankValues& out) {
  const RankValues& x = c.value(st.operands.front());
  const std::vector<double> sum = reduce_ranks(x, st.reduce, c.p);
  for (int r = 0; r < c.p; ++r) local(out, out.type.group, c.p, r) = sum;
}

void eval_allgather(const Context& c, const Stmt& st, RankValues& out) {
  const RankValues& x = c.value(st.operands.front());
  COCONET_ASSERT(x.type.layout.is_sliced(), "allgather of a value that is not sliced");
  const std::vector<double> whole = assemble(x, c.p);
  for (int r = 0; r < c.p; ++r) local(out, out.type.group, c.p, r) = whole;
}

void eval_broadcast(const Context& c, const Stmt& st, RankValues& out) {
  const RankValues& x = c.value(st.operands.front());
  if (st.root < 0 || st.root >= c.p)
    throw UserError(fmt::format("broadcast '{}': root {} is not a rank of a group of {}", st.name,
                                st.root, c.p));
  const std::vector<double> whole =
      x.type.layout.is_sliced() ? assemble(x, c.p) : local(x, x.type.group, c.p, st.root);
  for (int r = 0; r < c.p; ++r) local(out, out.type.group, c.p, r) = whole;
}

// The reduction is meaningful on the root only; every rank is given it so the
// value is an ordinary replicated one.
void eval_reduce(const Context& c, const Stmt& st, RankValues& out) {
  if (st.root < 0 || st.root >= c.p)
    throw UserError(
        fmt::format("reduce '{}': root {} is not a rank of a group of {}", st.name, st.root, c.p));
  eval_allreduce(c, st, out);
}

// The same global tensor laid out anew: what each rank receives from every
// other is the part of that rank's slice it holds afterwards.
void eval_alltoall(const Context& c, const Stmt& st, RankValues& out) {
  const RankValues& x = c.value(st.operands.front());
  COCONET_ASSERT(x.type.layout.is_sliced() && out.type.layout.is_sliced(), "alltoall of a value that is not sliced");
  distribute(out, assemble(x, c.p), c.p);
}

void eval_send(const Context& c, const Stmt& st, RankValues& out) {
  const RankValues& x = c.value(st.operands.front());
  for (int r = 0; r < c.p; ++r) local(out, out.type.group, c.p, r) = local(x, x.type.group, c.p, r);
}

RankValues eval_stmt(const Context& c, const Stmt& st, int world) {
  RankValues out = empty_value(st.type, c.bindings, world);
  switch (st.op) {
    case OpKind::compute:
    case OpKind::update:
      for (int r = 0; r < c.p; ++r) eval_elementwise_rank(c, st, out, r);
      break;
    case OpKind::matmul:
      for (int r = 0; r < c.p; ++r) eval_matmul_rank(c, st, out, r);
      break;
    case OpKind::norm:
      eval_norm(c, st, out);
      break;
    case OpKind::rowreduce:
      for (int r = 0; r < c.p; ++r) eval_rowreduce_rank(c, st, out, r);
      break;
    case OpKind::allreduce:
      eval_allreduce(c, st, out);
      break;
    case OpKind::reducescatter:
      eval_reducescatter(c, st, out);
      break;
    case OpKind::allgather:
      eval_allgather(c, st, out);
      break;
    case OpKind::broadcast:
      eval_broadcast(c, st, out);
      break;
    case OpKind::reduce:
      eval_reduce(c, st, out);
      break;
    case OpKind::alltoall:
      eval_alltoall(c, st, out);
      break;
    case OpKind::send:
      eval_send(c, st, out);
      break;
  }
  return out;
}

// An input as the program declares it: checked against the sizes, re-laid out
// from its global value when only its layout differs (as_slice).
RankValues prepare_input(const TensorDecl& decl, const State& inputs, int p, const Bindings& b,
                         int world) {
  const auto it = inputs.find(decl.name);
  if (it == inputs.end())
    throw UserError(
        fmt::format("input '{}' has no value: make inputs with make_inputs", decl.name));
  const RankValues& given = it->second;
  RankValues want = empty_value(decl.type, b, world);
  if (given.global_dims != want.global_dims || given.type.group != decl.type.group)
    throw UserError(
        fmt::format("input '{}' was made for other sizes or another process group", decl.name));
  if (given.type.layout == decl.type.layout) return given;
  if (given.type.layout.is_local() || decl.type.layout.is_local())
    throw UserError(fmt::format("input '{}' is {} but the program declares it {}", decl.name,
                                to_string(given.type.layout), to_string(decl.type.layout)));
  distribute(want, global_value(given, p), p);
  return want;
}

bool same_value(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

}  // namespace

State make_inputs(const Program& p, int ranks_per_group, const Bindings& b, std::uint64_t seed) {
  if (ranks_per_group < 1) throw UserError("ranks per group must be at least 1");
  return make_inputs(p, ranks_per_group, b, seed, choose_inputs(p, b, ranks_per_group).ranges);
}

State make_inputs(const Program& p, int ranks_per_group, const Bindings& b, std::uint64_t seed,
                  const std::vector<InputRange>& ranges) {
  if (ranks_per_group < 1) throw UserError("ranks per group must be at least 1");
  COCONET_ASSERT(ranges.size() == p.inputs.size(), "make_inputs: one input range per input");
  const int world = world_size(p, ranks_per_group);
  State state;
  for (std::size_t i = 0; i < p.inputs.size(); ++i) {
    const TensorDecl& decl = p.inputs[i];
    RankValues v = empty_value(decl.type, b, world);
    const std::uint64_t key = input_key(seed, static_cast<int>(i));
    const bool local = decl.type.layout.is_local();
    const InputRange& range = ranges[i];
    for (int r = 0; r < ranks_per_group; ++r) {
      const int rank = rank_of(decl.type.group, ranks_per_group, r);
      auto& part = v.ranks[at(rank)];
      part.assign(at(numel(local_dims(v.global_dims, decl.type.layout, ranks_per_group, r))), 0.0);
      for_each_element(v.global_dims, decl.type.layout, ranks_per_group, r,
                       [&](std::int64_t lf, std::int64_t gf, const Dims&) {
                         part[at(lf)] = input_element(key, local, rank, gf, range);
                       });
    }
    state.emplace(decl.name, std::move(v));
  }
  return state;
}

State interpret(const Program& p, int ranks_per_group, const Bindings& b, const State& inputs) {
  if (ranks_per_group < 1) throw UserError("ranks per group must be at least 1");
  const int world = world_size(p, ranks_per_group);
  State state;
  for (const auto& decl : p.inputs)
    state.emplace(decl.name, prepare_input(decl, inputs, ranks_per_group, b, world));
  const Context c{p, ranks_per_group, b, state};
  for (const auto& st : p.stmts) state.insert_or_assign(st.name, eval_stmt(c, st, world));
  return state;
}

State interpret(const Schedule& s, int ranks_per_group, const Bindings& b, const State& inputs) {
  return interpret(s.program, ranks_per_group, b, inputs);
}

std::vector<double> global_value(const RankValues& v, int ranks_per_group) {
  const int g = v.type.group;
  COCONET_ASSERT(v.ranks.size() >= at(rank_of(g + 1, ranks_per_group, 0)),
                 "value has fewer ranks than its group needs");
  switch (v.type.layout.kind) {
    case LayoutKind::sliced:
      return assemble(v, ranks_per_group);
    case LayoutKind::local: {
      std::vector<double> out;
      for (int r = 0; r < ranks_per_group; ++r) {
        const auto& part = local(v, g, ranks_per_group, r);
        out.insert(out.end(), part.begin(), part.end());
      }
      return out;
    }
    case LayoutKind::replicated:
      break;
  }
  const auto& first = local(v, g, ranks_per_group, 0);
  for (int r = 1; r < ranks_per_group; ++r) {
    const auto& part = local(v, g, ranks_per_group, r);
    COCONET_ASSERT(
        std::equal(first.begin(), first.end(), part.begin(), part.end(), same_value),
        fmt::format("replicated value differs between ranks 0 and {} of group {}", r, g));
  }
  return first;
}

std::vector<Mismatch> compare_outputs(const Program& p, const State& expected, const State& actual,
                                      int ranks_per_group, double rtol) {
  std::vector<Mismatch> out;
  for (const auto& name : p.outputs) {
    const auto e = expected.find(name);
    const auto a = actual.find(name);
    if (e == expected.end() || a == actual.end()) {
      out.push_back({name, -1, 0.0, 0.0});
      continue;
    }
    const auto ev = global_value(e->second, ranks_per_group);
    const auto av = global_value(a->second, ranks_per_group);
    if (ev.size() != av.size()) {
      out.push_back({name, -1, static_cast<double>(ev.size()), static_cast<double>(av.size())});
      continue;
    }
    std::size_t reported = 0;
    for (std::size_t i = 0; i < ev.size() && reported < kMaxMismatchesPerTensor; ++i) {
      // Relative to max(|expected|, 1): inputs are O(1) integers, so values that
      // should cancel to zero may differ by rounding without being wrong. The
      // default rtol (1e-12) is not 0 because a norm of a sliced value sums its
      // squares in another order than the norm of the whole (LAMB's trust ratio).
      const double scale = std::max(std::fabs(ev[i]), 1.0);
      if (same_value(ev[i], av[i]) || std::fabs(ev[i] - av[i]) <= rtol * scale) continue;
      out.push_back({name, static_cast<std::int64_t>(i), ev[i], av[i]});
      ++reported;
    }
  }
  return out;
}

}  // namespace coconet::model
