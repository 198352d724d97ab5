// A step report checked against what the test recomputes from its parts, not
// against the sum that produced it: each virtual stage's per-micro-batch
// times summed here from its ChunkTimes fields (plus a send each way), the
// pipeline laid out here (step/pipeline.h lay_out, the ops kept, the last end
// taken), the slowest stage found here. The step time must be that span plus
// the exposed data-parallel time and the optimizer; the breakdown's compute,
// TP, CP and EP lines m times the slowest stage's own; the bubble and the
// sends what the span holds beyond them. Shared by test_step, test_step_layout
// and test_step_moe.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "step/compose.h"
#include "step/pipeline.h"

namespace coconet::step::testing {

// Parts of one virtual stage's micro-batch, added field by field.
struct ChunkParts {
  double compute = 0, tp = 0, cp = 0, a2a = 0;
  [[nodiscard]] double all() const { return compute + tp + cp + a2a; }
};
inline ChunkParts fwd_parts(const ChunkTimes& c) {
  return {c.fwd_compute_us, c.fwd_tp_us + c.fwd_amax_us, c.fwd_cp_us, c.fwd_a2a_us};
}
inline ChunkParts bwd_parts(const ChunkTimes& c) {
  return {c.recompute_us + c.bwd_compute_us, c.recompute_tp_us + c.bwd_tp_us, c.recompute_cp_us + c.bwd_cp_us,
          c.recompute_a2a_us + c.bwd_a2a_us};
}

inline void expect_step_is_its_laid_out_pipeline(const StepReport& r, const std::string& what) {
  SCOPED_TRACE(what);
  const Layout& l = r.layout;
  ASSERT_EQ(r.chunks.size(), std::size_t(l.pp) * std::size_t(l.virtual_stages));
  std::vector<double> fwd, bwd;
  for (const ChunkTimes& c : r.chunks) {
    fwd.push_back(fwd_parts(c).all() + r.send_us);
    bwd.push_back(bwd_parts(c).all() + r.send_us);
  }
  const int m = int(l.micro_batches);
  const auto ops = lay_out(stage_orders(r.spec.parallel.schedule, l.pp, l.virtual_stages, m), l.virtual_stages, m,
                           fwd, bwd);
  double span = 0;
  for (const PlacedOp& op : ops) span = std::max(span, op.end_us);
  const Breakdown& b = r.breakdown;
  const double tol = 1e-9 * (span + b.dp_comm_us + b.optimizer_us);
  EXPECT_NEAR(r.step_us, span + b.dp_comm_us + b.optimizer_us, tol);
  // The slowest stage, every virtual chunk of it, and its lines times m.
  int slowest = -1;
  double most = -1;
  ChunkParts stage_sum;
  for (int s = 0; s < l.pp; ++s) {
    ChunkParts sum;
    for (int v = 0; v < l.virtual_stages; ++v) {
      const ChunkTimes& c = r.chunks[std::size_t(v * l.pp + s)];
      for (const ChunkParts& p : {fwd_parts(c), bwd_parts(c)}) {
        sum.compute += p.compute;
        sum.tp += p.tp;
        sum.cp += p.cp;
        sum.a2a += p.a2a;
      }
    }
    if (sum.all() > most) most = sum.all(), slowest = s, stage_sum = sum;
  }
  EXPECT_EQ(r.slowest_stage, slowest);
  EXPECT_NEAR(b.compute_us, m * stage_sum.compute, tol);
  EXPECT_NEAR(b.tp_comm_us, m * stage_sum.tp, tol);
  EXPECT_NEAR(b.cp_comm_us, m * stage_sum.cp, tol);
  EXPECT_NEAR(b.ep_comm_us, m * stage_sum.a2a, tol);
  // What the span holds beyond the slowest stage's m micro-batches: the
  // bubble and the sends on the critical path, neither negative.
  EXPECT_NEAR(b.pp_bubble_us + b.pp_p2p_us, span - m * stage_sum.all(), tol);
  EXPECT_GE(b.pp_bubble_us, -tol);
  EXPECT_GE(b.pp_p2p_us, 0);
  if (l.pp == 1) {
    EXPECT_EQ(b.pp_p2p_us, 0);
  }
}

}  // namespace coconet::step::testing
