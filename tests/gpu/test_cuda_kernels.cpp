// Every CUDA kernel of coconet against a CPU reference (double precision,
// the workloads' formulas) on random data at several sizes, ragged and
// misaligned ones included. Skipped, with the reason, without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "gpu_test_util.h"
#include "kernels/cuda/alltoall.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/epilogue.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/optimizer.h"
#include "model/ops.h"
#include "model/parse.h"

namespace coconet::gpu_test {
namespace {

namespace kc = kernels::cuda;

// Sizes: tiny, below and at one vector, ragged, one not a multiple of 8, large.
const std::vector<std::int64_t> kSizes{1, 7, 8, 1000, 4099, (1 << 20) + 3};

struct Adam {
  std::vector<double> g, w, m, v;
};

Adam adam_inputs(std::int64_t n, DType gt, DType st) {
  return {random_values(n, -1, 1, gt, 1), random_values(n, -1, 1, st, 2),
          random_values(n, -0.1, 0.1, st, 3), random_values(n, 0.01, 1, st, 4)};
}

// workloads/adam.yaml in double.
void adam_reference(Adam& a, const kc::AdamHyper& h) {
  for (std::size_t i = 0; i < a.g.size(); ++i) {
    a.m[i] = h.beta1 * a.m[i] + (1 - h.beta1) * a.g[i];
    a.v[i] = h.beta2 * a.v[i] + (1 - h.beta2) * a.g[i] * a.g[i];
    a.w[i] = a.w[i] - h.lr * a.m[i] / (std::sqrt(a.v[i]) + h.eps);
  }
}

// workloads/lamb.yaml in double.
void lamb_reference(Adam& a, const kc::LambHyper& h) {
  double sw = 0, su = 0;
  std::vector<double> u(a.g.size());
  for (std::size_t i = 0; i < a.g.size(); ++i) {
    a.m[i] = h.beta1 * a.m[i] + (1 - h.beta1) * a.g[i];
    a.v[i] = h.beta2 * a.v[i] + (1 - h.beta2) * a.g[i] * a.g[i];
    u[i] = a.m[i] / (std::sqrt(a.v[i]) + h.eps) + h.wd * a.w[i];
    sw += a.w[i] * a.w[i];
    su += u[i] * u[i];
  }
  const double ratio = std::sqrt(sw) / std::sqrt(su);
  for (std::size_t i = 0; i < a.g.size(); ++i) a.w[i] -= h.lr * ratio * u[i];
}

struct DeviceAdam {
  DeviceArray g, w, m, v;
  DeviceAdam(const Adam& a, DType gt, DType st, int offset)
      : g(a.g, gt, offset), w(a.w, st, offset), m(a.m, st, offset), v(a.v, st, offset) {}
  [[nodiscard]] kc::OptimizerShard shard() const { return {g.view(), w.view(), m.view(), v.view()}; }
};

class CudaKernels : public GpuTest {};

TEST_F(CudaKernels, AdamFusedAndUnfusedMatchTheReference) {
  const kc::AdamHyper h;
  for (auto [gt, st] : {std::pair{DType::f16, DType::f32}, std::pair{DType::bf16, DType::f32},
                        std::pair{DType::f32, DType::f32}, std::pair{DType::f16, DType::f16}}) {
    for (std::int64_t n : kSizes) {
      for (int offset : {0, 1}) {
        Adam ref = adam_inputs(n, gt, st);
        DeviceAdam fused(ref, gt, st, offset), unfused(ref, gt, st, offset);
        kc::adam_step(fused.shard(), h, nullptr);
        kc::adam_step_unfused(unfused.shard(), h, nullptr);
        adam_reference(ref, h);
        const double tol = tolerance(st);
        SCOPED_TRACE(::testing::Message() << "n=" << n << " offset=" << offset);
        EXPECT_TRUE(close(fused.w.read(), ref.w, tol));
        EXPECT_TRUE(close(fused.m.read(), ref.m, tol));
        EXPECT_TRUE(close(fused.v.read(), ref.v, tol));
        EXPECT_TRUE(close(unfused.w.read(), ref.w, tol));
      }
    }
  }
}

TEST_F(CudaKernels, AdamVerifierCanFail) {
  // A wrong learning rate must be caught by the same comparison.
  Adam ref = adam_inputs(4099, DType::f16, DType::f32);
  DeviceAdam d(ref, DType::f16, DType::f32, 0);
  kc::AdamHyper wrong;
  wrong.lr *= 2;
  kc::adam_step(d.shard(), wrong, nullptr);
  adam_reference(ref, kc::AdamHyper{});
  EXPECT_FALSE(close(d.w.read(), ref.w, tolerance(DType::f32)));
}

TEST_F(CudaKernels, LambMatchesTheReference) {
  const kc::LambHyper h;
  void* ws = nullptr;
  COCONET_CUDA_CHECK(cudaMalloc(&ws, kc::lamb_workspace_bytes()));
  for (auto st : {DType::f32, DType::bf16}) {
    for (std::int64_t n : kSizes) {
      for (int offset : {0, 1}) {
        Adam ref = adam_inputs(n, DType::f16, st);
        DeviceAdam d(ref, DType::f16, st, offset);
        kc::lamb_step(d.shard(), h, static_cast<double*>(ws), nullptr);
        lamb_reference(ref, h);
        SCOPED_TRACE(::testing::Message() << "n=" << n << " offset=" << offset);
        EXPECT_TRUE(close(d.w.read(), ref.w, tolerance(st)));
        EXPECT_TRUE(close(d.m.read(), ref.m, tolerance(st)));
      }
    }
  }
  (void)cudaFree(ws);
}

TEST_F(CudaKernels, NormIsTheRootOfTheSumOfSquares) {
  void* ws = nullptr;
  COCONET_CUDA_CHECK(cudaMalloc(&ws, kc::kNormWorkspaceDoubles * sizeof(double)));
  for (std::int64_t n : kSizes) {
    const auto x = random_values(n, -2, 2, DType::f16, 5);
    double sum = 0;
    for (double v : x) sum += v * v;
    DeviceArray dx(x, DType::f16), out(std::vector<double>{0.0}, DType::f32);
    kc::sum_of_squares(dx.view(), static_cast<double*>(ws), nullptr);
    kc::sqrt_into(static_cast<double*>(ws), out.view(), nullptr);
    EXPECT_TRUE(close(out.read(), {std::sqrt(sum)}, 1e-5)) << "n=" << n;
  }
  (void)cudaFree(ws);
}

TEST_F(CudaKernels, BiasDropoutResidualUsesTheCpuMask) {
  constexpr float kP = 0.1f;
  constexpr std::uint64_t kSeed = 42;
  for (auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{3, 8}, {5, 7}, {64, 3072}}) {
    for (DType t : {DType::f16, DType::f32}) {
      const std::int64_t n = rows * cols, first_row = 11;
      const auto z = random_values(n, -1, 1, t, 6), r = random_values(n, -1, 1, t, 7);
      const auto b = random_values(cols, -1, 1, t, 8);
      std::vector<double> expected(static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i) {
        const auto gi = static_cast<std::uint64_t>(first_row * cols + i);
        const float x = static_cast<float>(z[i] + b[i % cols]);
        expected[i] = static_cast<double>(model::dropout(x, kP, kSeed, gi)) + r[i];
      }
      DeviceArray dz(z, t), db(b, t), dr(r, t), out(std::vector<double>(n, 0.0), t);
      kc::EpilogueArgs a{dz.view(), db.view(), dr.view(), out.view(), rows, cols, first_row, kP, kSeed};
      kc::bias_dropout_residual(a, nullptr);
      EXPECT_TRUE(close(out.read(), expected, tolerance(t))) << rows << "x" << cols;
    }
  }
}

TEST_F(CudaKernels, GenericElementwiseRunsThePostfixProgram) {
  using model::ElementwiseStmt;
  const std::vector<model::ElementwiseStmt> stmts{
      {"y", model::parse_expr("x * x + 3 * b - 1"), DType::f32},
      {"z", model::parse_expr("dropout(y, 0.5) + x"), DType::f16}};
  const auto prog = model::compile_elementwise(stmts, {{"x", DType::f16}, {"b", DType::f32}}, {});
  for (std::int64_t n : kSizes) {
    const auto x = random_values(n, -4, 4, DType::f16, 9);
    const auto b = random_values(n, -4, 4, DType::f32, 10);
    DeviceArray dx(x, DType::f16), dbv(b, DType::f32);
    DeviceArray y(std::vector<double>(n, 0.0), DType::f32), z(std::vector<double>(n, 0.0), DType::f16);
    std::vector<kc::ElementwiseOperand> ins(prog.input_names.size()), outs(2);
    for (std::size_t k = 0; k < ins.size(); ++k) {
      const bool is_x = prog.input_names[k] == "x";
      ins[k] = {is_x ? dx.data() : dbv.data(), prog.input_types[k], {0, 1, 0}};
    }
    outs[0] = {y.data(), DType::f32, {0, 1, 0}};
    outs[1] = {z.data(), DType::f16, {0, 1, 0}};
    model::Block block{n, 1, 0, 0, 1};
    kc::elementwise(prog, ins, outs, block, nullptr);
    // The CPU reference: the same program, one element at a time.
    std::vector<double> ey(n), ez(n);
    for (std::int64_t i = 0; i < n; ++i) {
      float out[model::kMaxOutputs];
      auto load = [&](int slot) {
        return static_cast<float>(prog.input_names[slot] == "x" ? x[i] : b[i]);
      };
      model::eval_element(prog.code.data(), static_cast<int>(prog.code.size()),
                            prog.output_types.data(), load, static_cast<std::uint64_t>(i), out);
      ey[i] = out[0];
      ez[i] = out[1];
    }
    EXPECT_TRUE(close(y.read(), ey, 1e-6)) << "n=" << n;
    EXPECT_TRUE(close(z.read(), ez, 1e-3)) << "n=" << n;
  }
}

// The vector path: one row of n contiguous elements, every operand at the
// same element offset (a scalar head aligns them all to 16 bytes) or at
// different ones (no head aligns f16 and f32 alike: the scalar path), ragged
// tails included, against the program evaluated on the host.
TEST_F(CudaKernels, GenericElementwiseVectorPathAtEveryAlignment) {
  using model::ElementwiseStmt;
  const std::vector<model::ElementwiseStmt> stmts{
      {"y", model::parse_expr("select(x > 0, x * x, 0 - x) + b * 2"), DType::f32},
      {"z", model::parse_expr("dropout(y, 0.25) - b"), DType::f16}};
  const auto prog = model::compile_elementwise(stmts, {{"x", DType::f16}, {"b", DType::f32}}, {});
  for (std::int64_t n : {std::int64_t{5}, std::int64_t{64}, std::int64_t{1003}})
    for (int xo = 0; xo < 9; ++xo)
      for (int bo : {xo, xo + 1}) {
        const auto x = random_values(n, -4, 4, DType::f16, 11);
        const auto b = random_values(n, -4, 4, DType::f32, 12);
        DeviceArray dx(x, DType::f16, xo), db(b, DType::f32, bo);
        DeviceArray y(std::vector<double>(n, 0.0), DType::f32, xo), z(std::vector<double>(n, 0.0), DType::f16, xo);
        std::vector<kc::ElementwiseOperand> ins(prog.input_names.size());
        for (std::size_t k = 0; k < ins.size(); ++k)
          ins[k] = {prog.input_names[k] == "x" ? dx.data() : db.data(), prog.input_types[k], {0, n, 1}};
        const std::vector<kc::ElementwiseOperand> outs{{y.data(), DType::f32, {0, n, 1}},
                                                        {z.data(), DType::f16, {0, n, 1}}};
        kc::elementwise(prog, ins, outs, model::Block{1, n, 0, 0, n}, nullptr);
        std::vector<double> ey(n), ez(n);
        for (std::int64_t i = 0; i < n; ++i) {
          float out[model::kMaxOutputs];
          auto load = [&](int slot) { return static_cast<float>(prog.input_names[slot] == "x" ? x[i] : b[i]); };
          model::eval_element(prog.code.data(), static_cast<int>(prog.code.size()), prog.output_types.data(), load,
                                static_cast<std::uint64_t>(i), out);
          ey[i] = out[0];
          ez[i] = out[1];
        }
        EXPECT_TRUE(close(y.read(), ey, 1e-6)) << "n=" << n << " offsets " << xo << "," << bo;
        EXPECT_TRUE(close(z.read(), ez, 1e-3)) << "n=" << n << " offsets " << xo << "," << bo;
      }
}

TEST_F(CudaKernels, GemmAndChunkedGemmAreExactOnIntegers) {
  const std::int64_t m = 300, n = 72, k = 40;
  std::vector<double> a(m * k), b(k * n), c(m * n, 0.0);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<double>(i % 7) - 3;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<double>(i % 5) - 2;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t p = 0; p < k; ++p) c[i * n + j] += a[i * k + p] * b[p * n + j];
  kc::Blas blas;
  for (DType t : {DType::f16, DType::bf16, DType::f32}) {
    DeviceArray da(a, t), db(b, t), one(std::vector<double>(m * n, 0.0), t),
        chunked(std::vector<double>(m * n, 0.0), t);
    kc::GemmArgs g{da.data(), db.data(), one.data(), t, t, m, n, k, k, n, n};
    kc::gemm(blas, g, nullptr);
    EXPECT_TRUE(close(one.read(), c, 0.0));
    g.c = chunked.data();
    const auto plan = kc::chunk_rows(m, 4, 64);
    std::vector<cudaEvent_t> events(plan.size());
    for (auto& e : events) COCONET_CUDA_CHECK(cudaEventCreate(&e));
    int seen = 0;
    kc::chunked_gemm(blas, g, plan, nullptr, nullptr, events, [&](int, kc::Span1d) { ++seen; });
    EXPECT_EQ(seen, static_cast<int>(plan.size()));
    EXPECT_TRUE(close(chunked.read(), c, 0.0));
    for (auto& e : events) (void)cudaEventDestroy(e);
  }
}

