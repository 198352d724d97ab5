// Lowering a schedule to a StepPlan.
//
// Design notes
// - Ops are formed as a rank sees them: consecutive element-wise statements
//   of one group with the same global shape and layout become one kernel; a
//   statement of another group does not break a run, an op the group takes
//   part in does.
// - A fuse(...) stage becomes one fused op (plan/fused_form.h), in an overlap
//   group too (one fused op per chunk there). Outside overlap groups the op
//   pipelines its rows in pieces of Capabilities::fused_piece_bytes; inside
//   one, the group's chunks are its pieces. A fused stage of another shape
//   than fused_form reads is lowered to its parts, and the unit says why.
// - A unit is cut into chunks only when every statement in it (on every
//   group, so every rank cuts alike) has the same number of rows.
#include "plan/step_plan.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <span>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include <fmt/core.h>

#include "model/error.h"
#include "model/kernel_fusion.h"
#include "model/limits.h"
#include "plan/rows.h"
#include "plan/views.h"

namespace coconet::plan {
namespace {

using model::OpKind;
using model::Stmt;

OpClass class_of(const Stmt& s) {
  if (model::is_elementwise(s.op)) return OpClass::elementwise;
  if (s.op == OpKind::matmul) return OpClass::matmul;
  if (s.op == OpKind::norm) return OpClass::norm;
  if (s.op == OpKind::rowreduce) return OpClass::rowreduce;
  return OpClass::collective;
}

int group_of(const model::Program& p, const Stmt& s) {
  return s.op == OpKind::send ? p.type_of(s.operands.front()).group : s.type.group;
}

class Lowering {
 public:
  Lowering(const model::Schedule& s, std::shared_ptr<const model::Program> program, const ScheduleFacts& facts,
           const SizedViews& views, const model::Bindings& sizes, int ranks, const Capabilities& caps)
      : s_(s), p_(*program), f_(facts), views_(*views.views), by_name_(views.by_name) {
    out_.program = std::move(program);
    out_.schedule = f_.name;
    out_.knobs = s.knobs;
    out_.caps = caps;
    out_.sizes = sizes;
    out_.ranks_per_group = ranks;
    out_.groups = p_.groups();
    // At most an op per statement and a unit per stage: room made once.
    out_.ops.reserve(p_.stmts.size());
    out_.units.reserve(s.stages.size());
    out_.stage_codes = f_.stage_codes;
  }

  StepPlan run() {
    for (int i = 0; i < static_cast<int>(s_.stages.size());) {
      const int g = s_.overlap_of(i);
      const int last = g < 0 ? i : s_.overlaps[static_cast<std::size_t>(g)].last;
      add_unit(i, last, g >= 0);
      i = last + 1;
    }
    return std::move(out_);
  }

 private:
  const Stmt& stmt(const std::string& n) const { return p_.stmts[std::size_t(f_.index.at(n))]; }
  const std::vector<std::string>& reads_of(const std::string& n) const {
    return f_.reads[std::size_t(f_.index.at(n))];
  }
  const std::vector<int>& users_of(const std::string& n) const {
    static const std::vector<int> kNone;
    const auto it = f_.users.find(n);
    return it == f_.users.end() ? kNone : it->second;
  }
  const ValueView& view(const std::string& n) const {
    const auto it = by_name_.find(n);
    if (it == by_name_.end()) throw std::out_of_range("plan::lower: no value " + n);
    return *it->second;
  }

