// A test-only backend: forwards everything to a real one, except that after
// the n-th element-wise kernel it adds one to a single element of the
// kernel's first output on one rank (a wrong kernel), or after every GEMM it
// overwrites the first row of the product with the second (a GEMM that read
// the wrong row of its left operand), or after each alltoall it adds one to
// the first element it received (a wrong exchange), or it fails on purpose
// (throws, dies, or hangs) at the first allreduce, for the fault tests; or,
// right, it makes one rank slow: kSlowKernelMs after each of its element-wise
// kernels (a straggler, for the timing tests), and with late_and_slow also
// kSlowKernelMs late out of every barrier (a step started late); or its tile
// GEMM fails at its last block (the block's output made to reach outside its
// buffer, so the inner backend throws after the earlier blocks). It records
// the output rows of every tile block's matmuls in the order given
// (tile_rows), for the block-order tests.
#pragma once

#include <csignal>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "exec/backend.h"

namespace coconet::exec::testing {

enum class Fault {
  none, perturb, wrong_gemm, perturb_alltoall, throw_error, die, hang, slow_kernels, late_and_slow, throw_in_tile
};
inline constexpr int kSlowKernelMs = 200;  // well past a scheduler time slice (4-16 ms), which an oversubscribed collective can take

class PerturbingBackend : public Backend {
 public:
  PerturbingBackend(std::unique_ptr<Backend> inner, Fault fault, int rank, int kernel = 0)
      : inner_(std::move(inner)), fault_(fault), rank_(rank), kernel_(kernel) {}

  std::string name() const override { return inner_->name(); }
  plan::Capabilities capabilities() const override { return inner_->capabilities(); }
  int world_rank() const override { return inner_->world_rank(); }
  int world_size() const override { return inner_->world_size(); }
  void set_groups(int g) override { inner_->set_groups(g); }
  int ranks_per_group() const override { return inner_->ranks_per_group(); }
  BufferId allocate(DType t, std::int64_t n) override { return inner_->allocate(t, n); }
  void release_all() override { inner_->release_all(); }
  DType dtype_of(BufferId b) const override { return inner_->dtype_of(b); }
  std::int64_t size_of(BufferId b) const override { return inner_->size_of(b); }
  std::int64_t available_bytes() const override { return inner_->available_bytes(); }
  void write(View d, std::span<const double> v) override { inner_->write(d, v); }
  void fill_input(View d, const model::InputPattern& p) override { inner_->fill_input(d, p); }
  std::vector<double> read(View s) override { return inner_->read(s); }
  void copy(View d, View s) override { inner_->copy(d, s); }
  Event record(StreamKind s) override { return inner_->record(s); }
  void wait(StreamKind s, Event e) override { inner_->wait(s, e); }
  void synchronize() override { inner_->synchronize(); }
  double now_us() const override { return inner_->now_us(); }
  bool clock_shared() const override { return inner_->clock_shared(); }
  void matmul(const MatmulArgs& a) override {
    inner_->matmul(a);
    if (fault_ != Fault::wrong_gemm || world_rank() != rank_ || a.m < 2) return;
    const auto second = inner_->read(View{a.out.buffer, a.out.offset + a.ldc, a.n});
    inner_->write(View{a.out.buffer, a.out.offset, a.n}, second);
  }
  std::vector<Event> tile_events(int blocks) override { return inner_->tile_events(blocks); }
  void tiled_matmul(std::span<const std::vector<MatmulArgs>> b, std::span<const Event> e) override {
    std::vector<std::vector<MatmulArgs>> blocks(b.begin(), b.end());
    for (const auto& block : blocks) {
      tile_rows_.emplace_back();
      for (const MatmulArgs& a : block) tile_rows_.back().push_back(a.ldc > 0 ? a.out.offset / a.ldc : 0);
    }
    if (fault_ == Fault::throw_in_tile && world_rank() == rank_ && !blocks.empty() && !blocks.back().empty())
      blocks.back().front().out.offset = inner_->size_of(blocks.back().front().out.buffer);
    inner_->tiled_matmul(blocks, e);
  }
  // The first output row of each matmul of each tile block, in the order tiled_matmul was given them.
  [[nodiscard]] const std::vector<std::vector<std::int64_t>>& tile_rows() const { return tile_rows_; }
  void norm(View in, View out, bool across) override { inner_->norm(in, out, across); }
  void row_reduce(View in, View out, std::int64_t inner, ReduceOp op) override {
    inner_->row_reduce(in, out, inner, op);
  }
  void reduce_scatter(std::span<const View> p, View o, ReduceOp op) override { inner_->reduce_scatter(p, o, op); }
  void allgather(View in, std::span<const View> p) override { inner_->allgather(in, p); }
  void broadcast(View in, View out, int root) override { inner_->broadcast(in, out, root); }
  void reduce(View in, View out, ReduceOp op, int root) override { inner_->reduce(in, out, op, root); }
  void alltoall(std::span<const Block2d> s, std::span<const Block2d> r) override {
    inner_->alltoall(s, r);
    if (fault_ != Fault::perturb_alltoall || world_rank() != rank_) return;
    for (const Block2d& b : r)
      if (b.count() > 0) {
        const View first{b.buffer, b.offset, 1};
        auto v = inner_->read(first);
        v[0] += 1.0;
        inner_->write(first, v);
        return;
      }
  }
  void send(View in, int peer) override { inner_->send(in, peer); }
  void recv(View out, int peer) override { inner_->recv(out, peer); }
  void barrier() override {
    inner_->barrier();
    if (fault_ == Fault::late_and_slow && world_rank() == rank_)
      std::this_thread::sleep_for(std::chrono::milliseconds(kSlowKernelMs));
  }
  void host_allreduce(std::span<double> v, ReduceOp op) override { inner_->host_allreduce(v, op); }
  [[noreturn]] void abort_job(int code) override {
    inner_->abort_job(code);
    std::abort();  // not reached: a virtual call does not carry [[noreturn]]
  }

  void elementwise(const model::ElementwiseProgram& p, std::span<const Operand> in, std::span<const Operand> out,
                   const model::Block& block, StreamKind stream) override {
    inner_->elementwise(p, in, out, block, stream);
    if ((fault_ == Fault::slow_kernels || fault_ == Fault::late_and_slow) && world_rank() == rank_) {
      inner_->synchronize();
      std::this_thread::sleep_for(std::chrono::milliseconds(kSlowKernelMs));
    }
    if (fault_ != Fault::perturb || world_rank() != rank_ || calls_++ != kernel_ || out.empty()) return;
    const View first{out[0].buffer, out[0].access.at(0, 0), 1};
    auto v = inner_->read(first);
    v[0] += 1.0;
    inner_->write(first, v);
  }

  void allreduce(View in, View out, ReduceOp op) override {
    if (world_rank() == rank_) {
      if (fault_ == Fault::throw_error) throw std::runtime_error("injected failure in allreduce");
      if (fault_ == Fault::die) std::raise(SIGKILL);
      if (fault_ == Fault::hang)
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    inner_->allreduce(in, out, op);
  }

 private:
  std::unique_ptr<Backend> inner_;
  Fault fault_;
  int rank_;
  int kernel_;
  int calls_ = 0;
  std::vector<std::vector<std::int64_t>> tile_rows_;
};

}  // namespace coconet::exec::testing
