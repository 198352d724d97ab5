// A test-only backend that runs nothing: it hands out buffer ids, accepts
// every call and remembers the fused calls it was given. One instance
// stands for one world rank, so a test can drive the executor as every rank
// of a job in one process and read back what each rank issued
// (Executor::ran()), without MPI and in microseconds. act_like_nccl makes
// its collective calls do what the cuda backend does around its NCCL calls.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

#include "exec/backend.h"
#include "exec/fused_call.h"
#include "exec/nccl_tuner/per_call.h"

namespace coconet::exec::testing {

class DryBackend final : public Backend {
 public:
  DryBackend(int world_rank, int world_size, plan::Capabilities caps)
      : rank_(world_rank), size_(world_size), caps_(caps) {}

  std::string name() const override { return "dry"; }
  plan::Capabilities capabilities() const override { return caps_; }
  int world_rank() const override { return rank_; }
  int world_size() const override { return size_; }
  void set_groups(int groups) override { p_ = size_ / groups; }
  int ranks_per_group() const override { return p_; }

  BufferId allocate(DType t, std::int64_t n) override {
    buffers_.push_back({t, n});
    return static_cast<BufferId>(buffers_.size() - 1);
  }
  void release_all() override { buffers_.clear(); }
  // As the cpu backend: updates written in place (exec/update_in_place.h),
  // and `ranks` world ranks on this rank's node (Backend::node_ranks).
  void write_updates_in_place(bool on) { in_place_ = on; }
  void set_node_ranks(std::vector<int> ranks) { node_ = std::move(ranks); }
  bool updates_in_place() const override { return in_place_; }
  BufferId alias(BufferId target, std::int64_t, std::int64_t n) override { return allocate(dtype_of(target), n); }
  std::vector<int> node_ranks() const override { return node_.empty() ? std::vector<int>{rank_} : node_; }
  DType dtype_of(BufferId b) const override { return buffers_.at(static_cast<std::size_t>(b)).first; }
  std::int64_t size_of(BufferId b) const override { return buffers_.at(static_cast<std::size_t>(b)).second; }
  std::int64_t available_bytes() const override { return available_; }
  void set_available_bytes(std::int64_t b) { available_ = b; }
  void write(View, std::span<const double>) override {}
  std::vector<double> read(View v) override { return std::vector<double>(static_cast<std::size_t>(v.count)); }
  void copy(View, View) override {}

  Event record(StreamKind s) override { return Event{s, ++events_}; }
  void wait(StreamKind, Event) override {}
  void synchronize() override {}
  double now_us() const override { return 0.0; }

  void elementwise(const model::ElementwiseProgram&, std::span<const Operand>, std::span<const Operand>,
                   const model::Block&, StreamKind) override {}
  void matmul(const MatmulArgs&) override {}
  void norm(View, View, bool) override {}
  void row_reduce(View, View, std::int64_t, ReduceOp) override {}
  void allreduce(View in, View out, ReduceOp) override { nccl_call(model::OpKind::allreduce, in.count, out.count, in); }
  void reduce_scatter(std::span<const View> parts, View out, ReduceOp) override {
    nccl_call(model::OpKind::reducescatter, total_count(parts), out.count, out);
  }
  void allgather(View in, std::span<const View> parts) override {
    nccl_call(model::OpKind::allgather, in.count, total_count(parts), in);
  }
  void broadcast(View in, View out, int) override { nccl_call(model::OpKind::broadcast, in.count, out.count, out); }
  void reduce(View in, View out, ReduceOp, int) override { nccl_call(model::OpKind::reduce, in.count, out.count, in); }
  void choose_collectives(std::span<const plan::CallChoice> choices) override {
    if (nccl_) nccl_->per_call->choose(choices);
  }

  // What the cuda backend does around its NCCL calls (exec/cuda/cuda_backend.cpp):
  // each collective call first tells `per_call` the plan's choice for it, then
  // `asked` gets the call's kind and the size NCCL states it at (NCCL's question
  // to its tuner plugin); a fused call runs its pieces through run_fused
  // (exec/fused_call.h), as the cuda backend does where one LSA kernel cannot.
  struct NcclLike {
    nccl_tuner::PerCallChoices* per_call = nullptr;
    std::function<void(model::OpKind, std::size_t)> asked;
  };
  void act_like_nccl(NcclLike n) { nccl_ = std::move(n); }
  void alltoall(std::span<const Block2d>, std::span<const Block2d>) override {}
  void send(View, int) override {}
  void recv(View, int) override {}
  void barrier() override {}
  void host_allreduce(std::span<double>, ReduceOp) override {}
  [[noreturn]] void abort_job(int) override { std::abort(); }

  void fused(const FusedCall& call) override {
    fused_.push_back(call);
    if (nccl_) run_fused(*this, call);
  }
  [[nodiscard]] const std::vector<FusedCall>& fused_calls() const { return fused_; }

  // A tile unit whose collective is one call (plan::Capabilities::tile_one_collective).
  struct TileCall {
    std::vector<std::vector<MatmulArgs>> blocks;
    TileCollective collective;
  };
  void tiled_matmul_collective(std::span<const std::vector<MatmulArgs>> blocks, const TileCollective& c) override {
    tiles_.push_back({{blocks.begin(), blocks.end()}, c});
  }
  [[nodiscard]] const std::vector<TileCall>& tile_calls() const { return tiles_; }

 private:
  void nccl_call(model::OpKind kind, std::int64_t sent, std::int64_t received, View v) {
    if (!nccl_) return;
    const std::size_t bytes = nccl_->per_call->before_call(kind, sent, received, model::bytes_of(dtype_of(v.buffer)));
    if (nccl_->asked) nccl_->asked(kind, bytes);
  }

  int rank_ = 0;
  int size_ = 1;
  int p_ = 1;
  plan::Capabilities caps_;
  std::vector<std::pair<DType, std::int64_t>> buffers_;
  std::int64_t events_ = 0;
  std::int64_t available_ = std::int64_t{1} << 40;
  std::vector<FusedCall> fused_;
  std::vector<TileCall> tiles_;
  std::optional<NcclLike> nccl_;
  bool in_place_ = false;
  std::vector<int> node_;
};

}  // namespace coconet::exec::testing
