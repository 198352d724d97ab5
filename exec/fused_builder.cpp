// Building a fused op's calls (see exec/fused_builder.h).
#include "exec/fused_builder.h"

#include <algorithm>
#include <array>
#include <map>

#include "model/error.h"
#include "plan/rows.h"

namespace coconet::exec {
namespace {

using plan::RowRange;

std::int64_t rows_of(const std::vector<RowRange>& rs) {
  std::int64_t n = 0;
  for (const auto& r : rs) n += r.end - r.begin;
  return n;
}

class CallBuilder {
 public:
  CallBuilder(Backend& b, const plan::StepPlan& p, const plan::Op& op, const RankValues& values)
      : b_(b),
        p_(p),
        op_id_(op.id),
        form_(*op.fused),
        unit_(p.units.at(static_cast<std::size_t>(op.unit))),
        values_(values),
        head_(*p.program->find_stmt(form_.head)),
        hv_(values.at(form_.head)) {}

  FusedOpCalls run() {
    FusedOpCalls out;
    allocate_scratch(out);
    for (int c = 0; c < unit_.chunks; ++c) out.chunks.push_back(chunk_call(c));
    return out;
  }

 private:
  int ranks() const { return values_.ranks_per_group(); }
  int position() const { return values_.position(); }
  bool scratch(const std::string& n) const { return form_.scratch.contains(n); }
  // The programs run where the head's result lands (a send's receiving group).
  bool computes_here() const { return hv_.here; }

  std::vector<RowRange> ranges(int chunk, int piece) const {
    return plan::piece_rows(hv_.rows, ranks(), unit_.chunks, chunk, form_.pieces, piece, unit_.slice_mode);
  }

  void allocate_scratch(FusedOpCalls& out) {
    if (!computes_here()) return;
    std::int64_t most = 0;
    for (int c = 0; c < unit_.chunks; ++c)
      for (int j = 0; j < form_.pieces; ++j) most = std::max(most, rows_of(plan::held_of(ranges(c, j), hv_)));
    const std::int64_t elems = most * hv_.local_cols;
    const auto alloc = [&](model::DType t) {
      out.scratch.push_back(b_.allocate(t, elems));
      return out.scratch.back();
    };
    if (scratch(form_.head))
      for (auto& slot : head_scratch_) slot = alloc(hv_.type.dtype);
    for (const auto& pass : form_.passes)
      for (const auto& n : pass.stmts)
        if (scratch(n) && gathered_into(n).empty()) temp_scratch_[n] = alloc(values_.at(n).type.dtype);
  }

  std::string gathered_into(const std::string& n) const { return plan::gather_of(form_, *p_.program, n); }

  FusedCall chunk_call(int chunk) {
    FusedCall call;
    const plan::Stream program = plan::fused_program_stream(p_, plan::Launch{op_id_, chunk});
    call.compute_stream = program == plan::Stream::comm ? StreamKind::comm : StreamKind::compute;
    if (computes_here()) call.norms_before = norms(form_.norms_before);
    for (std::size_t k = 0; k < form_.passes.size(); ++k) {
      FusedPassCall pass;
      for (int j = 0; j < form_.pieces; ++j) pass.pieces.push_back(piece(chunk, j, k));
      if (computes_here()) pass.norms_after = norms(form_.passes[k].norms_after);
      call.passes.push_back(std::move(pass));
    }
    return call;
  }

  std::vector<NormCall> norms(const std::vector<plan::FusedNorm>& ns) const {
    std::vector<NormCall> out;
    for (const auto& n : ns)
      out.push_back({whole(values_.at(n.input)), View{values_.at(n.stmt).buffer, 0, 1}, n.across_group});
    return out;
  }

  FusedPiece piece(int chunk, int j, std::size_t pass) const {
    const auto rs = ranges(chunk, j);
    const auto mine = computes_here() ? plan::held_of(rs, hv_) : std::vector<RowRange>{};
    const int slot = j % 2;
    FusedPiece out;
    if (pass == 0) out.heads = heads(rs, mine, slot);
    std::int64_t offset = 0;  // of each range in the piece's scratch
    for (const auto& r : mine) {
      out.computes.push_back(compute(form_.passes[pass], r, slot, offset));
      offset += (r.end - r.begin) * hv_.local_cols;
    }
    if (pass + 1 == form_.passes.size()) out.gathers = gathers(rs);
    return out;
  }

  // Where the head's result for rows `r` goes: scratch place `slot` at `offset`, or its own buffer.
  View head_out(RowRange r, int slot, std::int64_t offset) const {
    const std::int64_t count = (r.end - r.begin) * hv_.local_cols;
    if (scratch(form_.head)) return View{head_scratch_[static_cast<std::size_t>(slot)], offset, count};
    return rows_view(hv_, r.begin, r.end);
  }

