// Pipelining a fused op's pieces (see exec/fused_call.h).
//
// Design notes
// - Step k issues piece k's heads, then piece k-1's program (after its heads
//   completed) and allgathers. Piece k+1's heads are issued after piece k-1's
//   program on the comm stream's order (the comm stream waits for it), so the
//   two scratch places alternate safely on an asynchronous backend; on the cpu
//   backend the program runs on the caller and is done before anything later
//   is queued.
// - Norms read whole values the passes wrote: they wait for the pass's last
//   program and allgathers.
#include "exec/fused_call.h"

#include <optional>

#include "model/error.h"

namespace coconet::exec {
namespace {

void run_norms(Backend& b, const std::vector<NormCall>& norms) {
  if (norms.empty()) return;
  b.wait(StreamKind::compute, b.record(StreamKind::comm));
  for (const auto& n : norms) b.norm(n.in, n.out, n.across_group);
  b.wait(StreamKind::comm, b.record(StreamKind::compute));
}

void run_pass(Backend& b, const FusedPassCall& pass, StreamKind cs) {
  const std::size_t n = pass.pieces.size();
  std::vector<std::optional<Event>> heads_done(n);
  for (std::size_t k = 0; k <= n; ++k) {
    if (k < n && !pass.pieces[k].heads.empty()) {
      for (const auto& h : pass.pieces[k].heads) issue_head(b, h);
      heads_done[k] = b.record(StreamKind::comm);
    }
    if (k == 0) continue;
    const FusedPiece& piece = pass.pieces[k - 1];
    if (!piece.computes.empty()) {
      if (cs != StreamKind::comm && heads_done[k - 1]) b.wait(cs, *heads_done[k - 1]);
      for (const auto& c : piece.computes) b.elementwise(*c.program, c.inputs, c.outputs, c.block, cs);
      if (cs != StreamKind::comm) b.wait(StreamKind::comm, b.record(cs));
    }
    for (const auto& g : piece.gathers) b.allgather(g.in, g.parts);
  }
  run_norms(b, pass.norms_after);
}

}  // namespace

void issue_head(Backend& b, const HeadCall& h) {
  switch (h.kind) {
    case HeadCall::Kind::allreduce: return b.allreduce(h.in.at(0), h.out, h.op);
    case HeadCall::Kind::reduce_scatter: return b.reduce_scatter(h.in, h.out, h.op);
    case HeadCall::Kind::send: return b.send(h.in.at(0), h.peer);
    case HeadCall::Kind::recv: return b.recv(h.out, h.peer);
  }
  throw InternalError("issue_head: unknown head kind");
}

void run_fused(Backend& b, const FusedCall& call) {
  run_norms(b, call.norms_before);
  for (const auto& pass : call.passes) run_pass(b, pass, call.compute_stream);
}

void Backend::fused(const FusedCall& call) { run_fused(*this, call); }

}  // namespace coconet::exec
