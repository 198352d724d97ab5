// The narrow interface every execution backend implements (cpu: MPI + Eigen in
// exec/cpu/, cuda: CUDA + NCCL + cuBLAS in exec/cuda/). The runtime
// (exec/runtime.h) lowers a model::Schedule to a StepPlan (plan/) with this
// backend's capabilities and the executor turns the plan into calls on this interface; a
// backend never sees statements, layouts or schedules, only buffers, views,
// compiled element-wise programs and collectives over its process group.
//
// Contract, method by method (P = ranks per group, "my group" = the ranks
// g*P .. g*P+P-1 holding this world rank, see model/interpreter.h):
//
// Identity and groups
//   world_rank(), world_size(): this process's rank in the whole job.
//   set_groups(groups): cuts the world into `groups` process groups of
//     P = world_size()/groups consecutive ranks (group g position r is world
//     rank g*P+r) and makes the group communicators every collective below
//     uses. Called before any collective, again whenever a program with a
//     different number of groups runs. Throws UserError when world_size() is
//     not a multiple of `groups`. ranks_per_group(), group(), position() read it.
//
// Memory (all counts and offsets in elements, never bytes)
//   allocate(dtype, count): a new zero-filled buffer of `count` elements
//     stored as `dtype` (f16/bf16: 16 bits each, f32: 32). Never returns an
//     invalid id; throws UserError when memory runs out. count may be 0.
//   allocate_to_fill(dtype, count): the same, its contents unspecified: for a
//     buffer the caller writes whole before anything reads it (an input,
//     filled). The default zero-fills it too.
//   release_all(): frees every buffer (ids become invalid). Implies synchronize().
//   updates_in_place(): whether alias() gives views of buffers, so that an
//     update is written over the state it updates (exec/update_in_place.h).
//     Default false: every value gets a buffer of its own.
//   alias(target, offset, count): a buffer id for elements [offset, offset +
//     count) of `target`, sharing its memory (a write through one is seen
//     through the other); released with it. Only where updates_in_place().
//   dtype_of(buffer), size_of(buffer): what allocate was given.
//   available_bytes(): memory this rank may still allocate (host RAM shared by
//     the ranks of this node, or free device memory); used to reject sizes
//     that do not fit before anything is allocated.
//   write(dst, values): host doubles -> buffer, converted to the buffer's
//     dtype with round-to-nearest-even; values.size() == dst.count.
//   fill_input(dst, pattern): the run's deterministic input values
//     (model/input_pattern.h) into dst, element i = input_at(pattern, i).
//     The default computes them on the host and writes them in blocks; a
//     device backend generates them where the buffer lives.
//   read(src): buffer -> host doubles (exact widening). write/read wait for
//     all work queued before them (they synchronize).
//   read_f32(src): the same as f32, which holds every f16, bf16 and f32
//     value exactly (half a double copy's memory; the runtime's outputs). The
//     default narrows read(src). read_f32(src, out) writes them into `out`
//     (src.count elements), by default a copy of read_f32(src).
//   host_f32(src): the values themselves where the buffer is f32 in host
//     memory (after a synchronize), valid until the next call that writes
//     the buffer; nullopt by default.
//   copy(dst, src): same dtype and count; queued on the compute stream.
//   share_on_node(key, bytes): collective (every rank of the world calls it,
//     each with its own key of at most kNodeKeyLength numbers): the ranks of
//     one node that pass the same key and size (non-zero) get one host region
//     of `bytes` bytes, mapped in each, so that what they all need is held
//     once per host (the runtime's reference outputs); the lowest of them is
//     its writer, which fills it before the ranks' next barrier(). The
//     default, and a rank alone with its key, gets a region of its own.
//   node_ranks(): the world ranks on this rank's node, in order (this one
//     alone by default).
//
// Streams and events (what makes overlap possible)
//   Every compute operation (elementwise, matmul, norm, copy) is queued on the
//   compute stream; every communication (allreduce .. recv) on the comm
//   stream. Operations on one stream run in the order queued; the two streams
//   run concurrently. A backend may run a stream synchronously on the caller
//   (the cpu backend does so for compute).
//   record(stream): an event that completes when everything queued on
//     `stream` so far has completed.
//   wait(stream, event): work queued on `stream` after this call starts only
//     once `event` has completed (may block the caller when the stream is
//     synchronous).
//   synchronize(): blocks until both streams are idle.
//   now_us(): wall clock in microseconds (steady, host side).
//   clock_shared(): whether now_us() reads one clock on every rank of the job
//     (all on one host), so that times of different ranks compare. Default
//     false.
//   nodes(): how many hosts the job's ranks run on, as MPI groups them (ranks
//     that share memory are one node); 0 when the backend does not say.
//   start_timer(), elapsed_us(mark): how long the work queued between them
//     takes, in microseconds; the runtime times each stage so. start_timer
//     waits for earlier work and returns a mark; elapsed_us waits for the
//     region's work. Default: synchronize() + now_us() on both sides; the cuda
//     backend times on the device with events, so the host's polling of the
//     streams is not counted.
//
// Compute
//   elementwise(program, inputs, outputs, block, stream): evaluates the compiled
//     program (model/elementwise_program.h) at every element (i, j) of the
//     rows x cols block: input k is read at buffer inputs[k].buffer, element
//     inputs[k].access.at(i, j), output k written at outputs[k].access.at(i, j);
//     the element's global index (for dropout) is block.global_index(i, j).
//     Inputs are stored in their buffers' dtypes (must equal
//     program.input_types), arithmetic is f32, outputs are rounded (RNE) to
//     their buffers' dtypes. Outputs never alias inputs. Queued on `stream`
//     (the comm stream only for a fused op's program in an overlap group,
//     plan::fused_program_stream).
//   matmul(args): out[m x n] = a[m x k] * b[k x n], row-major with leading
//     dimensions lda/ldb/ldc (elements), accumulated in f32 at least, rounded
//     to out's dtype. Integer-valued inputs whose sums stay below 2^24 give
//     exact results. With args.batch > 1, `batch` such products (a batched
//     matmul's local batches), product q's matrices starting q * stride_a,
//     q * stride_b and q * stride_out elements after the views' offsets.
//   norm(in, out, across_group): out (one element) = sqrt(sum of squares of
//     in), squares accumulated in double (f32 at least); with across_group the
//     sum of squares is summed over my group first (a sliced tensor's norm).
//     Collective over my group when across_group is true.
//   row_reduce(in, out, inner, op): a row reduction (rowsum, rowmax): in holds
//     out.count rows of `inner` contiguous elements (in.count == out.count *
//     inner); out[i] = op over row i (op: sum or max), accumulated in f32 at
//     least, rounded to out's dtype. A row of no elements (inner == 0, a rank
//     holding no columns of a ragged slice) gives 0 for sum and -inf for max.
//     Added for the transformer layer's LayerNorm and softmax (issue 16); the
//     only compute method besides these that reads more than one element per
//     output element.
//
// Communication over my group (queued on the comm stream; every rank of the
// group must call them in the same order with matching counts)
//   allreduce(in, out, op): out = op over the group of in; in == out allowed.
//   reduce_scatter(parts, out, op): parts[r] (r < P) is the part of my input
//     whose reduction lands on position r; out receives the reduction of
//     parts[position()] over the group. Parts may be ragged (counts differ
//     by position, but part r has the same count on every rank) and need not
//     be contiguous or adjacent.
//   allgather(in, parts): parts[r] receives position r's `in` (so
//     parts[position()] gets my own); parts may be ragged and scattered.
//   broadcast(in, out, root): out = root's in on every position (in == out allowed).
//   reduce(in, out, op, root): root's out = op over the group of in; out is
//     untouched elsewhere.
//   alltoall(send, recv): send[r] (r < P) is the block of my input that
//     position r receives, recv[r] where the block position r sends me lands;
//     send[r] on position q and recv[q] on position r hold the same number of
//     elements (ragged blocks, empty ones included), in row-major order of
//     their rows. Blocks are strided 2-D (Block2d): a backend packs them as it
//     needs. Added for alltoall(x, d) (issue 16): a tensor re-sliced along
//     another dimension.
//   send(in, peer) / recv(out, peer): point to point with world rank `peer`
//     (pipeline stages: position r of group g talks to position r of g+1).
//   f16/bf16 reductions: summed in f32 and rounded back; say how in the
//     implementation (MPI has no 16-bit float type).
//   choose_collectives(choices): before issuing a launch whose op has
//     collectives, the executor hands over what the plan resolved for them
//     (plan::launch_choices: algorithm, protocol and channels, one per
//     collective of the op, in order). The n-th call of a kind in the launch
//     runs the n-th choice of that kind, counting round (a fused op's pieces
//     call the op's collectives again, in the same order). A backend that
//     can apply a choice per call does (cuda: NCCL's tuner plugin,
//     exec/nccl_tuner/per_call.h); the default ignores them (MPI has no such
//     choice: the cpu backend's run reports the knobs that do not apply).
//     Empty: the backend's own choice for every call of the launch.
//
// Host-side helpers over the whole world (blocking, for the runtime's
// bookkeeping, never timed)
//   barrier(): all world ranks.
//   host_allreduce(values, op): element-wise op over all world ranks, in place.
//   abort_job(code): ends every rank of the job with exit status `code` (MPI_Abort);
//     used when one rank fails so the others cannot hang.
//
// Fused ops
//   fused(call): one fused stage (plan/fused_form.h) on this rank: norms of
//     values from before it, then each pass's pieces (a head collective into
//     the piece's place, the pass's compiled program over the piece's rows,
//     the allgathers of its results), then that pass's norms. The pieces of a
//     pass alternate between two scratch places, so piece k+2's head may not
//     start before piece k's program has read it. The default (run_fused,
//     exec/fused_call.h) pipelines the pieces through the methods above:
//     piece k's program on call.compute_stream while piece k+1's head and
//     piece k-1's allgathers run on the comm stream. A backend may run a
//     call its own way (one kernel) when the result is the same.
//   capabilities(): what the backend runs (plan/capabilities.h), the input of
//     plan::lower.
//
// Tiles (plan::Unit::tile; only a backend whose capabilities() say
// tile_overlap is asked; the defaults throw InternalError)
//   tile_events(blocks): one event per block of the next tiled_matmul, each
//     complete once its block is written. wait(comm, e) on one of them holds
//     the comm stream's later work until that block is done; the collective
//     of a block can so be queued before the GEMM starts.
//   tiled_matmul(blocks, events): one GEMM whose blocks (each block the
//     matmuls of its rows, as matmul() takes them) are computed in the order
//     given on the compute stream, events[b] completing after block b. The
//     blocks may share their right operand (a tile GEMM's weight): a backend
//     prepares it once. If it throws, every event completes (the comm
//     stream is not left waiting).
//   tiled_matmul_collective(blocks, collective): the same GEMM with the
//     unit's collective as one call resident across the blocks (a backend
//     whose capabilities() say tile_one_collective: the cuda backend's
//     communication kernel, kernels/cuda/tile_gemm.h); collective.blocks[b]
//     is block b's share of the reduce-scatter or allreduce, as
//     reduce_scatter() and allreduce() would take it, queued behind block b.
//     No events: the GEMM and the collective synchronise in device memory.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/elementwise_program.h"
#include "model/input_pattern.h"
#include "model/program.h"
#include "plan/capabilities.h"
#include "plan/step_plan.h"
#include "model/types.h"

