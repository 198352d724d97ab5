// The cuda backend through the runtime, one rank: every workload of
// workloads/ at small (ragged) sizes, every enumerated schedule, verified
// against the unscheduled program and the reference interpreter. And the
// fused RS+Adam+AG, both paths, against the plain Adam kernel. Skipped, with
// the reason, without a GPU.
#include <gtest/gtest.h>

#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>

#include "exec/backend.h"
#include "exec/cuda/nccl_bootstrap.h"
#include "exec/mpi_session.h"
#include "exec/runtime.h"
#include "../mpi/gpu_check_sizes.h"
#include "../mpi/perturbing_backend.h"
#include "gpu_test_util.h"
#include "kernels/cuda/fused_allreduce.h"
#include "model/catalog.h"
#include "model/error.h"
#include "model/enumerate.h"
#include "model/input_pattern.h"
#include "model/parse.h"

namespace coconet::gpu_test {
namespace {

namespace kc = kernels::cuda;

// Small sizes: ragged where a size is cut across ranks.
model::Bindings small_sizes(const model::Program& p) {
  const std::map<std::string, std::int64_t> small{{"N", 4099}, {"B", 2}, {"S", 16}, {"H", 64}};
  model::Bindings b;
  for (const auto& [name, value] : p.params) {
    const auto it = small.find(name);
    b[name] = it != small.end() ? it->second : std::min<std::int64_t>(value, 64);
  }
  return p.bind(b);
}

exec::Backend& backend() {
  static std::unique_ptr<exec::Backend> b = exec::make_backend("cuda");
  return *b;
}

// Every file the GPU tests read comes through the runtime data root
// (model::data_root(): COCONET_ROOT, which gpu-check.sh sets to the checkout
// it runs from), never a path of the build machine: on the GPU machine the
// checkout is elsewhere.
model::Program alltoall_workload() {
  return model::load_program(model::data_root() + "/tests/workloads/alltoall_ulysses.yaml");
}

// gpu-check.sh's sizes and interpreter limit for the Megatron blocks.
struct GpuCheckSetup {
  model::Bindings sizes;
  std::int64_t interpreter_limit = 0;
};
GpuCheckSetup gpu_check_setup(const model::Program& p) {
  return {exec::testing::gpu_check_megatron_sizes(p, model::data_root()),
          exec::testing::gpu_check_interpreter_limit(model::data_root())};
}

constexpr const char* kMegatronBlocks[] = {"megatron_mlp", "megatron_attention"};

// No GPU needed: the dry run of gpu-check.sh runs it from a copy of the
// checkout with the build's own hidden, as the GPU machine will.
TEST(GpuData, TheGpuTestsFindTheirFilesThroughTheDataRoot) {
  EXPECT_EQ(alltoall_workload().name, "alltoall_ulysses");
  for (const char* w : kMegatronBlocks) {
    const model::Program p = model::load_program(model::resolve_workload(w));
    const GpuCheckSetup s = gpu_check_setup(p);
    EXPECT_GT(s.interpreter_limit, 0) << w;
    EXPECT_FALSE(s.sizes.empty()) << w;
  }
}

class CudaRuntime : public GpuTest, public ::testing::WithParamInterface<std::string> {};

void expect_every_schedule_verifies(const model::Program& p, exec::Backend& b = backend()) {
  if (p.groups() > b.world_size())
    COCONET_EXPECTED_SKIP(p.name + " spans " + std::to_string(p.groups()) + " process groups; one rank runs one");
  b.set_groups(p.groups());
  const model::Bindings sizes = small_sizes(p);
  exec::RunOptions options;
  options.iters = 2;
  options.warmup = 1;
  const exec::References refs = exec::compute_references(b, p, sizes, options);
  for (const model::Schedule& s : model::enumerate_schedules(p)) {
    const exec::RunRow row = exec::run_schedule(b, s, sizes, refs, options);
    EXPECT_TRUE(row.verified) << s.name() << ": " << row.mismatch;
    EXPECT_GT(row.median_us, 0.0) << s.name();
  }
}

TEST_P(CudaRuntime, EveryScheduleOfTheWorkloadVerifies) {
  expect_every_schedule_verifies(model::load_program(model::resolve_workload(GetParam())));
}

// The fused ops that take the single LSA kernel by default (adam, sgd: see
// exec/cuda/lsa_fused_call.h) verify on the host path too: a backend made
// with COCONET_FUSED_LSA=0 runs them as NCCL host calls per piece.
TEST_F(GpuTest, FusedOpsVerifyOnTheHostPathToo) {
  ASSERT_EQ(setenv("COCONET_FUSED_LSA", "0", 1), 0);
  {
    const std::unique_ptr<exec::Backend> host_path = exec::make_backend("cuda");
    for (const char* w : {"adam", "sgd"})
      expect_every_schedule_verifies(model::load_program(model::resolve_workload(w)), *host_path);
  }
  ASSERT_EQ(unsetenv("COCONET_FUSED_LSA"), 0);
}

// The tests-only alltoall workload (issue 16): packed blocks through NCCL
// grouped sends and receives (on one rank: its own block).
TEST_F(GpuTest, AlltoallWorkloadVerifies) {
  expect_every_schedule_verifies(alltoall_workload());
}

// allreduce(mean) through ncclAvg (tests/workloads/adam_mean.yaml): every
// schedule, its mean split into a reduce-scatter of means and fused, verifies
// against the program and the interpreter (whose mean is the sum over the ranks).
TEST_F(GpuTest, MeanWorkloadVerifies) {
  expect_every_schedule_verifies(model::load_program(model::data_root() + "/tests/workloads/adam_mean.yaml"));
}

// Outside mpirun the backend is one rank on GPU 0 and never starts MPI (the
// GPU machine has no MPI that could start).
TEST_F(GpuTest, OneRankWithoutMpiOutsideMpirun) {
  if (exec::launched_by_mpirun()) COCONET_EXPECTED_SKIP("started by mpirun: the MPI bootstrap is the right one");
  EXPECT_EQ(backend().world_size(), 1);
  EXPECT_EQ(backend().world_rank(), 0);
  EXPECT_FALSE(exec::cuda::mpi_initialised());
  EXPECT_THROW(backend().set_groups(2), UserError);
  backend().set_groups(1);
}

// Stage times come from device events: a region with no work takes far less
// than the host's 50 us polling interval, a region with work takes longer.
TEST_F(GpuTest, TimersMeasureTheDeviceWork) {
  exec::Backend& b = backend();
  b.set_groups(1);
  const double empty = b.elapsed_us(b.start_timer());
  EXPECT_GE(empty, 0.0);
  EXPECT_LT(empty, 50.0);
  const exec::BufferId x = b.allocate(model::DType::f32, std::int64_t{1} << 26);
  const exec::BufferId y = b.allocate(model::DType::f32, std::int64_t{1} << 26);
  const double mark = b.start_timer();
  for (int i = 0; i < 4; ++i) b.copy({y, 0, std::int64_t{1} << 26}, {x, 0, std::int64_t{1} << 26});
  EXPECT_GT(b.elapsed_us(mark), empty);
  b.release_all();
}

// A buffer filled the moment it is allocated keeps the fill: its zeroing is
// ordered before the compute stream's work (on the legacy default stream it
// was not, and the zeros could land after the fill). Large buffers, so that
// the zeroing takes long enough to race; every filled value is in [1, 4].
TEST_F(GpuTest, AFillRightAfterAllocateIsNotOverwrittenByTheZeroing) {
  exec::Backend& b = backend();
  b.set_groups(1);
  constexpr std::int64_t kCount = std::int64_t{1} << 26;  // 256 MiB of f32
  for (int round = 0; round < 4; ++round) {
    const exec::BufferId x = b.allocate(model::DType::f32, kCount);
    model::InputPattern pattern;
    pattern.key = model::input_key(7, round);
    pattern.cols = pattern.local_cols = kCount;
    b.fill_input({x, 0, kCount}, pattern);
    const std::vector<double> got = b.read({x, 0, kCount});
    const auto zeros = std::count(got.begin(), got.end(), 0.0);
    EXPECT_EQ(zeros, 0) << "round " << round << ": " << zeros << " of " << kCount << " elements zeroed after the fill";
    b.release_all();
  }
}

// A GEMM that reads the wrong row of its left operand, run as gpu-check.sh
// runs the Megatron blocks (its sizes and interpreter limit): the unscheduled
// program on the GPU shares it with every schedule, so only the interpreter
// can catch it, and does; without the fault the same run verifies.
TEST_F(GpuTest, WrongGemmAtTheGpuCheckSizesIsCaughtByTheInterpreter) {
  for (const std::string w : kMegatronBlocks) {
    const model::Program p = model::load_program(model::resolve_workload(w));
    const GpuCheckSetup setup = gpu_check_setup(p);
    const model::Bindings& sizes = setup.sizes;
    exec::RunOptions options;
    options.iters = 1;
    options.warmup = 0;
    options.interpreter_limit = setup.interpreter_limit;
    const auto [clean, wrong] = exec::testing::wrong_gemm_verdicts("cuda", p, sizes, options);
    EXPECT_TRUE(clean.ok) << w << ": " << clean.first_mismatch;
    EXPECT_FALSE(wrong.ok) << w;
  }
}

// Inputs generated on the device equal the interpreter's, in every storage
// type, for a block in the middle of a wider tensor.
TEST_F(GpuTest, DeviceInputFillEqualsTheHostPattern) {
  exec::Backend& b = backend();
  b.set_groups(1);
  model::InputPattern pattern;
  pattern.key = model::input_key(5, 2);
  pattern.row_begin = 3;
  pattern.col_begin = 7;
  pattern.cols = 1000;
  pattern.local_cols = 333;
  const std::int64_t n = 333 * 41;
  for (const bool local : {false, true})
    for (const auto dtype : {model::DType::f16, model::DType::bf16, model::DType::f32}) {
      pattern.local = local;
      const exec::BufferId id = b.allocate(dtype, n);
      b.fill_input({id, 0, n}, pattern);
      const std::vector<double> got = b.read({id, 0, n});
      for (std::int64_t i = 0; i < n; ++i)
        ASSERT_EQ(got[static_cast<std::size_t>(i)], model::input_at(pattern, i)) << "element " << i;
    }
  b.release_all();
}

INSTANTIATE_TEST_SUITE_P(Workloads, CudaRuntime,
                         ::testing::Values("adam", "lamb", "sgd", "megatron_mlp",
                                           "megatron_attention", "gpt3_pipeline", "transformer_layer"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

class FusedAllreduce : public GpuTest {};

TEST_F(FusedAllreduce, BothPathsMatchPlainAdamOnOneRank) {
  int device = 0;
  COCONET_CUDA_CHECK(cudaGetDevice(&device));
  ncclComm_t comm = nullptr;
  COCONET_NCCL_CHECK(ncclCommInitAll(&comm, 1, &device));
  const kc::AdamHyper h;
  for (std::int64_t n : {std::int64_t{4099}, std::int64_t{1} << 20}) {
    const auto g = random_values(n, -1, 1, DType::f16, 11), w = random_values(n, -1, 1, DType::f32, 12);
    const auto m = random_values(n, -0.1, 0.1, DType::f32, 13), v = random_values(n, 0.01, 1, DType::f32, 14);
    DeviceArray pg(g, DType::f16), pw(w, DType::f32), pm(m, DType::f32), pv(v, DType::f32);
    kc::adam_step({pg.view(), pw.view(), pm.view(), pv.view()}, h, nullptr);
    const auto expected = pw.read();

    DeviceArray hg(g, DType::f16), hw(w, DType::f32), hm(m, DType::f32), hv(v, DType::f32);
    DeviceArray scratch(std::vector<double>(n, 0.0), DType::f16);
    kc::fused_adam_host(comm, 0, 1, {hg.view(), hw.view(), hm.view(), hv.view(), h}, scratch.view(),
                        nullptr);
    EXPECT_TRUE(close(hw.read(), expected, 1e-6)) << "host path, n=" << n;

    std::string why;
    auto lsa = kc::make_lsa_comm(comm, why);
    if (!lsa) {
      // Another NCCL minor version than the headers': the host path above is
      // the one that runs (recorded, not a failure).
      if (std::string version; !kc::lsa_runtime_supported(version))
        RecordProperty("lsa_path_off", version);
      else
        ADD_FAILURE() << "the LSA path is unavailable on one GPU: " << why;
      continue;
    }
    kc::SymmetricBuffer sg(comm, DType::f16, n), sw(comm, DType::f32, n);
    const auto g_bytes = exec::cuda::encode(g, DType::f16), w_bytes = exec::cuda::encode(w, DType::f32);
    COCONET_CUDA_CHECK(cudaMemcpy(sg.view().data, g_bytes.data(), g_bytes.size(), cudaMemcpyHostToDevice));
    COCONET_CUDA_CHECK(cudaMemcpy(sw.view().data, w_bytes.data(), w_bytes.size(), cudaMemcpyHostToDevice));
    DeviceArray lm(m, DType::f32), lv(v, DType::f32);
    kc::fused_adam_lsa(*lsa, sg, sw, {sg.view(), sw.view(), lm.view(), lv.view(), h}, nullptr);
    COCONET_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<std::uint8_t> out(w_bytes.size());
    COCONET_CUDA_CHECK(cudaMemcpy(out.data(), sw.view().data, out.size(), cudaMemcpyDeviceToHost));
    EXPECT_TRUE(close(exec::cuda::decode(out, DType::f32, n), expected, 1e-6)) << "lsa path, n=" << n;
  }
  (void)ncclCommDestroy(comm);
}

}  // namespace
}  // namespace coconet::gpu_test
