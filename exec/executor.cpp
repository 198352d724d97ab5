#include "exec/executor.h"

#include <algorithm>
#include <optional>

#include "exec/fused_stage.h"
#include "model/error.h"
#include "model/interpreter.h"

namespace coconet::exec {
namespace {

using model::OpKind;
using model::Stmt;

// Rows filled per write when loading inputs (bounds the host staging vector).
constexpr std::int64_t kFillElements = 1 << 20;

enum class OpClass { elementwise, matmul, norm, comm };

struct RowRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

OpClass class_of(const Stmt& s) {
  if (model::is_elementwise(s.op)) return OpClass::elementwise;
  if (s.op == OpKind::matmul) return OpClass::matmul;
  if (s.op == OpKind::norm) return OpClass::norm;
  return OpClass::comm;
}

bool slicing(const Stmt& s) { return s.op == OpKind::reducescatter || s.op == OpKind::allgather; }

RowRange intersect(RowRange r, std::int64_t begin, std::int64_t size) {
  return {std::max(r.begin, begin), std::min(r.end, begin + size)};
}

std::vector<RowRange> merged(const std::vector<RowRange>& ranges) {
  std::vector<RowRange> out;
  for (const auto& r : ranges) {
    if (r.end <= r.begin) continue;
    if (!out.empty() && out.back().end == r.begin) out.back().end = r.end;
    else out.push_back(r);
  }
  return out;
}

View rows_view(const ValueInfo& v, std::int64_t begin, std::int64_t end) {
  return View{v.buffer, (begin - v.row_begin) * v.local_cols, (end - begin) * v.local_cols};
}

// How element (i, j) of a block of `out` starting at global row `row0` reads operand `t`.
kernels::Access access_for(const ValueInfo& t, const ValueInfo& out, std::int64_t row0) {
  if (t.rank() == 0) return {0, 0, 0};
  if (t.rank() == out.rank()) {
    for (int d = 2; d < t.rank(); ++d)
      if (t.global_dims[static_cast<std::size_t>(d)] != out.global_dims[static_cast<std::size_t>(d)])
        throw UserError("operand '" + t.name + "' of '" + out.name +
                        "' broadcasts along an inner dimension, which the executor does not support");
    const bool row_bcast = t.rows == 1 && out.rows > 1;
    const bool col_bcast = t.cols == 1 && out.cols > 1;
    kernels::Access a;
    a.row_stride = row_bcast ? 0 : t.local_cols;
    a.col_stride = col_bcast ? 0 : 1;
    a.base = (row_bcast ? 0 : (row0 - t.row_begin) * t.local_cols) + (col_bcast ? 0 : out.col_begin - t.col_begin);
    return a;
  }
  if (t.rank() == 1 && out.rank() == 2) {  // a bias [H] on [B*S, H]: indexed by the column
    const bool bcast = t.rows == 1 && out.cols > 1;
    return {bcast ? 0 : out.col_begin - t.row_begin, 0, bcast ? 0 : 1};
  }
  throw UserError("operand '" + t.name + "' of '" + out.name + "' broadcasts from rank " +
                  std::to_string(t.rank()) + " to rank " + std::to_string(out.rank()) +
                  ", which the executor does not support");
}

}  // namespace

struct Op {
  OpClass cls = OpClass::elementwise;
  std::vector<const Stmt*> stmts;
  StreamKind stream = StreamKind::compute;
  int lag = 0;
  std::vector<int> producers;  // earlier ops of the unit this one reads
  kernels::ElementwiseProgram program;
};

struct Executor::Unit {
  std::string name;
  std::vector<Op> ops;
  int chunks = 1;
  bool slice_mode = false;
  std::vector<std::vector<Event>> events;  // [op][chunk]
  std::optional<FusedStageSpec> fused;     // a fuse(RS-C-AG) stage the backend may run whole
};

namespace {

// True when this rank takes part in the statement.
bool involves(const Stmt& s, const Plan& plan) {
  if (plan.at(s.name).here) return true;
  return s.op == OpKind::send && plan.at(s.operands.front()).here;
}

bool fuses_with(const Op& op, const Stmt& s, const Plan& plan) {
  if (op.cls != OpClass::elementwise || class_of(s) != OpClass::elementwise) return false;
  const auto& a = plan.at(op.stmts.front()->name);
  const auto& b = plan.at(s.name);
  return a.global_dims == b.global_dims && a.type.layout == b.type.layout;
}

kernels::ElementwiseProgram compile(const Op& op, const Plan& plan, const model::Program& program) {
  std::vector<kernels::ElementwiseStmt> stmts;
  for (const auto* s : op.stmts) stmts.push_back({s->name, s->expr, s->type.dtype});
  std::map<std::string, model::DType> types;
  for (const auto& [name, v] : plan.values()) types.emplace(name, v.type.dtype);
  return kernels::compile_elementwise(stmts, types, program.scalars);
}

void link(std::vector<Op>& ops) {
  std::map<std::string, int> defined_by;
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    auto& op = ops[static_cast<std::size_t>(i)];
    op.stream = op.cls == OpClass::comm ? StreamKind::comm : StreamKind::compute;
    for (const auto* s : op.stmts)
      for (const auto& read : model::Program::reads(*s)) {
        const auto it = defined_by.find(read);
        if (it == defined_by.end() || it->second == i) continue;
        op.producers.push_back(it->second);
        const auto& p = ops[static_cast<std::size_t>(it->second)];
        // A computation waits a whole chunk for the communication it reads, so
        // that the next chunk's communication is already queued meanwhile.
        const int extra = p.stream == StreamKind::comm && op.stream == StreamKind::compute ? 1 : 0;
        op.lag = std::max(op.lag, p.lag + extra);
      }
    for (const auto* s : op.stmts) defined_by[s->name] = i;
  }
}

// Whether a unit's statements (all of them, on every group, so that every
// rank cuts the same chunks) can be cut into row chunks that line up.
bool chunkable(const std::vector<const Stmt*>& stmts, const Plan& plan) {
  std::int64_t rows = -1;
  for (const auto* s : stmts) {
    if (s->op == OpKind::norm) return false;
    const auto& v = plan.at(s->name);
    if (v.rank() == 0) return false;
    if (rows >= 0 && v.rows != rows) return false;
    rows = v.rows;
  }
  return rows > 0;
}

}  // namespace