namespace coconet::exec {

using model::DType;
using model::ReduceOp;

using BufferId = int;

// A contiguous run of `count` elements of a buffer, starting at element `offset`.
struct View {
  BufferId buffer = -1;
  std::int64_t offset = 0;
  std::int64_t count = 0;
};

// An element-wise operand: a buffer and how element (i, j) of a block maps to it.
struct Operand {
  BufferId buffer = -1;
  model::Access access;
};

struct MatmulArgs {
  View a, b, out;  // offsets are the first element of each matrix
  std::int64_t m = 0, k = 0, n = 0;
  std::int64_t lda = 0, ldb = 0, ldc = 0;  // row strides in elements
  std::int64_t batch = 1;                  // products, each the next `stride_*` elements on
  std::int64_t stride_a = 0, stride_b = 0, stride_out = 0;
};

// Block b's share of a tile unit's collective (Backend::tiled_matmul_collective):
// reduce-scatter: parts[r] the block's part of position r's slice, outs[0]
// where my reduced part lands; allreduce: the block's runs of rows (parts)
// and where each run's reduction lands (outs, one per part).
struct TileReduction {
  std::vector<View> parts;
  std::vector<View> outs;
};
struct TileCollective {
  model::OpKind op = model::OpKind::reducescatter;  // or allreduce
  ReduceOp reduce = ReduceOp::sum;
  std::vector<TileReduction> blocks;  // in block order
};

// The elements of `views` together (a collective's parts).
[[nodiscard]] std::int64_t total_count(std::span<const View> views);

// A strided 2-D block of a buffer: `rows` rows of `cols` elements, row i
// starting at element offset + i * stride.
struct Block2d {
  BufferId buffer = -1;
  std::int64_t offset = 0;
  std::int64_t rows = 0, cols = 0, stride = 0;
  [[nodiscard]] std::int64_t count() const { return rows * cols; }
};

enum class StreamKind { compute, comm };

struct Event {
  StreamKind stream = StreamKind::compute;
  std::int64_t id = 0;
};

// ---- a fused op as calls (see "Fused ops" above) ----

// One element-wise kernel: the program over a block, as elementwise() takes it.
struct ElementwiseCall {
  const model::ElementwiseProgram* program = nullptr;
  std::vector<Operand> inputs;
  std::vector<Operand> outputs;
  model::Block block;
};

// A head collective of one piece, as the collective methods take it.
struct HeadCall {
  enum class Kind { allreduce, reduce_scatter, send, recv };
  Kind kind = Kind::allreduce;
  ReduceOp op = ReduceOp::sum;
  std::vector<View> in;  // reduce_scatter: one part per position; allreduce, send: one view
  View out;              // allreduce, reduce_scatter, recv
  int peer = -1;         // send, recv: world rank
};

struct GatherCall {
  View in;                 // may be parts[position()] itself (in place)
  std::vector<View> parts;
};

struct NormCall {
  View in, out;
  bool across_group = false;
};

struct FusedPiece {
  std::vector<HeadCall> heads;           // in order: one per range of rows this rank holds
  std::vector<ElementwiseCall> computes;  // one per such range; none on a rank that only sends
  std::vector<GatherCall> gathers;
};

struct FusedPassCall {
  std::vector<FusedPiece> pieces;
  std::vector<NormCall> norms_after;
};

struct FusedCall {
  std::vector<NormCall> norms_before;
  std::vector<FusedPassCall> passes;
  // Where the programs run (plan::fused_program_stream): the compute stream,
  // or inside an overlap group the comm stream (the compute stream stays with
  // the overlapped work).
  StreamKind compute_stream = StreamKind::compute;
};

// Host memory that ranks of one node may share (Backend::share_on_node).
inline constexpr std::size_t kNodeKeyLength = 8;
struct NodeShared {
  std::shared_ptr<std::byte> data;  // the region, unmapped with its last owner
  bool writer = true;               // this rank fills it; the others only read it
};

class Backend {
 public:
  virtual ~Backend() = default;

