#include "exec/executor.h"

#include <algorithm>

#include "exec/alltoall_blocks.h"
#include "exec/fused_builder.h"
#include "exec/rank_status.h"

#include "model/error.h"
#include "model/input_ranges.h"
#include "model/interpreter.h"
#include "plan/rows.h"

namespace coconet::exec {
namespace {

using model::OpKind;
using model::Stmt;

using plan::RowRange;

StreamKind stream_of(const plan::Op& op) {
  return op.stream == plan::Stream::comm ? StreamKind::comm : StreamKind::compute;
}

class OpRunner {
 public:
  OpRunner(Backend& b, const plan::StepPlan& plan, const RankValues& values, const plan::Unit& u, BytesTouched& touched)
      : b_(b), plan_(plan), values_(values), unit_(u), touched_(touched) {}

  // Runs `op` on `chunk`, appending the elements of each backend call to `calls`.
  void run(const plan::Op& op, int chunk, std::vector<std::int64_t>& calls) {
    calls_ = &calls;
    const Stmt& s = stmt(op.stmts.front());
    switch (op.cls) {
      case plan::OpClass::elementwise: return elementwise(op, chunk);
      case plan::OpClass::matmul: return matmul(s, chunk);
      case plan::OpClass::norm: {
        const auto& x = values_.at(s.operands.front());
        call(x.local_numel());
        touched_.view(whole(x));
        return b_.norm(whole(x), View{values_.at(s.name).buffer, 0, 1}, x.type.layout.is_sliced());
      }
      case plan::OpClass::rowreduce: return row_reduce(s, chunk);
      case plan::OpClass::collective: return communicate(s, chunk);
      case plan::OpClass::fused: break;
    }
    throw InternalError("OpRunner: a fused op goes to the backend whole");
  }

  // Block `chunk` of a tile unit's GEMM: the matmuls of the chunk's rows, in
  // the order a ring reduce-scatter takes them (plan::Unit::tile): when the
  // chunk holds one range of rows per position's slice, the range reduced
  // onto the next position first and this rank's own range last (a ring
  // reduce-scatter adds the own part in its last step).
  std::vector<MatmulArgs> tile_block(const plan::Op& op, int chunk, std::vector<std::int64_t>& calls) {
    calls_ = &calls;
    const Stmt& s = stmt(op.stmts.front());
    return matmul_args(s, plan::tile_block_rows(values_.at(s.name), values_.ranks_per_group(), unit_.chunks, chunk,
                                                unit_.slice_mode, values_.position()));
  }

  // Block `chunk`'s share of a tile unit's collective `op` (a reduce-scatter
  // or allreduce of the matmul's result): the views communicate() hands the
  // backend, recorded as its calls.
  TileReduction tile_reduction(const plan::Op& op, int chunk, std::vector<std::int64_t>& calls) {
    calls_ = &calls;
    return reduction_views(stmt(op.stmts.front()), chunk);
  }

 private:
  const Stmt& stmt(const std::string& n) const { return *plan_.program->find_stmt(n); }
  // Records one backend call of `elements` (its input on this rank).
  void call(std::int64_t elements) { calls_->push_back(elements); }
  // Records a collective call reading `in` and writing `out`.
  void both(View in, View out) {
    call(in.count);
    touched_.view(in);
    touched_.view(out);
  }

  // A reduce-scatter's or allreduce's views of chunk `chunk`, its calls
  // recorded: a reduce-scatter one call over every rank's part (outs[0] its
  // own reduced part); an allreduce one call per run of rows held (outs[i]
  // where parts[i] lands).
  TileReduction reduction_views(const Stmt& s, int chunk) {
    const auto& x = values_.at(s.operands.front());
    const auto& y = values_.at(s.name);
    TileReduction t;
    if (s.op == OpKind::reducescatter) {
      const auto rs = ranges(x.rows, chunk, true);
      for (const auto& r : rs) t.parts.push_back(rows_view(x, r.begin, r.end));
      const auto& mine = rs[static_cast<std::size_t>(values_.position())];
      t.outs.push_back(rows_view(y, mine.begin, mine.end));
      call(total_count(t.parts));
      for (const auto& v : t.parts) touched_.view(v);
      touched_.view(t.outs.front());
      return t;
    }
    COCONET_ASSERT(s.op == OpKind::allreduce, "reduction_views: a reduce-scatter or an allreduce");
    for (const auto& r : local_ranges(y, chunk, unit_.slice_mode)) {
      t.parts.push_back(rows_view(x, r.begin, r.end));
      t.outs.push_back(rows_view(y, r.begin, r.end));
      both(t.parts.back(), t.outs.back());
    }
    return t;
  }

