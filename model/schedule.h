// A schedule: a transformed program, cut into stages (each one kernel, one
// collective, or one fused collective), with groups of consecutive stages that
// overlap chunk by chunk, and the knobs a backend needs. Plain data, recorded
// by the transformations (the `history` of typed directives), round-tripping
// through YAML by replaying that history on the workload's program (after
// Halide's Schedule).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "model/program.h"

namespace coconet::model {

enum class Algo { auto_, ring, tree, nvls, hierarchical };
enum class Proto { auto_, ll, ll128, simple };
// The grain an overlap group overlaps at. chunk: each chunk is its own GEMM
// call, then its own collective calls. tile: a group of a matmul and the
// collective (or fused collective) of its output runs one GEMM over the whole
// output that produces its row blocks (the chunks) in the order the collective
// consumes them, the collective taking each block as soon as it is done
// (CoCoNet's fine-grained overlap).
enum class Grain { chunk, tile };
[[nodiscard]] std::string to_string(Algo a);
[[nodiscard]] std::string to_string(Proto p);
[[nodiscard]] std::string to_string(Grain g);
[[nodiscard]] Algo parse_algo(const std::string& s);    // throws UserError
[[nodiscard]] Proto parse_proto(const std::string& s);  // throws UserError
[[nodiscard]] Grain parse_grain(const std::string& s);  // throws UserError

struct Knobs {
  int chunks = 1;     // pieces an overlapped group is cut into
  Algo algo = Algo::auto_;
  Proto proto = Proto::auto_;
  int channels = 0;   // 0: let the backend choose
  Grain overlap = Grain::chunk;  // how an overlap group's chunks are made (Grain)
  friend bool operator==(const Knobs&, const Knobs&) = default;
};

enum class StageKind {
  compute,     // one (fused) element-wise kernel, norms and row reductions included
  matmul,
  collective,  // one collective or send
  fused,       // a collective fused with computation (fused allreduce, fused send)
  kernel,      // computations run as one kernel (model/kernel_fusion.h): a fused norm or softmax, flash attention
};

// The paper's code of one statement's op: C (computations, norms, row
// reductions), MM, AR, RS, AG, BC, RD, A2A, P2P.
[[nodiscard]] std::string op_code(OpKind k);

struct Stage {
  StageKind kind = StageKind::compute;
  std::vector<std::string> stmts;  // statement names, in program order

  // The paper's short code: C, MM, AR, RS, AG, BC, RD, P2P, fuse(RS-C-AG), ...
  [[nodiscard]] std::string code(const Program& p) const;
};

// The applied transformations, one typed record each (after Halide's
// Schedule: Split{old_var, outer, inner, factor}, never strings searched by
// name). kOp is the name the YAML form writes (`{op: split, args: [g1]}`),
// args() the arguments in the order it writes them, kExample an example of
// them for messages.
struct Split {
  static constexpr std::string_view kOp = "split";
  static constexpr std::string_view kExample = "[g1]";
  std::string allreduce;  // `y = allreduce(op, x)` becomes y.rs and y
  [[nodiscard]] std::vector<std::string> args() const { return {allreduce}; }
  friend bool operator==(const Split&, const Split&) = default;
};

struct Reorder {
  static constexpr std::string_view kOp = "reorder";
  static constexpr std::string_view kExample = "[g1]";
  std::string allgather;  // the computations after it move before it
  [[nodiscard]] std::vector<std::string> args() const { return {allgather}; }
  friend bool operator==(const Reorder&, const Reorder&) = default;
};

struct AsSlice {
  static constexpr std::string_view kOp = "as_slice";
  static constexpr std::string_view kExample = "[m]";
  std::string state;  // a replicated input kept sliced for good
  [[nodiscard]] std::vector<std::string> args() const { return {state}; }
  friend bool operator==(const AsSlice&, const AsSlice&) = default;
};

struct Fuse {
  static constexpr std::string_view kOp = "fuse";
  static constexpr std::string_view kExample = "[g1.rs, w1]";
  std::string first;  // statements in the first and the last stage fused
  std::string last;
  [[nodiscard]] std::vector<std::string> args() const { return {first, last}; }
  friend bool operator==(const Fuse&, const Fuse&) = default;
};

struct Overlap {
  static constexpr std::string_view kOp = "overlap";
  static constexpr std::string_view kExample = "[y, z]";
  std::string first;  // statements in the first and the last stage overlapped
  std::string last;
  [[nodiscard]] std::vector<std::string> args() const { return {first, last}; }
  friend bool operator==(const Overlap&, const Overlap&) = default;
};

// fuse_kernel: the statements of one compute stage run as one kernel, one
// pass over memory (model/kernel_fusion.h).
struct FuseKernel {
  static constexpr std::string_view kOp = "fuse_kernel";
  static constexpr std::string_view kExample = "[one1, ln1]";
  std::string first;  // the first and last statement of a compute stage
  std::string last;
  [[nodiscard]] std::vector<std::string> args() const { return {first, last}; }
  friend bool operator==(const FuseKernel&, const FuseKernel&) = default;
};

// flash_attention: an attention core (a GEMM, a row softmax, a GEMM; or the
// backward's GEMMs around the softmax's backward) runs as one kernel that
// keeps the score-shaped values on chip (model/kernel_fusion.h).
struct FlashAttention {
  static constexpr std::string_view kOp = "flash_attention";
  static constexpr std::string_view kExample = "[sc, ctx, causal]";
  std::string first;  // the core's first and last statement
  std::string last;
  std::string mask;   // "causal" (blocks above the diagonal skipped) or "full"
  [[nodiscard]] std::vector<std::string> args() const { return {first, last, mask}; }
  friend bool operator==(const FlashAttention&, const FlashAttention&) = default;
};

using Directive = std::variant<Split, Reorder, AsSlice, Fuse, Overlap, FuseKernel, FlashAttention>;

// The YAML form of a directive: its op and its arguments.
[[nodiscard]] std::string_view op_of(const Directive& d);
[[nodiscard]] std::vector<std::string> args_of(const Directive& d);
// The directive a YAML entry `{op: OP, args: [ARGS]}` records; throws
// UserError for an unknown op or the wrong number of arguments.
[[nodiscard]] Directive make_directive(const std::string& op, const std::vector<std::string>& args);

// Stages [first, last] run concurrently, chunk by chunk.
struct OverlapGroup {
  int first = 0;
  int last = 0;
};

struct Schedule {
  Program program;
  std::vector<Stage> stages;
  std::vector<OverlapGroup> overlaps;
  Knobs knobs;
  std::vector<Directive> history;