  [[nodiscard]] virtual std::string name() const = 0;
  [[nodiscard]] virtual int world_rank() const = 0;
  [[nodiscard]] virtual int world_size() const = 0;
  virtual void set_groups(int groups) = 0;
  [[nodiscard]] virtual int ranks_per_group() const = 0;
  [[nodiscard]] int group() const { return world_rank() / ranks_per_group(); }
  [[nodiscard]] int position() const { return world_rank() % ranks_per_group(); }

  [[nodiscard]] virtual BufferId allocate(DType dtype, std::int64_t count) = 0;
  virtual void release_all() = 0;
  [[nodiscard]] virtual BufferId allocate_to_fill(DType dtype, std::int64_t count) { return allocate(dtype, count); }
  [[nodiscard]] virtual bool updates_in_place() const { return false; }
  [[nodiscard]] virtual BufferId alias(BufferId target, std::int64_t offset, std::int64_t count);
  [[nodiscard]] virtual DType dtype_of(BufferId b) const = 0;
  [[nodiscard]] virtual std::int64_t size_of(BufferId b) const = 0;
  [[nodiscard]] virtual std::int64_t available_bytes() const = 0;
  virtual void write(View dst, std::span<const double> values) = 0;
  virtual void fill_input(View dst, const model::InputPattern& pattern);
  [[nodiscard]] virtual std::vector<double> read(View src) = 0;
  [[nodiscard]] virtual std::vector<float> read_f32(View src);
  virtual void read_f32(View src, std::span<float> out);
  [[nodiscard]] virtual std::optional<std::span<const float>> host_f32(View src);
  virtual void copy(View dst, View src) = 0;
  [[nodiscard]] virtual NodeShared share_on_node(std::span<const std::int64_t> key, std::int64_t bytes);
  [[nodiscard]] virtual std::vector<int> node_ranks() const { return {world_rank()}; }

