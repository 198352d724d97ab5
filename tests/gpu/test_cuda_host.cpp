// The host-side parts of the cuda backend and kernels, tested on any machine
// that compiles them (no GPU needed): check macros and their messages, launch
// geometry, chunk plans, collective planning, fused-path choice, host
// conversions, the watchdog's deadline loop, argument validation, and the
// "no GPU" path of the backend factory.
#include <gtest/gtest.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cublas_v2.h>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "exec/cuda/cuda_backend.h"
#include "exec/cuda/host_convert.h"
#include "exec/cuda/nccl_bootstrap.h"
#include "exec/cuda/nccl_watchdog.h"
#include "gpu_test_util.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/collectives.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/epilogue.h"
#include "kernels/cuda/fused_allreduce.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/grid.h"
#include "kernels/cuda/optimizer.h"
#include "model/error.h"
#include "model/parse.h"
#include "model/types.h"

namespace ck = coconet::kernels;
namespace kc = coconet::kernels::cuda;
namespace ec = coconet::exec::cuda;
using coconet::UserError;
using coconet::model::DType;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CudaCheck, MessageNamesHostRankSiteAndError) {
  ck::set_error_rank(3);
  const std::string m = ck::failure_message("NCCL", "unhandled cuda error", {"ncclFoo(x)", "a.cpp", 42});
  EXPECT_TRUE(contains(m, "NCCL error on host "));
  EXPECT_TRUE(contains(m, "rank 3"));
  EXPECT_TRUE(contains(m, "a.cpp:42"));
  EXPECT_TRUE(contains(m, "ncclFoo(x)"));
  EXPECT_TRUE(contains(m, "unhandled cuda error"));
  ck::set_error_rank(-1);
  EXPECT_TRUE(contains(ck::failure_message("CUDA", "e", {"c", "f", 1}), "rank ?"));
}

TEST(CudaCheck, SuccessPassesAndFailureThrowsWithLibraryString) {
  EXPECT_NO_THROW(COCONET_CUDA_CHECK(cudaSuccess));
  EXPECT_NO_THROW(COCONET_NCCL_CHECK(ncclSuccess));
  EXPECT_NO_THROW(COCONET_CUBLAS_CHECK(CUBLAS_STATUS_SUCCESS));
  try {
    COCONET_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "a failing CUDA status must throw";
  } catch (const ck::DeviceError& e) {
    EXPECT_TRUE(contains(e.what(), cudaGetErrorString(cudaErrorInvalidValue)));
    EXPECT_TRUE(contains(e.what(), "test_cuda_host.cpp:"));
    EXPECT_TRUE(contains(e.what(), "cudaErrorInvalidValue"));
  }
  try {
    COCONET_NCCL_CHECK(ncclInvalidArgument);
    FAIL() << "a failing NCCL status must throw";
  } catch (const ck::DeviceError& e) {
    EXPECT_TRUE(contains(e.what(), ncclGetErrorString(ncclInvalidArgument)));
  }
  EXPECT_THROW(COCONET_CUBLAS_CHECK(CUBLAS_STATUS_INVALID_VALUE), ck::DeviceError);
  // A DeviceError is a failed run (CLI exit 1), not bad input.
  EXPECT_THROW(COCONET_CUDA_CHECK(cudaErrorMemoryAllocation), coconet::RunFailure);
  try {
    COCONET_CUDA_CHECK(cudaErrorMemoryAllocation);
  } catch (const std::exception& e) {
    EXPECT_EQ(coconet::exit_code_for(e), coconet::kExitRunFailed);
  }
}

TEST(CudaLaunch, ShardsMatchTheModelsSliceRule) {
  for (std::int64_t n : {0, 1, 7, 8, 9, 1000, 4099}) {
    for (int p : {1, 2, 3, 4, 8}) {
      std::int64_t next = 0;
      for (int r = 0; r < p; ++r) {
        const kc::Span1d s = kc::shard_of(n, p, r);
        const coconet::model::Extent e = coconet::model::slice_extent(n, p, r);
        EXPECT_EQ(s.begin, e.begin) << n << " " << p << " " << r;
        EXPECT_EQ(s.size, e.size) << n << " " << p << " " << r;
        EXPECT_EQ(s.begin, next);
        next = s.begin + s.size;
      }
      EXPECT_EQ(next, n);
    }
  }
}

