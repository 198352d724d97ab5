// NCCL's tuner plugin (exec/nccl_tuner/tuner_plugin.h), loaded as NCCL loads
// it (dlopen, then the interface's symbol): told each call of a resolved
// plan, it answers NCCL's question for that call with the plan's choice (the
// cheapest entry of NCCL's cost table, and the channels), whatever NCCL's
// own table would pick; a call it was not told of keeps NCCL's choice. The
// plan is the one sim.Resolve.* resolves to 32 channels where NCCL would
// use 16. The executor hands each launch's choices to the backend, which
// tells the plugin before each NCCL call (exec/nccl_tuner/per_call.h), so
// NCCL's question for every call the executor issues gets the plan's answer.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstdint>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "exec/nccl_tuner/nccl_ids.h"
#include "exec/nccl_tuner/per_call.h"
#include "exec/nccl_tuner/tuner_plugin.h"
#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/parse.h"
#include "sim/tasks.h"
#include "sim/resolve.h"
#include "sim/topology.h"
#include "tests/unit/dry_backend.h"
#include "tests/paths.h"

namespace coconet::exec::nccl_tuner {
namespace {

using Logger = void (*)(int, unsigned long, const char*, int, const char*, ...);
struct TunerV4 {  // NCCL's tuner interface v4, as the plugin exports it
  const char* name;
  int (*init)(std::size_t, std::size_t, Logger, void**);
  int (*get_coll_info)(void*, int, std::size_t, int, float**, int, int, int, int*);
  int (*destroy)(void*);
};

constexpr int kAlgos = 7, kProtos = 3;  // NCCL 2.28's table: 7 algorithms x 3 protocols

// The plan sim.Resolve.* resolves to 32 channels where NCCL would use 16.
plan::StepPlan resolved_adam() {
  const model::Program p = model::load_program(model::resolve_workload("adam"));
  const sim::Context ctx{
      sim::load_topology("dgx-h100", {{"nodes", "1"}, {"nccl.channel_GBps", "20"}}), 8,
      p.bind({{"N", std::int64_t(1) << 22}})};
  return sim::lower_for(model::find_schedule(p, "fuse(RS-C-AG)"), ctx);
}

class Plugin : public ::testing::Test {
 protected:
  void SetUp() override {
    handle_ = dlopen(coconet::test::nccl_tuner_plugin().c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    tuner_ = static_cast<TunerV4*>(dlsym(handle_, kPluginSymbol));
    ASSERT_NE(tuner_, nullptr) << dlerror();
    expect_ = reinterpret_cast<decltype(expect_)>(dlsym(handle_, "coconet_tuner_expect"));
    clear_ = reinterpret_cast<decltype(clear_)>(dlsym(handle_, "coconet_tuner_clear"));
    ASSERT_NE(expect_, nullptr);
    ASSERT_NE(clear_, nullptr);
    ASSERT_EQ(tuner_->init(8, 1, nullptr, &context_), 0);
    clear_();
  }
  void TearDown() override {
    if (tuner_) {
      EXPECT_EQ(tuner_->destroy(context_), 0);
    }
    if (handle_) dlclose(handle_);
  }

  // What NCCL would take from the plugin's answer for one call: the cheapest
  // entry of a table where NCCL's own rule prefers ring/simple, and the channels.
  struct Answer {
    int algo = -1, proto = -1, channels = 0;
  };
  Answer ask(int coll, std::size_t bytes) const {
    float table[kAlgos][kProtos];
    for (auto& row : table)
      for (float& c : row) c = 10.0f;
    table[1][2] = 1.0f;   // ring/simple: NCCL's own pick
    table[2][0] = -1.0f;  // collnet: not offered
    int channels = 16;    // NCCL's default
    EXPECT_EQ(tuner_->get_coll_info(context_, coll, bytes, 1, reinterpret_cast<float**>(table),
                                    kAlgos, kProtos, 0, &channels),
              0);
    Answer a{0, 0, channels};
    for (int x = 0; x < kAlgos; ++x)
      for (int y = 0; y < kProtos; ++y)
        if (table[x][y] >= 0 && table[x][y] < table[a.algo][a.proto]) a = {x, y, channels};
    return a;
  }

  void* handle_ = nullptr;
  TunerV4* tuner_ = nullptr;
  void* context_ = nullptr;
  void (*expect_)(int, std::size_t, int, int, int) = nullptr;
  void (*clear_)() = nullptr;
};

TEST_F(Plugin, ReturnsThePlansChoiceForEachCall) {
  const plan::StepPlan plan = resolved_adam();
  // Each call as the executor issues it: its NCCL function, its size, the plan's choice of its
  // chunk.
  struct Call {
    int coll;
    std::size_t bytes;
    plan::CollectiveChoice choice;
  };
  std::vector<Call> calls;
  for (const plan::Op& op : plan.ops)
    for (const plan::Collective& c : op.work.collectives)
      for (std::size_t k = 0; k < c.chosen.size(); ++k)
        if (op.calls.at(k) > 0 && !c.chosen[k].local)
          calls.push_back({coll_id(c.op), std::size_t(c.bytes / op.calls.at(k)), c.chosen[k]});
  ASSERT_EQ(calls.size(), 4u);  // the reduce-scatter and three all-gathers, one chunk
  for (const Call& c : calls)
    expect_(c.coll, c.bytes, algo_id(c.choice.algo), proto_id(c.choice.proto), c.choice.channels);
  for (const Call& c : calls) {
    const Answer a = ask(c.coll, c.bytes);
    EXPECT_EQ(a.algo, algo_id(c.choice.algo)) << plan::to_string(c.choice);
    EXPECT_EQ(a.proto, proto_id(c.choice.proto)) << plan::to_string(c.choice);
    EXPECT_EQ(a.channels, c.choice.channels) << plan::to_string(c.choice);
    EXPECT_EQ(a.channels, 32) << "the plan's 32 channels, not NCCL's 16";
  }
  // A call it was not told of (another size) keeps NCCL's own choice.
  const Answer other = ask(calls.front().coll, calls.front().bytes + 2);
  EXPECT_EQ(other.algo, 1);
  EXPECT_EQ(other.proto, 2);
  EXPECT_EQ(other.channels, 16);
  // So does one whose choice NCCL does not offer for it, and every call once cleared.
  expect_(4, 4096, 2, 0, 8);  // collnet/ll: ignored in NCCL's table
  EXPECT_EQ(ask(4, 4096).channels, 16);
  clear_();
  EXPECT_EQ(ask(calls.front().coll, calls.front().bytes).channels, 16);
}

TEST_F(Plugin, EveryCallTheExecutorIssuesRunsThePlansChoice) {
  const plan::StepPlan plan = resolved_adam();
  const std::vector<plan::CollectiveChoice> planned = sim::choices_of(plan);
  ASSERT_FALSE(planned.empty());
  PerCallChoices per_call(coconet::test::nccl_tuner_plugin());
  ASSERT_TRUE(per_call.active()) << per_call.why_inactive();
  testing::DryBackend rank0(0, 8, plan.caps);
  rank0.set_groups(plan.groups);
  struct Asked {
    model::OpKind kind;
    Answer answer;
  };
  std::vector<Asked> asked;
  rank0.act_like_nccl({&per_call, [&](model::OpKind kind, std::size_t bytes) {
                         asked.push_back({kind, ask(coll_id(kind), bytes)});
                       }});
  Executor ex(rank0, plan, 1);
  (void)ex.run_step();
  int rs = 0, ag = 0;
  for (const Asked& a : asked) {
    (a.kind == model::OpKind::reducescatter ? rs : ag) += 1;
    const plan::CollectiveChoice got{a.answer.algo == algo_id(model::Algo::ring) ? model::Algo::ring : model::Algo::auto_,
                                     a.answer.proto == proto_id(model::Proto::ll128) ? model::Proto::ll128
                                                                                    : model::Proto::auto_,
                                     a.answer.channels, false};
    EXPECT_NE(std::find(planned.begin(), planned.end(), got), planned.end())
        << model::to_string(a.kind) << " ran " << a.answer.algo << "/" << a.answer.proto << " x" << a.answer.channels;
    EXPECT_EQ(a.answer.channels, 32) << "the plan's 32 channels, not NCCL's 16";
  }
  EXPECT_GT(rs, 0);
  EXPECT_GT(ag, rs) << "the update's three all-gathers per piece";
}

// The n-th call of a kind in a launch takes the n-th choice of that kind,
// counting round: a fused op's pieces call its collectives again in order.
TEST_F(Plugin, CallsOfAKindTakeTheirChoicesInOrderRoundAgain) {
  PerCallChoices per_call(coconet::test::nccl_tuner_plugin());
  ASSERT_TRUE(per_call.active()) << per_call.why_inactive();
  const plan::CollectiveChoice a{model::Algo::ring, model::Proto::ll, 4, false};
  const plan::CollectiveChoice b{model::Algo::tree, model::Proto::simple, 8, false};
  const std::vector<plan::CallChoice> launch{{model::OpKind::allgather, a}, {model::OpKind::allgather, b}};
  per_call.choose(launch);
  const int ag = coll_id(model::OpKind::allgather);
  for (int piece = 0; piece < 2; ++piece) {
    const std::size_t first = per_call.before_call(model::OpKind::allgather, 1000, 8000, 2);
    EXPECT_EQ(first, 16000u) << "NCCL states an all-gather at its output";
    EXPECT_EQ(ask(ag, first).channels, 4);
    const std::size_t second = per_call.before_call(model::OpKind::allgather, 1001, 8008, 2);
    const Answer b_answer = ask(ag, second);
    EXPECT_EQ(b_answer.algo, algo_id(model::Algo::tree));
    EXPECT_EQ(b_answer.channels, 8);
  }
  // A kind the launch has no choice for, and a new launch without choices: NCCL's own.
  EXPECT_EQ(ask(coll_id(model::OpKind::allreduce), per_call.before_call(model::OpKind::allreduce, 64, 64, 4)).channels,
            16);
  per_call.choose({});
  EXPECT_EQ(ask(ag, 16000).channels, 16) << "what an earlier launch told is forgotten";
}

TEST(PerCallChoices, SaysWhyItCannotApplyChoices) {
  EXPECT_FALSE(PerCallChoices("").active());
  const PerCallChoices missing("/nonexistent/libcoconet_nccl_tuner.so");
  EXPECT_FALSE(missing.active());
  EXPECT_NE(missing.why_inactive().find("cannot load"), std::string::npos) << missing.why_inactive();
  const PerCallChoices other("libm.so.6");  // loads, but is no tuner plugin of coconet's
  EXPECT_FALSE(other.active());
  EXPECT_NE(other.why_inactive().find("another tuner plugin"), std::string::npos) << other.why_inactive();
}

// `run` and `validate` on cuda name coconet's plugin unless NCCL_TUNER_PLUGIN names one, and
// refuse per-call choices when it names another.
TEST(PerCallChoices, NamePluginSetsOursAndRespectsAnother) {
  std::string why_not;
  unsetenv("NCCL_TUNER_PLUGIN");
  ASSERT_TRUE(name_plugin(why_not)) << why_not;
  EXPECT_EQ(std::string(std::getenv("NCCL_TUNER_PLUGIN")), installed_plugin());
  EXPECT_TRUE(PerCallChoices::from_environment().active());
  setenv("NCCL_TUNER_PLUGIN", "libm.so.6", 1);
  EXPECT_FALSE(name_plugin(why_not));
  EXPECT_NE(why_not.find("another tuner plugin"), std::string::npos) << why_not;
  EXPECT_EQ(std::string(std::getenv("NCCL_TUNER_PLUGIN")), "libm.so.6") << "the user's choice is kept";
  unsetenv("NCCL_TUNER_PLUGIN");
}

}  // namespace
}  // namespace coconet::exec::nccl_tuner