  // Chunk `chunk` of a value with `rows` global rows (plan/rows.h).
  std::vector<RowRange> ranges(std::int64_t rows, int chunk, bool slice_mode) const {
    return plan::chunk_rows(rows, values_.ranks_per_group(), unit_.chunks, chunk, slice_mode);
  }

  // The rows of that chunk this rank holds of `v`: one backend call each.
  std::vector<RowRange> local_ranges(const ValueInfo& v, int chunk, bool slice_mode) const {
    return plan::held_rows(v, values_.ranks_per_group(), unit_.chunks, chunk, slice_mode);
  }

  // One call per range of rows held. A value of rank >= 3 (sliced on
  // dimension 0 at most, plan/views.h) runs as rows of its last dimension, so
  // that an operand repeating along it (a row reduction's result) is
  // addressed by a row stride; one call per range of dimension-0 rows held,
  // as lowering counts.
  void elementwise(const plan::Op& op, int chunk) {
    const auto& out0 = values_.at(op.stmts.front());
    const bool folded = out0.rank() >= 3;
    const std::int64_t inner = folded ? inner_rows(out0) : 1;
    const std::int64_t cols = folded ? out0.global_dims.back() : out0.local_cols;
    for (const auto& r : local_ranges(out0, chunk, unit_.slice_mode)) {
      const model::Block block = folded ? model::Block{(r.end - r.begin) * inner, cols, r.begin * inner, 0, cols}
                                          : model::Block{r.end - r.begin, cols, r.begin, out0.col_begin, out0.cols};
      std::vector<Operand> ins;
      for (const auto& name : op.program->input_names) {
        const auto& t = values_.at(name);
        ins.push_back(Operand{t.buffer, folded ? folded_access(t, out0, r.begin) : access_for(t, out0, r.begin)});
      }
      std::vector<Operand> outs;
      for (const auto& n : op.stmts) {
        const auto& v = values_.at(n);
        outs.push_back(Operand{v.buffer, {(r.begin - v.row_begin) * v.local_cols, folded ? cols : v.local_cols, 1}});
      }
      call(block.rows * block.cols);
      touched_.elementwise(ins, outs, block);
      b_.elementwise(*op.program, ins, outs, block, StreamKind::compute);
    }
  }

  // One call per range of rows held. A 2-D b: a's rows (its leading
  // dimensions folded) times b. A batched matmul: the batches of those rows,
  // one strided batched product.
  void matmul(const Stmt& s, int chunk) {
    for (const MatmulArgs& args : matmul_args(s, local_ranges(values_.at(s.name), chunk, unit_.slice_mode)))
      b_.matmul(args);
  }

  std::vector<MatmulArgs> matmul_args(const Stmt& s, const std::vector<RowRange>& rows) {
    const auto& a = values_.at(s.operands[0]);
    const auto& w = values_.at(s.operands[1]);
    const auto& out = values_.at(s.name);
    const bool batched = w.rank() > 2;
    const auto ld = [](const ValueInfo& v, int from_end) { return v.local_dims[v.local_dims.size() - from_end]; };
    const auto dims_between = [](const ValueInfo& v, int first, int end) {
      return model::numel({v.local_dims.begin() + first, v.local_dims.begin() + end});
    };
    const std::int64_t k = ld(a, 1);
    const std::int64_t n = ld(out, 1);
    COCONET_ASSERT(ld(w, 2) == k && ld(w, 1) == n, "matmul: local shapes");
    std::vector<MatmulArgs> out_args;
    for (const auto& r : rows) {
      COCONET_ASSERT(r.begin >= a.row_begin && r.end <= a.row_begin + a.local_rows, "matmul: rows not held");
      MatmulArgs args;
      args.a = rows_view(a, r.begin, r.end);
      args.out = rows_view(out, r.begin, r.end);
      args.k = k;
      args.n = n;
      args.lda = k;
      args.ldb = n;
      args.ldc = n;
      if (batched) {
        args.b = rows_view(w, r.begin, r.end);
        args.m = ld(a, 2);
        args.batch = (r.end - r.begin) * dims_between(a, 1, a.rank() - 2);
        args.stride_a = args.m * k;
        args.stride_b = k * n;
        args.stride_out = args.m * n;
      } else {
        args.b = whole(w);
        args.m = (r.end - r.begin) * dims_between(a, 1, a.rank() - 1);
      }
      call(args.out.count);
      for (const View& v : {args.a, args.b, args.out}) touched_.view(v);
      out_args.push_back(args);
    }
    return out_args;
  }

