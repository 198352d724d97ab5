// The StepPlan: the one statement of what a step of a schedule does on each
// rank, made by plan::lower and consumed by both the simulator (sim/ prices
// it) and the executors (exec/ runs it), op for op.
//
// A plan is a list of units run one after another (a stage, or an overlap
// group of stages), each a list of ops: a run of element-wise statements
// compiled into one kernel, a matmul, a norm, a row reduction (rowsum,
// rowmax), a collective or send, or a
// fused collective (its head collective, compiled element-wise passes and
// allgathers in one backend op, plan/fused_form.h). Each op has its process
// group, its stream (compute or comm), its producers inside the unit and its
// lag (how many chunks behind the unit's first op it is issued, so that chunk
// k's communication runs while chunk k+1 computes). A unit runs `chunks` row chunks; issue_order()
// is the order every rank issues (op, chunk) launches in. Per-rank views
// (plan/views.h) place every value on a rank, ragged slices included; each
// op's Work is what it moves and computes on rank 0, the largest slice.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/elementwise_program.h"
#include "model/schedule.h"
#include "plan/capabilities.h"
#include "plan/fused_form.h"

namespace coconet::plan {

enum class OpClass { elementwise, matmul, norm, rowreduce, collective, fused };
[[nodiscard]] std::string to_string(OpClass c);

enum class Stream { compute, comm };
[[nodiscard]] std::string to_string(Stream s);

// How the calls of one chunk of a collective run: NCCL's algorithm, protocol
// and channel count. Concrete once resolved (sim/resolve.h
// resolve_collectives, the one place that chooses them); `auto_` and 0
// channels only before that, or for a chunk that makes no call. A call on
// one rank exchanges nothing (`local`: a copy or nothing; no algorithm
// applies, no channel is held).
struct CollectiveChoice {
  model::Algo algo = model::Algo::auto_;
  model::Proto proto = model::Proto::auto_;
  int channels = 0;
  bool local = false;
  [[nodiscard]] bool concrete() const {
    return local || (algo != model::Algo::auto_ && proto != model::Proto::auto_ && channels > 0);
  }
  friend bool operator==(const CollectiveChoice&, const CollectiveChoice&) = default;
};
[[nodiscard]] std::string to_string(const CollectiveChoice& c);  // "ring/ll128 x16", "local"

// The resolved choice of one collective a launch calls, with its kind: what
// the executor hands the backend before the launch's calls
// (exec::Backend::choose_collectives).
struct CallChoice {
  model::OpKind op = model::OpKind::allreduce;
  CollectiveChoice choice;
  friend bool operator==(const CallChoice&, const CallChoice&) = default;
};

// One collective call of an op (a send included), by statement.
struct Collective {
  model::OpKind op = model::OpKind::allreduce;
  std::string stmt;
  double bytes = 0;  // nccl-tests size on rank 0 (sim/collective.h): whole op, all chunks
  bool in_place = false;  // a fused op's allgather of what it wrote at this rank's place
  // An allgather whose result is a matmul's first operand: with FP8 GEMMs
  // (sim::Context::fp8_gemms) Transformer Engine casts that operand to FP8
  // before it is gathered (the norm writes it quantized), so the gather
  // moves one byte an element. Its size so (nccl-tests size on rank 0, all
  // chunks); 0 for any other collective.
  double fp8_bytes = 0;
  // The resolved choice of each chunk's calls (index: chunk of the op's unit),
  // what the simulator prices and the executors apply per call; empty until
  // resolved. Chunks differ only where a chunk's size crosses a choice's edge.
  std::vector<CollectiveChoice> chosen;
};

// A GEMM as the cost model sees it: `batch` products [m x k] x [k x n] on
// rank 0 (a batched matmul's leading dimensions; 1 for a 2-D b).
struct Gemm {
  std::int64_t m = 0, n = 0, k = 0;
  model::DType dtype = model::DType::f16;
  std::int64_t batch = 1;
  // The ranks its first operand was all-gathered over (1: not gathered):
  // with FP8 GEMMs each rank cast its own slice of it before the gather
  // (plan::Collective::fp8_bytes), 1/a_gathered of the operand.
  int a_gathered = 1;