Executor::Executor(Backend& backend, model::Schedule schedule, const model::Bindings& sizes, std::uint64_t seed)
    : backend_(backend),
      schedule_(std::move(schedule)),
      plan_(schedule_.program, sizes, backend.ranks_per_group(), backend.group(), backend.position()) {
  COCONET_ASSERT(backend.ranks_per_group() * schedule_.program.groups() == backend.world_size(),
                 "backend groups not set for this program (call set_groups first)");
  plan_.allocate(backend_);
  fill_inputs(seed);
  const auto& p = schedule_.program;
  for (int i = 0; i < static_cast<int>(schedule_.stages.size());) {
    const int g = schedule_.overlap_of(i);
    const int last = g < 0 ? i : schedule_.overlaps[static_cast<std::size_t>(g)].last;
    auto unit = std::make_unique<Unit>();
    std::vector<std::string> codes;
    std::vector<const Stmt*> all;
    for (int k = i; k <= last; ++k) {
      const auto& stage = schedule_.stages[static_cast<std::size_t>(k)];
      codes.push_back(stage.code(p));
      Op* current = nullptr;
      for (const auto& name : stage.stmts) {
        const Stmt& s = *p.find_stmt(name);
        all.push_back(&s);
        if (!involves(s, plan_)) continue;
        if (current != nullptr && fuses_with(*current, s, plan_)) {
          current->stmts.push_back(&s);
          continue;
        }
        unit->ops.push_back(Op{class_of(s), {&s}, StreamKind::compute, 0, {}, {}});
        current = &unit->ops.back();
      }
    }
    unit->name = g < 0 ? codes.front() : "ol(" + [&] {
      std::string s;
      for (const auto& c : codes) s += (s.empty() ? "" : ",") + c;
      return s;
    }() + ")";
    for (auto& op : unit->ops)
      if (op.cls == OpClass::elementwise) op.program = compile(op, plan_, p);
    link(unit->ops);
    if (g < 0) unit->fused = recognise_fused_allreduce(p, schedule_.stages[static_cast<std::size_t>(i)], plan_);
    unit->chunks = g >= 0 && chunkable(all, plan_) ? std::max(1, schedule_.knobs.chunks) : 1;
    for (const auto* s : all)
      unit->slice_mode = unit->slice_mode || slicing(*s) || plan_.at(s->name).type.layout == model::Layout::sliced(0);
    units_.push_back(std::move(unit));
    i = last + 1;
  }
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
  for (const auto& u : units_) names.push_back(u->name);
  return names;
}

std::int64_t Executor::bytes_needed(const model::Schedule& schedule, const model::Bindings& sizes,
                                    int ranks_per_group) {
  std::int64_t most = 0;
  for (int g = 0; g < schedule.program.groups(); ++g)
    most = std::max(most, Plan(schedule.program, sizes, ranks_per_group, g, 0).bytes());
  return most;
}

