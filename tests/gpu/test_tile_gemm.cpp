// The cuda backend's overlap: tile on one GPU: the project's tiled GEMM
// (kernels/cuda/tile_gemm.h) against a CPU reference and cuBLAS, exactly on
// integers, in every storage type, with its blocks' flags at their targets
// afterwards; and megatron_mlp's tile schedules against their chunk
// schedules through the runtime on one rank (an LSA team of one: the
// communication kernel reads its own window), both verified against the
// unscheduled program and the reference interpreter. Skipped, with the
// reason, without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "exec/mpi_session.h"
#include "exec/runtime.h"
#include "gpu_test_util.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/tile_gemm.h"
#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/parse.h"

namespace coconet::gpu_test {
namespace {

namespace kc = kernels::cuda;

class TileGemm : public GpuTest {};

// Device flags of a tile unit, read back after the kernels.
class DeviceFlags {
 public:
  DeviceFlags() { COCONET_CUDA_CHECK(cudaMalloc(&flags_, sizeof(unsigned) * kc::kTileFlagWords)); }
  ~DeviceFlags() { (void)cudaFree(flags_); }
  DeviceFlags(const DeviceFlags&) = delete;
  DeviceFlags& operator=(const DeviceFlags&) = delete;
  [[nodiscard]] unsigned* data() const { return flags_; }
  [[nodiscard]] std::vector<unsigned> read() const {
    std::vector<unsigned> out(kc::kTileFlagWords);
    COCONET_CUDA_CHECK(cudaDeviceSynchronize());
    COCONET_CUDA_CHECK(
        cudaMemcpy(out.data(), flags_, sizeof(unsigned) * out.size(), cudaMemcpyDeviceToHost));
    return out;
  }

 private:
  unsigned* flags_ = nullptr;
};

// m x k times k x n of small integers: every product and sum exact in f32,
// and every result (at most 6 * k = 240) exact in f16 and bf16.
struct IntegerGemm {
  std::int64_t m = 300, n = 130,
               k = 40;  // ragged in every dimension: 64-row, 64-column and 32-deep tiles
  std::vector<double> a, b, c;
  IntegerGemm() : a(m * k), b(k * n), c(m * n, 0.0) {
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<double>(i % 7) - 3;
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<double>(i % 5) - 2;
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t p = 0; p < k; ++p) c[i * n + j] += a[i * k + p] * b[p * n + j];
  }
  // Rows cut into 3 blocks, each of 2 runs given in a rotated (ring) order.
  [[nodiscard]] std::vector<std::vector<kc::TileRows>> blocks() const {
    const auto run = [&](std::int64_t first, std::int64_t rows) {
      return kc::TileRows{first * k, first * n, rows};
    };
    return {{run(50, 50), run(0, 50)}, {run(150, 50), run(100, 50)}, {run(250, 50), run(200, 50)}};
  }
};

// Shown to fail on a GPU: with one run left out of the plan (below), its
// rows stay zero and the comparison names the first.
TEST_F(TileGemm, EqualsTheReferenceAndCublasExactlyOnIntegersInEveryDtype) {
  const IntegerGemm x;
  kc::Blas blas;
  for (DType t : {DType::f16, DType::bf16, DType::f32}) {
    DeviceArray da(x.a, t), db(x.b, t), c(std::vector<double>(x.m * x.n, 0.0), t),
        window(std::vector<double>(x.m * x.n, 0.0), t),
        cublas(std::vector<double>(x.m * x.n, 0.0), t);
    const kc::TileGemmPlan plan = kc::plan_tile_gemm(x.blocks(), x.n);
    DeviceFlags flags;
    kc::reset_tile_flags(flags.data(), nullptr);
    kc::TileGemmArgs g{da.data(), db.data(), c.data(), window.data(), t,  t,
                       x.n,       x.k,       x.k,      x.n,           x.n};
    kc::tile_gemm(g, plan, flags.data(), nullptr);
    EXPECT_TRUE(close(c.read(), x.c, 0.0)) << model::to_string(t);
    EXPECT_TRUE(close(window.read(), x.c, 0.0)) << model::to_string(t) << " (the window's copy)";
    const std::vector<unsigned> f = flags.read();
    for (std::size_t b = 0; b < plan.block_tiles.size(); ++b)
      EXPECT_EQ(f[b], static_cast<unsigned>(plan.block_tiles[b]))
          << model::to_string(t) << " block " << b;
    EXPECT_GE(f[kc::kMaxTileBlocks],
              static_cast<unsigned>(plan.total_tiles));  // every ticket was taken
    kc::GemmArgs cb{da.data(), db.data(), cublas.data(), t, t, x.m, x.n, x.k, x.k, x.n, x.n};
    kc::gemm(blas, cb, nullptr);
    EXPECT_TRUE(close(c.read(), cublas.read(), 0.0)) << model::to_string(t) << " against cuBLAS";
  }
  // The comparison can fail: a plan without block 1's second run.
  auto partial = x.blocks();
  partial[1].pop_back();
  DeviceArray da(x.a, DType::f16), db(x.b, DType::f16),
      c(std::vector<double>(x.m * x.n, 0.0), DType::f16);
  DeviceFlags flags;
  kc::reset_tile_flags(flags.data(), nullptr);
  kc::TileGemmArgs g{da.data(), db.data(), c.data(), nullptr, DType::f16, DType::f16,
                     x.n,       x.k,       x.k,      x.n,     x.n};
  kc::tile_gemm(g, kc::plan_tile_gemm(partial, x.n), flags.data(), nullptr);
  EXPECT_FALSE(close(c.read(), x.c, 0.0));
}

// Random values (not integers): within the f32 accumulation's rounding of
// the same sums in another order, and the storage type's half ulp.
TEST_F(TileGemm, RandomValuesWithinTheStorageTolerance) {
  const std::int64_t m = 129, n = 65, k = 257;
  for (DType t : {DType::f16, DType::bf16, DType::f32}) {
    const auto a = random_values(m * k, -1, 1, t, 7), b = random_values(k * n, -1, 1, t, 8);
    std::vector<double> ref(m * n, 0.0);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t p = 0; p < k; ++p) ref[i * n + j] += a[i * k + p] * b[p * n + j];
    DeviceArray da(a, t), db(b, t), c(std::vector<double>(m * n, 0.0), t);
    const std::vector<std::vector<kc::TileRows>> one{{{0, 0, m}}};
    DeviceFlags flags;
    kc::reset_tile_flags(flags.data(), nullptr);
    kc::TileGemmArgs g{da.data(), db.data(), c.data(), nullptr, t, t, n, k, k, n, n};
    kc::tile_gemm(g, kc::plan_tile_gemm(one, n), flags.data(), nullptr);
    // f32 accumulation in another order than the double reference (errors of
    // order sqrt(k) 2^-24 |ref|), then one rounding to t.
    EXPECT_TRUE(close(c.read(), ref, tolerance(t) + 1e-4)) << model::to_string(t);
  }
}

