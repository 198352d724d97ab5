// Calibration: runs the microbenchmarks (validation/microbench.h) on the
// machine at hand, fits the cost model's constants to them (validation/fit.h)
// and writes a topology YAML that `predict` and `validate` accept, every
// constant with where it came from and the fit's residuals in comments. The
// residuals are the simulator's own predictions of the microbenchmarks with
// the fitted topology, next to the measured times.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "model/set_flag.h"
#include "sim/topology.h"
#include "validation/calibrated_range.h"
#include "validation/fit.h"
#include "validation/fit_regimes.h"
#include "validation/machine_identity.h"
#include "validation/mpi_limits.h"
#include "validation/microbench.h"
#include "validation/machine_speed.h"
#include "validation/progress.h"
#include "validation/spell_guard.h"

namespace coconet::validation {

// calibrate's default allowance for slow spells: a spell that covers a
// sweep of a few seconds lasts seconds to minutes (machine_speed.h); half a
// minute waits out the short ones and bounds what a slower machine than the
// one calibrated before (every probe a "spell") costs.
inline constexpr double kCalibrateWaitS = 30;

struct CalibrateOptions {
  std::string name = "cpu-local";  // the topology's name
  std::string command;             // the command line, recorded in the YAML
  std::string experiment;          // its sizes join the sweep (validation/experiment_sizes.h); empty: none
  model::Assignments sets;         // --set sizes of that experiment
  MicroOptions micro;
  // The reference times of the calibration this one replaces (the --out
  // file's): the machine's speed then, the spell guard's baseline with the
  // first probe now (spell_guard.h). Used when measured on as many ranks.
  std::optional<CalibratedSpeed> previous;
  // Seconds the sweep may wait out slow spells and be measured again (--wait-s).
  double wait_s = kCalibrateWaitS;
  // The machine recorded in the topology (validation/machine_identity.h); none: this one.
  std::optional<MachineIdentity> machine;
};

struct Fitted {
  ElementwiseFit elementwise;
  GemmFit gemm_f16;
  GemmFit gemm_bf16;
  GemmFit gemm_f32;  // the GEMM kernel's, not the element-wise engine's (gpu.tflops.f32_gemm)
  CollectiveRegimes collectives;  // one regime, or two split at MPI's protocol switch
  // Compute units (of gpu.sms = 1: the rank's share of the cores) a collective's
  // progress occupies while a kernel runs beside it; fitted through the
  // simulator from the overlapped microbenchmarks.
  double sms_per_channel = 1.0;
  // nccl.interference: the extra slowdown of a kernel and a collective working
  // side by side (each at 1 / (1 + interference) of its rate), fitted with
  // sms_per_channel from the same overlapped microbenchmarks.
  double interference = 0.0;
  // Each overlapped op's own sms_per_channel (nccl.per_op.OP.sms_per_channel), by op name.
  std::map<std::string, double> op_sms_per_channel;
  // nccl.handoff_us: what a collective call hands off that a fused op's
  // calls after its first do not, fitted through the simulator on the fused
  // microbenchmarks (0: none measured, or none seen).
  double handoff_us = 0.0;
  // nccl.step_sync_us: the median, over sizes, of a reduce-scatter and an
  // all-gather measured alone (a step each) less the two in one step
  // (MicroKind::paired); 0 without such samples.
  double step_sync_us = 0.0;
  // gpu.copy: a local copy's fixed cost and rate over bytes read and written,
  // fitted on allreduces over groups of one rank (none: fewer than 2 ranks).
  std::optional<double> copy_us;
  std::optional<double> copy_GBps;
  // gpu.op_flops: each costly operation's cost in FLOPs at the element-wise
  // FLOP rate, fitted on its own kernel (none: not measured).
  std::array<std::optional<double>, model::kCostlyOps> op_flops{};
};

// A fitted rate as the topology file holds it: one the samples did not bound
// (no sample cost anything per byte or per FLOP: infinite) stands as "no
// limit", a cap of 1e6 GB/s (or GFLOP/s) that no workload here comes near.
[[nodiscard]] double bounded(double rate);

// The overlap constants: sms_per_channel and interference over every
// overlapped sample, then each op's own sms_per_channel on its samples alone
// (with the shared interference).
struct OverlapFit {
  double sms_per_channel = 1.0;
  double interference = 0.0;
  std::map<std::string, double> per_op;
};

// Fits the overlap constants to the overlapped samples (MicroKind::overlap)
// through the simulator, on the topology of `f`'s other constants: for each
// interference on a grid, the best sms_per_channel; the pair with the least
// squared relative error wins; then, that interference kept, each op's own
// sms_per_channel on its samples. No overlapped sample: sms_per_channel 1
// (take turns), interference 0, no op's own.
[[nodiscard]] OverlapFit fit_overlap(const std::vector<MicroSample>& samples, const Fitted& f);

// Fits nccl.handoff_us to the fused samples (MicroKind::fused) through the
// simulator, on the topology of `f`'s other constants: the value on a grid
// over [0, 10 us] with the least squared relative error; 0 without samples.
[[nodiscard]] double fit_handoff(const std::vector<MicroSample>& samples, const Fitted& f);

// gpu.copy into `f`: t = us + 2 x bytes / GBps by least squares on relative
// error over the one-rank allreduces (MicroKind::copy); nothing when fewer
// than two were measured.
void fit_copy(const std::vector<MicroSample>& samples, Fitted& f);

// nccl.step_sync_us from the paired microbenchmarks and the single ones of
// the same sizes (Fitted::step_sync_us, after the element-wise and GEMM fits): what
// the two alone took beyond the pair, per charge of it the simulator counts
// beyond the pair's, never so much that a collective microbenchmark less it
// would cost less than the fitted launch (a loaded machine can make the
// pairs claim more than the cheapest collective alone took).
[[nodiscard]] double fit_step_sync(const std::vector<MicroSample>& samples, const Fitted& f);

// gpu.op_flops into `f` (after the element-wise fit): for each costly
// operation, its weight w in t = launch + the simulator's arithmetic terms
// (sim::elementwise_arithmetic: base + w x its term) at the fitted rate, by
// least squares on relative error over its kernels (MicroKind::costly),
// which its cost makes compute-bound.
void fit_op_flops(const std::vector<MicroSample>& samples, Fitted& f);

struct Calibration {
  std::vector<MicroSample> samples;
  Fitted fit;
  std::vector<double> simulated_us;  // per sample, with the written topology
  std::string yaml;              // ends with the calibrated range's comment (validation/calibrated_range.h)
  sim::Topology topology;
  CalibratedRange range;
  std::optional<MpiLimit> mpi_limit;  // MPI's protocol switch as the library states it, when read
  SpellOutcome spell;                 // the sweep's spell guard: measured again, kept in a spell
  std::string note;                   // the sweep measured again after a spell; "" if not
  std::string warning;                // the sweep kept in a spell (also a comment of the YAML); "" if not
};

// Fits the constants from measured samples (pure: no runs). The overlap
// constant needs the rest of the topology: fit_samples fits it last, with the
// simulator on the topology of the other constants.
// `limit`: the MPI library's protocol switch, the threshold tried first (validation/fit_regimes.h).
[[nodiscard]] Fitted fit_samples(const std::vector<MicroSample>& samples, const std::optional<MpiLimit>& limit = {});

// The topology YAML of a fit, for `ranks` ranks on one machine, without residuals.
[[nodiscard]] std::string topology_yaml(const Fitted& f, const CalibrateOptions& o, const std::string& backend,
                                        int ranks);

// Runs, fits and checks: collective over every rank of `backend`; every rank
// gets the same result (the fit is deterministic given the agreed times).
[[nodiscard]] Calibration calibrate(exec::Backend& backend, const CalibrateOptions& o, Progress& progress);

}  // namespace coconet::validation
