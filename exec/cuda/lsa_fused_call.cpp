// Planning a fused call as one single-kernel launch (see lsa_fused_call.h).
#include "exec/cuda/lsa_fused_call.h"

#include "kernels/cuda/grid.h"

namespace coconet::exec::cuda {
namespace kc = coconet::kernels::cuda;

namespace {

// Every rank must take the same path (the kernel and the window
// registrations are collective), so these tests read only what all ranks
// share: strides and widths, never a rank's row count.

// Element e of the block is element base + e of the operand.
bool contiguous(const Operand& o, const model::Block& b) {
  if (b.cols == 1) return o.access.row_stride == 1;
  return o.access.col_stride == 1 && o.access.row_stride == b.cols;
}

// Element e of the block has global index first + e.
bool flat_global(const model::Block& b) { return b.cols == 1 || b.global_cols == b.cols; }

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

// What planning one call reads, besides the plan it fills.
struct CallContext {
  const FusedPiece& piece;
  const HeadCall& head;
  const ElementwiseCall& c;
  const model::ElementwiseProgram& prog;
  const std::function<model::DType(BufferId)>& dtype_of;
  int position = 0;
  int ranks = 1;
  bool rs = true;  // a reduce-scatter head; false: an allreduce
  kc::Span1d shard;
  std::int64_t local_shift =
      0;  // allreduce: the block covers the whole range, the shard starts later
};

// The range, its source and this rank's shard; "" or the refusal.
std::string plan_head(CallContext& x, LsaCallPlan& p) {
  if (x.rs) {
    if (static_cast<int>(x.head.in.size()) != x.ranks || !shard_run(x.head.in, p.n))
      return "reduce-scatter parts that are not one contiguous run split by the shard rule";
    p.reduced_source = {x.head.in[0].buffer, x.head.in[0].offset, p.n};
  } else {
    p.n = x.head.in.at(0).count;
    p.reduced_source = x.head.in[0];
  }
  x.shard = kc::shard_of(p.n, x.ranks, x.position);
  x.local_shift = x.rs ? 0 : x.shard.begin;
  if (x.c.block.rows * x.c.block.cols != (x.rs ? x.shard.size : p.n) || !flat_global(x.c.block))
    return "a program block that is not this rank's range";
  p.global_first =
      static_cast<std::int64_t>(x.c.block.global_index(0, 0)) - (x.rs ? x.shard.begin : 0);
  if (x.c.inputs.size() != x.prog.input_types.size() ||
      x.c.outputs.size() != x.prog.output_types.size())
    return "operand counts that differ from the program's";
  return "";
}

std::string plan_inputs(const CallContext& x, LsaCallPlan& p) {
  int reduced = 0;
  for (std::size_t k = 0; k < x.c.inputs.size(); ++k) {
    const Operand& o = x.c.inputs[k];
    if (!contiguous(o, x.c.block) || x.dtype_of(o.buffer) != x.prog.input_types[k])
      return "an input that is strided, broadcast or of another dtype";
    const bool is_head = same_place(x.head.out, o);
    reduced += is_head ? 1 : 0;
    if (is_head) p.reduced_slot = k;
    p.in_roles.push_back(is_head ? kc::LsaRole::reduced : kc::LsaRole::local);
    p.in_local.push_back(is_head ? View{}
                                 : View{o.buffer, o.access.base + x.local_shift, x.shard.size});
  }
  if (reduced != 1 || x.dtype_of(x.head.out.buffer) != x.dtype_of(p.reduced_source.buffer))
    return "a program that does not read the head's result exactly once";
  return "";
}

// Output k: local, gathered by an allgather of the piece, or (allreduce)
// gathered into its own range; counts the allgathers it matched.
std::string plan_output(const CallContext& x, std::size_t k, LsaCallPlan& p, std::size_t& matched) {
  const Operand& o = x.c.outputs[k];
  if (!contiguous(o, x.c.block) || x.dtype_of(o.buffer) != x.prog.output_types[k])
    return "an output that is strided, broadcast or of another dtype";
  const View mine{o.buffer, o.access.base + x.local_shift, x.shard.size};
  const GatherCall* g = nullptr;
  for (const auto& gc : x.piece.gathers)
    if (same_place(gc.in, o)) g = &gc;
  if (!x.rs || g == nullptr) {  // allreduce: every rank ends with the whole result
    p.out_roles.push_back(x.rs ? kc::LsaRole::local : kc::LsaRole::gathered);
    p.out_local.push_back(x.rs ? mine : View{});
    p.out_dest.push_back(x.rs ? View{} : View{o.buffer, o.access.base, p.n});
    return "";
  }
  std::int64_t gathered_n = 0;
  if (static_cast<int>(g->parts.size()) != x.ranks || !shard_run(g->parts, gathered_n) ||
      gathered_n != p.n || x.dtype_of(g->parts[0].buffer) != x.prog.output_types[k])
    return "allgather parts that are not one contiguous run split by the shard rule";
  ++matched;
  const bool in_place = same_place(g->parts[static_cast<std::size_t>(x.position)], o);
  p.out_roles.push_back(kc::LsaRole::gathered);
  p.out_local.push_back(in_place ? View{} : mine);
  p.out_dest.push_back({g->parts[0].buffer, g->parts[0].offset, p.n});
  return "";
}

}  // namespace

std::optional<LsaCallPlan> plan_lsa_call(const FusedCall& call, int position, int ranks,
                                         const std::function<model::DType(BufferId)>& dtype_of,
                                         std::string& why) {
  why = shape_refusal(call);
  if (!why.empty()) return std::nullopt;
  const FusedPiece& piece = call.passes[0].pieces[0];
  const ElementwiseCall& c = piece.computes[0];
  CallContext x{piece,    piece.heads[0],
                c,        *c.program,
                dtype_of, position,
                ranks,    piece.heads[0].kind == HeadCall::Kind::reduce_scatter,
                {},       0};
  LsaCallPlan p;
  p.program = c.program;
  why = plan_head(x, p);
  if (why.empty()) why = plan_inputs(x, p);
  std::size_t matched = 0;
  for (std::size_t k = 0; why.empty() && k < c.outputs.size(); ++k)
    why = plan_output(x, k, p, matched);
  if (why.empty() && matched != piece.gathers.size())
    why = "an allgather of a value the program does not compute";
  if (!why.empty()) return std::nullopt;
  return p;
}

}  // namespace coconet::exec::cuda
