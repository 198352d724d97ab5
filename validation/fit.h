// Least-squares fits of the cost model's constants to microbenchmark times
// (Eigen). Each fit minimises the squared *relative* error, so microsecond
// latencies and millisecond transfers weigh alike, and keeps every constant
// non-negative (an active-set loop over a handful of unknowns).
//
// The models are the simulator's own, evaluated through its functions (no
// formula is written here): element-wise kernels by sim::roofline_us, GEMMs by
// sim::gemm_flops_us and sim::gemm_operands_us, collectives by the ring's
// features and constants (sim/ring_features.h) and MPI's regimes and
// per-operation constants (sim/collective_mpi.h), on one node with one channel:
//   element-wise kernel: t = launch + max(bytes / bandwidth, flops / rate)
//   GEMM:                t = launch + flops / gemm_rate + bytes / operand_rate
//   ring collective:     t = base + steps x hop + bus bytes / link + reduced bytes / reduce_rate
#pragma once

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "sim/ring_features.h"

namespace coconet::validation {

// Non-negative weighted least squares: minimises sum_i ((x . a_i + known_i - y_i) / y_i)^2
// over x >= 0. Rows of `a` are the samples' features; `known` (empty: none) a
// part of each time already accounted for. Throws UserError when there are
// fewer samples than unknowns or a target is not positive.
[[nodiscard]] std::vector<double> fit_relative_nonnegative(const std::vector<std::vector<double>>& a,
                                                           const std::vector<double>& y,
                                                           const std::vector<double>& known = {});

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
  double bytes = 0;  // A, B and C (sim::GemmShape::bytes)
  double measured_us = 0;
};

struct GemmFit {
  double GFLOPs = 0;
  // The rate the call reads and writes its operands besides its arithmetic
  // (gpu.gemm_operand_GBps); infinite: the samples show no such cost.
  double operand_GBps = std::numeric_limits<double>::infinity();
};

// Fits t = launch + flops / GFLOPs + bytes / operand_GBps with the launch
// overhead already known. With fewer than two samples, or when the bytes
// would explain every sample (no FLOP rate left), the FLOP rate alone.
// Throws UserError when the samples give no positive FLOP rate.
[[nodiscard]] GemmFit fit_gemm(const std::vector<GemmSample>& s, double launch_us);
[[nodiscard]] double gemm_model_us(const GemmFit& f, double launch_us, double flops, double bytes);

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

// The ring's features of a sample (sim::ring_features on one node; the op by name).
[[nodiscard]] sim::RingFeatures features_of(const std::string& op, double bytes, int ranks);
// The fit's constants as the simulator's (the network hop as the node's: one node).
[[nodiscard]] sim::RingConstants ring_constants(const CollectiveFit& f);
// `need_rate`: throw when the samples show no cost per byte (else the link rate is infinite).
[[nodiscard]] CollectiveFit fit_collectives(const std::vector<CollectiveSample>& s, bool need_rate = true);
[[nodiscard]] double collective_model_us(const CollectiveFit& f, const std::string& op, double bytes, int ranks);

// The squared relative error of `predicted` against `measured`: sum ((p / m) - 1)^2.
[[nodiscard]] double relative_residual(const std::vector<double>& predicted, const std::vector<double>& measured);

// Schwarz's criterion (BIC) of a fit with `constants` constants whose squared
// relative residual over n samples is `residual`: lower is better; a constant
// more must lower the residual by more than chance would.
[[nodiscard]] double schwarz_criterion(double residual, std::size_t n, std::size_t constants);

// The one-dimensional least-squares fit of a constant the simulator needs (the
// compute units a collective's progress occupies): the value on a grid over
// [lo, hi] whose predictions `model(x)` have the smallest squared relative
// error against `measured`. Throws UserError without samples.
[[nodiscard]] double fit_scalar(const std::vector<double>& measured,
                                const std::function<std::vector<double>(double)>& model, double lo, double hi);

}  // namespace coconet::validation