  void add_unit(int first, int last, bool overlapped) {
    Unit u;
    u.first_stage = first;
    u.last_stage = last;
    u.overlapped = overlapped;
    const int unit = static_cast<int>(out_.units.size());
    std::vector<std::string> codes;
    std::vector<const Stmt*> all;
    for (int k = first; k <= last; ++k) {
      std::map<int, int> open_run;  // group -> the element-wise op a statement may join (-1: none)
      const auto& stage = s_.stages[static_cast<std::size_t>(k)];
      codes.push_back(out_.stage_codes[static_cast<std::size_t>(k)]);
      for (const auto& n : stage.stmts) all.push_back(&stmt(n));
      if (stage.kind == model::StageKind::fused) {
        std::string why;
        if (auto form = fused_form(p_, stage, views_, why)) {
          add_fused(stage, k, unit, u, std::move(*form));
          continue;
        }
        u.as_parts += (u.as_parts.empty() ? "" : "; ") + out_.stage_codes[static_cast<std::size_t>(k)] + ": " + why;
      }
      for (const auto& n : stage.stmts) add_stmt(stmt(n), k, unit, u, open_run);
    }
    u.name = overlapped ? "ol(" + join(codes) + ")" : codes.front();
    link(u);
    cut_chunks(u, all);
    u.tile = overlapped && out_.knobs.overlap == model::Grain::tile;
    if (u.tile) check_tile(u);
    for (int id : u.ops) cut_pieces(out_.ops[static_cast<std::size_t>(id)], u);
    for (int id : u.ops) {
      measure(out_.ops[static_cast<std::size_t>(id)]);
      count_calls(out_.ops[static_cast<std::size_t>(id)], u);
    }
    for (int k = first; k <= last; ++k) {
      const auto& stage = s_.stages[static_cast<std::size_t>(k)];
      if (stage.kind != model::StageKind::kernel) continue;
      if (out_.caps.fused_kernels)
        attach_kernel(stage, k, u);
      else
        u.as_parts += (u.as_parts.empty() ? "" : "; ") + out_.stage_codes[static_cast<std::size_t>(k)] +
                      ": the backend runs a kernel stage as its parts";
    }
    out_.units.push_back(std::move(u));
  }

  // A tile unit is its matmul, then collectives and fused ops only: its comm
  // stream takes every block's collective before the caller's GEMM starts,
  // so nothing in it may wait for the caller (a computation after the
  // collective, a fused op's norm). Otherwise the unit runs by chunks, and says why.
  void check_tile(Unit& u) const {
    for (std::size_t k = 1; k < u.ops.size(); ++k) {
      const Op& op = out_.ops[static_cast<std::size_t>(u.ops[k])];
      const bool norms = op.fused && (!op.fused->norms_before.empty() ||
                                      std::any_of(op.fused->passes.begin(), op.fused->passes.end(),
                                                  [](const FusedPass& p) { return !p.norms_after.empty(); }));
      const bool computes = op.cls != OpClass::collective && op.cls != OpClass::fused;
      if (!computes && !norms) continue;
      u.tile = false;
      u.untiled = fmt::format("{} {} after the collective, which the tile GEMM's caller would wait for", op.code,
                              norms ? "takes a norm" : "computes");
      return;
    }
  }

  static std::string join(const std::vector<std::string>& parts) {
    std::string out;
    for (const auto& x : parts) out += (out.empty() ? "" : ",") + x;
    return out;
  }

  Op& new_op(OpClass cls, int stage, int unit, Unit& u) {
    Op op;
    op.id = static_cast<int>(out_.ops.size());
    op.cls = cls;
    op.stage = stage;
    op.unit = unit;
    out_.ops.push_back(std::move(op));
    u.ops.push_back(out_.ops.back().id);
    return out_.ops.back();
  }

  bool joins(const Op& op, const Stmt& s) const {
    if (op.cls != OpClass::elementwise || class_of(s) != OpClass::elementwise) return false;
    const auto& a = view(op.stmts.front());
    const auto& b = view(s.name);
    return a.global_dims == b.global_dims && a.type.layout == b.type.layout;
  }

  void add_stmt(const Stmt& s, int stage, int unit, Unit& u, std::map<int, int>& open_run) {
    const int group = group_of(p_, s);
    if (const auto it = open_run.find(group); it != open_run.end() && it->second >= 0) {
      Op& run = out_.ops[static_cast<std::size_t>(it->second)];
      if (joins(run, s)) {
        run.stmts.push_back(s.name);
        return;
      }
    }
    Op& op = new_op(class_of(s), stage, unit, u);
    op.stmts = {s.name};
    op.group = group;
    op.dest_group = s.op == OpKind::send ? s.type.group : -1;
    // The paper's codes (C, MM, AR, RS, AG, BC, RD, P2P); a norm is "norm", a row reduction "rowsum"/"rowmax".
    op.code = op.cls == OpClass::norm        ? "norm"
              : op.cls == OpClass::rowreduce ? (s.reduce == model::ReduceOp::max ? "rowmax" : "rowsum")
                                             : model::op_code(s.op);
    open_run[op.group] = op.id;
    if (op.dest_group >= 0) open_run[op.dest_group] = -1;
  }