TEST(CudaLaunch, BlocksAreCappedAndNeverZero) {
  EXPECT_EQ(kc::blocks_for(0, 256), 1);
  EXPECT_EQ(kc::blocks_for(257, 256), 2);
  EXPECT_EQ(kc::blocks_for(std::int64_t{1} << 40, 256), kc::kMaxGridBlocks);
  EXPECT_EQ(kc::blocks_for(std::int64_t{1} << 40, 256, 7), 7);
}

TEST(CudaLaunch, OccupancyCapIsResidentBlocksTimesWaves) {
  // H200: 132 SMs; a kernel that keeps 3 blocks of 256 threads resident per SM.
  EXPECT_EQ(kc::occupancy_cap(3, 132), 3 * 132 * kc::kGridWaves);
  EXPECT_EQ(kc::occupancy_cap(0, 132), 132 * kc::kGridWaves);  // never a zero grid
  EXPECT_EQ(kc::occupancy_cap(8, 0), 8 * kc::kGridWaves);
  EXPECT_EQ(kc::blocks_for(std::int64_t{1} << 40, 256, kc::occupancy_cap(3, 132)), 3 * 132 * kc::kGridWaves);
  EXPECT_EQ(kc::blocks_for(1000, 256, kc::occupancy_cap(3, 132)), 4);
}

TEST(NcclBootstrap, OneProcessOutsideMpirunNeedsNoMpi) {
  EXPECT_EQ(ec::choose_bootstrap(false, false), ec::Bootstrap::local);
  EXPECT_EQ(ec::choose_bootstrap(true, false), ec::Bootstrap::mpi);   // mpirun -np 1 included
  EXPECT_EQ(ec::choose_bootstrap(false, true), ec::Bootstrap::mpi);   // MPI already up in this process
  EXPECT_EQ(ec::choose_bootstrap(true, true), ec::Bootstrap::mpi);
  EXPECT_FALSE(ec::mpi_initialised());  // asking starts nothing
}

TEST(ChunkedGemm, ChunksCoverTheRowsOnTileBoundaries) {
  for (std::int64_t m : {1, 100, 128, 129, 1000, 8192, 16384, 24577}) {
    for (int chunks : {1, 2, 4, 5, 8}) {
      const auto plan = kc::chunk_rows(m, chunks);
      ASSERT_FALSE(plan.empty());
      EXPECT_LE(static_cast<int>(plan.size()), chunks);
      std::int64_t next = 0;
      for (const auto& c : plan) {
        EXPECT_EQ(c.begin, next);
        EXPECT_GT(c.size, 0);
        EXPECT_EQ(c.begin % kc::kChunkRowAlign, 0);
        next = c.begin + c.size;
      }
      EXPECT_EQ(next, m);
    }
  }
  // The paper's Megatron shapes: B*S = 8192 rows in 4 chunks of whole tiles.
  const auto plan = kc::chunk_rows(8192, 4);
  ASSERT_EQ(plan.size(), 4u);
  for (const auto& c : plan) EXPECT_EQ(c.size, 2048);
  EXPECT_THROW((void)kc::chunk_rows(100, 0), UserError);
}

TEST(ChunkedGemm, RowsOfOffsetsAAndCByTheirStrides) {
  kc::GemmArgs g;
  g.a = reinterpret_cast<const void*>(std::uintptr_t{0x10000});
  g.c = reinterpret_cast<void*>(std::uintptr_t{0x20000});
  g.ab_dtype = DType::f16;
  g.c_dtype = DType::f32;
  g.m = 64, g.n = 8, g.k = 16, g.lda = 16, g.ldb = 8, g.ldc = 8;
  const kc::GemmArgs r = kc::rows_of(g, {10, 5});
  EXPECT_EQ(r.m, 5);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(r.a), 0x10000u + 10 * 16 * 2);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(r.c), 0x20000u + 10 * 8 * 4);
  EXPECT_EQ(r.b, g.b);
}

TEST(ChunkedGemm, ValidationRejectsBadStridesAndTypes) {
  kc::GemmArgs g;
  g.m = 4, g.n = 4, g.k = 4, g.lda = 4, g.ldb = 4, g.ldc = 4;
  EXPECT_NO_THROW(kc::validate(g));
  g.lda = 3;
  EXPECT_THROW(kc::validate(g), UserError);
  g.lda = 4;
  g.ab_dtype = DType::f16;
  g.c_dtype = DType::bf16;
  EXPECT_THROW(kc::validate(g), UserError);
  g.c_dtype = DType::f32;
  EXPECT_NO_THROW(kc::validate(g));
  // A batch: at least one product, C's products never overlapping.
  g.batch = 0;
  EXPECT_THROW(kc::validate(g), UserError);
  g.batch = 2;
  g.stride_c = g.m * g.ldc - 1;
  EXPECT_THROW(kc::validate(g), UserError);
  g.stride_c = g.m * g.ldc;
  EXPECT_NO_THROW(kc::validate(g));
  g.stride_a = -1;
  EXPECT_THROW(kc::validate(g), UserError);
  g.stride_a = 0;
  g.batch = 1;
  g.k = std::int64_t{1} << 33;
  g.lda = g.k;
  EXPECT_THROW(kc::validate(g), UserError);
}