void Executor::fill_inputs(std::uint64_t seed) {
  const auto& inputs = schedule_.program.inputs;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const auto& v = plan_.at(inputs[i].name);
    if (!v.here) continue;
    const std::int64_t rows_per_write = std::max<std::int64_t>(1, kFillElements / std::max<std::int64_t>(1, v.local_cols));
    for (std::int64_t r0 = 0; r0 < v.local_rows; r0 += rows_per_write) {
      const std::int64_t r1 = std::min(v.local_rows, r0 + rows_per_write);
      std::vector<double> values;
      values.reserve(static_cast<std::size_t>((r1 - r0) * v.local_cols));
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = 0; c < v.local_cols; ++c)
          values.push_back(model::input_value(inputs[i], static_cast<int>(i),
                                              (v.row_begin + r) * v.cols + v.col_begin + c, backend_.world_rank(),
                                              seed));
      backend_.write(View{v.buffer, r0 * v.local_cols, (r1 - r0) * v.local_cols}, values);
    }
  }
}

std::vector<double> Executor::read(const std::string& value) {
  const auto& v = plan_.at(value);
  if (!v.here) return {};
  return backend_.read(View{v.buffer, 0, v.local_numel()});
}

namespace {

class OpRunner {
 public:
  OpRunner(Backend& b, const Plan& plan, const Executor::Unit& u) : b_(b), plan_(plan), unit_(u) {}

  void run(const Op& op, int chunk) {
    const Stmt& s = *op.stmts.front();
    switch (op.cls) {
      case OpClass::elementwise: return elementwise(op, chunk);
      case OpClass::matmul: return matmul(s, chunk);
      case OpClass::norm: {
        const auto& x = plan_.at(s.operands.front());
        return b_.norm(View{x.buffer, 0, x.local_numel()}, View{plan_.at(s.name).buffer, 0, 1},
                       x.type.layout.is_sliced());
      }
      case OpClass::comm: return communicate(s, chunk);
    }
  }

 private:
  // Chunk `chunk` of a value with `rows` global rows: one range, or in slice
  // mode the chunk-th piece of every rank's slice.
  std::vector<RowRange> ranges(std::int64_t rows, int chunk, bool slice_mode) const {
    const int p = plan_.ranks_per_group();
    if (!slice_mode) {
      const auto e = model::slice_extent(rows, unit_.chunks, chunk);
      return {{e.begin, e.begin + e.size}};
    }
    std::vector<RowRange> out;
    for (int r = 0; r < p; ++r) {
      const auto slice = model::slice_extent(rows, p, r);
      const auto piece = model::slice_extent(slice.size, unit_.chunks, chunk);
      out.push_back({slice.begin + piece.begin, slice.begin + piece.begin + piece.size});
    }
    return out;
  }

  std::vector<RowRange> local_ranges(const ValueInfo& v, int chunk, bool slice_mode) const {
    std::vector<RowRange> out;
    for (const auto& r : merged(ranges(v.rows, chunk, slice_mode))) {
      const auto i = intersect(r, v.row_begin, v.local_rows);
      if (i.end > i.begin) out.push_back(i);
    }
    return out;
  }

  void elementwise(const Op& op, int chunk) {
    const auto& out0 = plan_.at(op.stmts.front()->name);
    for (const auto& r : local_ranges(out0, chunk, unit_.slice_mode)) {
      kernels::Block block{r.end - r.begin, out0.local_cols, r.begin, out0.col_begin, out0.cols};
      std::vector<Operand> ins;
      for (const auto& name : op.program.input_names) {
        const auto& t = plan_.at(name);
        ins.push_back(Operand{t.buffer, access_for(t, out0, r.begin)});
      }
      std::vector<Operand> outs;
      for (const auto* s : op.stmts) {
        const auto& v = plan_.at(s->name);
        outs.push_back(Operand{v.buffer, {(r.begin - v.row_begin) * v.local_cols, v.local_cols, 1}});
      }
      b_.elementwise(op.program, ins, outs, block);
    }
  }