  void add_fused(const model::Stage& stage, int k, int unit, Unit& u, FusedForm form) {
    Op& op = new_op(OpClass::fused, k, unit, u);
    const Stmt& head = stmt(form.head);
    op.stmts = stage.stmts;
    op.group = group_of(p_, head);
    op.dest_group = head.op == OpKind::send ? head.type.group : -1;
    op.code = out_.stage_codes[static_cast<std::size_t>(k)];
    op.fused = std::move(form);
  }

  // Pieces of a fused op outside an overlap group: its head's result on rank
  // 0 cut into pieces of about fused_piece_bytes, at most one per row.
  void cut_pieces(Op& op, const Unit& u) const {
    if (!op.fused || u.overlapped || out_.caps.fused_piece_bytes <= 0) return;
    const auto& h = view(op.fused->head);
    const std::int64_t rows = u.slice_mode ? model::slice_extent(h.rows, out_.ranks_per_group, 0).size : h.rows;
    const double bytes = double(rows) * double(h.local_cols) * double(model::bytes_of(h.type.dtype));
    const double pieces = std::ceil(bytes / out_.caps.fused_piece_bytes);
    op.fused->pieces = static_cast<int>(std::clamp<double>(pieces, 1.0, double(std::max<std::int64_t>(1, rows))));
  }

  // Producers, streams and lags (a computation waits a whole chunk for the
  // communication it reads, so that the next chunk's communication is
  // already queued meanwhile).
  void link(const Unit& u) {
    // value -> the op of the unit defining it (a unit has a few statements: searched in place)
    std::vector<std::pair<const std::string*, int>> defined_by;
    const auto defining = [&](const std::string& n) {
      return std::find_if(defined_by.begin(), defined_by.end(), [&](const auto& d) { return *d.first == n; });
    };
    for (int id : u.ops) {
      Op& op = out_.ops[static_cast<std::size_t>(id)];
      const bool comm = op.cls == OpClass::collective || op.cls == OpClass::fused;
      op.stream = comm ? Stream::comm : Stream::compute;
      std::vector<int>& producers = op.producers;  // made sorted and distinct below
      producers.clear();
      for (const auto& n : op.stmts)
        for (const auto& read : reads_of(n)) {
          const auto it = defining(read);
          if (it == defined_by.end() || it->second == id) continue;
          producers.push_back(it->second);
          const Op& p = out_.ops[static_cast<std::size_t>(it->second)];
          const int extra = p.stream == Stream::comm && op.stream == Stream::compute ? 1 : 0;
          op.lag = std::max(op.lag, p.lag + extra);
        }
      std::sort(producers.begin(), producers.end());
      producers.erase(std::unique(producers.begin(), producers.end()), producers.end());
      for (const auto& n : op.stmts) {
        if (const auto it = defining(n); it != defined_by.end())
          it->second = id;
        else
          defined_by.emplace_back(&n, id);
      }
      if (op.cls == OpClass::elementwise) op.program = compile(op);
    }
  }

  // A run's program, compiled once per schedule (ScheduleFacts::compiled).
  model::ElementwiseProgram compile(const Op& op) const {
    if (const auto it = f_.compiled.find(op.stmts); it != f_.compiled.end()) return it->second;
    return f_.compiled.emplace(op.stmts, compile_afresh(op)).first->second;
  }
  // compile_elementwise looks up the dtypes of the values its statements
  // read: those of the op's reads are given, not every value's.
  model::ElementwiseProgram compile_afresh(const Op& op) const {
    std::vector<model::ElementwiseStmt> stmts;
    std::map<std::string, model::DType> types;
    for (const auto& n : op.stmts) {
      const Stmt& s = stmt(n);
      if (model::is_elementwise(s.op)) stmts.push_back({s.name, s.expr, s.type.dtype});
      for (const auto& r : reads_of(n))
        if (const auto it = by_name_.find(r); it != by_name_.end()) types.emplace(r, it->second->type.dtype);
    }
    return model::compile_elementwise(stmts, types, p_.scalars);
  }

