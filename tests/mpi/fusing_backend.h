// A test-only backend for the fused-collective hook: a real backend that
// either has no fused capability (mode none: plans keep fused stages as their
// parts, so nothing is offered), or claims SGD and Adam and computes each
// offered spec with the backend's own
// reduce-scatter and allgather around a host update of the shard (f32, the
// formulas of kernels/cuda/optimizer.h), so a spec that misses or misplaces
// anything gives wrong outputs the verifier catches. `lr_scale` != 1 makes
// the accepted path wrong on purpose (the negative test).
#pragma once

#include <cmath>
#include <vector>

#include "perturbing_backend.h"

namespace coconet::exec::testing {

class FusingBackend final : public PerturbingBackend {
 public:
  enum class Mode { none, host };
  FusingBackend(std::unique_ptr<Backend> inner, Mode mode, double lr_scale = 1.0)
      : PerturbingBackend(std::move(inner), Fault::none, 0), mode_(mode), lr_scale_(lr_scale) {}

  [[nodiscard]] int offers() const { return offers_; }

  plan::Capabilities capabilities() const override {
    plan::Capabilities c = PerturbingBackend::capabilities();
    if (mode_ == Mode::host) c.fused_updates = {plan::FusedUpdate::sgd, plan::FusedUpdate::adam};
    return c;
  }

  bool try_fused_allreduce(const FusedStageSpec& s) override {
    ++offers_;
    if (mode_ == Mode::none) return false;
    const int p = ranks_per_group();
    std::vector<View> g_parts, w_parts;
    for (int r = 0; r < p; ++r) {
      const auto e = model::slice_extent(s.count, p, r);
      g_parts.push_back(View{s.g.buffer, s.g.offset + e.begin, e.size});
      w_parts.push_back(View{s.w_out.buffer, s.w_out.offset + e.begin, e.size});
    }
    reduce_scatter(g_parts, s.g_shard, ReduceOp::sum);
    const auto mine = model::slice_extent(s.count, p, position());
    const View w_in{s.w.buffer, s.w.offset + mine.begin, mine.size};
    update_shard(s, read(s.g_shard), read(w_in), w_parts[static_cast<std::size_t>(position())]);
    allgather(w_parts[static_cast<std::size_t>(position())], w_parts);
    return true;
  }

 private:
  void update_shard(const FusedStageSpec& s, const std::vector<double>& g, std::vector<double> w, View w_shard) {
    const auto lr = static_cast<float>(s.hyper.lr * lr_scale_);
    const auto b1 = static_cast<float>(s.hyper.beta1), b2 = static_cast<float>(s.hyper.beta2);
    const auto eps = static_cast<float>(s.hyper.eps);
    // 1 - beta folded in double and rounded once, as the compiled programs and the kernels do.
    const auto c1 = static_cast<float>(1.0 - s.hyper.beta1), c2 = static_cast<float>(1.0 - s.hyper.beta2);
    std::vector<double> m, v;
    if (s.update == FusedUpdate::adam) {
      m = read(s.m);
      v = read(s.v);
    }
    for (std::size_t i = 0; i < g.size(); ++i) {
      const auto gi = static_cast<float>(g[i]);
      if (s.update == FusedUpdate::sgd) {
        w[i] = static_cast<float>(w[i]) - lr * gi;
        continue;
      }
      const float mi = b1 * static_cast<float>(m[i]) + c1 * gi;
      const float vi = b2 * static_cast<float>(v[i]) + c2 * gi * gi;
      m[i] = mi;
      v[i] = vi;
      w[i] = static_cast<float>(w[i]) - lr * mi / (std::sqrt(vi) + eps);
    }
    write(w_shard, w);
    if (s.update == FusedUpdate::sgd) return;
    write(s.m_out, m);
    write(s.v_out, v);
  }

  Mode mode_;
  double lr_scale_;
  int offers_ = 0;
};

}  // namespace coconet::exec::testing