  std::vector<HeadCall> heads(const std::vector<RowRange>& rs, const std::vector<RowRange>& mine, int slot) const {
    const auto& x = values_.at(head_.operands.front());
    std::vector<HeadCall> out;
    if (head_.op == model::OpKind::reducescatter) {
      HeadCall h{HeadCall::Kind::reduce_scatter, head_.reduce, {}, {}, -1};
      for (const auto& r : rs) h.in.push_back(rows_view(x, r.begin, r.end));
      const RowRange own = rs[static_cast<std::size_t>(position())];
      h.out = head_out(own, slot, 0);
      out.push_back(std::move(h));
      return out;
    }
    std::int64_t offset = 0;
    if (head_.op == model::OpKind::send && x.here)
      for (const auto& r : plan::held_of(rs, x))
        out.push_back({HeadCall::Kind::send, head_.reduce, {rows_view(x, r.begin, r.end)}, {},
                       b_.world_rank() + ranks()});
    for (const auto& r : mine) {
      if (head_.op == model::OpKind::send)
        out.push_back({HeadCall::Kind::recv, head_.reduce, {}, head_out(r, slot, offset), b_.world_rank() - ranks()});
      else
        out.push_back({HeadCall::Kind::allreduce, head_.reduce, {rows_view(x, r.begin, r.end)},
                       head_out(r, slot, offset), -1});
      offset += (r.end - r.begin) * hv_.local_cols;
    }
    return out;
  }

  ElementwiseCall compute(const plan::FusedPass& pass, RowRange r, int slot, std::int64_t offset) const {
    const auto& out0 = values_.at(pass.stmts.front());
    ElementwiseCall c;
    c.program = &pass.program;
    c.block = model::Block{r.end - r.begin, out0.local_cols, r.begin, out0.col_begin, out0.cols};
    for (const auto& name : pass.program.input_names) {
      if (name == form_.head && scratch(name)) {
        c.inputs.push_back({head_scratch_[static_cast<std::size_t>(slot)], {offset, hv_.local_cols, 1}});
        continue;
      }
      const auto& t = values_.at(name);
      COCONET_ASSERT(t.allocated, "fused op: '" + name + "' is read but lives in no buffer");
      c.inputs.push_back({t.buffer, access_for(t, out0, r.begin)});
    }
    for (const auto& n : pass.stmts) c.outputs.push_back(output(n, r, offset));
    return c;
  }

  // Where result `n` of rows `r` is written: its own buffer, the gather's
  // output at this rank's place, or its piece scratch.
  Operand output(const std::string& n, RowRange r, std::int64_t offset) const {
    const auto at = [&](const ValueInfo& v) {
      return Operand{v.buffer, {(r.begin - v.row_begin) * v.local_cols, v.local_cols, 1}};
    };
    if (!scratch(n)) return at(values_.at(n));
    if (const auto g = gathered_into(n); !g.empty()) return at(values_.at(g));
    return Operand{temp_scratch_.at(n), {offset, hv_.local_cols, 1}};
  }

  std::vector<GatherCall> gathers(const std::vector<RowRange>& rs) const {
    std::vector<GatherCall> out;
    const RowRange own = rs[static_cast<std::size_t>(position())];
    for (const auto& g : form_.gathers) {
      const auto& y = values_.at(g);
      const std::string& x = p_.program->find_stmt(g)->operands.front();
      GatherCall call;
      for (const auto& r : rs) call.parts.push_back(rows_view(y, r.begin, r.end));
      call.in = scratch(x) ? call.parts[static_cast<std::size_t>(position())]
                           : rows_view(values_.at(x), own.begin, own.end);
      out.push_back(std::move(call));
    }
    return out;
  }

  Backend& b_;
  const plan::StepPlan& p_;
  int op_id_;
  const plan::FusedForm& form_;
  const plan::Unit& unit_;
  const RankValues& values_;
  const model::Stmt& head_;
  const ValueInfo& hv_;
  std::array<BufferId, 2> head_scratch_{-1, -1};
  std::map<std::string, BufferId> temp_scratch_;
};

}  // namespace

FusedOpCalls build_fused_calls(Backend& b, const plan::StepPlan& p, const plan::Op& op, const RankValues& values) {
  COCONET_ASSERT(op.fused.has_value(), "build_fused_calls: not a fused op");
  if (!op.involves(b.group())) return {};
  return CallBuilder(b, p, op, values).run();
}

std::set<std::string> fused_scratch_values(const plan::StepPlan& p) {
  std::set<std::string> out;
  for (const auto& op : p.ops)
    if (op.fused) out.insert(op.fused->scratch.begin(), op.fused->scratch.end());
  return out;
}

}  // namespace coconet::exec