  // The part one of `calls` backend calls makes of the `share` of the op's
  // rows a chunk holds: rows are a batched GEMM's batches, else its rows.
  [[nodiscard]] Gemm part(double share, int calls) const;
};

// What an op moves and computes on rank 0, all chunks together.
struct Work {
  double hbm_bytes = 0;  // element-wise bytes read and written (fused: besides the collectives' own)
  double flops = 0;      // element-wise arithmetic FLOPs
  std::array<double, model::kCostlyOps> costly{};  // costly operations (model::CostlyOp), each counted on its own
  std::optional<Gemm> gemm;
  std::vector<Collective> collectives;  // in order (a fused allreduce: RS then AG)
  bool norm_across_group = false;       // a norm over slices: a scalar allreduce follows it
};

// A kernel stage (model::StageKind::kernel) as the one kernel that software
// with fused kernels runs (Capabilities::fused_kernels), on rank 0, all
// chunks together. The stage's ops still run as parts on the executors.
struct Kernel {
  Work work;  // bytes read from before it and written for after it; element-wise FLOPs
  // Flash attention: its GEMMs' FLOPs as the kernel runs them (the mask's
  // share of the blocks, the probabilities recomputed in a backward); 0 for
  // a fused element-wise kernel.
  double attention_flops = 0;
  bool attention_backward = false;  // a flash kernel's backward (the probabilities recomputed from Q and K)
  model::DType dtype = model::DType::f16;  // its GEMMs' operands
};

struct Op {
  int id = 0;
  OpClass cls = OpClass::elementwise;
  std::string code;                // C, N (norm), MM, AR, RS, AG, BC, RD, P2P, fuse(RS-C-AG)
  std::vector<std::string> stmts;  // statement names, program order
  int stage = 0;                   // the schedule stage it comes from
  int unit = 0;
  int group = 0;                   // process group it runs on (a send: the sender's)
  int dest_group = -1;             // a send's receiving group
  Stream stream = Stream::compute;
  int lag = 0;
  std::vector<int> producers;      // ops of the same unit it reads (ids)
  std::optional<model::ElementwiseProgram> program;  // elementwise ops
  std::optional<FusedForm> fused;                      // fused ops: head, passes, gathers
  Work work;
  // The first op of a kernel stage carries the stage's kernel; the others
  // name that op (kernel_op) and are priced as part of it.
  std::optional<Kernel> kernel;
  int kernel_op = -1;
  // Backend calls per chunk on position 0 of its group (a send: the
  // sender's): a chunk's rows held as separate ranges are separate calls; a
  // fused op makes one call of each collective per piece.
  std::vector<int> calls;

  // Whether a rank of `group` takes part.
  [[nodiscard]] bool involves(int g) const { return group == g || dest_group == g; }
};

struct Unit {
  std::string name;  // a stage's code ("AR", "fuse(RS-C-AG)") or an overlap group's ("ol(MM,AR)")
  int first_stage = 0;
  int last_stage = 0;
  bool overlapped = false;
  std::string as_parts;  // a fused stage lowered to its parts: why it is not one fused op
  int chunks = 1;
  // Chunk k is the k-th piece of every rank's slice (a group with a
  // reducescatter, allgather or sliced value), not the k-th piece of rows.
  bool slice_mode = false;
  std::int64_t rows = 0;  // rows the chunks cut (rank 0's slice in slice mode); 0: unchunked
  // overlap: tile (model::Grain): the unit is a matmul op then the collective
  // (or fused) op of its output; the matmul is one GEMM over the whole
  // output whose chunk k is its k-th row block, done in chunk order, and the
  // collective's chunk k starts once that block is done. The matmul's launch
  // of chunk k is that block (priced at the whole GEMM's efficiency).
  bool tile = false;
  // Why an overlap group of a schedule with overlap: tile runs by chunks
  // all the same (its fused stage lowered as parts, so computation follows
  // the collective in the unit); empty otherwise.
  std::string untiled;
  std::vector<int> ops;
};

// One launch: op `op` on chunk `chunk`.
struct Launch {
  int op = 0;
  int chunk = 0;
  friend bool operator==(const Launch&, const Launch&) = default;
};

struct StepPlan {
  // The schedule's program, never null: shared, not copied, by the plans of
  // one schedule lowered at several sizes (sim::lower_unchunked).
  std::shared_ptr<const model::Program> program;
  std::string schedule;  // the schedule's name
  model::Knobs knobs;
  Capabilities caps;
  model::Bindings sizes;
  int ranks_per_group = 1;
  int groups = 1;
  std::vector<std::string> stage_codes;
  std::vector<Unit> units;
  std::vector<Op> ops;
  // The topology the collectives' choices were resolved on (sim/resolve.h);
  // empty: not resolved (plan::lower leaves every choice open).
  std::string resolved_on;