  // Canonical name in the paper's notation, e.g. "ol(MM,fuse(RS-C-AG))";
  // as_slice variants end in "+asSlice(m,v)".
  [[nodiscard]] std::string name() const;
  // Index of the stage holding statement `stmt`, -1 when none.
  [[nodiscard]] int stage_of(const std::string& stmt) const;
  // Index of the overlap group holding stage `s`, -1 when none.
  [[nodiscard]] int overlap_of(int stage) const;
  // True once fuse or overlap was applied (program transformations must come first).
  [[nodiscard]] bool has_stage_transforms() const;
};

// The unscheduled program as a schedule: one stage per collective, matmul and
// send, and one compute stage per maximal run of consecutive element-wise
// statements (a fused optimizer or epilogue kernel, as every baseline has).
[[nodiscard]] Schedule initial_schedule(const Program& p);

// Stages rebuilt from the program after a program-level transformation.
[[nodiscard]] std::vector<Stage> default_stages(const Program& p);

// YAML form: workload name, history and knobs (stages listed for reading).
[[nodiscard]] std::string to_yaml(const Schedule& s);
// Replays a schedule's YAML on `program`; throws UserError (with line) when the
// text is malformed or a recorded transformation is illegal for the program.
[[nodiscard]] Schedule schedule_from_yaml(const Program& program, const std::string& text,
                                          const std::string& origin = "<schedule>");

// Human-readable listing of stages and overlaps.
[[nodiscard]] std::string describe(const Schedule& s);

// Predictions within this relative distance of the fastest are alike: the
// model makes no difference between their schedules (a fused op and its
// parts, on a topology that prices no launch, say).
inline constexpr double kPredictedAlike = 1e-9;

// The schedules predicted alike with the fastest, by index, in order; empty
// when there is none.
[[nodiscard]] std::vector<std::size_t> predicted_alike(std::span<const double> times);

// The schedule predictions rank first, by index: the fastest; of those
// predicted alike with it (kPredictedAlike), the one with the
// fewest stages: fewer launches and synchronisations, which a prediction
// prices only where its topology says what they cost (so a fused op and its
// parts can tie); then the first listed. `times` and `stages` are per
// schedule; 0 when there is none. Used by the tuner, `run --schedule best`,
// validate's pick and its metrics alike.
[[nodiscard]] std::size_t predicted_best(std::span<const double> times, std::span<const std::size_t> stages);

// predicted_best over any list of candidates: `time(c)` and `stages(c)` of each.
template <class Candidates, class Time, class Stages>
[[nodiscard]] std::size_t predicted_best_of(const Candidates& candidates, Time time, Stages stages) {
  std::vector<double> t;
  std::vector<std::size_t> s;
  for (const auto& c : candidates) {
    t.push_back(time(c));
    s.push_back(stages(c));
  }
  return predicted_best(t, s);
}

}  // namespace coconet::model