  void cut_chunks(Unit& u, const std::vector<const Stmt*>& all) const {
    for (const auto* s : all)
      u.slice_mode = u.slice_mode || s->op == OpKind::reducescatter || s->op == OpKind::allgather ||
                     view(s->name).type.layout == model::Layout::sliced(0);
    if (!u.overlapped) return;
    std::int64_t rows = -1;
    for (const auto* s : all) {
      const auto& v = view(s->name);
      if (s->op == OpKind::norm || v.rank() == 0 || (rows >= 0 && v.rows != rows)) return;
      rows = v.rows;
    }
    if (rows <= 0) return;
    u.rows = u.slice_mode ? model::slice_extent(rows, out_.ranks_per_group, 0).size : rows;
    // A chunk holds at least one row: more chunks than rows are cut as many as the rows
    // (the knob itself is bounded by kMaxChunks when lowering starts).
    u.chunks = static_cast<int>(std::clamp<std::int64_t>(out_.knobs.chunks, 1, std::max<std::int64_t>(1, u.rows)));
  }

  // Calls per chunk of an op on position 0, as the executor cuts them (plan/rows.h).
  void count_calls(Op& op, const Unit& u) const {
    const Stmt& s = stmt(op.stmts.front());
    const int p = out_.ranks_per_group;
    if (op.fused) return count_fused_calls(op, u);
    for (int c = 0; c < u.chunks; ++c) {
      int calls = 1;
      const bool by_rows = op.cls == OpClass::elementwise || op.cls == OpClass::matmul ||
                           op.cls == OpClass::rowreduce ||
                           (op.cls == OpClass::collective && s.op != OpKind::reducescatter &&
                            s.op != OpKind::allgather);
      if (by_rows) {
        const auto& v = view(s.op == OpKind::send ? s.operands.front() : s.name);
        calls = static_cast<int>(op.cls == OpClass::matmul && u.tile
                                     ? tile_block_rows(v, p, u.chunks, c, u.slice_mode, 0).size()
                                     : held_rows(v, p, u.chunks, c, u.slice_mode).size());
      }
      op.calls.push_back(calls);
    }
  }

  // A fused op's head calls per chunk: one per piece and range of rows held
  // (a reduce-scatter: one per piece).
  void count_fused_calls(Op& op, const Unit& u) const {
    const Stmt& h = stmt(op.fused->head);
    const auto& v = view(h.op == OpKind::send ? h.operands.front() : h.name);
    for (int c = 0; c < u.chunks; ++c) {
      int calls = 0;
      for (int j = 0; j < op.fused->pieces; ++j) {
        const auto rs = piece_rows(v.rows, out_.ranks_per_group, u.chunks, c, op.fused->pieces, j, u.slice_mode);
        calls += h.op == OpKind::reducescatter ? 1 : static_cast<int>(held_of(rs, v).size());
      }
      op.calls.push_back(calls);
    }
  }

  // ---- kernel stages (model/kernel_fusion.h) ----

  // The stage's ops as one kernel: its first op carries it, the others point there.
  void attach_kernel(const model::Stage& stage, int k, const Unit& u) {
    int head = -1;
    for (int id : u.ops) {
      Op& op = out_.ops[static_cast<std::size_t>(id)];
      if (op.stage != k) continue;
      if (head < 0) {
        head = id;
        op.kernel = kernel_of(stage);
      } else {
        op.kernel_op = head;
      }
    }
  }

  // The mask a flash_attention directive recorded for the stage; empty: none.
  std::string flash_mask(const model::Stage& stage) const {
    for (const auto& d : s_.history)
      if (const auto* f = std::get_if<model::FlashAttention>(&d); f && f->first == stage.stmts.front()) return f->mask;
    return {};
  }