  [[nodiscard]] const Op& op(int id) const { return ops.at(static_cast<std::size_t>(id)); }
};

// What lowering finds in a schedule whatever its sizes, ranks and knobs: its
// name, its stages' codes, and each statement's position, reads and users.
// A caller lowering one schedule at several sizes finds them once
// (sim::ScheduleList) instead of at every lowering.
struct ScheduleFacts {
  std::string name;                              // model::Schedule::name
  std::vector<std::string> stage_codes;          // per stage, model::Stage::code
  std::unordered_map<std::string, int> index;    // statement name -> position in the program's stmts
  std::vector<std::vector<std::string>> reads;   // per statement, model::Program::reads
  std::unordered_map<std::string, std::vector<int>> users;  // value -> the statements reading it, in order
  std::vector<model::ElementCost> costs;          // per statement, model::element_cost of its expression (none: 0)
  std::vector<bool> outputs;                      // per statement: a program output
  // The element-wise programs of the statement runs compiled so far, by the
  // run's statements: what compiling them reads (their expressions, their
  // reads' dtypes, the program's scalars) is the program's at any sizes.
  // Filled by the lowerings given these facts (one at a time).
  mutable std::map<std::vector<std::string>, model::ElementwiseProgram> compiled;
};
// The facts of `s` with its program `program` (which holds what s.program holds).
[[nodiscard]] ScheduleFacts schedule_facts(const model::Schedule& s, const model::Program& program);

// Lowers `s` (with its knobs) for `ranks_per_group` ranks per group at
// `sizes` onto a backend with `caps`. Throws UserError for what no backend
// can run (a slicing the runtime cannot hold).
[[nodiscard]] StepPlan lower(const model::Schedule& s, const model::Bindings& sizes, int ranks_per_group,
                             const Capabilities& caps);
// The same with the plan's program `program` (not null), which must hold
// what `s.program` holds: a caller lowering a schedule at several sizes
// shares one copy of its program among the plans.
[[nodiscard]] StepPlan lower(const model::Schedule& s, std::shared_ptr<const model::Program> program,
                             const model::Bindings& sizes, int ranks_per_group, const Capabilities& caps);
// The same with the schedule's facts found already: `facts` must be
// schedule_facts(s, *program).
[[nodiscard]] StepPlan lower(const model::Schedule& s, std::shared_ptr<const model::Program> program,
                             const ScheduleFacts& facts, const model::Bindings& sizes, int ranks_per_group,
                             const Capabilities& caps);

// Whether two programs declare the same values (name, inputs and statements,
// each with its type): their values are sized and viewed alike at any sizes.
[[nodiscard]] bool same_values(const model::Program& a, const model::Program& b);
// The program's values as rank 0 of a group sees them at some sizes (rank_views),
// their sizes checked (model::check_tensor_sizes): found by the first lowering
// given them empty, read by the next.
struct SizedViews {
  std::optional<std::map<std::string, ValueView>> views;
  // Each value's view in `views` by its name, hashed: what a lowering looks up
  // (the map's nodes and keys stay where they are when the struct is moved).
  std::unordered_map<std::string_view, const ValueView*> by_name;
};
// The same as lower(s, program, facts, sizes, ranks_per_group, caps), with
// `views` empty or found by a lowering of a schedule whose program has
// same_values as `program`, at the same sizes and ranks.
[[nodiscard]] StepPlan lower(const model::Schedule& s, std::shared_ptr<const model::Program> program,
                             const ScheduleFacts& facts, SizedViews& views, const model::Bindings& sizes,
                             int ranks_per_group, const Capabilities& caps);

// The order every rank issues a unit's launches in (a rank skips the ops it
// takes no part in): step by step, op by op, chunk = step - lag.
[[nodiscard]] std::vector<Launch> issue_order(const StepPlan& p, const Unit& u);

// Where the program of a fused op's launch `l` runs: outside an overlap group
// on the compute stream; inside one on the comm stream (the compute stream
// stays with the overlapped work) when caps.comm_stream_computes, else there
// only while a compute-stream launch of the unit follows `l` in issue order
// (so the head's latency hides behind that work) and on the compute stream
// after the comm stream's queued work otherwise.
[[nodiscard]] Stream fused_program_stream(const StepPlan& p, const Launch& l);

// The resolved choices of the collectives launch (op, chunk) calls, in the
// op's order (a fused op: its head's, then its gathers'; each piece of the
// launch calls them in that order again); calls on one rank left out. Empty
// for an unresolved plan or an op without collectives.
[[nodiscard]] std::vector<CallChoice> launch_choices(const Op& op, int chunk);

// The share of an op's work that chunk `chunk` of unit `u` carries (rows of
// the chunk over the unit's rows; 1 for an unchunked unit).
[[nodiscard]] double chunk_share(const Unit& u, int chunk);

// Why schedule `s` cannot run with overlap: tile on a backend with `caps`
// (each overlap group must be a matmul then the collective or fused
// collective of its output, and the backend must run tiles); empty when it
// can. A schedule without overlap groups can: the knob changes nothing there.
[[nodiscard]] std::string why_not_tile(const model::Schedule& s, const Capabilities& caps);

// Human-readable plan: units, ops with stream, lag, chunks, work.
[[nodiscard]] std::string describe(const StepPlan& p);

}  // namespace coconet::plan