// A batched matmul (issue 16): one strided batched cuBLAS call equals a GEMM
// per product, exactly on integers, for every storage type.
TEST_F(CudaKernels, StridedBatchedGemmIsExactOnIntegers) {
  const std::int64_t q = 5, m = 17, n = 9, k = 12;
  std::vector<double> a(q * m * k), b(q * k * n), c(q * m * n, 0.0);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<double>(i % 7) - 3;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<double>(i % 5) - 2;
  for (std::int64_t z = 0; z < q; ++z)
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t p = 0; p < k; ++p)
          c[(z * m + i) * n + j] += a[(z * m + i) * k + p] * b[(z * k + p) * n + j];
  kc::Blas blas;
  for (DType t : {DType::f16, DType::bf16, DType::f32}) {
    DeviceArray da(a, t), db(b, t), dc(std::vector<double>(q * m * n, 0.0), t);
    kc::GemmArgs g{da.data(), db.data(), dc.data(), t, t, m, n, k, k, n, n};
    g.batch = q;
    g.stride_a = m * k;
    g.stride_b = k * n;
    g.stride_c = m * n;
    kc::gemm(blas, g, nullptr);
    EXPECT_TRUE(close(dc.read(), c, 0.0)) << model::to_string(t);
  }
}

// The packed alltoall on one rank: its own block, strided on both sides,
// lands where the receiving block says (the exchange between ranks is the
// runtime test's, which runs every schedule of the alltoall workload).
TEST_F(CudaKernels, AlltoallMovesAStridedBlockOnOneRank) {
  int device = 0;
  COCONET_CUDA_CHECK(cudaGetDevice(&device));
  ncclComm_t comm = nullptr;
  COCONET_NCCL_CHECK(ncclCommInitAll(&comm, 1, &device));
  std::vector<double> x(6 * 5);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = double(i);
  DeviceArray dx(x, DType::f32), dy(std::vector<double>(4 * 3, -1.0), DType::f32);
  // Rows 1..4, columns 2..4 of x [6 x 5] into y [4 x 3].
  const kc::StridedBlock send{static_cast<float*>(dx.data()) + 1 * 5 + 2, 4, 3, 5};
  const kc::StridedBlock recv{dy.data(), 4, 3, 3};
  void* scratch = nullptr;
  COCONET_CUDA_CHECK(cudaMalloc(&scratch, kc::alltoall_scratch_bytes({&send, 1}, {&recv, 1}, DType::f32)));
  kc::alltoall(comm, {&send, 1}, {&recv, 1}, DType::f32, 0, scratch, nullptr);
  const auto y = dy.read();
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 3; ++j) EXPECT_EQ(y[i * 3 + j], x[(i + 1) * 5 + 2 + j]);
  (void)cudaFree(scratch);
  (void)ncclCommDestroy(comm);
}

}  // namespace
}  // namespace coconet::gpu_test