TEST(Collectives, UniformContiguousPartsTakeTheSingleCall) {
  std::vector<float> mem(12);
  const std::vector<kc::Part> even{{&mem[0], 4}, {&mem[4], 4}, {&mem[8], 4}};
  EXPECT_TRUE(kc::uniform_contiguous(even, 4));
  const std::vector<kc::Part> ragged{{&mem[0], 5}, {&mem[5], 4}, {&mem[9], 3}};
  EXPECT_FALSE(kc::uniform_contiguous(ragged, 4));
  const std::vector<kc::Part> scattered{{&mem[0], 4}, {&mem[8], 4}, {&mem[4], 4}};
  EXPECT_FALSE(kc::uniform_contiguous(scattered, 4));
  EXPECT_FALSE(kc::uniform_contiguous({}, 4));
  EXPECT_EQ(kc::nccl_type(DType::bf16), ncclBfloat16);
  EXPECT_EQ(kc::nccl_op(coconet::model::ReduceOp::max), ncclMax);
}

TEST(FusedAllreduce, LsaOnlyWhenEveryRankSharesTheDomain) {
  EXPECT_EQ(kc::choose_fused_path(8, 8, true), kc::FusedPath::lsa);
  EXPECT_EQ(kc::choose_fused_path(1, 1, true), kc::FusedPath::lsa);
  EXPECT_EQ(kc::choose_fused_path(16, 8, true), kc::FusedPath::host);  // two nodes
  EXPECT_EQ(kc::choose_fused_path(8, 8, false), kc::FusedPath::host);  // no symmetric memory
  EXPECT_EQ(kc::to_string(kc::FusedPath::lsa), "lsa");
  EXPECT_EQ(kc::to_string(kc::FusedPath::host), "host");
}

TEST(HostConvert, RoundTripsAndRoundsToNearestEven) {
  const std::vector<double> v{0.0, 1.0, -2.5, 2049.0, 65504.0, 3.0e-5};
  for (DType t : {DType::f16, DType::bf16, DType::f32}) {
    const auto bytes = ec::encode(v, t);
    EXPECT_EQ(bytes.size(), v.size() * (t == DType::f32 ? 4u : 2u));
    const auto back = ec::decode(bytes, t, static_cast<std::int64_t>(v.size()));
    EXPECT_EQ(back[1], 1.0);
    EXPECT_EQ(back[2], -2.5);
  }
  const auto f16 = ec::decode(ec::encode(v, DType::f16), DType::f16, 6);
  EXPECT_EQ(f16[3], 2048.0);  // 2049 is a tie between 2048 and 2050: even wins
  EXPECT_EQ(f16[4], 65504.0);
  const auto bf16 = ec::decode(ec::encode(std::vector<double>{257.0}, DType::bf16), DType::bf16, 1);
  EXPECT_EQ(bf16[0], 256.0);
}

TEST(NcclWatchdog, TimeoutFromEnvironment) {
  EXPECT_EQ(ec::timeout_from_env(nullptr), ec::kDefaultTimeoutSeconds);
  EXPECT_EQ(ec::timeout_from_env(""), ec::kDefaultTimeoutSeconds);
  EXPECT_EQ(ec::timeout_from_env("12.5"), 12.5);
  EXPECT_THROW((void)ec::timeout_from_env("soon"), UserError);
  EXPECT_THROW((void)ec::timeout_from_env("0"), UserError);
  EXPECT_THROW((void)ec::timeout_from_env("-3"), UserError);
  EXPECT_THROW((void)ec::timeout_from_env("5s"), UserError);
}

