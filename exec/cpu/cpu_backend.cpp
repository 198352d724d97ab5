// The cpu backend (see exec/backend.h for the contract).
//
// Design notes
// - Buffers are host blocks of bytes tagged with their dtype (16-bit floats
//   stored as 16 bits), taken from a pool that keeps released blocks for the
//   next plan (exec/cpu/host_pool.h): a run of every schedule maps its memory
//   once. Inputs are filled in place (model/input_fill.h), outputs read as
//   f32, which holds every f16, bf16 and f32 value exactly.
// - The compute stream is the calling thread: elementwise, matmul, norm and row_reduce run
//   synchronously. The comm stream is a CommThread running blocking MPI calls
//   in order, so an overlapped group's collectives on chunk k proceed while
//   the caller computes chunk k+1.
// - Each thread has its own communicators (MPI_THREAD_MULTIPLE): the comm
//   thread uses `group_comm_` and `p2p_comm_`, the caller `group_compute_`
//   (norms) and `host_comm_` (bookkeeping), so concurrent collectives never
//   share a communicator.
// - Tiles (plan::Unit::tile): a tile event is a number on the compute
//   stream; the caller's tiled_matmul raises a counter past it once its
//   block is written. wait(comm, tile event) queues a task that blocks the
//   comm thread until then (asleep on a condition variable: the caller
//   computes on the core it shares), so every block's collective can be queued before
//   the GEMM starts and runs as soon as its block is done. The blocks share
//   their weight, widened to f32 once (kernels::CpuF32Operand).
// - Reduce-scatter: a ring of MPI_Isend/MPI_Irecv reduced with
//   MPI_Reduce_local (exec/cpu/ring.h says why not MPI_Ireduce_scatter); the
//   parts are sent from where they lie (ragged, scattered), so nothing is
//   staged, and the scratch it needs stays with the backend between calls.
#include "exec/cpu/cpu_backend.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <new>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include <mpi.h>
#include <sched.h>

#include "exec/cpu/comm_thread.h"
#include "exec/cpu/host_pool.h"
#include "exec/cpu/node_shared.h"
#include "exec/cpu/reduce_ops.h"
#include "exec/cpu/ring.h"
#include "exec/mpi_session.h"
#include "kernels/cpu_elementwise.h"
#include "kernels/cpu_matmul.h"
#include "kernels/cpu_rowreduce.h"
#include "kernels/mpi_check.h"
#include "model/input_fill.h"

namespace coconet::exec::cpu {

namespace {

// Share of MemAvailable a rank may plan to use: the rest is left to the OS,
// MPI's shared-memory segments and the runtime's host copies.
constexpr double kUsableMemoryShare = 0.9;
constexpr int kP2pTag = 7;
constexpr int kRingTag = 8;  // the ring reduce-scatter's messages, on group_comm_

int as_int(std::int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX)
    throw UserError(std::string("the cpu backend passes ") + what +
                    " to MPI as int; this one is too large (" + std::to_string(v) +
                    "); use smaller sizes");
  return static_cast<int>(v);
}

std::int64_t mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return std::numeric_limits<std::int64_t>::max() / 4;
}

