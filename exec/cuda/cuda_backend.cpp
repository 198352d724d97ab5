// The cuda backend (see exec/backend.h for the contract, cuda_backend.h for
// the shape).
//
// Design notes
// - Buffers are cudaMalloc'ed, zero-filled, tagged with their dtype. Views
//   become typed device pointers (kernels/cuda/view.h) at the call.
// - Two non-blocking streams: compute (kernels, cuBLAS, copies, norms, host
//   uploads and downloads) and comm (every NCCL call), comm at the device's
//   highest stream priority so that a collective's blocks are scheduled
//   before queued compute blocks. Events are recorded per record() call;
//   their ids carry a generation, and synchronize() recycles the pool (a
//   wait on an event of an older generation is already satisfied).
// - Communicators: world (send/recv between pipeline stages, world ranks)
//   and group (collectives; the world communicator itself when there is one
//   group). Bootstrapped over MPI under mpirun; a single process not started
//   by mpirun touches no MPI and makes a one-rank communicator from a local
//   unique id (nccl_bootstrap.h).
// - Stage times come from timing events around the region on the device
//   (start_timer / elapsed_us), not from the host clock around synchronize(),
//   whose polling interval would add to every short stage.
// - f16/bf16 reductions are NCCL's (16-bit arithmetic per step); with the
//   integer-valued inputs coconet verifies with they are exact.
// - Fused ops: one launch of the generated single LSA kernel
//   (kernels/cuda/fused_program_lsa.h) when the call has its shape
//   (lsa_fused_call.h) and the group is one LSA team; the head's input is
//   staged into a symmetric window and gathered results are copied out of
//   theirs (the buffers are cudaMalloc'ed, not registered), on the comm
//   stream between waits on the compute stream. Otherwise, or with
//   COCONET_FUSED_LSA=0, Backend::fused's default (exec/fused_call.h). Why
//   the LSA team is unavailable is said once on stderr.
// - overlap: tile (tiled_matmul_collective): the project's tiled GEMM on the
//   compute stream writes the matmul's result into its buffer and into a
//   symmetric window, raising a flag per block in device memory; the
//   communication kernel on the comm stream takes each block as its flag
//   completes and reduces it across the LSA team (kernels/cuda/tile_gemm.h).
//   Offered (capabilities().tile_overlap) only where the group is one LSA
//   team and NCCL at run time is the headers' version; refused with the
//   reason otherwise.
// - synchronize() polls the streams and the communicators' async errors with
//   a deadline (nccl_watchdog.h): a hang becomes ncclCommAbort + DeviceError.
#include "exec/cuda/cuda_backend.h"

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "exec/cuda/host_convert.h"
#include "exec/cuda/lsa_fused_call.h"
#include "exec/cuda/nccl_bootstrap.h"
#include "exec/cuda/nccl_watchdog.h"
#include "exec/fused_call.h"
#include "exec/mpi_session.h"
#include "exec/nccl_tuner/per_call.h"
#include "kernels/cuda/alltoall.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/collectives.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/fill.h"
#include "kernels/cuda/fused_program_lsa.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/rowreduce.h"
#include "kernels/cuda/tile_gemm.h"
#include "kernels/mpi_check.h"
#include "model/error.h"

namespace coconet::exec::cuda {
namespace kc = coconet::kernels::cuda;

Availability probe() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky error of a failed probe
    return {false, fmt::format("cudaGetDeviceCount: {}", cudaGetErrorString(err))};
  }
  if (count == 0) return {false, "cudaGetDeviceCount reports 0 devices"};
  return {true, fmt::format("{} device(s)", count)};
}

bool available() { return probe().ok; }

std::string unavailable_message(const Availability& a) {
  return "the cuda backend needs an NVIDIA GPU, and none is usable on this machine (" + a.reason +
         "); run with --backend cpu, or on a machine with a GPU and its driver";
}

namespace {

struct Buffer {
  void* data = nullptr;
  DType dtype = DType::f32;
  std::int64_t count = 0;
};

// Event ids: generation in the high bits, pool index in the low 32.
constexpr int kEventIndexBits = 32;
constexpr std::int64_t kEventIndexMask = (std::int64_t{1} << kEventIndexBits) - 1;

class CudaBackend final : public Backend {
 public:
  CudaBackend() : mpi_(choose_bootstrap(launched_by_mpirun(), mpi_initialised()) == Bootstrap::mpi) {
    if (mpi_) {
      ensure_mpi();
      COCONET_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
      COCONET_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
    }
    kernels::set_error_rank(rank_);
    timeout_s_ = timeout_from_env(std::getenv("COCONET_NCCL_TIMEOUT_S"));
    select_device();
    make_streams();
    world_ = mpi_ ? make_nccl_comm(MPI_COMM_WORLD) : make_local_comm();
    group_ = world_;
    blas_ = std::make_unique<kc::Blas>();
    norm_workspace_ = raw_alloc(kc::kNormWorkspaceDoubles * sizeof(double));
  }