  void matmul(const Stmt& s, int chunk) {
    const auto& a = plan_.at(s.operands[0]);
    const auto& w = plan_.at(s.operands[1]);
    const auto& out = plan_.at(s.name);
    if (a.rank() != 2 || w.rank() != 2)
      throw UserError("matmul '" + s.name + "': the executor multiplies 2-D matrices; write " + a.name +
                      " as [rows, cols]");
    COCONET_ASSERT(a.local_cols == w.local_rows && out.local_cols == w.local_cols, "matmul: local shapes");
    for (const auto& r : local_ranges(out, chunk, unit_.slice_mode)) {
      COCONET_ASSERT(r.begin >= a.row_begin && r.end <= a.row_begin + a.local_rows, "matmul: rows not held");
      MatmulArgs args;
      args.a = rows_view(a, r.begin, r.end);
      args.b = View{w.buffer, 0, w.local_numel()};
      args.out = rows_view(out, r.begin, r.end);
      args.m = r.end - r.begin;
      args.k = a.local_cols;
      args.n = out.local_cols;
      args.lda = a.local_cols;
      args.ldb = w.local_cols;
      args.ldc = out.local_cols;
      b_.matmul(args);
    }
  }

  void communicate(const Stmt& s, int chunk) {
    const auto& x = plan_.at(s.operands.front());
    const auto& y = plan_.at(s.name);
    switch (s.op) {
      case OpKind::allreduce:
        for (const auto& r : local_ranges(y, chunk, unit_.slice_mode))
          b_.allreduce(rows_view(x, r.begin, r.end), rows_view(y, r.begin, r.end), s.reduce);
        return;
      case OpKind::broadcast:
        require_whole(x, s);
        for (const auto& r : local_ranges(y, chunk, unit_.slice_mode))
          b_.broadcast(rows_view(x, r.begin, r.end), rows_view(y, r.begin, r.end), s.root);
        return;
      case OpKind::reduce:
        for (const auto& r : local_ranges(y, chunk, unit_.slice_mode))
          b_.reduce(rows_view(x, r.begin, r.end), rows_view(y, r.begin, r.end), s.reduce, s.root);
        return;
      case OpKind::reducescatter: {
        const auto rs = ranges(x.rows, chunk, true);
        std::vector<View> parts;
        for (const auto& r : rs) parts.push_back(rows_view(x, r.begin, r.end));
        const auto& mine = rs[static_cast<std::size_t>(plan_.position())];
        b_.reduce_scatter(parts, rows_view(y, mine.begin, mine.end), s.reduce);
        return;
      }
      case OpKind::allgather: {
        if (!(x.type.layout == model::Layout::sliced(0)))
          throw UserError("allgather '" + s.name + "': the executor gathers tensors sliced along dimension 0");
        const auto rs = ranges(y.rows, chunk, true);
        std::vector<View> parts;
        for (const auto& r : rs) parts.push_back(rows_view(y, r.begin, r.end));
        const auto& mine = rs[static_cast<std::size_t>(plan_.position())];
        b_.allgather(rows_view(x, mine.begin, mine.end), parts);
        return;
      }
      case OpKind::send: {
        const int p = plan_.ranks_per_group();
        if (x.here)
          for (const auto& r : local_ranges(x, chunk, unit_.slice_mode))
            b_.send(rows_view(x, r.begin, r.end), b_.world_rank() + p);
        if (y.here)
          for (const auto& r : local_ranges(y, chunk, unit_.slice_mode))
            b_.recv(rows_view(y, r.begin, r.end), b_.world_rank() - p);
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
  const Plan& plan_;
  const Executor::Unit& unit_;
};

}  // namespace

void Executor::run_unit(Unit& u) {
  if (u.fused && backend_.try_fused_allreduce(*u.fused)) {
    ran_fused_ = true;
    return;
  }
  int max_lag = 0;
  for (const auto& op : u.ops) max_lag = std::max(max_lag, op.lag);
  u.events.assign(u.ops.size(), std::vector<Event>(static_cast<std::size_t>(u.chunks)));
  OpRunner runner(backend_, plan_, u);
  for (int step = 0; step < u.chunks + max_lag; ++step) {
    for (std::size_t i = 0; i < u.ops.size(); ++i) {
      const Op& op = u.ops[i];
      const int chunk = step - op.lag;
      if (chunk < 0 || chunk >= u.chunks) continue;
      const auto c = static_cast<std::size_t>(chunk);
      for (const int p : op.producers) {
        const auto& producer = u.ops[static_cast<std::size_t>(p)];
        if (producer.stream != op.stream) backend_.wait(op.stream, u.events[static_cast<std::size_t>(p)][c]);
      }
      runner.run(op, chunk);
      u.events[i][c] = backend_.record(op.stream);
    }
  }
}

std::vector<double> Executor::run_step() {
  std::vector<double> times;
  for (auto& u : units_) {
    backend_.synchronize();
    const double t0 = backend_.now_us();
    run_unit(*u);
    backend_.synchronize();
    times.push_back(backend_.now_us() - t0);
  }
  return times;
}

}  // namespace coconet::exec