  [[nodiscard]] virtual Event record(StreamKind stream) = 0;
  virtual void wait(StreamKind stream, Event e) = 0;
  virtual void synchronize() = 0;
  [[nodiscard]] virtual double now_us() const = 0;
  [[nodiscard]] virtual bool clock_shared() const { return false; }
  [[nodiscard]] virtual int nodes() const { return 0; }
  [[nodiscard]] virtual double start_timer();
  [[nodiscard]] virtual double elapsed_us(double mark);

  virtual void elementwise(const model::ElementwiseProgram& program, std::span<const Operand> inputs,
                           std::span<const Operand> outputs, const model::Block& block,
                           StreamKind stream = StreamKind::compute) = 0;
  virtual void matmul(const MatmulArgs& args) = 0;
  virtual void norm(View in, View out, bool across_group) = 0;
  virtual void row_reduce(View in, View out, std::int64_t inner, ReduceOp op) = 0;

  virtual void allreduce(View in, View out, ReduceOp op) = 0;
  virtual void reduce_scatter(std::span<const View> parts, View out, ReduceOp op) = 0;
  virtual void allgather(View in, std::span<const View> parts) = 0;
  virtual void broadcast(View in, View out, int root) = 0;
  virtual void reduce(View in, View out, ReduceOp op, int root) = 0;
  virtual void alltoall(std::span<const Block2d> send, std::span<const Block2d> recv) = 0;
  virtual void send(View in, int peer) = 0;
  virtual void recv(View out, int peer) = 0;
  virtual void choose_collectives(std::span<const plan::CallChoice> /*choices*/) {}