  Kernel kernel_of(const model::Stage& stage) const {
    Kernel k;
    const std::string mask = flash_mask(stage);
    if (mask.empty()) {  // a fused element-wise kernel: the stage's statements as one op
      Op all;
      all.stmts = stage.stmts;
      measure(all);
      k.work = all.work;
      return k;
    }
    const Names inside(stage.stmts);
    // The scores: the largest GEMM result; values of its shape (or transposed) stay on chip.
    std::vector<std::int64_t> scores;
    double largest = 0, flops = 0;
    std::int64_t scores_numel = 0;
    for (const auto& n : stage.stmts) {
      const Stmt& s = stmt(n);
      if (s.op != OpKind::matmul) continue;
      const Gemm g = gemm_of(s);
      const double f = 2.0 * double(g.batch) * double(g.m) * double(g.n) * double(g.k);
      flops += f;
      largest = std::max(largest, f);
      k.dtype = g.dtype;
      if (view(n).local_numel() > scores_numel) {
        scores_numel = view(n).local_numel();
        scores = view(n).local_dims;
      }
    }
    const auto on_chip = [&](const std::string& n) {
      std::vector<std::int64_t> d = view(n).local_dims;
      if (d == scores) return true;
      if (d.size() < 2) return false;
      std::swap(d[d.size() - 1], d[d.size() - 2]);
      return d == scores;
    };
    bool recompute = false;
    std::map<std::string, double> reads;
    for (const auto& n : stage.stmts) {
      const Stmt& s = stmt(n);
      for (const auto& r : reads_of(s.name)) {
        if (has(inside, r) || p_.scalars.contains(r)) continue;
        if (on_chip(r)) {
          recompute = true;  // a saved probability: recomputed from Q and K, not read
          continue;
        }
        reads[r] = double(view(r).local_bytes());
      }
      if (outlives(s, inside) && !on_chip(n)) k.work.hbm_bytes += double(view(n).local_bytes());
    }
    for (const auto& [name, bytes] : reads) k.work.hbm_bytes += bytes;
    // The scores' GEMM again when the probabilities are recomputed (as large as the largest here).
    if (recompute) flops += largest;
    k.attention_backward = recompute;
    k.attention_flops = flops * (mask == model::kCausalMask ? model::kCausalShare : 1.0);
    return k;
  }

  // ---- work on rank 0 ----

  // A stage's or an op's statements (a few; searched in place, not copied into a set).
  using Names = std::span<const std::string>;
  static bool has(Names names, const std::string& n) { return std::find(names.begin(), names.end(), n) != names.end(); }

  [[nodiscard]] double elem_bytes(const std::string& n) const { return model::bytes_of(view(n).type.dtype); }

  bool outlives(const Stmt& s, Names inside) const {
    if (s.op == OpKind::update) return true;
    if (f_.outputs[std::size_t(f_.index.at(s.name))]) return true;
    for (int u : users_of(s.name))
      if (!has(inside, p_.stmts[static_cast<std::size_t>(u)].name)) return true;
    return false;
  }

  Collective collective_of(const Stmt& s) const {
    const auto& x = view(s.operands.at(0));
    const auto& y = view(s.name);
    const double p = out_.ranks_per_group;
    switch (s.op) {
      case OpKind::allreduce: return {s.op, s.name, double(x.local_bytes())};
      case OpKind::reducescatter: return {s.op, s.name, double(y.local_bytes()) * p};
      case OpKind::allgather: return {s.op, s.name, double(x.local_bytes()) * p};
      case OpKind::broadcast: return {s.op, s.name, double(y.local_bytes())};
      case OpKind::reduce: return {s.op, s.name, double(x.local_bytes())};
      case OpKind::send: return {s.op, s.name, double(x.local_bytes())};
      case OpKind::alltoall: return {s.op, s.name, double(x.local_bytes())};  // rank 0's slice, as nccl-tests
      default: throw InternalError("collective_of: not a communication statement: " + s.name);
    }
  }

  // A matmul's GEMM on rank 0: a 2-D b folds a's leading dimensions into
  // its rows; a batched one multiplies its local batches one by one.
  Gemm gemm_of(const Stmt& s) const {
    const auto& a = view(s.operands.at(0)).local_dims;
    const auto& b = view(s.operands.at(1)).local_dims;
    const model::DType dtype = view(s.operands.at(0)).type.dtype;
    Gemm g = b.size() <= 2 ? Gemm{a.size() >= 2 ? model::numel({a.begin(), a.end() - 1}) : 1, b.back(), a.back(), dtype}
                           : Gemm{a[a.size() - 2], b.back(), a.back(), dtype, model::numel({b.begin(), b.end() - 2})};
    if (gathered(s.operands.at(0))) g.a_gathered = out_.ranks_per_group;
    return g;
  }

  // Whether value `n` is an allgather's result.
  bool gathered(const std::string& n) const { return f_.index.contains(n) && stmt(n).op == OpKind::allgather; }

  // Whether value `n` is the first operand of a (2-D) matmul: a GEMM FP8
  // training runs in FP8 (sim::GemmShape::fp8).
  bool feeds_gemm(const std::string& n) const {
    for (const int i : users_of(n)) {
      const Stmt& u = p_.stmts[std::size_t(i)];
      if (u.op == OpKind::matmul && u.operands.at(0) == n && view(u.operands.at(1)).local_dims.size() <= 2) return true;
    }
    return false;
  }