TEST(NcclWatchdog, WaitEndsDoneFailedOrTimedOut) {
  int calls = 0;
  const auto done_third = [&] {
    return ++calls < 3 ? ec::Poll{ec::PollState::pending, ""} : ec::Poll{ec::PollState::done, ""};
  };
  EXPECT_EQ(ec::wait_with_deadline(done_third, 10.0).outcome, ec::WaitOutcome::done);
  EXPECT_EQ(calls, 3);

  const auto fails = [] { return ec::Poll{ec::PollState::failed, "remote error"}; };
  const ec::WaitResult f = ec::wait_with_deadline(fails, 10.0);
  EXPECT_EQ(f.outcome, ec::WaitOutcome::failed);
  EXPECT_EQ(f.error, "remote error");

  // A collective that never finishes: the wait must end, not hang.
  const auto hangs = [] { return ec::Poll{ec::PollState::pending, ""}; };
  const auto start = std::chrono::steady_clock::now();
  const ec::WaitResult t = ec::wait_with_deadline(hangs, 0.05);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(t.outcome, ec::WaitOutcome::timed_out);
  EXPECT_GE(took, 0.05);
  EXPECT_LT(took, 5.0);
  const std::string m = ec::timeout_message("allreduce", 0.05);
  EXPECT_TRUE(contains(m, "ncclCommAbort"));
  EXPECT_TRUE(contains(m, "COCONET_NCCL_TIMEOUT_S"));
}

TEST(KernelArguments, OptimizerShardsMustAgree) {
  kc::OptimizerShard s{{nullptr, 10, DType::f16}, {nullptr, 10, DType::f32},
                       {nullptr, 10, DType::f32}, {nullptr, 10, DType::f32}};
  EXPECT_NO_THROW(kc::validate(s));
  s.v.size = 9;
  EXPECT_THROW(kc::validate(s), UserError);
  s.v.size = 10;
  s.m.dtype = DType::bf16;
  EXPECT_THROW(kc::validate(s), UserError);
}

TEST(KernelArguments, EpilogueChecksSizesAndProbability) {
  kc::EpilogueArgs a;
  a.rows = 4, a.cols = 8;
  a.z = {nullptr, 32, DType::f16};
  a.bias = {nullptr, 8, DType::f16};
  a.residual = {nullptr, 32, DType::f16};
  a.out = {nullptr, 32, DType::f16};
  a.p = 0.1f;
  EXPECT_NO_THROW(kc::validate(a));
  a.p = 1.0f;
  EXPECT_THROW(kc::validate(a), UserError);
  a.p = 0.1f;
  a.bias.size = 4;
  EXPECT_THROW(kc::validate(a), UserError);
}

TEST(KernelArguments, ElementwiseProgramsWithinLimitsAndTypes) {
  using coconet::model::ElementwiseStmt;
  const std::vector<ElementwiseStmt> stmts{
      {"y", coconet::model::parse_expr("x * 2 + b"), DType::f32}};
  const auto prog = coconet::model::compile_elementwise(
      stmts, {{"x", DType::f16}, {"b", DType::f32}}, {});
  std::vector<kc::ElementwiseOperand> ins(prog.input_types.size());
  for (std::size_t k = 0; k < ins.size(); ++k) ins[k].dtype = prog.input_types[k];
  std::vector<kc::ElementwiseOperand> outs(1);
  outs[0].dtype = DType::f32;
  EXPECT_NO_THROW(kc::validate(prog, ins, outs));
  outs[0].dtype = DType::f16;
  EXPECT_THROW(kc::validate(prog, ins, outs), UserError);
  outs[0].dtype = DType::f32;
  auto long_prog = prog;
  long_prog.code.resize(kc::kMaxProgramLength + 1);
  EXPECT_THROW(kc::validate(long_prog, ins, outs), UserError);
}

TEST(CudaBackend, NoGpuMeansAPlainUserError) {
  const ec::Availability a = ec::probe();
  if (a.ok) COCONET_EXPECTED_SKIP("a GPU is present (" + a.reason + "); the no-GPU path is not reachable");
  EXPECT_FALSE(ec::available());
  EXPECT_FALSE(a.reason.empty());
  try {
    (void)coconet::exec::make_backend("cuda");
    FAIL() << "make_backend(\"cuda\") must refuse without a GPU";
  } catch (const UserError& e) {
    EXPECT_TRUE(contains(e.what(), "needs an NVIDIA GPU"));
    EXPECT_TRUE(contains(e.what(), "--backend cpu"));
  }
}

TEST(CudaBackend, OfferedByTheFactory) {
  const auto names = coconet::exec::available_backends();
  EXPECT_NE(std::find(names.begin(), names.end(), "cuda"), names.end());
}

// ---- what the first GPU run would have tripped on (issue 28), host side

