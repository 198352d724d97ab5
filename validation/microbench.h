// The calibration microbenchmarks: tiny one-stage programs (an element-wise
// kernel, a GEMM, one collective, one send) swept over sizes and run through
// the same runtime that measures schedules (exec/runtime.h), so their times
// carry the same per-step overheads as a validation's. What each one asks of
// the machine (bytes, FLOPs, collective size) is the cost model's own account
// (the ops of its StepPlan, plan::lower), so the fitted constants mean what the model means by them.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "model/program.h"
#include "model/schedule.h"
#include "sim/collective.h"
#include "validation/progress.h"

namespace coconet::validation {

enum class MicroKind { elementwise, gemm, collective, overlap, fused, copy, costly, paired };

struct MicroSample {
  MicroKind kind = MicroKind::elementwise;
  std::string label;          // "add f32 N=65536", "allreduce f16 N=1024", ...
  model::Program program;
  model::Schedule schedule;   // what runs: the program itself, (overlap) a GEMM overlapped with its
                              // collective, (fused) an allreduce and update as one fused op, or
                              // (copy) an allreduce on groups of one rank: a local copy, or
                              // (paired) a reduce-scatter and an all-gather in one step
  model::Bindings sizes;
  int ranks = 1;              // per process group
  double bytes = 0;           // element-wise: HBM bytes; GEMM: A, B and C; collective: nccl-tests size
  double flops = 0;
  std::array<double, model::kCostlyOps> costly{};  // element-wise: costly operations (model::CostlyOp)
  std::string op;             // collective: allreduce, reducescatter, allgather, send; overlap: its collective
  model::DType dtype = model::DType::f32;  // GEMM operand type
  double measured_us = 0;     // median step time
};

// Sizes an experiment's points will run (validation/experiment_sizes.h),
// measured besides the sweep's own.
struct ExtraSizes {
  struct Gemm {
    std::int64_t m = 0, k = 0, n = 0;
    model::DType dtype = model::DType::f16;
  };
  std::vector<std::pair<std::string, std::int64_t>> collectives;  // op, f16 elements (the buffer's bytes / 2)
  std::vector<Gemm> gemms;                                         // [m x k] x [k x n] per rank, f16 or bf16
  double elementwise_bytes = 0;                                    // the largest element-wise op's bytes
};

struct MicroOptions {
  // Timed steps per microbenchmark (their median is the sample): with 5, one
  // slow or fast step in a 10-30 us collective moved the sample enough that
  // three calibrations in a row kept one regime, two, one (collectives' own
  // error 3.8-13.8%); with 20, two regimes each time, 3.8-5.4% (2 ranks here,
  // about 1.7 s for cpu-local's microbenchmarks).
  int iters = 20;
  int warmup = 1;
  bool quick = false;  // fewer sizes: what `validate` runs when it calibrates on the fly
  ExtraSizes extra;    // added to the sweep where it lacks them
};

// The schedule name of a GEMM overlapped with collective `op` ("ol(MM,AR)", "ol(MM,RS)").
[[nodiscard]] std::string overlap_label(const std::string& op);

// Builds the sweep (programs and sizes) for a world of `world` ranks; no run.
[[nodiscard]] std::vector<MicroSample> microbenchmark_plan(int world, const MicroOptions& o);

// Rounds the sweep's steps are spread over (each visits every microbenchmark).
[[nodiscard]] int microbenchmark_rounds(const MicroOptions& o);

// Runs the sweep on the backend (collective: every rank calls it) in
// microbenchmark_rounds() rounds and fills measured_us with the median of
// all of a microbenchmark's steps; one progress step per microbenchmark and
// round; a run whose result fails verification is a RunFailure.
void run_microbenchmarks(exec::Backend& backend, std::vector<MicroSample>& samples, const MicroOptions& o,
                         Progress& progress);

}  // namespace coconet::validation