  // One call per range of rows held: each row of the result reduces the
  // input's last dimension (its local part of it, partial results when the
  // input is sliced along it).
  void row_reduce(const Stmt& s, int chunk) {
    const auto& x = values_.at(s.operands.front());
    const auto& y = values_.at(s.name);
    const std::int64_t inner = x.local_dims.back();
    COCONET_ASSERT(x.local_numel() == y.local_numel() * inner, "rowreduce: local shapes");
    for (const auto& r : local_ranges(y, chunk, unit_.slice_mode)) {
      // A 1-D input reduces to one element: all of it is that row.
      const View in = x.rank() == 1 ? whole(x) : rows_view(x, r.begin, r.end);
      const View out = rows_view(y, r.begin, r.end);
      both(in, out);
      b_.row_reduce(in, out, inner, s.reduce);
    }
  }

  void communicate(const Stmt& s, int chunk) {
    const auto& x = values_.at(s.operands.front());
    const auto& y = values_.at(s.name);
    switch (s.op) {
      case OpKind::allreduce: {
        const TileReduction t = reduction_views(s, chunk);
        for (std::size_t i = 0; i < t.parts.size(); ++i) b_.allreduce(t.parts[i], t.outs[i], s.reduce);
        return;
      }
      case OpKind::broadcast:
        require_whole(x, s);
        for (const auto& r : local_ranges(y, chunk, unit_.slice_mode)) {
          both(rows_view(x, r.begin, r.end), rows_view(y, r.begin, r.end));
          b_.broadcast(rows_view(x, r.begin, r.end), rows_view(y, r.begin, r.end), s.root);
        }
        return;
      case OpKind::reduce:
        for (const auto& r : local_ranges(y, chunk, unit_.slice_mode)) {
          both(rows_view(x, r.begin, r.end), rows_view(y, r.begin, r.end));
          b_.reduce(rows_view(x, r.begin, r.end), rows_view(y, r.begin, r.end), s.reduce, s.root);
        }
        return;
      case OpKind::reducescatter: {
        const TileReduction t = reduction_views(s, chunk);
        b_.reduce_scatter(t.parts, t.outs.front(), s.reduce);
        return;
      }
      case OpKind::allgather: {
        if (!(x.type.layout == model::Layout::sliced(0)))
          throw UserError("allgather '" + s.name + "': the executor gathers tensors sliced along dimension 0");
        const auto rs = ranges(y.rows, chunk, true);
        std::vector<View> parts;
        for (const auto& r : rs) parts.push_back(rows_view(y, r.begin, r.end));
        const auto& mine = rs[static_cast<std::size_t>(values_.position())];
        const View in = rows_view(x, mine.begin, mine.end);
        call(in.count);
        touched_.allgather(in, parts);
        b_.allgather(in, parts);
        return;
      }
      case OpKind::alltoall: {
        // Whole: overlap refuses to cut an alltoall into chunks (model/overlap.cpp).
        if (unit_.chunks != 1) throw InternalError("alltoall '" + s.name + "' in a chunked unit");
        const auto blocks = alltoall_blocks(x, y, values_.ranks_per_group(), values_.position());
        call(x.local_numel());
        touched_.view(whole(x));
        touched_.view(whole(y));
        b_.alltoall(blocks.send, blocks.recv);
        return;
      }
      case OpKind::send: {
        const int p = values_.ranks_per_group();
        if (x.here)
          for (const auto& r : local_ranges(x, chunk, unit_.slice_mode)) {
            call((r.end - r.begin) * x.local_cols);
            touched_.view(rows_view(x, r.begin, r.end));
            b_.send(rows_view(x, r.begin, r.end), b_.world_rank() + p);
          }
        if (y.here)
          for (const auto& r : local_ranges(y, chunk, unit_.slice_mode)) {
            call((r.end - r.begin) * y.local_cols);
            touched_.view(rows_view(y, r.begin, r.end));
            b_.recv(rows_view(y, r.begin, r.end), b_.world_rank() - p);
          }
        return;
      }
      default: throw InternalError("not a communication: " + s.name);
    }
  }