  // Whether an element-wise result of `op` is written to memory: a fused op
  // writes what it does not keep in scratch, and a gathered result (into
  // the gather's output); another op what is read after it.
  bool written(const Op& op, const Stmt& s, Names inside) const {
    if (!op.fused) return outlives(s, inside);
    return !op.fused->scratch.contains(s.name) || !gather_of(*op.fused, p_, s.name).empty();
  }

  void measure(Op& op) const {
    const Names inside(op.stmts);
    // A fused op's pass of each element-wise statement (-1: a norm or collective).
    std::map<std::string, int> pass_of;
    if (op.fused)
      for (std::size_t k = 0; k < op.fused->passes.size(); ++k)
        for (const auto& n : op.fused->passes[k].stmts) pass_of[n] = static_cast<int>(k);
    // Values read from memory: those from before the op and, in a fused op,
    // its materialised results read by another pass or a norm (a few: searched
    // in place, summed in the order of their names below).
    std::vector<std::pair<const std::string*, double>> reads;
    const auto from_memory = [&](const std::string& n, const std::string& reader) {
      if (!has(inside, n)) return true;
      const auto at = pass_of.find(n);
      if (!op.fused || op.fused->scratch.contains(n) || at == pass_of.end()) return false;
      const auto by = pass_of.find(reader);
      return by == pass_of.end() || by->second != at->second;  // not a register of the same program
    };
    std::string reader;  // the statement whose reads are counted
    auto read = [&](const std::string& n, std::int64_t elems) {
      if (!from_memory(n, reader)) return;
      const double b = double(std::min(elems, view(n).local_numel())) * elem_bytes(n);
      const auto it = std::find_if(reads.begin(), reads.end(), [&](const auto& r) { return *r.first == n; });
      if (it == reads.end())
        reads.emplace_back(&n, std::max(0.0, b));
      else
        it->second = std::max(it->second, b);
    };
    for (const auto& n : op.stmts) {
      const Stmt& s = stmt(n);
      reader = n;
      if (model::is_communication(s.op)) {
        Collective c = collective_of(s);
        // A value a fused op keeps only to gather is written at this rank's place in the gather's output.
        c.in_place = s.op == OpKind::allgather && op.fused && op.fused->scratch.contains(s.operands.at(0));
        if (s.op == OpKind::allgather && feeds_gemm(s.name))
          c.fp8_bytes = c.bytes / double(model::bytes_of(view(s.name).type.dtype));
        op.work.collectives.push_back(c);
      } else if (s.op == OpKind::matmul) {
        op.work.gemm = gemm_of(s);
      } else if (s.op == OpKind::rowreduce) {
        // Memory-bound like a norm: the input read once, one value per row written.
        const auto& x = view(s.operands.at(0));
        op.work.flops += double(x.local_numel());
        read(x.name, x.local_numel());
        if (written(op, s, inside)) op.work.hbm_bytes += double(view(s.name).local_bytes());
      } else if (s.op == OpKind::norm) {
        const auto& x = view(s.operands.at(0));
        op.work.costly[std::size_t(model::CostlyOp::norm_element)] += double(x.local_numel());
        read(x.name, x.local_numel());
        op.work.norm_across_group = x.type.layout.is_sliced();
      } else {
        const std::int64_t n_elems = view(s.name).local_numel();
        const model::ElementCost& cost = f_.costs[std::size_t(f_.index.at(s.name))];
        op.work.flops += double(cost.flops) * double(n_elems);
        for (int k = 0; k < model::kCostlyOps; ++k)
          op.work.costly[std::size_t(k)] += double(cost.costly[std::size_t(k)]) * double(n_elems);
        for (const auto& r : reads_of(s.name)) read(r, n_elems);
        if (!s.type.shape.empty() && written(op, s, inside)) op.work.hbm_bytes += double(view(s.name).local_bytes());
      }
    }
    std::sort(reads.begin(), reads.end(), [](const auto& a, const auto& b) { return *a.first < *b.first; });
    for (const auto& [name, bytes] : reads) op.work.hbm_bytes += bytes;
  }

