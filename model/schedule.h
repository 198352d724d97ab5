// A schedule: a transformed program, cut into stages (each one kernel, one
// collective, or one fused collective), with groups of consecutive stages that
// overlap chunk by chunk, and the knobs a backend needs. Plain data, recorded
// by the transformations (the `history`), round-tripping through YAML by
// replaying that history on the workload's program (after Halide's Schedule).
#pragma once

#include <string>
#include <vector>

#include "model/program.h"

namespace coconet::model {

enum class Algo { auto_, ring, tree, nvls, hierarchical };
enum class Proto { auto_, ll, ll128, simple };
[[nodiscard]] std::string to_string(Algo a);
[[nodiscard]] std::string to_string(Proto p);
[[nodiscard]] Algo parse_algo(const std::string& s);    // throws UserError
[[nodiscard]] Proto parse_proto(const std::string& s);  // throws UserError

struct Knobs {
  int chunks = 1;     // pieces an overlapped group is cut into
  Algo algo = Algo::auto_;
  Proto proto = Proto::auto_;
  int channels = 0;   // 0: let the backend choose
  friend bool operator==(const Knobs&, const Knobs&) = default;
};

enum class StageKind {
  compute,     // one (fused) element-wise kernel, norms included
  matmul,
  collective,  // one collective or send
  fused,       // a collective fused with computation (fused allreduce, fused send)
};

struct Stage {
  StageKind kind = StageKind::compute;
  std::vector<std::string> stmts;  // statement names, in program order

  // The paper's short code: C, MM, AR, RS, AG, BC, RD, P2P, fuse(RS-C-AG), ...
  [[nodiscard]] std::string code(const Program& p) const;
};

// One applied transformation, e.g. {"split", {"g1"}} or {"fuse", {"g1.rs", "w1.ag"}}.
struct Directive {
  std::string op;
  std::vector<std::string> args;
  friend bool operator==(const Directive&, const Directive&) = default;
};

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

}  // namespace coconet::model