  static void require_whole(const ValueInfo& x, const Stmt& s) {
    if (x.type.layout.is_sliced())
      throw UserError("broadcast '" + s.name + "' of a sliced tensor: allgather it first");
  }

  Backend& b_;
  const plan::StepPlan& plan_;
  const RankValues& values_;
  const plan::Unit& unit_;
  BytesTouched& touched_;
  std::vector<std::int64_t>* calls_ = nullptr;
};

}  // namespace

Executor::Executor(Backend& backend, plan::StepPlan plan, std::uint64_t seed,
                   std::optional<std::vector<model::InputRange>> inputs)
    : backend_(backend),
      plan_(std::move(plan)),
      seed_(seed),
      values_(*plan_.program, plan_.sizes, backend.ranks_per_group(), backend.group(), backend.position(),
              fused_scratch_values(plan_), backend.updates_in_place()),
      touched_(backend) {
  COCONET_ASSERT(backend.ranks_per_group() == plan_.ranks_per_group && plan_.groups == backend.world_size() /
                                                                                         backend.ranks_per_group(),
                 "the plan was lowered for other groups than the backend has (call set_groups first)");
  values_.allocate(backend_);
  for (const auto& op : plan_.ops) {
    if (!op.fused) continue;
    auto calls = build_fused_calls(backend_, plan_, op, values_);
    for (BufferId b : calls.scratch) touched_.add_scratch(b);
    fused_calls_.emplace(op.id, std::move(calls));
  }
  check_in_place_order();
  if (!inputs) inputs = model::choose_inputs(*plan_.program, plan_.sizes, plan_.ranks_per_group).ranges;
  COCONET_ASSERT(inputs->size() == plan_.program->inputs.size(), "one input range per program input");
  ranges_ = std::move(*inputs);
  fill_inputs();
}

Executor::~Executor() {
  try {
    backend_.release_all();
  } catch (...) {
    // A failing backend is reported by whoever ran the step.
  }
}

std::vector<std::string> Executor::unit_names() const {
  std::vector<std::string> names;
  for (const auto& u : plan_.units) names.push_back(u.name);
  return names;
}

std::int64_t Executor::bytes_needed(const model::Program& program, const model::Bindings& sizes,
                                    int ranks_per_group, bool in_place) {
  std::int64_t most = 0;
  for (int g = 0; g < program.groups(); ++g)
    most = std::max(most, RankValues(program, sizes, ranks_per_group, g, 0, {}, in_place).bytes());
  return most;
}

void Executor::fill_inputs(const std::optional<std::set<std::string>>& only) {
  const std::uint64_t seed = seed_;
  const auto& ranges = ranges_;
  const auto& inputs = plan_.program->inputs;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const auto& v = values_.at(inputs[i].name);
    if (!v.here || (only && !only->contains(inputs[i].name))) continue;
    model::InputPattern pattern;
    pattern.key = model::input_key(seed, static_cast<int>(i));
    pattern.local = inputs[i].type.layout.is_local();
    pattern.rank = backend_.world_rank();
    pattern.row_begin = v.row_begin;
    pattern.col_begin = v.col_begin;
    pattern.cols = v.cols;
    pattern.local_cols = std::max<std::int64_t>(1, v.local_cols);
    pattern.range = ranges[i];
    backend_.fill_input(View{v.buffer, 0, v.local_rows * v.local_cols}, pattern);
  }
  backend_.synchronize();  // a device fill is queued on the compute stream; the comm stream reads inputs too
}