  virtual void barrier() = 0;
  virtual void host_allreduce(std::span<double> values, ReduceOp op) = 0;
  [[noreturn]] virtual void abort_job(int code) = 0;

  virtual void fused(const FusedCall& call);
  [[nodiscard]] virtual std::vector<Event> tile_events(int blocks);
  virtual void tiled_matmul(std::span<const std::vector<MatmulArgs>> blocks, std::span<const Event> events);
  virtual void tiled_matmul_collective(std::span<const std::vector<MatmulArgs>> blocks,
                                       const TileCollective& collective);
  // What this backend runs (fused ops, overlap), the input of plan::lower.
  [[nodiscard]] virtual plan::Capabilities capabilities() const = 0;
};

// Backend names this build offers ("cpu" with MPI, "cuda" with CUDA + NCCL).
[[nodiscard]] std::vector<std::string> available_backends();

// Makes a backend by name; throws UserError for an unknown or unbuilt one.
// Initialises MPI (exec/mpi_session.h) when the backend needs it.
[[nodiscard]] std::unique_ptr<Backend> make_backend(const std::string& name);

// Each backend's factory, defined in its folder. exec/cuda/ defines
// make_cuda_backend() and adds COCONET_EXEC_HAVE_CUDA=1 to coconet_exec's
// compile definitions so that make_backend() offers it.
[[nodiscard]] std::unique_ptr<Backend> make_cpu_backend();
[[nodiscard]] std::unique_ptr<Backend> make_cuda_backend();

}  // namespace coconet::exec
