// Least-squares fits of the cost model's constants to microbenchmark times
// (Eigen). Each fit minimises the squared *relative* error, so microsecond
// latencies and millisecond transfers weigh alike, and keeps every constant
// non-negative (an active-set loop over a handful of unknowns).
//
// The formulas are the cost model's own (sim/compute.h, sim/collective.h) on
// one node with one channel:
//   element-wise kernel: t = launch + max(bytes / bandwidth, flops / rate)
//   GEMM:                t = launch + flops / gemm_rate
//   ring collective:     t = base + steps x hop + bytes x bus_factor / link_bandwidth
//                            + bytes x reduce_factor / reduce_rate
// where steps is 2(n-1) for allreduce, n-1 for reduce-scatter and all-gather, 1 for a send,
// and reduce_factor (n-1)/n for the reducing collectives (allreduce, reduce-scatter), else 0.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace coconet::validation {

// Non-negative weighted least squares: minimises sum_i ((x . a_i - y_i) / y_i)^2
// over x >= 0. Rows of `a` are the samples' features. Throws UserError when
// there are fewer samples than unknowns or a target is not positive.
[[nodiscard]] std::vector<double> fit_relative_nonnegative(const std::vector<std::vector<double>>& a,
                                                           const std::vector<double>& y);

struct ElementwiseSample {
  double bytes = 0;
  double flops = 0;
  double measured_us = 0;
};

struct ElementwiseFit {
  double launch_us = 0;
  double GBps = 0;     // memory bandwidth the kernels reach
  double GFLOPs = 0;   // element-wise arithmetic rate
  int iterations = 0;  // regime re-assignments until stable
};

// Fits t = launch + max(bytes / GBps, flops / GFLOPs): starts from the additive
// fit (bytes and flops both cost), then assigns each sample to the term that
// bounds it, refits, and repeats until no sample changes side.
[[nodiscard]] ElementwiseFit fit_elementwise(const std::vector<ElementwiseSample>& s);
[[nodiscard]] double elementwise_model_us(const ElementwiseFit& f, double bytes, double flops);

struct GemmSample {
  double flops = 0;
  double measured_us = 0;
};

// The GEMM rate (GFLOP/s) with the launch overhead already known.
[[nodiscard]] double fit_gemm_GFLOPs(const std::vector<GemmSample>& s, double launch_us);

struct CollectiveSample {
  std::string op;      // "allreduce", "reducescatter", "allgather", "send"
  double bytes = 0;    // nccl-tests size (sim/collective.h)
  int ranks = 2;
  double measured_us = 0;
};

struct CollectiveFit {
  double base_us = 0;
  double hop_us = 0;
  double GBps = 0;         // bus bandwidth of the link
  double reduce_GBps = 0;  // rate a rank combines received data (infinite: free)
};

// Ring steps of `op` on `ranks` ranks; its nccl-tests bus factor and reduced share (sim/collective.h, by name).
[[nodiscard]] int ring_steps(const std::string& op, int ranks);
[[nodiscard]] double ring_bus_factor(const std::string& op, int ranks);
[[nodiscard]] double ring_reduce_factor(const std::string& op, int ranks);
// `need_rate`: throw when the samples show no cost per byte (else the link rate is infinite).
[[nodiscard]] CollectiveFit fit_collectives(const std::vector<CollectiveSample>& s, bool need_rate = true);
[[nodiscard]] double collective_model_us(const CollectiveFit& f, const std::string& op, double bytes, int ranks);

// The one-dimensional least-squares fit of a constant the simulator needs (the
// compute units a collective's progress occupies): the value on a grid over
// [lo, hi] whose predictions `model(x)` have the smallest squared relative
// error against `measured`. Throws UserError without samples.
[[nodiscard]] double fit_scalar(const std::vector<double>& measured,
                                const std::function<std::vector<double>(double)>& model, double lo, double hi);

}  // namespace coconet::validation
