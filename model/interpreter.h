// The reference interpreter: evaluates a program or a schedule for P simulated
// ranks per process group in one process, in double precision. It is the
// oracle every transformation and every backend is held against.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/input_pattern.h"
#include "model/schedule.h"

namespace coconet::model {

// One tensor's values on every rank of the world (groups * P ranks; rank
// g*P + r is position r of group g). Ranks outside the tensor's group hold
// nothing; each holds its local part (its slice, or the whole tensor).
struct RankValues {
  TensorType type;
  std::vector<std::int64_t> global_dims;
  std::vector<std::vector<double>> ranks;
};

using State = std::map<std::string, RankValues>;

// Deterministic inputs of small integers times a power of two (so sums are
// exact): the same global value sliced across ranks for replicated/sliced
// tensors, per-rank values for local ones, input i drawn from ranges[i].
// Each element's value is model/input_pattern.h's, as every backend fills it.
[[nodiscard]] State make_inputs(const Program& p, int ranks_per_group, const Bindings& b, std::uint64_t seed,
                                const std::vector<InputRange>& ranges);
// The same with the ranges model/input_ranges.h chooses for `p` at `b`.
[[nodiscard]] State make_inputs(const Program& p, int ranks_per_group, const Bindings& b,
                                std::uint64_t seed = 1);

// Runs every statement of the schedule's program; returns inputs and values.
[[nodiscard]] State interpret(const Schedule& s, int ranks_per_group, const Bindings& b,
                              const State& inputs);
[[nodiscard]] State interpret(const Program& p, int ranks_per_group, const Bindings& b,
                              const State& inputs);

// The global value of a tensor as one flat row-major array: a replicated value
// (checked equal on every rank of its group), the concatenated slices, or, for
// local values, every rank's value one after another.
[[nodiscard]] std::vector<double> global_value(const RankValues& v, int ranks_per_group);

struct Mismatch {
  std::string tensor;
  std::int64_t index = -1;
  double expected = 0;
  double actual = 0;
};

// Compares the program outputs of two states by global value; relative
// tolerance `rtol`. Empty when they agree.
[[nodiscard]] std::vector<Mismatch> compare_outputs(const Program& p, const State& expected,
                                                    const State& actual, int ranks_per_group,
                                                    double rtol = 1e-12);

}  // namespace coconet::model
