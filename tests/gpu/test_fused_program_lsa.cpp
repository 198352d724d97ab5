// The generated single-kernel fused op over an LSA team
// (kernels/cuda/fused_program_lsa.h) against the interpreter's own function
// (eval_element on the host): the programs the plan compiles for the
// workloads' fused ops that take the single kernel (sgd, adam, ...), LAMB's
// first pass (the program before its norm phase), and a tests-only update
// (momentum, weight decay, select, max, pow) in f16/bf16 storage, at ragged
// sizes and misaligned local operands, on one rank (an LSA team of one), and
// under mpirun over every rank of one node. A program with one opcode
// changed must be caught. Skipped without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <nccl.h>

#include <memory>
#include <string>
#include <vector>

#include "exec/cuda/host_convert.h"
#include "../unit/dry_backend.h"
#include "exec/cuda/lsa_fused_call.h"
#include "exec/fused_builder.h"
#include "exec/rank_values.h"
#include "exec/cuda/nccl_bootstrap.h"
#include "exec/mpi_session.h"
#include "gpu_test_util.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/fused_program_lsa.h"
#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/parse.h"
#include "plan/step_plan.h"

namespace coconet::gpu_test {
namespace {

namespace kc = kernels::cuda;
using kc::LsaRole;

const std::vector<std::int64_t> kRagged{1, 7, 37, 4099, (1 << 20) + 3};
constexpr std::int64_t kLargestMisaligned = 4099;  // larger sizes run aligned only

struct Case {
  std::string name;
  model::ElementwiseProgram program;
  std::vector<LsaRole> inputs, outputs;
};

void upload(const kc::SymmetricBuffer& b, const std::vector<double>& values) {
  const auto bytes = exec::cuda::encode(values, b.view().dtype);
  if (!bytes.empty())
    COCONET_CUDA_CHECK(
        cudaMemcpy(b.view().data, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
}

std::vector<double> download(const kc::SymmetricBuffer& b) {
  COCONET_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(b.view().size) *
                                  kc::storage_bytes(b.view().dtype));
  if (!bytes.empty())
    COCONET_CUDA_CHECK(
        cudaMemcpy(bytes.data(), b.view().data, bytes.size(), cudaMemcpyDeviceToHost));
  return exec::cuda::decode(bytes, b.view().dtype, b.view().size);
}

// Runs `run_program` through the single kernel on one rank of `comm` and
// checks every output against `reference` (the interpreter's program)
// evaluated on the host. Returns the first mismatch, or success.
::testing::AssertionResult single_kernel_matches(ncclComm_t comm, const kc::LsaComm& lsa,
                                                 const Case& c,
                                                 const model::ElementwiseProgram& run_program,
                                                 std::int64_t n, int offset) {
  const auto& prog = c.program;
  std::vector<std::vector<double>> in_values;
  std::vector<std::unique_ptr<DeviceArray>> locals;
  std::vector<std::unique_ptr<kc::SymmetricBuffer>> windows;
  std::vector<kc::LsaOperand> ins, outs;
  for (std::size_t k = 0; k < prog.input_names.size(); ++k) {
    const DType t = prog.input_types[k];
    in_values.push_back(random_values(n, 0.05, 2, t, static_cast<std::uint32_t>(20 + k)));
    if (c.inputs[k] == LsaRole::reduced) {
      windows.push_back(std::make_unique<kc::SymmetricBuffer>(comm, t, n));
      upload(*windows.back(), in_values.back());
      ins.push_back({LsaRole::reduced, windows.back().get(), nullptr});
    } else {
      locals.push_back(std::make_unique<DeviceArray>(in_values.back(), t, offset));
      ins.push_back({LsaRole::local, nullptr, locals.back()->data()});
    }
  }
  std::vector<const DeviceArray*> out_local(prog.output_names.size(), nullptr);
  std::vector<const kc::SymmetricBuffer*> out_window(prog.output_names.size(), nullptr);
  for (std::size_t k = 0; k < prog.output_names.size(); ++k) {
    const DType t = prog.output_types[k];
    if (c.outputs[k] == LsaRole::gathered) {
      windows.push_back(std::make_unique<kc::SymmetricBuffer>(comm, t, n));
      out_window[k] = windows.back().get();
      outs.push_back({LsaRole::gathered, windows.back().get(), nullptr});
    } else {
      locals.push_back(std::make_unique<DeviceArray>(std::vector<double>(n, 0.0), t, offset));
      out_local[k] = locals.back().get();
      outs.push_back({LsaRole::local, nullptr, locals.back()->data()});
    }
  }
  kc::fused_program_lsa(lsa, run_program, ins, outs, n, nullptr);
  COCONET_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<std::vector<double>> expected(prog.output_names.size(), std::vector<double>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    float out[model::kMaxOutputs];
    auto load = [&](int slot) { return static_cast<float>(in_values[slot][i]); };
    model::eval_element(prog.code.data(), static_cast<int>(prog.code.size()),
                          prog.output_types.data(), load, static_cast<std::uint64_t>(i), out);
    for (std::size_t k = 0; k < expected.size(); ++k) expected[k][i] = out[k];
  }
  for (std::size_t k = 0; k < expected.size(); ++k) {
    const auto got = out_local[k] != nullptr ? out_local[k]->read() : download(*out_window[k]);
    auto r = close(got, expected[k], tolerance(prog.output_types[k]));
    if (!r) return r << " (output " << prog.output_names[k] << ")";
  }
  return ::testing::AssertionSuccess();
}

model::Schedule named(const model::Program& p, const std::string& name) {
  for (auto& s : model::enumerate_schedules(p))
    if (s.name() == name) return s;
  throw InternalError(p.name + " has no schedule " + name);
}

// The program the plan compiles for a workload's fused stage, with the roles
// the cuda backend's own decision (exec/cuda/lsa_fused_call.h, on the calls
// the runtime builds) gives it: it must take the single kernel.
Case workload_case(const std::string& workload, const std::string& schedule) {
  const model::Program p = model::load_program(model::resolve_workload(workload));
  const model::Bindings sizes{{"N", 37}};
  const auto plan = plan::lower(named(p, schedule), sizes, 1, plan::cuda_capabilities());
  for (const auto& op : plan.ops) {
    if (!op.fused) continue;
    exec::testing::DryBackend dry(0, 1, plan::cuda_capabilities());
    dry.set_groups(1);
    exec::RankValues values(*plan.program, sizes, 1, 0, 0, exec::fused_scratch_values(plan));
    values.allocate(dry);
    const auto calls = exec::build_fused_calls(dry, plan, op, values);
    std::string why = "no call";
    const auto lp = calls.chunks.empty() ? std::nullopt
                                         : exec::cuda::plan_lsa_call(
                                               calls.chunks.front(), 0, 1,
                                               [&](exec::BufferId b) { return dry.dtype_of(b); }, why);
    if (!lp)
      throw InternalError(workload + " " + schedule + " does not take the single kernel: " + why);
    return {workload + " " + schedule, *lp->program, lp->in_roles, lp->out_roles};
  }
  throw InternalError(workload + " " + schedule + " has no fused op");
}

// LAMB's first pass (m1, v1, u.s: the program before its norm phase), the
// reduced gradient as input, every output local.
Case lamb_first_pass() {
  const model::Program p = model::load_program(model::resolve_workload("lamb"));
  const auto plan = plan::lower(named(p, "fuse(RS-C-AG)+asSlice(m,v)"), {{"N", 37}}, 1,
                                plan::cuda_capabilities());
  for (const auto& op : plan.ops) {
    if (!op.fused) continue;
    Case c{"lamb pass 1", op.fused->passes[0].program, {}, {}};
    for (const auto& name : c.program.input_names)
      c.inputs.push_back(name == op.fused->head ? LsaRole::reduced : LsaRole::local);
    c.outputs.assign(c.program.output_names.size(), LsaRole::local);
    return c;
  }
  throw InternalError("lamb has no fused op");
}

// A tests-only update in f16/bf16 storage: momentum with weight decay, select,
// max, pow. Both branches agree at m1 = 1, so a rounding difference between
// device and host that flips the branch moves w1 by rounding only.
Case momentum_case() {
  const std::vector<model::ElementwiseStmt> stmts{
      {"m1", model::parse_expr("0.9 * m + g + 0.01 * w"), DType::bf16},
      {"w1", model::parse_expr("select(m1 > 1, w - 0.1 * max(m1, 0.5), w - pow(m1, 2) * 0.1)"),
       DType::bf16}};
  Case c{"momentum",
         model::compile_elementwise(
             stmts, {{"g", DType::f16}, {"m", DType::bf16}, {"w", DType::bf16}}, {}),
         {},
         {}};
  for (const auto& name : c.program.input_names)
    c.inputs.push_back(name == "g" ? LsaRole::reduced : LsaRole::local);
  for (const auto& name : c.program.output_names)
    c.outputs.push_back(name == "w1" ? LsaRole::gathered : LsaRole::local);
  return c;
}

class FusedProgramLsa : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    if (std::string why; !kc::lsa_runtime_supported(why)) COCONET_EXPECTED_SKIP("the LSA path is off: " + why);
    int device = 0;
    COCONET_CUDA_CHECK(cudaGetDevice(&device));
    COCONET_NCCL_CHECK(ncclCommInitAll(&comm_, 1, &device));
    std::string why;
    lsa_ = kc::make_lsa_comm(comm_, why);
    if (!lsa_) FAIL() << "the LSA path is unavailable on one GPU: " << why;
  }
  void TearDown() override {
    lsa_.reset();
    if (comm_ != nullptr) (void)ncclCommDestroy(comm_);
  }
  ncclComm_t comm_ = nullptr;
  std::unique_ptr<kc::LsaComm> lsa_;
};

TEST_F(FusedProgramLsa, EqualsTheInterpreterOnOneRank) {
  std::vector<Case> cases{workload_case("adam", "fuse(RS-C-AG)+asSlice(m,v)"), lamb_first_pass(),
                          momentum_case()};
  for (const auto& s :
       model::enumerate_schedules(model::load_program(model::resolve_workload("sgd"))))
    if (s.name().find("fuse(") != std::string::npos)
      cases.push_back(workload_case("sgd", s.name()));
  for (const auto& c : cases)
    for (std::int64_t n : kRagged)
      for (int offset : {0, 1, 3}) {
        if (n > kLargestMisaligned && offset != 0)
          continue;  // the large size once: test_gpu's time budget
        EXPECT_TRUE(single_kernel_matches(comm_, *lsa_, c, c.program, n, offset))
            << c.name << " n=" << n << " offset " << offset;
      }
}

// One opcode changed (the first add becomes a sub): the comparison must fail.
TEST_F(FusedProgramLsa, AWrongProgramIsCaught) {
  for (const Case& c : {workload_case("adam", "fuse(RS-C-AG)+asSlice(m,v)"), momentum_case()}) {
    model::ElementwiseProgram wrong = c.program;
    bool changed = false;
    for (auto& in : wrong.code)
      if (!changed && in.code == model::OpCode::binary &&
          in.op == static_cast<std::uint8_t>(model::BinaryOp::add)) {
        in.op = static_cast<std::uint8_t>(model::BinaryOp::sub);
        changed = true;
      }
    ASSERT_TRUE(changed) << c.name << " has no add to change";
    EXPECT_FALSE(single_kernel_matches(comm_, *lsa_, c, wrong, 4099, 0)) << c.name;
  }
}

// Under mpirun on one node: every rank's gradient differs, the reduced input
// is their f32 sum in rank order (rounded to f16, as the kernel sums), each
// rank updates its shard of m and w, and every rank ends with the whole w1.
TEST_F(GpuTest, SingleKernelOverEveryRankUnderMpirun) {
  if (!exec::launched_by_mpirun())
    COCONET_EXPECTED_SKIP("not started by mpirun: one rank is covered above");
  exec::ensure_mpi();
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (ranks < 2) COCONET_EXPECTED_SKIP("one rank: covered above");
  if (std::string why; !kc::lsa_runtime_supported(why)) COCONET_EXPECTED_SKIP("the LSA path is off: " + why);
  int devices = 0;
  COCONET_CUDA_CHECK(cudaGetDeviceCount(&devices));
  COCONET_CUDA_CHECK(cudaSetDevice(exec::cuda::node_local_rank(MPI_COMM_WORLD) % devices));
  ncclComm_t comm = exec::cuda::make_nccl_comm(MPI_COMM_WORLD);
  {
    std::string why;
    const auto lsa = kc::make_lsa_comm(comm, why);
    if (!lsa) {
      (void)ncclCommDestroy(comm);
      GTEST_SKIP() << "the ranks are not one LSA team: " << why;
    }
    const Case c = momentum_case();
    const auto& prog = c.program;
    for (std::int64_t n : {std::int64_t{37}, std::int64_t{4099}}) {
      const kc::Span1d shard = kc::shard_of(n, lsa->lsa_size(), lsa->lsa_rank());
      const auto shard_of_values = [&](const std::vector<double>& v) {
        return std::vector<double>(v.begin() + shard.begin, v.begin() + shard.begin + shard.size);
      };
      std::vector<std::vector<double>> grads;  // every rank's gradient
      for (int q = 0; q < lsa->lsa_size(); ++q)
        grads.push_back(random_values(n, 0.05, 2, DType::f16, static_cast<std::uint32_t>(100 + q)));
      std::vector<double> reduced(n);
      for (std::int64_t i = 0; i < n; ++i) {
        float sum = 0.0f;
        for (const auto& gq : grads) sum += static_cast<float>(gq[i]);
        reduced[i] = model::round_to(DType::f16, sum);
      }
      std::vector<std::vector<double>> full;
      std::vector<std::unique_ptr<DeviceArray>> locals;
      std::vector<kc::LsaOperand> ins, outs;
      kc::SymmetricBuffer g(comm, DType::f16, n), w1(comm, prog.output_types[1], n);
      upload(g, grads[static_cast<std::size_t>(lsa->lsa_rank())]);
      for (std::size_t k = 0; k < prog.input_names.size(); ++k) {
        full.push_back(
            random_values(n, 0.05, 2, prog.input_types[k], static_cast<std::uint32_t>(20 + k)));
        if (c.inputs[k] == LsaRole::reduced) {
          ins.push_back({LsaRole::reduced, &g, nullptr});
        } else {
          locals.push_back(
              std::make_unique<DeviceArray>(shard_of_values(full.back()), prog.input_types[k]));
          ins.push_back({LsaRole::local, nullptr, locals.back()->data()});
        }
      }
      DeviceArray m1(std::vector<double>(shard.size, 0.0), prog.output_types[0]);
      ASSERT_EQ(prog.output_names[0], "m1");
      outs.push_back({LsaRole::local, nullptr, m1.data()});
      outs.push_back({LsaRole::gathered, &w1, nullptr});
      MPI_Barrier(MPI_COMM_WORLD);  // every rank's gradient is in its window
      kc::fused_program_lsa(*lsa, prog, ins, outs, n, nullptr);
      COCONET_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<double> e_m1(n), e_w1(n);
      for (std::int64_t i = 0; i < n; ++i) {
        float out[model::kMaxOutputs];
        auto load = [&](int slot) {
          return static_cast<float>(c.inputs[slot] == LsaRole::reduced ? reduced[i]
                                                                       : full[slot][i]);
        };
        model::eval_element(prog.code.data(), static_cast<int>(prog.code.size()),
                              prog.output_types.data(), load, static_cast<std::uint64_t>(i), out);
        e_m1[i] = out[0];
        e_w1[i] = out[1];
      }
      EXPECT_TRUE(close(m1.read(), shard_of_values(e_m1), tolerance(prog.output_types[0])))
          << "rank " << lsa->lsa_rank() << " n=" << n;
      EXPECT_TRUE(close(download(w1), e_w1, tolerance(prog.output_types[1])))
          << "rank " << lsa->lsa_rank() << " n=" << n;
      MPI_Barrier(MPI_COMM_WORLD);  // no rank frees its windows while a peer still reads them
    }
  }
  (void)ncclCommDestroy(comm);
}

}  // namespace
}  // namespace coconet::gpu_test