// A cuBLAS that records what it is asked: the handle's creation and math mode.
namespace fake_cublas {
int creates = 0;
int gemms = 0;
cublasMath_t mode = CUBLAS_DEFAULT_MATH;
cublasHandle_t const kHandle = reinterpret_cast<cublasHandle_t>(0x10);
cublasStatus_t create(cublasHandle_t* h) { ++creates; *h = kHandle; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t destroy(cublasHandle_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t set_stream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t set_math_mode(cublasHandle_t, cublasMath_t m) { mode = m; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t gemm_ex(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
                       cudaDataType, int, const void*, cudaDataType, int, const void*, void*, cudaDataType, int,
                       cublasComputeType_t, cublasGemmAlgo_t) {
  ++gemms;
  return CUBLAS_STATUS_SUCCESS;
}
const kc::CublasApi& api() {
  static const kc::CublasApi a{create, destroy, set_stream, set_math_mode, gemm_ex, nullptr, nullptr};
  return a;
}
}  // namespace fake_cublas

// cuBLAS is loaded and its handle made at the first GEMM, not with the
// backend, and with reduced-precision reduction disallowed (split-K partial
// sums added in f32 whatever the chunking).
TEST(CudaGemm, TheHandleIsMadeAtTheFirstGemmWithFullPrecisionReduction) {
  fake_cublas::creates = fake_cublas::gemms = 0;
  fake_cublas::mode = CUBLAS_DEFAULT_MATH;
  kc::Blas blas(fake_cublas::api);
  EXPECT_FALSE(blas.created());
  EXPECT_EQ(fake_cublas::creates, 0);
  kc::GemmArgs g;
  g.ab_dtype = g.c_dtype = DType::f16;
  g.m = g.n = g.k = g.lda = g.ldb = g.ldc = 8;
  kc::gemm(blas, g, nullptr);
  kc::gemm(blas, g, nullptr);
  EXPECT_TRUE(blas.created());
  EXPECT_EQ(fake_cublas::creates, 1);
  EXPECT_EQ(fake_cublas::gemms, 2);
  EXPECT_TRUE(fake_cublas::mode & CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
}

// The LSA kernels run only on the NCCL minor version they were built against.
TEST(CudaLsa, OnlyTheHeadersMinorVersionTakesTheLsaPath) {
  std::string why;
  EXPECT_TRUE(kc::lsa_version_matches(22809, 22809, why));
  EXPECT_TRUE(kc::lsa_version_matches(22805, 22809, why));  // another patch release
  EXPECT_TRUE(why.empty());
  EXPECT_FALSE(kc::lsa_version_matches(22900, 22809, why));
  EXPECT_TRUE(contains(why, "2.29")) << why;
  EXPECT_TRUE(contains(why, "2.28")) << why;
  why.clear();
  EXPECT_FALSE(kc::lsa_version_matches(22700, 22809, why));
  EXPECT_FALSE(why.empty());
}

TEST(CudaLsa, ASymmetricWindowNeedsTheSameSizeOnEveryRank) {
  EXPECT_NO_THROW(kc::check_symmetric_sizes({4096, 4096, 4096}));
  EXPECT_NO_THROW(kc::check_symmetric_sizes({4096}));
  try {
    kc::check_symmetric_sizes({4096, 4096, 2048});
    FAIL() << "a window of another size on rank 2 must be refused";
  } catch (const UserError& e) {
    EXPECT_TRUE(contains(e.what(), "rank 2")) << e.what();
    EXPECT_TRUE(contains(e.what(), "2048")) << e.what();
  }
}

// A group left by an exception is closed: NCCL would otherwise defer every
// later call of the thread into the open group.
namespace fake_group {
int depth = 0;
ncclResult_t start() { ++depth; return ncclSuccess; }
ncclResult_t end() { --depth; return ncclSuccess; }
ncclResult_t failing_end() { --depth; return ncclInvalidArgument; }
}  // namespace fake_group

TEST(CudaCollectives, AnExceptionInsideAGroupClosesIt) {
  fake_group::depth = 0;
  try {
    kc::NcclGroup group(fake_group::start, fake_group::end);
    EXPECT_EQ(fake_group::depth, 1);
    COCONET_NCCL_CHECK(ncclInvalidArgument);  // a call inside the group fails
    group.end();
  } catch (const ck::DeviceError&) {
  }
  EXPECT_EQ(fake_group::depth, 0);
  {
    kc::NcclGroup group(fake_group::start, fake_group::end);
    group.end();
  }
  EXPECT_EQ(fake_group::depth, 0);  // ended once, not again by the destructor
  kc::NcclGroup group(fake_group::start, fake_group::failing_end);
  EXPECT_THROW(group.end(), ck::DeviceError);
  EXPECT_EQ(fake_group::depth, 0);
}

}  // namespace