void Executor::read_f32(const std::string& value, std::int64_t first, std::span<float> out) {
  const View part = whole(values_.at(value));
  const auto count = static_cast<std::int64_t>(out.size());
  COCONET_ASSERT(first >= 0 && first + count <= part_count(value), "read_f32: outside the value's part");
  backend_.read_f32(View{part.buffer, part.offset + first, count}, out);
}

std::optional<std::span<const float>> Executor::host_f32(const std::string& value, std::int64_t first,
                                                         std::int64_t count) {
  const View part = whole(values_.at(value));
  COCONET_ASSERT(first >= 0 && first + count <= part_count(value), "host_f32: outside the value's part");
  return backend_.host_f32(View{part.buffer, part.offset + first, count});
}

std::int64_t Executor::part_count(const std::string& value) const {
  const auto& v = values_.at(value);
  return v.allocated ? whole(v).count : 0;
}

void Executor::run_unit(const plan::Unit& u) {
  if (u.tile) return run_tiled_unit(u);
  const int group = backend_.group();
  std::vector<std::vector<Event>> events(plan_.ops.size());
  for (int id : u.ops) events[static_cast<std::size_t>(id)].resize(static_cast<std::size_t>(u.chunks));
  for (const plan::Launch& l : plan::issue_order(plan_, u)) {
    const plan::Op& op = plan_.op(l.op);
    if (!op.involves(group)) continue;
    const auto c = static_cast<std::size_t>(l.chunk);
    for (const int p : op.producers) {
      const plan::Op& producer = plan_.op(p);
      if (producer.involves(group) && producer.stream != op.stream)
        backend_.wait(stream_of(op), events[static_cast<std::size_t>(p)][c]);
    }
    events[static_cast<std::size_t>(l.op)][c] = launch(u, op, l.chunk);
  }
}

Event Executor::launch(const plan::Unit& u, const plan::Op& op, int chunk) {
  const auto c = static_cast<std::size_t>(chunk);
  if (!op.work.collectives.empty()) backend_.choose_collectives(plan::launch_choices(op, chunk));
  RanLaunch ran{op.id, chunk, {}};
  const double start_us = recorder_ ? backend_.now_us() : 0.0;
  if (op.cls == plan::OpClass::fused) {
    const FusedCall& call = fused_calls_.at(op.id).chunks.at(c);
    for (const auto& piece : call.passes.front().pieces)
      for (const auto& h : piece.heads) ran.elements.push_back(h.kind == HeadCall::Kind::recv ? h.out.count : total_count(h.in));
    touched_.fused(call);
    backend_.fused(call);
  } else {
    OpRunner runner(backend_, plan_, values_, u, touched_);
    runner.run(op, chunk, ran.elements);
  }
  const Event done = backend_.record(stream_of(op));
  if (recorder_) recorder_->add({op.id, chunk, op.stream, start_us, backend_.now_us()});
  ran_.push_back(std::move(ran));
  return done;
}

// The matmul op first (plan::why_not_tile: a matmul, then the collective of
// its result): block k of the GEMM is chunk k of its rows, so block k's
// event stands where chunk k's matmul launch would have ended.
void Executor::run_tiled_unit(const plan::Unit& u) {
  const int group = backend_.group();
  const plan::Op& mm = plan_.op(u.ops.front());
  COCONET_ASSERT(mm.cls == plan::OpClass::matmul, "a tile unit starts with its matmul");
  if (!mm.involves(group)) return;
  if (plan_.caps.tile_one_collective) return run_resident_tile_unit(u);
  const std::vector<Event> blocks = backend_.tile_events(u.chunks);
  try {
    for (const plan::Launch& l : plan::issue_order(plan_, u)) {
      const plan::Op& op = plan_.op(l.op);
      if (op.id == mm.id || !op.involves(group)) continue;
      COCONET_ASSERT(op.stream == plan::Stream::comm, "a tile unit's ops after its matmul communicate");
      backend_.wait(StreamKind::comm, blocks[static_cast<std::size_t>(l.chunk)]);
      (void)launch(u, op, l.chunk);
    }
  } catch (...) {
    // Every block completed (empty), so no queued collective waits for a GEMM that will not run.
    backend_.tiled_matmul(std::vector<std::vector<MatmulArgs>>(blocks.size()), blocks);
    throw;
  }
  OpRunner runner(backend_, plan_, values_, u, touched_);
  std::vector<std::vector<MatmulArgs>> args;
  const double start_us = recorder_ ? backend_.now_us() : 0.0;
  for (int c = 0; c < u.chunks; ++c) {
    RanLaunch ran{mm.id, c, {}};
    args.push_back(runner.tile_block(mm, c, ran.elements));
    ran_.push_back(std::move(ran));
  }
  backend_.tiled_matmul(args, blocks);
  if (recorder_) recorder_->add({mm.id, 0, mm.stream, start_us, backend_.now_us()});
}

