// Planning a fused call as one single-kernel launch (see lsa_fused_call.h).
#include "exec/cuda/lsa_fused_call.h"

#include "kernels/cuda/launch.h"

namespace coconet::exec::cuda {
namespace kc = coconet::kernels::cuda;

namespace {

// Every rank must take the same path (the kernel and the window
// registrations are collective), so these tests read only what all ranks
// share: strides and widths, never a rank's row count.

// Element e of the block is element base + e of the operand.
bool contiguous(const Operand& o, const kernels::Block& b) {
  if (b.cols == 1) return o.access.row_stride == 1;
  return o.access.col_stride == 1 && o.access.row_stride == b.cols;
}

// Element e of the block has global index first + e.
bool flat_global(const kernels::Block& b) { return b.cols == 1 || b.global_cols == b.cols; }

// Whether `parts` are one contiguous run split by shard_of's rule; sets n.
bool shard_run(const std::vector<View>& parts, std::int64_t& n) {
  n = 0;
  for (const View& v : parts) n += v.count;
  const int p = static_cast<int>(parts.size());
  for (int r = 0; r < p; ++r) {
    const kc::Span1d s = kc::shard_of(n, p, r);
    if (parts[r].buffer != parts[0].buffer || parts[r].offset != parts[0].offset + s.begin ||
        parts[r].count != s.size)
      return false;
  }
  return p > 0;
}

bool same_place(const View& v, const Operand& o) {
  return v.buffer == o.buffer && v.offset == o.access.base;
}

std::string shape_refusal(const FusedCall& call) {
  if (!call.norms_before.empty()) return "a norm phase";
  if (call.passes.size() != 1) return "several passes";
  const FusedPassCall& pass = call.passes[0];
  if (!pass.norms_after.empty()) return "a norm phase";
  if (pass.pieces.size() != 1) return "several pieces";
  const FusedPiece& piece = pass.pieces[0];
  if (piece.heads.size() != 1 || piece.computes.size() != 1) return "not one head and one program";
  const HeadCall& h = piece.heads[0];
  if (h.kind != HeadCall::Kind::reduce_scatter && h.kind != HeadCall::Kind::allreduce)
    return "a head that is not a reduce-scatter or an allreduce";
  if (h.op != ReduceOp::sum) return "a head that does not sum";
  if (piece.computes[0].program == nullptr) return "no program";
  if (h.kind == HeadCall::Kind::allreduce && !piece.gathers.empty())
    return "an allreduce head with allgathers";
  return "";
}

}  // namespace

std::int64_t LsaCallPlan::staged_elements() const {
  std::int64_t total = reduced_source.count;
  for (const View& d : out_dest) total += d.count;
  return total;
}

std::optional<LsaCallPlan> plan_lsa_call(const FusedCall& call, int position, int ranks,
                                         const std::function<model::DType(BufferId)>& dtype_of,
                                         std::string& why) {
  why = shape_refusal(call);
  if (!why.empty()) return std::nullopt;
  const FusedPiece& piece = call.passes[0].pieces[0];
  const HeadCall& head = piece.heads[0];
  const ElementwiseCall& c = piece.computes[0];
  const kernels::ElementwiseProgram& prog = *c.program;
  const bool rs = head.kind == HeadCall::Kind::reduce_scatter;
  LsaCallPlan p;
  p.program = &prog;
  p.ranks = ranks;
  if (rs) {
    if (static_cast<int>(head.in.size()) != ranks || !shard_run(head.in, p.n)) {
      why = "reduce-scatter parts that are not one contiguous run split by the shard rule";
      return std::nullopt;
    }
    p.reduced_source = {head.in[0].buffer, head.in[0].offset, p.n};
  } else {
    p.n = head.in.at(0).count;
    p.reduced_source = head.in[0];
  }
  const kc::Span1d shard = kc::shard_of(p.n, ranks, position);
  const std::int64_t block_elems = c.block.rows * c.block.cols;
  if (block_elems != (rs ? shard.size : p.n) || !flat_global(c.block)) {
    why = "a program block that is not this rank's range";
    return std::nullopt;
  }
  p.global_first = static_cast<std::int64_t>(c.block.global_index(0, 0)) - (rs ? shard.begin : 0);
  const std::int64_t local_shift =
      rs ? 0 : shard.begin;  // allreduce: the block covers the whole range
  if (c.inputs.size() != prog.input_types.size() || c.outputs.size() != prog.output_types.size()) {
    why = "operand counts that differ from the program's";
    return std::nullopt;
  }
  int reduced = 0;
  for (std::size_t k = 0; k < c.inputs.size(); ++k) {
    const Operand& o = c.inputs[k];
    if (!contiguous(o, c.block) || dtype_of(o.buffer) != prog.input_types[k]) {
      why = "an input that is strided, broadcast or of another dtype";
      return std::nullopt;
    }
    const bool is_head = same_place(head.out, o);
    reduced += is_head ? 1 : 0;
    p.in_roles.push_back(is_head ? kc::LsaRole::reduced : kc::LsaRole::local);
    p.in_local.push_back(is_head ? View{}
                                 : View{o.buffer, o.access.base + local_shift, shard.size});
  }
  if (reduced != 1 || dtype_of(head.out.buffer) != dtype_of(p.reduced_source.buffer)) {
    why = "a program that does not read the head's result exactly once";
    return std::nullopt;
  }
  std::size_t matched = 0;
  for (std::size_t k = 0; k < c.outputs.size(); ++k) {
    const Operand& o = c.outputs[k];
    if (!contiguous(o, c.block) || dtype_of(o.buffer) != prog.output_types[k]) {
      why = "an output that is strided, broadcast or of another dtype";
      return std::nullopt;
    }
    const View mine{o.buffer, o.access.base + local_shift, shard.size};
    if (!rs) {  // every rank ends with the whole result: gathered into its own range
      p.out_roles.push_back(kc::LsaRole::gathered);
      p.out_local.push_back({});
      p.out_dest.push_back({o.buffer, o.access.base, p.n});
      continue;
    }
    const GatherCall* g = nullptr;
    for (const auto& gc : piece.gathers)
      if (same_place(gc.in, o)) g = &gc;
    std::int64_t gathered_n = 0;
    if (g == nullptr) {
      p.out_roles.push_back(kc::LsaRole::local);
      p.out_local.push_back(mine);
      p.out_dest.push_back({});
      continue;
    }
    if (static_cast<int>(g->parts.size()) != ranks || !shard_run(g->parts, gathered_n) ||
        gathered_n != p.n || dtype_of(g->parts[0].buffer) != prog.output_types[k]) {
      why = "allgather parts that are not one contiguous run split by the shard rule";
      return std::nullopt;
    }
    ++matched;
    const bool in_place = same_place(g->parts[static_cast<std::size_t>(position)], o);
    p.out_roles.push_back(kc::LsaRole::gathered);
    p.out_local.push_back(in_place ? View{} : mine);
    p.out_dest.push_back({g->parts[0].buffer, g->parts[0].offset, p.n});
  }
  if (matched != piece.gathers.size()) {
    why = "an allgather of a value the program does not compute";
    return std::nullopt;
  }
  return p;
}

}  // namespace coconet::exec::cuda
