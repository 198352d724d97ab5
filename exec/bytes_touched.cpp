// Counting the bytes of value buffers a call touches (see exec/bytes_touched.h).
#include "exec/bytes_touched.h"

namespace coconet::exec {

void BytesTouched::view(View v) {
  if (v.buffer < 0 || scratch_.contains(v.buffer)) return;
  bytes_ += v.count * model::bytes_of(b_.dtype_of(v.buffer));
}

void BytesTouched::operand(const Operand& o, const model::Block& block) {
  if (o.buffer < 0 || scratch_.contains(o.buffer)) return;
  const std::int64_t rows = o.access.row_stride == 0 ? 1 : block.rows;
  const std::int64_t cols = o.access.col_stride == 0 ? 1 : block.cols;
  bytes_ += rows * cols * model::bytes_of(b_.dtype_of(o.buffer));
}

void BytesTouched::elementwise(std::span<const Operand> inputs, std::span<const Operand> outputs,
                          const model::Block& block) {
  for (const auto& o : inputs) operand(o, block);
  for (const auto& o : outputs) operand(o, block);
}

void BytesTouched::allgather(View in, std::span<const View> parts) {
  view(in);
  for (const auto& p : parts)
    if (p.buffer != in.buffer || p.offset != in.offset) view(p);
}

void BytesTouched::fused(const FusedCall& call) {
  const auto norms = [&](const std::vector<NormCall>& ns) {
    for (const auto& n : ns) view(n.in);
  };
  norms(call.norms_before);
  for (const auto& pass : call.passes) {
    for (const auto& piece : pass.pieces) {
      for (const auto& h : piece.heads) {
        for (const auto& v : h.in) view(v);
        if (h.kind != HeadCall::Kind::send) view(h.out);
      }
      for (const auto& c : piece.computes) elementwise(c.inputs, c.outputs, c.block);
      for (const auto& g : piece.gathers) allgather(g.in, g.parts);
    }
    norms(pass.norms_after);
  }
}

}  // namespace coconet::exec