// One backend call: the GEMM's blocks and, block by block, the views of the
// unit's one collective (plan::why_not_tile with tile_fused false: a plain
// reduce-scatter or allreduce of the matmul's result).
void Executor::run_resident_tile_unit(const plan::Unit& u) {
  COCONET_ASSERT(u.ops.size() == 2, "a resident tile unit is its matmul and one collective");
  const plan::Op& mm = plan_.op(u.ops.front());
  const plan::Op& coll = plan_.op(u.ops.back());
  COCONET_ASSERT(coll.cls == plan::OpClass::collective && coll.stmts.size() == 1,
                 "a resident tile unit's collective is one plain collective");
  OpRunner runner(backend_, plan_, values_, u, touched_);
  std::vector<std::vector<MatmulArgs>> args;
  const Stmt& head = *plan_.program->find_stmt(coll.stmts.front());
  TileCollective collective{head.op, head.reduce, {}};
  const double start_us = recorder_ ? backend_.now_us() : 0.0;
  std::vector<RanLaunch> blocks, reductions;  // by chunk
  for (int c = 0; c < u.chunks; ++c) {
    blocks.push_back({mm.id, c, {}});
    args.push_back(runner.tile_block(mm, c, blocks.back().elements));
    reductions.push_back({coll.id, c, {}});
    collective.blocks.push_back(runner.tile_reduction(coll, c, reductions.back().elements));
  }
  for (const plan::Launch& l : plan::issue_order(plan_, u))  // recorded in the plan's order, as every unit's
    ran_.push_back((l.op == mm.id ? blocks : reductions).at(static_cast<std::size_t>(l.chunk)));
  backend_.tiled_matmul_collective(args, collective);
  if (recorder_) {
    const double end_us = backend_.now_us();
    recorder_->add({mm.id, 0, mm.stream, start_us, end_us});
    recorder_->add({coll.id, 0, coll.stream, start_us, end_us});
  }
}

void Executor::check_in_place_order() const {
  const auto& in_place = values_.in_place();
  if (in_place.empty()) return;
  for (const auto& op : plan_.ops)
    if (op.program) check_reads_before_writes(*op.program, in_place);
  for (const auto& [id, calls] : fused_calls_)
    for (const auto& chunk : calls.chunks)
      for (const auto& pass : chunk.passes)
        for (const auto& piece : pass.pieces)
          for (const auto& c : piece.computes) check_reads_before_writes(*c.program, in_place);
}

void Executor::prepare_step() {
  if (!stepped_) return;
  const std::set<std::string> overwritten = values_.overwritten_inputs();
  if (!overwritten.empty()) fill_inputs(overwritten);
  stepped_ = false;
}

std::vector<double> Executor::run_step() {
  prepare_step();
  stepped_ = true;
  ran_.clear();
  touched_.reset();
  std::vector<double> times;
  step_start_us_ = backend_.now_us();
  for (const auto& u : plan_.units) {
    note_rank_status({plan_.program->name, " ", plan_.schedule, ", stage ", u.name});
    const double mark = backend_.start_timer();
    run_unit(u);
    times.push_back(backend_.elapsed_us(mark));
  }
  return times;
}

}  // namespace coconet::exec