class CpuBackend final : public Backend {
 public:
  CpuBackend() {
    ensure_mpi();
    COCONET_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    kernels::set_error_rank(rank_);
    COCONET_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
    COCONET_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &host_comm_));
    COCONET_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &p2p_comm_));
    COCONET_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_comm_));
    COCONET_MPI_CHECK(MPI_Comm_size(node_comm_, &ranks_on_node_));
    int node_rank = 0;
    COCONET_MPI_CHECK(MPI_Comm_rank(node_comm_, &node_rank));
    node_ranks_.resize(static_cast<std::size_t>(ranks_on_node_));
    COCONET_MPI_CHECK(MPI_Allgather(&rank_, 1, MPI_INT, node_ranks_.data(), 1, MPI_INT, node_comm_));
    // One leader per node (its rank 0 there) counts the nodes.
    const int leader = node_rank == 0 ? 1 : 0;
    COCONET_MPI_CHECK(MPI_Allreduce(&leader, &nodes_, 1, MPI_INT, MPI_SUM, host_comm_));
    ops_ = std::make_unique<ReduceOps>();
    comm_ = std::make_unique<CommThread>();
    pinned_ = pinned_to_one_cpu();
    set_groups(1);
  }

  ~CpuBackend() override {
    try {
      comm_->drain();
    } catch (...) {
    }
    comm_.reset();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    free_groups();
    MPI_Comm_free(&host_comm_);
    MPI_Comm_free(&p2p_comm_);
    MPI_Comm_free(&node_comm_);
    ops_.reset();
  }

  std::string name() const override { return "cpu"; }
  plan::Capabilities capabilities() const override { return plan::cpu_capabilities(); }
  int world_rank() const override { return rank_; }
  int world_size() const override { return size_; }
  int ranks_per_group() const override { return size_ / groups_; }

  void set_groups(int groups) override {
    if (groups < 1 || size_ % groups != 0)
      throw UserError("the program spans " + std::to_string(groups) +
                      " process groups (pipeline stages) of equal size, but the job has " +
                      std::to_string(size_) + " ranks; run it with a multiple of " +
                      std::to_string(groups) + " ranks (e.g. --ranks " + std::to_string(2 * groups) + ")");
    if (groups == groups_ && group_comm_ != MPI_COMM_NULL) return;
    comm_->drain();
    free_groups();
    groups_ = groups;
    const int p = size_ / groups;
    COCONET_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, rank_ / p, rank_ % p, &group_comm_));
    COCONET_MPI_CHECK(MPI_Comm_dup(group_comm_, &group_compute_));
  }

  BufferId allocate(DType dtype, std::int64_t count) override { return take(dtype, count, true); }
  // A reused block is not cleared first: the input's fill writes every element.
  BufferId allocate_to_fill(DType dtype, std::int64_t count) override { return take(dtype, count, false); }

  BufferId take(DType dtype, std::int64_t count, bool zeroed) {
    Buffer b;
    b.dtype = dtype;
    b.count = count;
    try {
      b.block = pool_.take(static_cast<std::size_t>(count * model::bytes_of(dtype)), zeroed);
    } catch (const std::bad_alloc&) {
      throw UserError("out of host memory allocating " + std::to_string(count) + " elements on rank " +
                      std::to_string(rank_) + "; use smaller sizes (--set)");
    }
    b.data = b.block.data();
    buffers_.push_back(std::move(b));
    return static_cast<BufferId>(buffers_.size() - 1);
  }

  bool updates_in_place() const override { return true; }

  // A view of the target's block: no memory of its own.
  BufferId alias(BufferId target, std::int64_t offset, std::int64_t count) override {
    const Buffer& t = buffer(target);
    COCONET_ASSERT(offset >= 0 && count >= 0 && offset + count <= t.count, "alias: outside its target");
    Buffer b;
    b.dtype = t.dtype;
    b.count = count;
    b.data = t.data + offset * model::bytes_of(t.dtype);
    buffers_.push_back(std::move(b));
    return static_cast<BufferId>(buffers_.size() - 1);
  }

  void release_all() override {
    synchronize();
    for (Buffer& b : buffers_)
      if (b.block.capacity() > 0) pool_.give_back(std::move(b.block));
    buffers_.clear();
    for (HostBlock& b : ring_scratch_) pool_.give_back(std::move(b));
    ring_scratch_.clear();
  }

  DType dtype_of(BufferId b) const override { return buffer(b).dtype; }
  std::int64_t size_of(BufferId b) const override { return buffer(b).count; }

  std::int64_t available_bytes() const override {
    // The pool's free blocks are this rank's to reuse, though the kernel counts them as used.
    return static_cast<std::int64_t>(static_cast<double>(mem_available_bytes()) * kUsableMemoryShare /
                                     ranks_on_node_) +
           static_cast<std::int64_t>(pool_.free_bytes());
  }

  void write(View dst, std::span<const double> values) override {
    COCONET_ASSERT(static_cast<std::int64_t>(values.size()) == dst.count, "write: size mismatch");
    synchronize();
    check(dst);
    std::vector<float> tmp(values.begin(), values.end());
    kernels::store_f32(data(dst.buffer), dtype_of(dst.buffer), dst.offset, 1, dst.count, tmp.data());
  }

  std::vector<double> read(View src) override {
    const std::vector<float> values = read_f32(src);
    return {values.begin(), values.end()};
  }

  std::vector<float> read_f32(View src) override {
    check(src);
    std::vector<float> values(static_cast<std::size_t>(src.count));
    read_f32(src, values);
    return values;
  }

  // Straight into `out`: no vector between.
  void read_f32(View src, std::span<float> out) override {
    COCONET_ASSERT(static_cast<std::int64_t>(out.size()) == src.count, "read_f32: size mismatch");
    synchronize();
    check(src);
    kernels::load_f32(data(src.buffer), dtype_of(src.buffer), src.offset, 1, src.count, out.data());
  }

  std::optional<std::span<const float>> host_f32(View src) override {
    if (dtype_of(src.buffer) != DType::f32) return std::nullopt;
    synchronize();
    check(src);
    return std::span<const float>(reinterpret_cast<const float*>(ptr(src)), static_cast<std::size_t>(src.count));
  }

  // In place, a tile of f32 values at a time: no host copy of the tensor.
  void fill_input(View dst, const model::InputPattern& pattern) override {
    synchronize();
    check(dst);
    std::vector<float> tile(static_cast<std::size_t>(std::min<std::int64_t>(kFillTile, dst.count)));
    for (std::int64_t first = 0; first < dst.count; first += kFillTile) {
      const std::int64_t n = std::min<std::int64_t>(kFillTile, dst.count - first);
      model::fill_input_values(pattern, first, std::span<float>(tile.data(), static_cast<std::size_t>(n)));
      kernels::store_f32(data(dst.buffer), dtype_of(dst.buffer), dst.offset + first, 1, n, tile.data());
    }
  }

  NodeShared share_on_node(std::span<const std::int64_t> key, std::int64_t bytes) override {
    return cpu::share_on_node(node_comm_, key, bytes, shared_serial_++);
  }
  std::vector<int> node_ranks() const override { return node_ranks_; }

  void copy(View dst, View src) override {
    check(dst);
    check(src);
    COCONET_ASSERT(dst.count == src.count && dtype_of(dst.buffer) == dtype_of(src.buffer),
                   "copy: views differ in size or dtype");
    const auto width = model::bytes_of(dtype_of(src.buffer));
    std::memmove(data(dst.buffer) + dst.offset * width, data(src.buffer) + src.offset * width,
                 static_cast<std::size_t>(src.count * width));
  }

  Event record(StreamKind stream) override {
    return Event{stream, stream == StreamKind::comm ? comm_->last_queued() : 0};
  }

  void wait(StreamKind stream, Event e) override {
    if (stream == StreamKind::compute && e.stream == StreamKind::comm) comm_->wait_for(e.id);
    // The comm stream waits only for a tile (tile_events); other compute
    // work completes before the caller queues more.
    if (stream == StreamKind::comm && e.stream == StreamKind::compute && e.id > 0)
      comm_->enqueue([this, id = e.id] { await_tile(id); });
  }

  std::vector<Event> tile_events(int blocks) override {
    std::vector<Event> out;
    for (int b = 0; b < blocks; ++b) out.push_back(Event{StreamKind::compute, ++tiles_planned_});
    return out;
  }

  void tiled_matmul(std::span<const std::vector<MatmulArgs>> blocks, std::span<const Event> events) override {
    COCONET_ASSERT(blocks.size() == events.size(), "tiled_matmul: one event per block");
    try {
      std::optional<kernels::CpuF32Operand> weight;  // the blocks' shared right operand, widened once
      for (std::size_t b = 0; b < blocks.size(); ++b) {
        for (const MatmulArgs& args : blocks[b]) {
          if (args.batch != 1) {
            matmul(args);
            continue;
          }
          const kernels::CpuMatrix w = matrix(args.b, args.k, args.n, args.ldb);
          if (!weight || !same_matrix(weight->matrix(), w)) weight.emplace(w, tile_weight_);
          kernels::cpu_matmul(matrix(args.a, args.m, args.k, args.lda), *weight,
                              matrix(args.out, args.m, args.n, args.ldc));
        }
        publish_tile(events[b].id);
      }
    } catch (...) {
      if (!events.empty()) publish_tile(events.back().id);  // no collective left waiting for a block
      throw;
    }
  }

  void synchronize() override { comm_->drain(); }

  // steady_clock is CLOCK_MONOTONIC on Linux: one clock for every process of a host.
  bool clock_shared() const override { return ranks_on_node_ == size_; }
  int nodes() const override { return nodes_; }

  double now_us() const override {
    using namespace std::chrono;
    return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
  }

  void elementwise(const model::ElementwiseProgram& program, std::span<const Operand> inputs,
                   std::span<const Operand> outputs, const model::Block& block, StreamKind stream) override {
    if (block.rows == 0 || block.cols == 0) return;
    std::vector<kernels::CpuOperand> ins;
    std::vector<kernels::CpuOperand> outs;
    for (const auto& o : inputs) ins.push_back(cpu_operand(o, block));
    for (const auto& o : outputs) outs.push_back(cpu_operand(o, block));
    for (std::size_t k = 0; k < ins.size(); ++k)
      COCONET_ASSERT(ins[k].dtype == program.input_types[k], "elementwise: input dtype differs from program");
    if (stream == StreamKind::compute) return kernels::cpu_elementwise(program, ins, outs, block);
    // A fused op's program in an overlap group: after the collectives queued before it.
    comm_->enqueue([&program, ins = std::move(ins), outs = std::move(outs), block] {
      kernels::cpu_elementwise(program, ins, outs, block);
    });
  }

  void matmul(const MatmulArgs& args) override {
    if (args.batch <= 0) return;
    const auto last = [](View v, std::int64_t q, std::int64_t stride) {
      return View{v.buffer, v.offset + q * stride, v.count};
    };
    const std::int64_t q = args.batch - 1;  // the last product reaches furthest: checked as the first is
    (void)matrix(last(args.a, q, args.stride_a), args.m, args.k, args.lda);
    (void)matrix(last(args.b, q, args.stride_b), args.k, args.n, args.ldb);
    (void)matrix(last(args.out, q, args.stride_out), args.m, args.n, args.ldc);
    kernels::cpu_matmul_batched(matrix(args.a, args.m, args.k, args.lda), matrix(args.b, args.k, args.n, args.ldb),
                                matrix(args.out, args.m, args.n, args.ldc), args.batch,
                                {args.stride_a, args.stride_b, args.stride_out});
  }

  void norm(View in, View out, bool across_group) override {
    check(in);
    check(out);
    double sum = 0.0;
    std::vector<float> tile(kNormTile);
    for (std::int64_t first = 0; first < in.count; first += kNormTile) {
      const std::int64_t n = std::min<std::int64_t>(kNormTile, in.count - first);
      kernels::load_f32(data(in.buffer), dtype_of(in.buffer), in.offset + first, 1, n, tile.data());
      for (std::int64_t k = 0; k < n; ++k) sum += static_cast<double>(tile[k]) * tile[k];
    }
    if (across_group) COCONET_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, group_compute_));
    const float value = static_cast<float>(std::sqrt(sum));
    kernels::store_f32(data(out.buffer), dtype_of(out.buffer), out.offset, 1, 1, &value);
  }

  void row_reduce(View in, View out, std::int64_t inner, ReduceOp op) override {
    check(in);
    check(out);
    kernels::cpu_row_reduce({data(in.buffer), dtype_of(in.buffer), in.offset, in.count},
                            {data(out.buffer), dtype_of(out.buffer), out.offset, out.count}, inner, op);
  }

  void allreduce(View in, View out, ReduceOp op) override {
    check(in);
    check(out);
    if (one_rank_copy(out, in)) return;
    comm_->enqueue([this, in, out, op] {
      const auto t = dtype_of(in.buffer);
      const void* send = same(in, out) ? MPI_IN_PLACE : ptr(in);
      MPI_Request req = MPI_REQUEST_NULL;
      COCONET_MPI_CHECK(MPI_Iallreduce(send, ptr(out), as_int(in.count, "an allreduce count"),
                                       ReduceOps::datatype(t), ops_->op(t, op), group_comm_, &req));
      wait_politely(req);
      if (op == ReduceOp::mean) divide_by_group(out);
    });
  }

  void reduce_scatter(std::span<const View> parts, View out, ReduceOp op) override {
    check(out);
    std::vector<View> ps(parts.begin(), parts.end());
    for (const auto& p : ps) check(p);
    COCONET_ASSERT(static_cast<int>(ps.size()) == ranks_per_group(), "reduce_scatter: one part per rank");
    if (one_rank_copy(out, ps.front())) return;
    const auto t = dtype_of(out.buffer);
    RingReduceScatter call;
    for (const auto& p : ps) {
      call.parts.push_back(static_cast<const std::byte*>(ptr(p)));
      call.counts.push_back(as_int(p.count, "a reduce-scatter count"));
    }
    call.out = static_cast<std::byte*>(ptr(out));
    call.width = static_cast<std::size_t>(model::bytes_of(t));
    call.type = ReduceOps::datatype(t);
    call.op = ops_->op(t, op);
    call.comm = group_comm_;
    call.position = position();
    call.tag = kRingTag;
    const std::span<std::byte> scratch = ring_scratch(ring_scratch_bytes(call));
    comm_->enqueue([this, call = std::move(call), scratch, out, op] {
      ring_reduce_scatter(call, scratch, [this](MPI_Request& req) { wait_politely(req); });
      if (op == ReduceOp::mean) divide_by_group(out);
    });
  }

  void allgather(View in, std::span<const View> parts) override {
    check(in);
    std::vector<View> ps(parts.begin(), parts.end());
    for (const auto& p : ps) {
      check(p);
      COCONET_ASSERT(p.buffer == ps.front().buffer, "allgather: parts must lie in one buffer");
    }
    COCONET_ASSERT(static_cast<int>(ps.size()) == ranks_per_group(), "allgather: one part per rank");
    if (one_rank_copy(ps.front(), in)) return;
    comm_->enqueue([this, in, ps] {
      const auto t = dtype_of(in.buffer);
      std::vector<int> counts;
      std::vector<int> displs;
      for (const auto& p : ps) {
        counts.push_back(as_int(p.count, "an allgather count"));
        displs.push_back(as_int(p.offset, "an allgather displacement"));
      }
      // In place when the input is this rank's own part (a fused op writes its results there).
      const View& own = ps[static_cast<std::size_t>(position())];
      const void* send = same(in, own) ? MPI_IN_PLACE : ptr(in);
      MPI_Request req = MPI_REQUEST_NULL;
      COCONET_MPI_CHECK(MPI_Iallgatherv(send, as_int(in.count, "an allgather count"), ReduceOps::datatype(t),
                                        data(ps.front().buffer), counts.data(), displs.data(),
                                        ReduceOps::datatype(t), group_comm_, &req));
      wait_politely(req);
    });
  }

  void broadcast(View in, View out, int root) override {
    check(in);
    check(out);
    if (one_rank_copy(out, in)) return;
    comm_->enqueue([this, in, out, root] {
      if (!same(in, out) && position() == root) copy_now(out, in);
      COCONET_MPI_CHECK(MPI_Bcast(ptr(out), as_int(out.count, "a broadcast count"),
                                  ReduceOps::datatype(dtype_of(out.buffer)), root, group_comm_));
    });
  }

  void reduce(View in, View out, ReduceOp op, int root) override {
    check(in);
    check(out);
    if (one_rank_copy(out, in)) return;
    comm_->enqueue([this, in, out, op, root] {
      const auto t = dtype_of(in.buffer);
      const bool in_place = same(in, out) && position() == root;
      COCONET_MPI_CHECK(MPI_Reduce(in_place ? MPI_IN_PLACE : ptr(in), ptr(out), as_int(in.count, "a reduce count"),
                                   ReduceOps::datatype(t), ops_->op(t, op), root, group_comm_));
      if (op == ReduceOp::mean && position() == root) divide_by_group(out);  // only the root holds the result
    });
  }

  // Packs each block bound for a peer back to back, one MPI_Alltoallv of
  // bytes, then unpacks what arrives into the receiving blocks.
  void alltoall(std::span<const Block2d> send, std::span<const Block2d> recv) override {
    const int p = ranks_per_group();
    COCONET_ASSERT(static_cast<int>(send.size()) == p && static_cast<int>(recv.size()) == p,
                   "alltoall: one block per rank each way");
    std::vector<Block2d> out(send.begin(), send.end());
    std::vector<Block2d> in(recv.begin(), recv.end());
    for (const auto& b : out) check(b);
    for (const auto& b : in) check(b);
    comm_->enqueue([this, out, in] {
      const auto width = model::bytes_of(dtype_of(out.front().buffer));
      std::vector<int> send_counts, send_displs, recv_counts, recv_displs;
      const auto layout = [&](const std::vector<Block2d>& blocks, std::vector<int>& counts, std::vector<int>& displs) {
        std::int64_t at = 0;
        for (const auto& b : blocks) {
          counts.push_back(as_int(b.count() * width, "an alltoall block's bytes"));
          displs.push_back(as_int(at, "an alltoall displacement"));
          at += b.count() * width;
        }
        return at;
      };
      std::vector<std::byte> packed(static_cast<std::size_t>(layout(out, send_counts, send_displs)));
      std::vector<std::byte> arrived(static_cast<std::size_t>(layout(in, recv_counts, recv_displs)));
      for (std::size_t r = 0; r < out.size(); ++r) move_block(out[r], packed.data() + send_displs[r], true);
      MPI_Request req = MPI_REQUEST_NULL;
      COCONET_MPI_CHECK(MPI_Ialltoallv(packed.data(), send_counts.data(), send_displs.data(), MPI_BYTE,
                                       arrived.data(), recv_counts.data(), recv_displs.data(), MPI_BYTE, group_comm_,
                                       &req));
      wait_politely(req);
      for (std::size_t r = 0; r < in.size(); ++r) move_block(in[r], arrived.data() + recv_displs[r], false);
    });
  }

  void send(View in, int peer) override {
    check(in);
    comm_->enqueue([this, in, peer] {
      MPI_Request req = MPI_REQUEST_NULL;
      COCONET_MPI_CHECK(MPI_Isend(ptr(in), as_int(in.count, "a send count"), ReduceOps::datatype(dtype_of(in.buffer)),
                                  peer, kP2pTag, p2p_comm_, &req));
      wait_politely(req);
    });
  }

  void recv(View out, int peer) override {
    check(out);
    comm_->enqueue([this, out, peer] {
      MPI_Request req = MPI_REQUEST_NULL;
      COCONET_MPI_CHECK(MPI_Irecv(ptr(out), as_int(out.count, "a receive count"),
                                  ReduceOps::datatype(dtype_of(out.buffer)), peer, kP2pTag, p2p_comm_, &req));
      wait_politely(req);
    });
  }

  void barrier() override { COCONET_MPI_CHECK(MPI_Barrier(host_comm_)); }

  void host_allreduce(std::span<double> values, ReduceOp op) override {
    const MPI_Op mpi_op = op == ReduceOp::max ? MPI_MAX : op == ReduceOp::min ? MPI_MIN : MPI_SUM;
    COCONET_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE,
                                    mpi_op, host_comm_));
    if (op == ReduceOp::mean)
      for (double& v : values) v /= world_size();
  }

  [[noreturn]] void abort_job(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::abort();
  }

 private:
  static constexpr std::int64_t kNormTile = 4096;
  static constexpr std::int64_t kFillTile = 4096;  // f32 input values per store: 16 KiB, in L1

  static bool same_matrix(const kernels::CpuMatrix& x, const kernels::CpuMatrix& y) {
    return x.data == y.data && x.dtype == y.dtype && x.first == y.first && x.rows == y.rows && x.cols == y.cols &&
           x.stride == y.stride;
  }

  void publish_tile(std::int64_t id) {
    {
      const std::lock_guard<std::mutex> lock(tiles_mutex_);
      tiles_done_ = id;
    }
    tile_written_.notify_all();
  }

  // On the comm thread: returns once tile `id` is written (asleep meanwhile).
  void await_tile(std::int64_t id) {
    std::unique_lock<std::mutex> lock(tiles_mutex_);
    tile_written_.wait(lock, [&] { return tiles_done_ >= id; });
  }

  struct Buffer {
    DType dtype = DType::f32;
    std::int64_t count = 0;
    HostBlock block;            // empty for an alias
    std::byte* data = nullptr;  // the first element: in `block`, or in an alias's target
  };

  const Buffer& buffer(BufferId b) const {
    COCONET_ASSERT(b >= 0 && b < static_cast<BufferId>(buffers_.size()), "unknown buffer id");
    return buffers_[static_cast<std::size_t>(b)];
  }
  std::byte* data(BufferId b) { return buffers_.at(static_cast<std::size_t>(b)).data; }
  void* ptr(View v) { return data(v.buffer) + v.offset * model::bytes_of(dtype_of(v.buffer)); }
  // The same memory (an alias of a buffer included): MPI then works in place.
  bool same(View a, View b) { return ptr(a) == ptr(b); }

  // A mean (NCCL's ncclAvg) after its sum: each element divided by the
  // group's size in f32 and rounded once to the buffer's type. On the comm
  // thread, after the collective, so that users of `v` wait for it.
  void divide_by_group(View v) {
    const float ranks = static_cast<float>(ranks_per_group());
    std::vector<float> tile(kNormTile);
    for (std::int64_t first = 0; first < v.count; first += kNormTile) {
      const std::int64_t n = std::min<std::int64_t>(kNormTile, v.count - first);
      kernels::load_f32(data(v.buffer), dtype_of(v.buffer), v.offset + first, 1, n, tile.data());
      for (std::int64_t k = 0; k < n; ++k) tile[std::size_t(k)] /= ranks;
      kernels::store_f32(data(v.buffer), dtype_of(v.buffer), v.offset + first, 1, n, tile.data());
    }
  }

  void check(View v) const {
    const auto& b = buffer(v.buffer);
    COCONET_ASSERT(v.offset >= 0 && v.count >= 0 && v.offset + v.count <= b.count,
                   "view [" + std::to_string(v.offset) + ", +" + std::to_string(v.count) +
                       ") outside its buffer of " + std::to_string(b.count));
  }

  void copy_now(View dst, View src) { copy(dst, src); }

  // A group of one rank exchanges nothing: as NCCL's one-rank path
  // (src/enqueue.cc -> ncclLaunchOneRank: in place nothing, out of place a
  // copy), no MPI call and no trip through the comm thread when nothing is
  // queued on it to come first; otherwise the copy is queued, in stream
  // order. Returns whether the group is one rank (the call is then done).
  bool one_rank_copy(View out, View in) {
    if (ranks_per_group() != 1) return false;
    if (same(in, out)) return true;
    if (comm_->idle()) {
      copy_now(out, in);
    } else {
      comm_->enqueue([this, out, in] { copy_now(out, in); });
    }
    return true;
  }

  void check(const Block2d& b) const {
    COCONET_ASSERT(b.rows >= 0 && b.cols >= 0 && b.stride >= b.cols, "alltoall: a malformed block");
    if (b.count() > 0) check(View{b.buffer, b.offset, (b.rows - 1) * b.stride + b.cols});
  }

  // Copies block `b` into the contiguous bytes at `packed` (pack), or back.
  void move_block(const Block2d& b, std::byte* packed, bool pack) {
    if (b.count() == 0) return;
    const auto width = model::bytes_of(dtype_of(b.buffer));
    const auto row_bytes = static_cast<std::size_t>(b.cols * width);
    for (std::int64_t i = 0; i < b.rows; ++i) {
      std::byte* buf = data(b.buffer) + (b.offset + i * b.stride) * width;
      std::byte* flat = packed + i * b.cols * width;
      if (pack)
        std::memcpy(flat, buf, row_bytes);
      else
        std::memcpy(buf, flat, row_bytes);
    }
  }

  // `bytes` of scratch for a reduce-scatter queued now: the plan's block
  // when large enough, else a new one from the pool of at least twice its
  // size (a plan's reduce-scatters grow it a few times at most).
  std::span<std::byte> ring_scratch(std::size_t bytes) {
    if (bytes == 0) return {};
    const std::size_t held = ring_scratch_.empty() ? 0 : ring_scratch_.back().capacity();
    if (held < bytes) {
      try {
        ring_scratch_.push_back(pool_.take(std::max(bytes, 2 * held), false));
      } catch (const std::bad_alloc&) {
        throw UserError("out of host memory for a reduce-scatter's " + std::to_string(bytes) +
                        " bytes of scratch on rank " + std::to_string(rank_) + "; use smaller sizes (--set)");
      }
    }
    return {ring_scratch_.back().data(), bytes};
  }

  // Completes a request without holding a core the rank computes on: a
  // blocking MPI call spins (Open MPI polls shared memory), which takes the
  // core from the compute thread an overlapped schedule runs beside it. Test
  // in a short burst (fast completions stay fast), then sleep between tests
  // while the compute thread works. A rank pinned to a core of its own whose
  // compute thread waits for this stream leaves the core to nobody else, so
  // it keeps testing: every round of a collective that needs both ranks
  // would otherwise pay a sleep when they start out of step (measured: a
  // 32 KB reduce-scatter right after megatron_mlp B=2's GEMM took 130-152 us
  // as a stage sleeping, 62-77 us testing). Unpinned (more ranks than cores),
  // spinning would take the core from the rank it waits for: it sleeps.
  void wait_politely(MPI_Request& req) const {
    constexpr int kSpinTests = 64;
    constexpr auto kPollPause = std::chrono::microseconds(20);
    int done = 0;
    for (int k = 0; !done; ++k) {
      COCONET_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
      if (!done && k >= kSpinTests && !(pinned_ && comm_->awaited())) std::this_thread::sleep_for(kPollPause);
    }
  }

  // Whether this process may run on one CPU only (mpirun --bind-to core).
  static bool pinned_to_one_cpu() {
    cpu_set_t set;
    CPU_ZERO(&set);
    return ::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) == 1;
  }

  kernels::CpuOperand cpu_operand(const Operand& o, const model::Block& block) {
    const auto& b = buffer(o.buffer);
    const auto last = o.access.at(block.rows - 1, block.cols - 1);
    COCONET_ASSERT(o.access.base >= 0 && last >= 0 && o.access.base < b.count && last < b.count,
                   "elementwise operand reaches outside its buffer");
    return kernels::CpuOperand{data(o.buffer), b.dtype, o.access};
  }

  kernels::CpuMatrix matrix(View v, std::int64_t rows, std::int64_t cols, std::int64_t stride) {
    const auto& b = buffer(v.buffer);
    COCONET_ASSERT(rows == 0 || cols == 0 || v.offset + (rows - 1) * stride + cols <= b.count,
                   "matmul operand reaches outside its buffer");
    return kernels::CpuMatrix{data(v.buffer), b.dtype, v.offset, rows, cols, stride};
  }

  void free_groups() {
    if (group_comm_ != MPI_COMM_NULL) MPI_Comm_free(&group_comm_);
    if (group_compute_ != MPI_COMM_NULL) MPI_Comm_free(&group_compute_);
  }

  int rank_ = 0;
  int size_ = 1;
  int groups_ = 0;
  int ranks_on_node_ = 1;
  int nodes_ = 1;
  MPI_Comm host_comm_ = MPI_COMM_NULL;
  MPI_Comm node_comm_ = MPI_COMM_NULL;  // the ranks of this node (share_on_node)
  std::vector<int> node_ranks_;         // their world ranks
  std::int64_t shared_serial_ = 0;      // share_on_node calls so far
  MPI_Comm p2p_comm_ = MPI_COMM_NULL;
  MPI_Comm group_comm_ = MPI_COMM_NULL;
  MPI_Comm group_compute_ = MPI_COMM_NULL;
  std::unique_ptr<ReduceOps> ops_;
  std::unique_ptr<CommThread> comm_;
  bool pinned_ = false;  // this rank runs on one CPU of its own (exec::Binding::core)
  HostPool pool_;  // before buffers_: their blocks go back to it
  std::vector<Buffer> buffers_;
  // ring_reduce_scatter's scratch, the plan's (given back by release_all):
  // the last block is the one handed out; the ones before it may still be in
  // use by queued reduce-scatters.
  std::vector<HostBlock> ring_scratch_;
  std::vector<float> tile_weight_;            // a tile GEMM's weight widened to f32 (kernels::CpuF32Operand)
  std::int64_t tiles_planned_ = 0;            // the last tile event handed out
  std::mutex tiles_mutex_;                    // guards tiles_done_
  std::condition_variable tile_written_;
  std::int64_t tiles_done_ = 0;               // the last tile written
};

}  // namespace

std::unique_ptr<Backend> create() { return std::make_unique<CpuBackend>(); }

}  // namespace coconet::exec::cpu