  ~CudaBackend() override {
    free_buffers();
    drop_lsa();
    for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
    for (cudaEvent_t e : timing_) (void)cudaEventDestroy(e);
    (void)cudaEventDestroy(zeroed_);
    (void)cudaFree(norm_workspace_);
    (void)cudaFree(alltoall_scratch_);
    (void)cudaFree(tile_flags_);
    blas_.reset();
    if (group_ != world_ && group_ != nullptr) (void)ncclCommDestroy(group_);
    if (world_ != nullptr) (void)ncclCommDestroy(world_);
    (void)cudaStreamDestroy(compute_);
    (void)cudaStreamDestroy(comm_);
  }

  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  [[nodiscard]] std::string name() const override { return "cuda"; }
  [[nodiscard]] plan::Capabilities capabilities() const override {
    plan::Capabilities c = plan::cuda_capabilities();
    if (std::string why; !tile_team(why)) {
      c.tile_overlap = false;
      c.no_tile_reason = why;
    }
    return c;
  }
  [[nodiscard]] int world_rank() const override { return rank_; }
  [[nodiscard]] int world_size() const override { return size_; }
  [[nodiscard]] int ranks_per_group() const override { return size_ / groups_; }

  void set_groups(int groups) override {
    if (groups < 1 || size_ % groups != 0)
      throw UserError(fmt::format("the program spans {} process groups, but {} ranks cannot be cut "
                                  "into {} equal groups; run with a multiple of {} ranks",
                                  groups, size_, groups, groups));
    if (groups == groups_) return;
    synchronize();
    drop_lsa();  // made over the old group communicator
    if (group_ != world_) COCONET_NCCL_CHECK(ncclCommDestroy(group_));
    groups_ = groups;
    group_ = world_;
    if (groups_ == 1) return;
    MPI_Comm split = MPI_COMM_NULL;
    COCONET_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, rank_ / ranks_per_group(), rank_, &split));
    group_ = make_nccl_comm(split);
    COCONET_MPI_CHECK(MPI_Comm_free(&split));
  }

  // ---- memory

  [[nodiscard]] BufferId allocate(DType dtype, std::int64_t count) override {
    if (count < 0) throw UserError("allocate: negative element count");
    const auto bytes = static_cast<std::size_t>(count) * kc::storage_bytes(dtype);
    if (static_cast<std::int64_t>(bytes) > available_bytes())
      throw UserError(fmt::format("rank {}: {} bytes do not fit in the GPU's free memory ({} bytes); "
                                  "choose smaller sizes",
                                  rank_, bytes, available_bytes()));
    buffers_.push_back({bytes == 0 ? nullptr : raw_alloc(bytes), dtype, count});
    return static_cast<BufferId>(buffers_.size() - 1);
  }

  void release_all() override {
    synchronize();
    free_buffers();
  }

  [[nodiscard]] DType dtype_of(BufferId b) const override { return buffer(b).dtype; }
  [[nodiscard]] std::int64_t size_of(BufferId b) const override { return buffer(b).count; }

  [[nodiscard]] std::int64_t available_bytes() const override {
    std::size_t free_bytes = 0, total = 0;
    COCONET_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
    return static_cast<std::int64_t>(free_bytes);
  }

  void write(View dst, std::span<const double> values) override {
    COCONET_ASSERT(static_cast<std::int64_t>(values.size()) == dst.count, "write: size mismatch");
    synchronize();
    const auto bytes = encode(values, buffer(dst.buffer).dtype);
    if (bytes.empty()) return;
    // On the compute stream (never the legacy default stream); the host
    // bytes must outlive the copy, so wait for it here.
    COCONET_CUDA_CHECK(cudaMemcpyAsync(address(dst), bytes.data(), bytes.size(), cudaMemcpyHostToDevice,
                                       compute_));
    COCONET_CUDA_CHECK(cudaStreamSynchronize(compute_));
  }

  // Generated where the buffer lives (kernels/cuda/fill.h): no host loop, no upload.
  void fill_input(View dst, const model::InputPattern& pattern) override {
    kc::fill_input(device_view(dst), pattern, compute_);
  }

  [[nodiscard]] std::vector<double> read(View src) override {
    synchronize();
    const DType t = buffer(src.buffer).dtype;
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(src.count) * kc::storage_bytes(t));
    if (!bytes.empty()) {
      COCONET_CUDA_CHECK(
          cudaMemcpyAsync(bytes.data(), address(src), bytes.size(), cudaMemcpyDeviceToHost, compute_));
      COCONET_CUDA_CHECK(cudaStreamSynchronize(compute_));
    }
    return decode(bytes, t, src.count);
  }

  void copy(View dst, View src) override {
    COCONET_ASSERT(dst.count == src.count && dtype_of(dst.buffer) == dtype_of(src.buffer),
                   "copy: views differ in size or dtype");
    if (dst.count == 0) return;
    COCONET_CUDA_CHECK(cudaMemcpyAsync(address(dst), address(src), bytes_of(src),
                                       cudaMemcpyDeviceToDevice, compute_));
  }

  // ---- streams and events

  [[nodiscard]] Event record(StreamKind stream) override {
    cudaEvent_t e = next_event();
    COCONET_CUDA_CHECK(cudaEventRecord(e, stream_of(stream)));
    return {stream, (generation_ << kEventIndexBits) | static_cast<std::int64_t>(used_events_ - 1)};
  }

  void wait(StreamKind stream, Event e) override {
    if ((e.id >> kEventIndexBits) != generation_) return;  // completed before a synchronize()
    const auto index = static_cast<std::size_t>(e.id & kEventIndexMask);
    COCONET_ASSERT(index < used_events_, "wait: unknown event");
    COCONET_CUDA_CHECK(cudaStreamWaitEvent(stream_of(stream), events_[index], 0));
  }

  void synchronize() override {
    const WaitResult r = wait_with_deadline([this] { return poll(); }, timeout_s_);
    if (r.outcome == WaitOutcome::timed_out) {
      abort_all();
      throw kernels::DeviceError(
          timeout_message("GPU work queued on the compute and comm streams", timeout_s_));
    }
    if (r.outcome == WaitOutcome::failed) {
      abort_all();
      throw kernels::DeviceError(r.error);
    }
    ++generation_;
    used_events_ = 0;
  }

  [[nodiscard]] double now_us() const override {
    using namespace std::chrono;
    return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
  }

  // The region starts when both streams reach the start event (comm waits
  // for it) and ends when both have finished it (compute waits for comm).
  [[nodiscard]] double start_timer() override {
    synchronize();
    COCONET_CUDA_CHECK(cudaEventRecord(timing_[0], compute_));
    COCONET_CUDA_CHECK(cudaStreamWaitEvent(comm_, timing_[0], 0));
    return 0.0;
  }

  [[nodiscard]] double elapsed_us(double /*mark*/) override {
    compute_after(comm_);
    COCONET_CUDA_CHECK(cudaEventRecord(timing_[1], compute_));
    synchronize();
    float ms = 0.0F;
    COCONET_CUDA_CHECK(cudaEventElapsedTime(&ms, timing_[0], timing_[1]));
    return static_cast<double>(ms) * 1e3;
  }

  // ---- compute

  void elementwise(const model::ElementwiseProgram& program, std::span<const Operand> inputs,
                   std::span<const Operand> outputs, const model::Block& block, StreamKind stream) override {
    std::vector<kc::ElementwiseOperand> ins, outs;
    for (const Operand& o : inputs) ins.push_back(operand(o));
    for (const Operand& o : outputs) outs.push_back(operand(o));
    kc::elementwise(program, ins, outs, block, stream == StreamKind::comm ? comm_ : compute_);
  }

  void matmul(const MatmulArgs& a) override {
    kc::GemmArgs g;
    g.a = address(a.a);
    g.b = address(a.b);
    g.c = address(a.out);
    g.ab_dtype = dtype_of(a.a.buffer);
    g.c_dtype = dtype_of(a.out.buffer);
    if (dtype_of(a.b.buffer) != g.ab_dtype)
      throw UserError("matmul on the cuda backend: both operands must share one dtype");
    g.m = a.m;
    g.n = a.n;
    g.k = a.k;
    g.lda = a.lda;
    g.ldb = a.ldb;
    g.ldc = a.ldc;
    g.batch = a.batch;
    g.stride_a = a.stride_a;
    g.stride_b = a.stride_b;
    g.stride_c = a.stride_out;
    kc::gemm(*blas_, g, compute_);
  }

  void norm(View in, View out, bool across_group) override {
    auto* sum = static_cast<double*>(norm_workspace_);
    kc::sum_of_squares(device_view(in), sum, compute_);
    if (across_group) {
      comm_after(compute_);
      COCONET_NCCL_CHECK(ncclAllReduce(sum, sum, 1, ncclFloat64, ncclSum, group_, comm_));
      compute_after(comm_);
    }
    kc::sqrt_into(sum, device_view(out), compute_);
  }

  void row_reduce(View in, View out, std::int64_t inner, ReduceOp op) override {
    kc::row_reduce(device_view(in), device_view(out), inner, op, compute_);
  }

  // ---- communication

  void choose_collectives(std::span<const plan::CallChoice> choices) override { per_call_.choose(choices); }

  void allreduce(View in, View out, ReduceOp op) override {
    before_call(model::OpKind::allreduce, in.count, out.count, in.buffer);
    COCONET_NCCL_CHECK(ncclAllReduce(address(in), address(out), count(in), type(in),
                                     kc::nccl_op(op), group_, comm_));
  }

  void reduce_scatter(std::span<const View> parts, View out, ReduceOp op) override {
    before_call(model::OpKind::reducescatter, total_count(parts), out.count, out.buffer);
    kc::reduce_scatter(group_, to_parts(parts), part(out), dtype_of(out.buffer), op, position(),
                       comm_);
  }

  void allgather(View in, std::span<const View> parts) override {
    before_call(model::OpKind::allgather, in.count, total_count(parts), in.buffer);
    kc::allgather(group_, part(in), to_parts(parts), dtype_of(in.buffer), position(), comm_);
  }

  void broadcast(View in, View out, int root) override {
    before_call(model::OpKind::broadcast, in.count, out.count, out.buffer);
    COCONET_NCCL_CHECK(
        ncclBroadcast(address(in), address(out), count(out), type(out), root, group_, comm_));
  }

  void reduce(View in, View out, ReduceOp op, int root) override {
    before_call(model::OpKind::reduce, in.count, out.count, in.buffer);
    void* recv = position() == root ? address(out) : address(in);
    COCONET_NCCL_CHECK(
        ncclReduce(address(in), recv, count(in), type(in), kc::nccl_op(op), root, group_, comm_));
  }

  void alltoall(std::span<const Block2d> send, std::span<const Block2d> recv) override {
    const auto blocks = [this](std::span<const Block2d> bs) {
      std::vector<kc::StridedBlock> out;
      for (const Block2d& b : bs) {
        const std::int64_t reach = b.count() == 0 ? 0 : (b.rows - 1) * b.stride + b.cols;
        out.push_back({address(View{b.buffer, b.offset, reach}), b.rows, b.cols, b.stride});
      }
      return out;
    };
    const auto out = blocks(send);
    const auto in = blocks(recv);
    const DType t = dtype_of(send.front().buffer);
    const std::size_t need = kc::alltoall_scratch_bytes(out, in, t);
    if (need > alltoall_scratch_bytes_) {  // grown once to the largest alltoall, freed with the backend
      synchronize();
      (void)cudaFree(alltoall_scratch_);
      alltoall_scratch_ = raw_alloc(need);
      alltoall_scratch_bytes_ = need;
    }
    kc::alltoall(group_, out, in, t, position(), alltoall_scratch_, comm_);
  }

  void send(View in, int peer) override {
    COCONET_NCCL_CHECK(ncclSend(address(in), count(in), type(in), peer, world_, comm_));
  }

  void recv(View out, int peer) override {
    COCONET_NCCL_CHECK(ncclRecv(address(out), count(out), type(out), peer, world_, comm_));
  }

  // ---- fused ops: the single LSA kernel when the call has its shape and the
  // group is one LSA team; otherwise Backend::fused's default
  // (exec/fused_call.h) pipelines the pieces through the NCCL calls and the
  // generic element-wise kernel above, host calls interleaved per piece.

  void fused(const FusedCall& call) override {
    std::string why;
    const auto plan = plan_lsa_call(call, position(), ranks_per_group(),
                                    [this](BufferId b) { return dtype_of(b); }, why);
    if (plan && lsa_ready()) return run_lsa(*plan);
    run_fused(*this, call);
  }

  // ---- overlap: tile

  void tiled_matmul_collective(std::span<const std::vector<MatmulArgs>> blocks, const TileCollective& c) override {
    const MatmulArgs* shape = first_matmul(blocks);
    if (shape == nullptr) return;  // no rows on any rank (every rank's plan is alike)
    const kc::TileGemmArgs g = tile_gemm_args(*shape);
    std::vector<std::vector<kc::TileRows>> rows;
    for (const auto& block : blocks) {
      rows.emplace_back();
      for (const MatmulArgs& a : block) {
        require_tile_shape(a, *shape);
        rows.back().push_back({a.a.offset, a.out.offset, a.m});
      }
    }
    const kc::TileGemmPlan gemm = kc::plan_tile_gemm(rows, shape->n);
    kc::validate_tile_gemm(g, gemm);
    const bool in_place = c.op == model::OpKind::allreduce;
    const BufferId result = shape->out.buffer;
    const BufferId out = tile_output(c, result);
    const kc::TileCommPlan comm = kc::plan_tile_comm(
        in_place ? kc::TileCollectiveKind::allreduce : kc::TileCollectiveKind::reduce_scatter, tile_views(c),
        ranks_per_group(), position());
    const kc::LsaComm& lsa = tile_lsa();  // collective on first use, like the windows below
    const kc::SymmetricBuffer& window = tile_window(g.c_dtype, size_of(result));
    unsigned* flags = tile_flags();
    compute_after(comm_);  // a previous communication kernel no longer reads the flags
    kc::reset_tile_flags(flags, compute_);
    comm_after(compute_);  // recorded before the GEMM: the kernels overlap
    // The GEMM first (tile_gemm.h): it waits on nothing, so a throw after it leaves nothing waiting,
    // and serialised kernels (CUDA_LAUNCH_BLOCKING=1) run it to its end before the communication kernel.
    kc::TileGemmArgs with_window = g;
    with_window.c_window = window.view().data;
    kc::tile_gemm(with_window, gemm, flags, compute_);
    kc::tile_comm(lsa, comm, gemm, flags, window, in_place ? nullptr : buffer(out).data, c.reduce, in_place, comm_);
    const std::size_t bytes = kc::storage_bytes(g.c_dtype);
    for (const kc::TileCopy& k : comm.copies)
      copy_on_comm(static_cast<char*>(buffer(out).data) + k.dst * bytes,
                   static_cast<const char*>(window.view().data) + k.src * bytes, k.count, g.c_dtype);
    compute_after(comm_);
  }

  // ---- host helpers

  void barrier() override {
    if (mpi_) COCONET_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  }

  void host_allreduce(std::span<double> values, ReduceOp op) override {
    if (!mpi_) return;  // one rank: the reduction of one value is itself
    const MPI_Op mop = op == ReduceOp::max ? MPI_MAX : op == ReduceOp::min ? MPI_MIN : MPI_SUM;
    COCONET_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()),
                                    MPI_DOUBLE, mop, MPI_COMM_WORLD));
    if (op == ReduceOp::mean)
      for (double& v : values) v /= world_size();
  }

  [[noreturn]] void abort_job(int code) override {
    abort_all();
    if (!mpi_) {
      std::fflush(nullptr);
      std::_Exit(code);
    }
    MPI_Abort(MPI_COMM_WORLD, code);
    std::abort();  // MPI_Abort does not return; this satisfies [[noreturn]]
  }

 private:
  // Tells NCCL's tuner plugin the plan's choice for the collective about to
  // be called (exec/nccl_tuner/per_call.h). A reduce-scatter or all-gather
  // of ragged parts runs as grouped reduces or broadcasts
  // (kernels/cuda/collectives.h): NCCL asks about those calls, which the
  // plan's choice for the whole collective does not name, and chooses them
  // itself.
  void before_call(model::OpKind kind, std::int64_t sent, std::int64_t received, BufferId b) {
    (void)per_call_.before_call(kind, sent, received, kc::storage_bytes(dtype_of(b)));
  }

  void select_device() {
    int devices = 0;
    COCONET_CUDA_CHECK(cudaGetDeviceCount(&devices));
    COCONET_CUDA_CHECK(cudaSetDevice(mpi_ ? node_local_rank(MPI_COMM_WORLD) % devices : 0));
  }

  // Compute at the lowest priority, comm at the highest (numerically least);
  // the two timing events keep their timestamps.
  void make_streams() {
    int lowest = 0, highest = 0;
    COCONET_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lowest, &highest));
    COCONET_CUDA_CHECK(cudaStreamCreateWithPriority(&compute_, cudaStreamNonBlocking, lowest));
    COCONET_CUDA_CHECK(cudaStreamCreateWithPriority(&comm_, cudaStreamNonBlocking, highest));
    for (cudaEvent_t& e : timing_) COCONET_CUDA_CHECK(cudaEventCreate(&e));
    COCONET_CUDA_CHECK(cudaEventCreateWithFlags(&zeroed_, cudaEventDisableTiming));
  }

  // Device memory, zeroed on the compute stream (every first use of a buffer
  // is queued there or on comm): the legacy default stream's cudaMemset does
  // not order with the non-blocking streams, so a fill queued right after
  // could run first and be overwritten. The comm stream waits for the zeroing.
  void* raw_alloc(std::size_t bytes) {
    void* p = nullptr;
    COCONET_CUDA_CHECK(cudaMalloc(&p, bytes));
    COCONET_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, compute_));
    COCONET_CUDA_CHECK(cudaEventRecord(zeroed_, compute_));
    COCONET_CUDA_CHECK(cudaStreamWaitEvent(comm_, zeroed_, 0));
    return p;
  }

  void free_buffers() {
    for (Buffer& b : buffers_)
      if (b.data != nullptr) (void)cudaFree(b.data);
    buffers_.clear();
  }

  [[nodiscard]] const Buffer& buffer(BufferId b) const {
    COCONET_ASSERT(b >= 0 && static_cast<std::size_t>(b) < buffers_.size(), "unknown buffer id");
    return buffers_[static_cast<std::size_t>(b)];
  }

  [[nodiscard]] void* address(View v) const {
    const Buffer& b = buffer(v.buffer);
    COCONET_ASSERT(v.offset >= 0 && v.offset + v.count <= b.count, "view outside its buffer");
    return static_cast<char*>(b.data) + v.offset * kc::storage_bytes(b.dtype);
  }

  [[nodiscard]] std::size_t bytes_of(View v) const {
    return static_cast<std::size_t>(v.count) * kc::storage_bytes(buffer(v.buffer).dtype);
  }
  [[nodiscard]] static std::size_t count(View v) { return static_cast<std::size_t>(v.count); }
  [[nodiscard]] ncclDataType_t type(View v) const { return kc::nccl_type(dtype_of(v.buffer)); }

  [[nodiscard]] kc::DeviceView device_view(View v) const {
    return {address(v), v.count, dtype_of(v.buffer)};
  }
  [[nodiscard]] kc::Part part(View v) const { return {address(v), v.count}; }
  [[nodiscard]] std::vector<kc::Part> to_parts(std::span<const View> views) const {
    std::vector<kc::Part> out;
    for (const View& v : views) out.push_back(part(v));
    return out;
  }

  [[nodiscard]] kc::ElementwiseOperand operand(const Operand& o) const {
    const Buffer& b = buffer(o.buffer);
    return {b.data, b.dtype, o.access};
  }

  [[nodiscard]] cudaStream_t stream_of(StreamKind s) const {
    return s == StreamKind::compute ? compute_ : comm_;
  }

  cudaEvent_t next_event() {
    if (used_events_ == events_.size()) {
      cudaEvent_t e = nullptr;
      COCONET_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      events_.push_back(e);
    }
    return events_[used_events_++];
  }

  void comm_after(cudaStream_t s) {
    cudaEvent_t e = next_event();
    COCONET_CUDA_CHECK(cudaEventRecord(e, s));
    COCONET_CUDA_CHECK(cudaStreamWaitEvent(comm_, e, 0));
  }

  void compute_after(cudaStream_t s) {
    cudaEvent_t e = next_event();
    COCONET_CUDA_CHECK(cudaEventRecord(e, s));
    COCONET_CUDA_CHECK(cudaStreamWaitEvent(compute_, e, 0));
  }

  [[nodiscard]] Poll poll() const {
    for (ncclComm_t c : {world_, group_}) {
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(c, &async) == ncclSuccess && async != ncclSuccess &&
          async != ncclInProgress)
        return {PollState::failed,
                kernels::failure_message("NCCL", ncclGetErrorString(async),
                                         {"ncclCommGetAsyncError", __FILE__, __LINE__})};
    }
    for (cudaStream_t s : {compute_, comm_}) {
      const cudaError_t err = cudaStreamQuery(s);
      if (err == cudaErrorNotReady) return {PollState::pending, ""};
      if (err != cudaSuccess)
        return {PollState::failed,
                kernels::failure_message("CUDA", cudaGetErrorString(err),
                                         {"cudaStreamQuery", __FILE__, __LINE__})};
    }
    return {PollState::done, ""};
  }

  // The device communicator over the group, made on first use (collective:
  // every rank reaches it at the same fused op); false, said once, when the
  // group is not one LSA team or COCONET_FUSED_LSA=0.
  bool lsa_ready() {
    if (lsa_ != nullptr) return true;
    if (lsa_tried_) return false;
    lsa_tried_ = true;
    std::string why;
    const char* env = std::getenv("COCONET_FUSED_LSA");
    if (env != nullptr && std::string(env) == "0")
      why = "COCONET_FUSED_LSA=0";
    else
      lsa_ = kc::make_lsa_comm(group_, why);
    if (lsa_ != nullptr) {
      try {  // symmetric windows can be registered on this communicator
        staging(0, DType::f32, 1);
      } catch (const kernels::DeviceError& e) {
        why = std::string("no symmetric window could be registered: ") + e.what();
        drop_lsa();
        lsa_tried_ = true;
      }
    }
    lsa_why_ = why;
    if (lsa_ == nullptr && rank_ == 0)
      std::fprintf(stderr, "coconet: fused ops take the host path (NCCL host calls per piece): %s\n", why.c_str());
    return lsa_ != nullptr;
  }

  // Staging window `slot` with at least `count` elements of `dtype`; grown
  // (collectively: every rank runs the same fused ops) when too small.
  const kc::SymmetricBuffer& staging(std::size_t slot, DType dtype, std::int64_t count) {
    if (staging_.size() <= slot) staging_.resize(slot + 1);
    auto& s = staging_[slot];
    if (s == nullptr || s->view().dtype != dtype || s->view().size < count) {
      synchronize();
      s.reset();
      s = std::make_unique<kc::SymmetricBuffer>(group_, dtype, count);
      COCONET_CUDA_CHECK(cudaDeviceSynchronize());  // its zero fill is done
    }
    return *s;
  }

  void copy_on_comm(void* dst, const void* src, std::int64_t count, DType t) {
    if (count == 0) return;
    COCONET_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(count) * kc::storage_bytes(t),
                                       cudaMemcpyDeviceToDevice, comm_));
  }

  void run_lsa(const LsaCallPlan& p) {
    const model::ElementwiseProgram& prog = *p.program;
    std::vector<kc::LsaOperand> ins, outs;
    std::vector<const kc::SymmetricBuffer*> windows(prog.output_types.size(), nullptr);
    const DType rt = prog.input_types[p.reduced_slot];
    const kc::SymmetricBuffer& reduced = staging(0, rt, p.n);
    for (std::size_t k = 0; k < prog.output_types.size(); ++k)
      if (p.out_roles[k] == kc::LsaRole::gathered) windows[k] = &staging(k + 1, prog.output_types[k], p.n);
    comm_after(compute_);
    copy_on_comm(reduced.view().data, address(p.reduced_source), p.n, rt);
    for (std::size_t k = 0; k < p.in_roles.size(); ++k)
      ins.push_back(p.in_roles[k] == kc::LsaRole::reduced ? kc::LsaOperand{kc::LsaRole::reduced, &reduced, nullptr}
                                                          : kc::LsaOperand{kc::LsaRole::local, nullptr, local(p.in_local[k])});
    for (std::size_t k = 0; k < p.out_roles.size(); ++k)
      outs.push_back({p.out_roles[k], windows[k], local(p.out_local[k])});
    kc::fused_program_lsa(*lsa_, prog, ins, outs, p.n, comm_, p.global_first);
    for (std::size_t k = 0; k < windows.size(); ++k)
      if (windows[k] != nullptr) copy_on_comm(address(p.out_dest[k]), windows[k]->view().data, p.n, prog.output_types[k]);
    compute_after(comm_);
  }

  // Whether the group can run the tile path: NCCL at run time is the
  // headers' version and every rank of the group shares one LSA team (host
  // queries only, nothing collective); `why` says what is missing.
  bool tile_team(std::string& why) const {
    if (!kc::lsa_runtime_supported(why)) return false;
    const int lsa = kc::lsa_team_size(group_);
    if (lsa == ranks_per_group()) return true;
    why = fmt::format("only {} of the group's {} ranks share a load/store (NVLink) domain, which the tiles' "
                      "communication kernel (NCCL's device API) needs",
                      lsa, ranks_per_group());
    return false;
  }

  static const MatmulArgs* first_matmul(std::span<const std::vector<MatmulArgs>> blocks) {
    for (const auto& block : blocks)
      if (!block.empty()) return &block.front();
    return nullptr;
  }

  [[nodiscard]] kc::TileGemmArgs tile_gemm_args(const MatmulArgs& a) const {
    kc::TileGemmArgs g;
    g.a = buffer(a.a.buffer).data;
    g.b = address(a.b);
    g.c = buffer(a.out.buffer).data;
    g.ab_dtype = dtype_of(a.a.buffer);
    g.c_dtype = dtype_of(a.out.buffer);
    if (dtype_of(a.b.buffer) != g.ab_dtype)
      throw UserError("matmul on the cuda backend: both operands must share one dtype");
    g.n = a.n;
    g.k = a.k;
    g.lda = a.lda;
    g.ldb = a.ldb;
    g.ldc = a.ldc;
    return g;
  }

  // Every run of rows shares the first's operands but A's and C's rows: one GEMM.
  static void require_tile_shape(const MatmulArgs& a, const MatmulArgs& first) {
    if (a.batch != 1)
      throw UserError("overlap: tile on the cuda backend: a batched matmul (its weight has more than two "
                      "dimensions) runs no tiled GEMM; use overlap: chunk");
    COCONET_ASSERT(a.a.buffer == first.a.buffer && a.out.buffer == first.out.buffer && a.b.buffer == first.b.buffer &&
                       a.b.offset == first.b.offset && a.n == first.n && a.k == first.k && a.lda == first.lda &&
                       a.ldb == first.ldb && a.ldc == first.ldc,
                   "a tile unit's blocks are rows of one GEMM");
  }

  // The collective's output buffer; its parts must be views of the matmul's result.
  BufferId tile_output(const TileCollective& c, BufferId result) const {
    BufferId out = -1;
    for (const TileReduction& b : c.blocks) {
      for (const View& v : b.parts)
        COCONET_ASSERT(v.count == 0 || v.buffer == result, "a tile unit's collective reads the matmul's result");
      for (const View& v : b.outs)
        if (v.count > 0) out = v.buffer;
    }
    if (out >= 0 && dtype_of(out) != dtype_of(result))
      throw UserError("overlap: tile on the cuda backend: the collective's output has another dtype than the "
                      "matmul's result; use overlap: chunk");
    return out < 0 ? result : out;
  }

  static std::vector<kc::TileBlockViews> tile_views(const TileCollective& c) {
    std::vector<kc::TileBlockViews> out;
    for (const TileReduction& b : c.blocks) {
      kc::TileBlockViews v;
      for (const View& p : b.parts) v.parts.push_back({p.offset, p.count});
      for (const View& o : b.outs) v.outs.push_back(o.offset);
      out.push_back(std::move(v));
    }
    return out;
  }

  const kc::LsaComm& tile_lsa() {
    if (!lsa_ready())
      throw UserError("overlap: tile on the cuda backend needs the group's device communicator (NCCL's device "
                      "API), which is not available here: " + lsa_why_ + "; use overlap: chunk");
    return *lsa_;
  }

  // The symmetric window the GEMM writes its result into (as large as the
  // result's buffer); grown collectively (every rank runs the same tile unit).
  const kc::SymmetricBuffer& tile_window(DType dtype, std::int64_t count) {
    if (tile_window_ == nullptr || tile_window_->view().dtype != dtype || tile_window_->view().size < count) {
      synchronize();
      tile_window_.reset();
      tile_window_ = std::make_unique<kc::SymmetricBuffer>(group_, dtype, std::max<std::int64_t>(count, 1));
      COCONET_CUDA_CHECK(cudaDeviceSynchronize());  // its zero fill is done
    }
    return *tile_window_;
  }

  unsigned* tile_flags() {
    if (tile_flags_ == nullptr) tile_flags_ = static_cast<unsigned*>(raw_alloc(sizeof(unsigned) * kc::kTileFlagWords));
    return tile_flags_;
  }

  // A local operand's address; nullptr for an empty view (none, or an empty shard).
  [[nodiscard]] void* local(View v) const { return v.buffer < 0 || v.count == 0 ? nullptr : address(v); }

  // Windows and the device communicator go before the communicator they were made over.
  void drop_lsa() {
    tile_window_.reset();
    staging_.clear();
    lsa_.reset();
    lsa_tried_ = false;
  }

  void abort_all() {
    // The windows and device communicator belong to a communicator being
    // aborted: released without deregistering (the process is ending).
    for (auto& s : staging_) (void)s.release();
    (void)tile_window_.release();
    staging_.clear();
    (void)lsa_.release();
    const std::array<ncclComm_t, 2> comms{group_ != world_ ? group_ : nullptr, world_};
    abort_comms(comms);
    group_ = nullptr;
    world_ = nullptr;
  }

  bool mpi_ = false;  // false: one rank, no MPI (nccl_bootstrap.h)
  // The plan's choice of each collective call, told to NCCL's tuner plugin
  // when NCCL_TUNER_PLUGIN names coconet's (`coconet run` sets it).
  nccl_tuner::PerCallChoices per_call_ = nccl_tuner::PerCallChoices::from_environment();
  int rank_ = 0;
  int size_ = 1;
  int groups_ = 1;
  double timeout_s_ = kDefaultTimeoutSeconds;
  cudaStream_t compute_ = nullptr;
  cudaStream_t comm_ = nullptr;
  ncclComm_t world_ = nullptr;
  ncclComm_t group_ = nullptr;
  std::unique_ptr<kc::Blas> blas_;
  std::unique_ptr<kc::LsaComm> lsa_;  // the group as one LSA team, when it is one
  bool lsa_tried_ = false;
  std::vector<std::unique_ptr<kc::SymmetricBuffer>> staging_;  // 0: the head's input; k + 1: output k
  std::string lsa_why_;  // why lsa_ is null, once tried
  std::unique_ptr<kc::SymmetricBuffer> tile_window_;  // the tiled GEMM's result, read by the communication kernel
  unsigned* tile_flags_ = nullptr;  // kc::kTileFlagWords: block flags and the GEMM's ticket counter
  void* norm_workspace_ = nullptr;
  void* alltoall_scratch_ = nullptr;  // packed alltoall blocks (kernels/cuda/alltoall.h)
  std::size_t alltoall_scratch_bytes_ = 0;
  std::vector<Buffer> buffers_;
  std::vector<cudaEvent_t> events_;
  std::array<cudaEvent_t, 2> timing_{};  // start, stop of a timed region
  cudaEvent_t zeroed_ = nullptr;          // recorded after a new buffer's zeroing (raw_alloc)
  std::size_t used_events_ = 0;
  std::int64_t generation_ = 0;
};

}  // namespace

std::unique_ptr<Backend> create() {
  const Availability a = probe();
  if (!a.ok) throw UserError(unavailable_message(a));
  return std::make_unique<CudaBackend>();
}

}  // namespace coconet::exec::cuda

namespace coconet::exec {

std::unique_ptr<Backend> make_cuda_backend() { return cuda::create(); }

}  // namespace coconet::exec