  const model::Schedule& s_;
  const model::Program& p_;
  const ScheduleFacts& f_;  // the statements' positions, reads and users, found once per schedule
  const std::map<std::string, ValueView>& views_;  // every value on rank 0 (rank_views)
  const std::unordered_map<std::string_view, const ValueView*>& by_name_;  // views_ by name, hashed
  StepPlan out_;
};

}  // namespace

namespace {
std::string sizes_text(const model::Bindings& sizes) {
  std::string out;
  for (const auto& [k, v] : sizes) out += fmt::format("{}{}={}", out.empty() ? "" : " ", k, v);
  return out.empty() ? "its sizes" : out;
}
}  // namespace

namespace {
// Whether overlap group `g` of `s` is a matmul then the collective (or fused
// collective) whose head reduces the matmul's result.
bool tile_pair(const model::Schedule& s, const model::OverlapGroup& g) {
  if (g.last != g.first + 1) return false;
  const auto& mm = s.stages[static_cast<std::size_t>(g.first)];
  const auto& comm = s.stages[static_cast<std::size_t>(g.last)];
  if (mm.kind != model::StageKind::matmul || mm.stmts.size() != 1) return false;
  if (comm.kind != model::StageKind::collective && comm.kind != model::StageKind::fused) return false;
  const Stmt* head = s.program.find_stmt(comm.stmts.front());
  return head && (head->op == OpKind::reducescatter || head->op == OpKind::allreduce) &&
         head->operands.front() == mm.stmts.front();
}
}  // namespace

std::string why_not_tile(const model::Schedule& s, const Capabilities& caps) {
  if (s.overlaps.empty()) return {};
  if (!caps.tile_overlap)
    return fmt::format("the {} backend runs no tiled GEMM{}{} (plan::Capabilities::tile_overlap); use overlap: chunk",
                       to_string(caps.backend), caps.no_tile_reason.empty() ? "" : " here: ", caps.no_tile_reason);
  for (const auto& g : s.overlaps) {
    std::vector<std::string> codes;
    for (int k = g.first; k <= g.last; ++k) codes.push_back(s.stages[static_cast<std::size_t>(k)].code(s.program));
    std::string group;
    for (const auto& c : codes) group += (group.empty() ? "" : ",") + c;
    if (!tile_pair(s, g))
      return fmt::format("overlap group ol({}) of {} is not a matmul then the reduce-scatter or allreduce of its "
                         "result (ol(MM,RS), ol(MM,AR), ol(MM,fuse(RS-...))); use overlap: chunk",
                         group, s.name());
    if (!caps.tile_fused && s.stages[static_cast<std::size_t>(g.last)].kind == model::StageKind::fused)
      return fmt::format("overlap group ol({}) of {}: the {} backend's tiles feed a plain reduce-scatter or "
                         "allreduce (its communication kernel runs no fused op's program; "
                         "plan::Capabilities::tile_fused); use overlap: chunk, or ol(MM,RS) / ol(MM,AR)",
                         group, s.name(), to_string(caps.backend));
  }
  return {};
}

ScheduleFacts schedule_facts(const model::Schedule& s, const model::Program& program) {
  ScheduleFacts f;
  f.name = s.name();
  f.stage_codes.reserve(s.stages.size());
  for (const auto& st : s.stages) f.stage_codes.push_back(st.code(program));
  f.reads.resize(program.stmts.size());
  f.costs.reserve(program.stmts.size());
  f.outputs.reserve(program.stmts.size());
  for (std::size_t i = 0; i < program.stmts.size(); ++i) {
    const Stmt& st = program.stmts[i];
    f.costs.push_back(st.expr ? model::element_cost(st.expr) : model::ElementCost{});  // a compute or update statement's
    f.outputs.push_back(std::find(program.outputs.begin(), program.outputs.end(), st.name) != program.outputs.end());
    f.index.emplace(program.stmts[i].name, int(i));
    f.reads[i] = model::Program::reads(program.stmts[i]);
    for (const auto& r : f.reads[i]) {
      auto& u = f.users[r];
      if (u.empty() || u.back() != int(i)) u.push_back(int(i));
    }
  }
  return f;
}

StepPlan lower(const model::Schedule& s, const model::Bindings& sizes, int ranks_per_group,
               const Capabilities& caps) {
  return lower(s, std::make_shared<const model::Program>(s.program), sizes, ranks_per_group, caps);
}

StepPlan lower(const model::Schedule& s, std::shared_ptr<const model::Program> program, const model::Bindings& sizes,
               int ranks_per_group, const Capabilities& caps) {
  COCONET_ASSERT(program != nullptr, "plan::lower: no program");
  const ScheduleFacts facts = schedule_facts(s, *program);
  return lower(s, std::move(program), facts, sizes, ranks_per_group, caps);
}

StepPlan lower(const model::Schedule& s, std::shared_ptr<const model::Program> program, const ScheduleFacts& facts,
               const model::Bindings& sizes, int ranks_per_group, const Capabilities& caps) {
  SizedViews views;
  return lower(s, std::move(program), facts, views, sizes, ranks_per_group, caps);
}

bool same_values(const model::Program& a, const model::Program& b) {
  const auto same_decl = [](const model::TensorDecl& x, const model::TensorDecl& y) {
    return x.name == y.name && x.type == y.type;
  };
  const auto same_stmt = [](const Stmt& x, const Stmt& y) { return x.name == y.name && x.type == y.type; };
  return a.name == b.name && std::equal(a.inputs.begin(), a.inputs.end(), b.inputs.begin(), b.inputs.end(), same_decl) &&
         std::equal(a.stmts.begin(), a.stmts.end(), b.stmts.begin(), b.stmts.end(), same_stmt);
}

StepPlan lower(const model::Schedule& s, std::shared_ptr<const model::Program> program, const ScheduleFacts& facts,
               SizedViews& views, const model::Bindings& sizes, int ranks_per_group, const Capabilities& caps) {
  COCONET_ASSERT(program != nullptr && program->name == s.program.name &&
                     program->stmts.size() == s.program.stmts.size(),
                 "plan::lower: a shared program that is not the schedule's");
  model::check_schedule_bounds(s, ranks_per_group);
  if (s.knobs.overlap == model::Grain::tile)
    if (const std::string why = why_not_tile(s, caps); !why.empty()) throw UserError("overlap: tile: " + why);
  if (!views.views) {
    model::check_tensor_sizes(*program, sizes_text(sizes), sizes);
    views.views = rank_views(*program, sizes, ranks_per_group, RankId{0, 0});
    views.by_name.clear();
    views.by_name.reserve(views.views->size());
    for (const auto& [name, v] : *views.views) views.by_name.emplace(name, &v);
  }
  return Lowering(s, std::move(program), facts, views, sizes, ranks_per_group, caps).run();
}

std::vector<Launch> issue_order(const StepPlan& p, const Unit& u) {
  int max_lag = 0;
  for (int id : u.ops) max_lag = std::max(max_lag, p.op(id).lag);
  std::vector<Launch> out;
  for (int step = 0; step < u.chunks + max_lag; ++step)
    for (int id : u.ops) {
      const int chunk = step - p.op(id).lag;
      if (chunk >= 0 && chunk < u.chunks) out.push_back({id, chunk});
    }
  return out;
}

Stream fused_program_stream(const StepPlan& p, const Launch& l) {
  const Unit& u = p.units.at(static_cast<std::size_t>(p.op(l.op).unit));
  if (!u.overlapped) return Stream::compute;
  // Tiles: the caller runs the GEMM from the unit's start to its end, the
  // comm stream takes each block's fused op whole.
  if (p.caps.comm_stream_computes || u.tile) return Stream::comm;
  const auto order = issue_order(p, u);
  const auto at = std::find(order.begin(), order.end(), l);
  COCONET_ASSERT(at != order.end(), "fused_program_stream: a launch its unit does not issue");
  const bool compute_follows = std::any_of(std::next(at), order.end(), [&](const Launch& later) {
    return p.op(later.op).stream == Stream::compute;
  });
  return compute_follows ? Stream::comm : Stream::compute;
}

Gemm Gemm::part(double share, int calls) const {
  Gemm g = *this;
  std::int64_t& rows = batch > 1 ? g.batch : g.m;
  rows = std::max<std::int64_t>(1, std::llround(double(rows) * share / std::max(1, calls)));
  return g;
}

std::vector<CallChoice> launch_choices(const Op& op, int chunk) {
  std::vector<CallChoice> out;
  const auto k = static_cast<std::size_t>(chunk);
  for (const Collective& c : op.work.collectives)
    if (k < c.chosen.size() && c.chosen[k].concrete() && !c.chosen[k].local) out.push_back({c.op, c.chosen[k]});
  return out;
}

double chunk_share(const Unit& u, int chunk) {
  if (u.chunks <= 1 || u.rows <= 0) return 1.0;
  return double(model::slice_extent(u.rows, u.chunks, chunk).size) / double(u.rows);
}

}  // namespace coconet::plan