exec::Backend& tile_backend() {
  static std::unique_ptr<exec::Backend> b = exec::make_backend("cuda");
  return *b;
}

// megatron_mlp's ol(MM,RS)-C-AG and ol(MM,AR)-C, 4 chunks, with overlap:
// chunk and tile on backend `b`, every rank of its job: both grains verified
// against the unscheduled program and the reference interpreter (small sizes).
void expect_tile_verifies_like_chunk(exec::Backend& b) {
  b.set_groups(1);
  const model::Program p = model::load_program(model::resolve_workload("megatron_mlp"));
  const model::Bindings sizes =
      p.bind({{"B", 2}, {"S", 100}, {"H", 96}});  // 200 rows: ragged 64-row tiles
  exec::RunOptions options;
  options.iters = 2;
  options.warmup = 1;
  const exec::References refs = exec::compute_references(b, p, sizes, options);
  ASSERT_TRUE(refs.interpreter.has_value()) << "sizes past the interpreter's limit";
  int ran = 0;
  for (model::Schedule s : model::enumerate_schedules(p)) {
    if (s.name() != "ol(MM,RS)-C-AG" && s.name() != "ol(MM,AR)-C") continue;
    s.knobs.chunks = 4;
    for (model::Grain g : {model::Grain::chunk, model::Grain::tile}) {
      s.knobs.overlap = g;
      const exec::RunRow row = exec::run_schedule(b, s, sizes, refs, options);
      EXPECT_TRUE(row.verified) << s.name() << " " << model::to_string(g) << ": " << row.mismatch;
      EXPECT_EQ(row.checked_against, "program+interpreter")
          << s.name() << " " << model::to_string(g);
      ++ran;
    }
  }
  EXPECT_EQ(ran, 4);
}

// tile against chunk on one GPU (a loopback LSA team of one).
TEST_F(TileGemm, TileSchedulesVerifyLikeTheirChunkSchedulesOnOneRank) {
  if (exec::launched_by_mpirun())
    GTEST_SKIP() << "under mpirun: GpuTest.TileSchedulesVerifyOverEveryRankUnderMpirun";
  exec::Backend& b = tile_backend();
  const plan::Capabilities caps = b.capabilities();
  if (!caps.tile_overlap)
    FAIL() << "the cuda backend refuses tiles on one GPU: " << caps.no_tile_reason;
  expect_tile_verifies_like_chunk(b);
}

// The same over every rank of one node under mpirun (2 GPUs or more): the
// communication kernel reads its peers' windows and reduces across them.
TEST_F(GpuTest, TileSchedulesVerifyOverEveryRankUnderMpirun) {
  if (!exec::launched_by_mpirun())
    COCONET_EXPECTED_SKIP(
        "not started by mpirun: one rank is "
        "TileGemm.TileSchedulesVerifyLikeTheirChunkSchedulesOnOneRank");
  exec::Backend& b = tile_backend();
  if (b.world_size() < 2) COCONET_EXPECTED_SKIP("one rank: covered by TileGemm.*");
  const plan::Capabilities caps = b.capabilities();
  if (!caps.tile_overlap)
    COCONET_EXPECTED_SKIP("the backend refuses tiles here: " + caps.no_tile_reason);
  expect_tile_verifies_like_chunk(b);
}

}  // namespace
}  // namespace coconet::gpu_test
