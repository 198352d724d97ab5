// The event simulator against the analytic model: equal within 3% where
// nothing overlaps; on overlapped schedules between the longest part and the
// sum of the parts; contention visible; traces well formed.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/parse.h"
#include "model/schedule.h"
#include "sim/resolve.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace coconet::sim {
namespace {

constexpr double kAgreement = 0.03;

model::Program workload(const std::string& name) { return model::load_program(model::resolve_workload(name)); }

struct Setting {
  const char* topology;
  int nodes;
};
const Setting kSettings[] = {{"dgx-h100", 4}, {"dgx2-v100", 16}, {"dgx-a100", 1}};
const char* const kWorkloads[] = {"sgd", "adam", "lamb", "megatron_mlp", "megatron_attention", "gpt3_pipeline"};

Context context_for(const Setting& s, const model::Program& p) {
  Topology t = load_topology(s.topology, {{"nodes", std::to_string(s.nodes)}});
  const int ranks = t.total_gpus() / p.groups();  // all GPUs over the groups (model/points.h)
  return Context{t, ranks, p.params};
}

// Whether some unit of the plan has ops on both streams (which may then run
// side by side, e.g. a fused stage the backend runs as its parts).
bool runs_concurrently(const plan::StepPlan& p) {
  for (const auto& u : p.units)
    for (int a : u.ops)
      for (int b : u.ops)
        if (p.op(a).stream != p.op(b).stream) return true;
  return false;
}

// A plan made here (not by sim::lower_for) resolved as lower_for resolves
// one, then simulated.
SimResult simulate_resolved(plan::StepPlan p, const Context& ctx) {
  resolve_collectives(p, ctx);
  return simulate(p, ctx);
}

bool agrees(double simulated, double analytic) { return std::abs(simulated - analytic) <= kAgreement * analytic; }

// The bounds an overlapped run must respect: no faster than its busiest
// stream (a stream runs its tasks one after another), no slower than all its
// tasks one after another.
bool within_overlap_bounds(const SimResult& r) {
  double sum = 0, longest = 0;
  std::map<std::pair<int, int>, double> per_stream;
  for (const auto& e : r.events) {
    sum += e.alone_us;
    longest = std::max(longest, per_stream[{e.rank, e.stream}] += e.alone_us);
  }
  constexpr double kSlack = 1e-9;
  return r.time_us >= longest * (1 - kSlack) && r.time_us <= sum * (1 + kSlack);
}

TEST(Simulator, AgreesWithAnalyticWithoutOverlap) {
  int checked = 0;
  for (const auto& setting : kSettings)
    for (const char* name : kWorkloads) {
      const model::Program p = workload(name);
      const Context ctx = context_for(setting, p);
      for (const auto& s : model::enumerate_schedules(p)) {
        if (!s.overlaps.empty() || runs_concurrently(lower_for(s, ctx))) continue;
        const double sim = simulate(s, ctx).time_us;
        const double ana = predict_analytic(s, ctx).time_us;
        EXPECT_TRUE(agrees(sim, ana)) << name << " " << s.name() << " on " << setting.topology << ": " << sim
                                      << " vs " << ana;
        ++checked;
      }
    }
  EXPECT_GT(checked, 20);
}

TEST(Simulator, AgreementCheckCanFail) {
  EXPECT_FALSE(agrees(104, 100));
  EXPECT_TRUE(agrees(102, 100));
}

TEST(Simulator, OverlapBetweenLongestPartAndSum) {
  int checked = 0;
  for (const auto& setting : kSettings)
    for (const char* name : kWorkloads) {
      const model::Program p = workload(name);
      const Context ctx = context_for(setting, p);
      for (auto s : model::enumerate_schedules(p)) {
        if (s.overlaps.empty()) continue;
        for (int chunks : {1, 2, 4, 8, 16}) {
          s.knobs.chunks = chunks;
          const SimResult r = simulate(s, ctx);
          EXPECT_TRUE(within_overlap_bounds(r)) << name << " " << s.name() << " chunks=" << chunks << " on "
                                                << setting.topology << ": " << r.time_us;
          EXPECT_GE(r.time_us, predict_analytic(s, ctx).time_us * (1 - 1e-9));  // contention only slows
          ++checked;
        }
      }
    }
  EXPECT_GT(checked, 20);
}

TEST(Simulator, OverlapBoundsCheckCanFail) {
  SimResult r;
  r.events = {SimEvent{0, 0, -1, 0, 0, "MM", "", 0, 10, 10}, SimEvent{1, 0, -1, 1, 0, "AR", "", 0, 6, 6}};
  r.time_us = 9;  // faster than the GEMM alone: impossible
  EXPECT_FALSE(within_overlap_bounds(r));
  r.time_us = 17;  // slower than both in sequence
  EXPECT_FALSE(within_overlap_bounds(r));
  r.time_us = 12;
  EXPECT_TRUE(within_overlap_bounds(r));
}

TEST(Simulator, OverlapHelpsAndGemmFeelsTheCollective) {
  int whole_row_chunks = 0;
  const model::Program p = workload("megatron_mlp");
  const Context ctx{load_topology("dgx2-v100"), 16, p.params};
  for (auto s : model::enumerate_schedules(p)) {
    if (s.overlaps.empty()) continue;
    s.knobs.chunks = 8;
    const SimResult r8 = simulate(s, ctx);
    double sum = 0;
    for (const auto& st : r8.stages) sum += st.alone_us;
    EXPECT_LT(r8.time_us, 0.9 * sum) << s.name();
    // Two chunks of [4096 x 768] x [768 x 3072]: 768 tiles, 10 waves on 80 SMs, 12 on the 64 left.
    s.knobs.chunks = 2;
    // In slice mode each chunk of the GEMM is one small call per rank's slice,
    // which the SMs a collective leaves hold whole: only whole-row chunks show it.
    const plan::StepPlan plan = lower_for(s, ctx);
    if (plan.units.front().slice_mode) continue;
    ++whole_row_chunks;
    const SimResult r = simulate(plan, ctx);
    const bool slowed = std::any_of(r.events.begin(), r.events.end(), [](const SimEvent& e) {
      return e.name.starts_with("MM") && e.end_us - e.start_us > e.alone_us * 1.001;
    });
    EXPECT_TRUE(slowed) << s.name() << ": a GEMM chunk beside a collective loses its SMs";
  }
  EXPECT_GE(whole_row_chunks, 2);  // ol(MM,AR) and ol(MM,fuse(AR-C))
}

TEST(Simulator, NoSpareUnitSerialisesGemmAndCollective) {
  // One compute unit per rank that a collective's progress fills (a CPU rank
  // with no spare core): an overlapped GEMM waits while the allreduce runs, so
  // the overlap takes at least the sum of its parts; a collective that takes
  // a tenth of the unit leaves the GEMM most of it.
  const model::Program p = workload("megatron_mlp");
  const Overrides no_spare = {{"gpu.sms", "1"}, {"gpu.gemm_tile.m", "1"}, {"gpu.gemm_tile.n", "1"},
                              {"nccl.channels", "1"}, {"nccl.sms_per_channel", "1"}};
  Overrides light = no_spare;
  light.back().second = "0.1";
  for (auto s : model::enumerate_schedules(p)) {
    if (s.overlaps.empty()) continue;
    s.knobs.chunks = 4;
    const Context ctx{load_topology("dgx2-v100", no_spare), 16, p.params};
    const SimResult serial = simulate(s, ctx);
    double sum = 0;
    for (const auto& st : serial.stages) sum += st.alone_us;
    // Only the kernels' launch overheads (no compute) still overlap the collective.
    double launches = 0;
    for (const auto& op : lower_for(s, ctx).ops)
      if (op.stream == plan::Stream::compute)
        for (int calls : op.calls) launches += calls * ctx.topology.gpu.launch_us;
    EXPECT_GE(serial.time_us, (sum - launches) * (1 - 1e-9)) << s.name();
    const SimResult shared = simulate(s, Context{load_topology("dgx2-v100", light), 16, p.params});
    EXPECT_LT(shared.time_us, serial.time_us) << s.name();
  }
}

// A topology file's text without the lines that mention `key`.
std::string topology_text_without(const std::string& name, const std::string& key) {
  std::ifstream in(model::resolve_topology(name));
  std::string text, line;
  while (std::getline(in, line))
    if (line.find(key) == std::string::npos) text += line + "\n";
  return text;
}

// A fused op calls more than its collectives and one kernel per piece
// (exec/fused_call.h): a kernel per further pass, one per norm, and an
// allreduce of the partial sums of each norm of a sliced value. On the cpu
// backend, where its parts take turns with its collectives as they do, it
// is priced no cheaper than its parts (LAMB at 1024 elements: fused with
// sliced moments 33.0 us without them against 44.2 for the parts; measured
// 44.0 and 45.2).
TEST(Simulator, AFusedOpPaysItsPassesNormsAndTheirAllreduces) {
  const model::Program p = workload("lamb");
  // Without a hand-off (whatever the committed calibration fitted), which a fused op's calls may save.
  const Topology t = parse_topology(topology_text_without("cpu-local", "handoff_us"), "cpu-local.yaml");
  for (std::int64_t n : {1024, 65536}) {
    model::Bindings sizes = p.params;
    sizes["N"] = n;
    const auto time = [&](const char* name) {
      return simulate(model::find_schedule(p, name), Context{t, 2, sizes, plan::BackendKind::cpu}).time_us;
    };
    for (const auto& [fused, parts] : {std::pair{"fuse(RS-C-AG)+asSlice(m,v)", "RS-C-AG+asSlice(m,v)"},
                                       std::pair{"fuse(RS-C-AG)", "RS-C-AG"}, std::pair{"fuse(AR-C)", "AR-C"}})
      EXPECT_GE(time(fused), time(parts) * (1 - 1e-9)) << fused << " at N=" << n;
  }
}

// mpi.handoff_us: a fused op's two collectives (reduce-scatter, all-gather)
// hand off once per piece, so one piece runs h faster than with none; the
// same schedule's parts and a single collective are priced as before.
TEST(Simulator, AFusedOpHandsOffOnce) {
  const std::string text = topology_text_without("cpu-local", "handoff_us");
  const auto with = [&](const std::string& h) {
    const auto at = text.find("\nmpi:") + 1;
    const auto body = text.find('\n', at) + 1;
    return parse_topology(text.substr(0, body) + "  handoff_us: " + h + "\n" + text.substr(body), "t.yaml");
  };
  const model::Program p = workload("sgd");
  model::Bindings sizes = p.params;
  sizes["N"] = 4096;
  const Topology none = with("0"), some = with("2.5");
  const auto time = [&](const Topology& t, const char* name) {
    return simulate(model::find_schedule(p, name), Context{t, 2, sizes}).time_us;
  };
  EXPECT_NEAR(time(some, "fuse(RS-C-AG)"), time(none, "fuse(RS-C-AG)") - 2.5, 1e-9);
  // In pieces (2^20 elements: 1 MiB of f16 reduced per rank, pieces of 256 KiB: 4), once per piece.
  sizes["N"] = 1 << 20;
  EXPECT_NEAR(time(some, "fuse(RS-C-AG)"), time(none, "fuse(RS-C-AG)") - 4 * 2.5, 1e-9);
  sizes["N"] = 4096;
  for (const char* parts : {"RS-C-AG", "AR-C", "fuse(AR-C)"}) EXPECT_DOUBLE_EQ(time(some, parts), time(none, parts)) << parts;
  try {
    (void)with("-1");
    ADD_FAILURE() << "a negative hand-off was taken";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("t.yaml:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("mpi.handoff_us"), std::string::npos) << e.what();
  }
  // A GPU topology: the key is the cpu backend's.
  std::ifstream gpu_in(model::resolve_topology("dgx-h100"));
  std::string gpu((std::istreambuf_iterator<char>(gpu_in)), std::istreambuf_iterator<char>());
  const auto at = gpu.find("\nnccl:\n") + std::string("\nnccl:\n").size();
  try {
    (void)parse_topology(gpu.substr(0, at) + "  handoff_us: 1\n" + gpu.substr(at), "g.yaml");
    ADD_FAILURE() << "a GPU topology took nccl.handoff_us";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("needs `device: cpu`"), std::string::npos) << e.what();
  }
  // More hand-off than a call's own fixed cost: no call is priced below zero.
  const Topology huge = with("1000");
  EXPECT_GT(time(huge, "fuse(RS-C-AG)"), 0.0);
  EXPECT_LE(time(none, "fuse(RS-C-AG)") - time(huge, "fuse(RS-C-AG)"),
            time(none, "RS-C-AG") + 1e-9);
}

TEST(Simulator, AResidentCollectivePaysItsLatencyOnce) {
  // A backend whose overlapped collective stays resident (Capabilities::
  // resident_overlap) pays the collective's latency on the first chunk only.
  const model::Program p = workload("megatron_mlp");
  const Context ctx{load_topology("dgx-h100"), 8, p.params};
  for (auto s : model::enumerate_schedules(p)) {
    if (s.overlaps.empty()) continue;
    s.knobs.chunks = 8;
    plan::Capabilities resident = plan::cuda_capabilities();
    resident.resident_overlap = true;
    const double per_call = simulate_resolved(plan::lower(s, p.params, 8, plan::cuda_capabilities()), ctx).time_us;
    const double once = simulate_resolved(plan::lower(s, p.params, 8, resident), ctx).time_us;
    EXPECT_LT(once, per_call) << s.name();
  }
}

// nccl.step_sync_us is paid once a step, by its first collective or send
// between ranks: a reduce-scatter then an all-gather cost it once, a step of
// one collective once, a step whose collectives are on one rank never.
TEST(Simulator, OnlyAStepsFirstExchangePaysTheStepSync) {
  const model::Program rs_ag = model::parse_program(
      "name: t\nparams: {N: 4096}\ntensors:\n  x: {dtype: f16, shape: [N], layout: local}\n"
      "program:\n  - y = reducescatter(sum, x)\n  - z = allgather(y)\noutputs: [z]\n", "t.yaml");
  const model::Schedule s = model::initial_schedule(rs_ag);
  Topology t = load_topology("cpu-local");
  t.nccl.step_sync_us = 0;
  const double without = simulate(s, Context{t, 2, rs_ag.params, plan::BackendKind::cpu}).time_us;
  t.nccl.step_sync_us = 5;
  const SimResult with = simulate(s, Context{t, 2, rs_ag.params, plan::BackendKind::cpu});
  EXPECT_NEAR(with.time_us, without + 5, 1e-6);
  ASSERT_EQ(with.stages.size(), 2u);
  t.nccl.step_sync_us = 0;
  const SimResult base = simulate(s, Context{t, 2, rs_ag.params, plan::BackendKind::cpu});
  EXPECT_NEAR(with.stages[0].end_us - with.stages[0].start_us, base.stages[0].end_us - base.stages[0].start_us + 5, 1e-6);
  EXPECT_NEAR(with.stages[1].end_us - with.stages[1].start_us, base.stages[1].end_us - base.stages[1].start_us, 1e-6);
  t.nccl.step_sync_us = 5;
  const double one_rank = simulate(s, Context{t, 1, rs_ag.params, plan::BackendKind::cpu}).time_us;
  t.nccl.step_sync_us = 0;
  EXPECT_DOUBLE_EQ(one_rank, simulate(s, Context{t, 1, rs_ag.params, plan::BackendKind::cpu}).time_us);
  // It is the cpu backend's constant: a GPU topology with it is refused, naming the key.
  std::ifstream in(model::resolve_topology("dgx-h100"));
  std::string text, line;
  while (std::getline(in, line)) text += line + (line == "nccl:" ? "\n  step_sync_us: 3\n" : "\n");
  try {
    (void)parse_topology(text, "gpu.yaml");
    ADD_FAILURE() << "step_sync_us accepted on a GPU topology";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("nccl.step_sync_us"), std::string::npos) << e.what();
  }
}

TEST(Simulator, AFusedOpOverlapsItsUpdateOnlyWhereComputeIsLeftFree) {
  // Both backends run Adam's fuse(RS-C-AG) as one fused op that pipelines its
  // pieces, which the model prices below the same stages one after another
  // on a GPU cluster, where the update runs on SMs the collective leaves. The cpu
  // backend's 256 KiB pieces pay a GPU cluster's collective latency so often
  // that there the fused op is the slower one: the model says so.
  const model::Program p = workload("adam");
  const auto time_of = [&](const char* topology, int ranks, const std::string& name, plan::BackendKind b) {
    const Context ctx{load_topology(topology), ranks, p.params, b};
    for (const auto& s : model::enumerate_schedules(p))
      if (s.name() == name) return simulate(s, ctx).time_us;
    ADD_FAILURE() << "no schedule " << name;
    return 0.0;
  };
  const auto cuda = plan::BackendKind::cuda;
  const auto cpu = plan::BackendKind::cpu;
  const double gpu_ratio = time_of("dgx2-v100", 16, "fuse(RS-C-AG)+asSlice(m,v)", cuda) /
                           time_of("dgx2-v100", 16, "RS-C-AG+asSlice(m,v)", cuda);
  EXPECT_LT(gpu_ratio, 0.99);
  // cpu-local has one core per rank, and a collective's progress holds it
  // (sms_per_channel fitted by calibrate): the update and the transfers take
  // turns, so the fused op costs about its parts (within 15%: its pieces'
  // calls against the bytes it saves; 1.094 with the calibration of
  // 2026-12-06, whose faster element-wise rate makes the bytes saved count
  // less; 1.107-1.143 over four calibrations after the cpu backend's
  // reduce-scatter became a ring, cheaper a byte, so the pieces' fixed costs
  // weigh more), and gains less than on the GPUs.
  const double cpu_ratio = time_of("cpu-local", 2, "fuse(RS-C-AG)+asSlice(m,v)", cpu) /
                           time_of("cpu-local", 2, "RS-C-AG+asSlice(m,v)", cpu);
  EXPECT_NEAR(cpu_ratio, 1.0, 0.15);
  EXPECT_GT(cpu_ratio, gpu_ratio);
  EXPECT_GT(time_of("dgx2-v100", 16, "fuse(RS-C-AG)+asSlice(m,v)", cpu),
            time_of("dgx2-v100", 16, "fuse(RS-C-AG)+asSlice(m,v)", cuda));
}

TEST(Simulator, RepresentativeRanksAtScale) {
  const model::Program p = workload("adam");
  const Topology t = load_topology("dgx-h100", {{"nodes", "512"}});
  const Context ctx{t, 4096, p.params};
  for (const auto& s : model::enumerate_schedules(p)) {
    if (s.name() != "fuse(RS-C-AG)") continue;
    const SimResult r = simulate(s, ctx);
    EXPECT_EQ(r.rank_names.size(), 1u);
    EXPECT_GT(r.time_us, 0);
  }
}

// Traffic per link class (issue 11, item 1): a collective is charged to every
// resource it crosses, so no single label flips when one bandwidth passes another.
const Task& first_comm(const std::vector<Task>& tasks) {
  for (const Task& k : tasks)
    if (k.is_comm) return k;
  throw std::runtime_error("no collective");
}

std::vector<Task> adam_allreduce_tasks(int nodes, const Overrides& sets = {}) {
  const model::Program p = workload("adam");
  Overrides o = {{"nodes", std::to_string(nodes)}};
  o.insert(o.end(), sets.begin(), sets.end());
  const Context ctx{load_topology("dgx-a100", o), 8 * nodes, p.params};
  return make_tasks(lower_for(model::find_schedule(p, "AR-C"), ctx), ctx);
}

TEST(LinkTraffic, ACollectiveIsChargedToEveryLinkItCrosses) {
  const Task one = first_comm(adam_allreduce_tasks(1));
  EXPECT_GT(one.demand_GBps[int(Resource::nvlink)], 0);
  EXPECT_EQ(one.demand_GBps[int(Resource::network)], 0) << "one node: no NIC";
  EXPECT_GT(one.demand_GBps[int(Resource::hbm)], 0);
  const Task two = first_comm(adam_allreduce_tasks(2));
  EXPECT_GT(two.demand_GBps[int(Resource::nvlink)], 0) << "7 of 8 ring edges in a node stay on NVLink";
  EXPECT_GT(two.demand_GBps[int(Resource::network)], 0);
  EXPECT_GT(two.demand_GBps[int(Resource::hbm)], 0);
}

TEST(LinkTraffic, PassingTheNetworksBandwidthDoesNotJump) {
  // A DGX A100 node's NICs carry 8 x 200 Gb/s x 0.96 = 192 GB/s; its NVLink
  // 12 links x 16 GB/s = 192. Just below and just above, the ring's demand on
  // each resource moves by the bandwidth's 0.6%, not from one resource to the other.
  const Task below = first_comm(adam_allreduce_tasks(2, {{"node.nccl_link_GBps", "15.9"}}));
  const Task above = first_comm(adam_allreduce_tasks(2, {{"node.nccl_link_GBps", "16.1"}}));
  for (Resource r : {Resource::nvlink, Resource::network, Resource::hbm}) {
    const double a = below.demand_GBps[int(r)], b = above.demand_GBps[int(r)];
    EXPECT_GT(a, 0);
    EXPECT_NEAR(b, a, 0.01 * a) << int(r);
  }
  EXPECT_NEAR(above.duration_us(), below.duration_us(), 0.01 * below.duration_us());
}

// Interference between a GEMM and a collective on one GPU (issue 11, item 3):
// the published case (validation/reference/published.yaml, `overlap`): on an
// H100 a GEMM of exactly 132 tiles runs in one wave alone; beside an NCCL
// all-gather holding 24 SMs (24 channels, one CTA each) 24 tiles wait for a
// second wave. Measured: the GEMM's time 'nearly doubles' (80% -> 47% MFU,
// x1.7); the model: x2 (two waves of the same tile time), HBM not binding.
plan::StepPlan gemm_beside_allgather(int channels) {
  plan::StepPlan p;
  p.schedule = "ol(MM,AG)";
  p.knobs.channels = channels;
  p.stage_codes = {"MM", "AG"};
  plan::Op mm;
  mm.id = 0;
  mm.cls = plan::OpClass::matmul;
  mm.code = "MM";
  mm.stream = plan::Stream::compute;
  mm.work.gemm = plan::Gemm{12 * 128, 11 * 256, 8192, model::DType::f16};  // 12 x 11 = 132 tiles of 128x256
  mm.calls = {1};
  plan::Op ag;
  ag.id = 1;
  ag.cls = plan::OpClass::collective;
  ag.code = "AG";
  ag.stage = 1;
  ag.stream = plan::Stream::comm;
  ag.work.collectives = {{model::OpKind::allgather, "g", 2e9}};
  ag.calls = {1};
  p.ops = {mm, ag};
  plan::Unit u;
  u.name = "ol(MM,AG)";
  u.last_stage = 1;
  u.overlapped = true;
  u.ops = {0, 1};
  p.units = {u};
  return p;
}

TEST(Interference, AGemmBesideACollectiveLosesTheSmsItsChannelsHold) {
  // The SMs alone: nccl.interference (tested below) set to none.
  const Context ctx{load_topology("dgx-h100", {{"nodes", "1"}, {"nccl.interference", "0"}}), 8, {}};
  const SimResult r = simulate_resolved(gemm_beside_allgather(24), ctx);
  const SimEvent& gemm = r.events.at(0);
  ASSERT_EQ(gemm.name, "MM");
  const double slowdown = (gemm.end_us - gemm.start_us - ctx.topology.gpu.launch_us) /
                          (gemm.alone_us - ctx.topology.gpu.launch_us);
  EXPECT_NEAR(slowdown, 2.0, 1e-6) << "two waves instead of one";
  EXPECT_LE(slowdown, 1.7 * 1.25) << "within 25% of the measured x1.7";
  // With 4 channels (4 SMs held) 132 tiles still need 2 waves on 128 SMs; the
  // collective alone beside nothing loses nothing.
  const SimResult few = simulate_resolved(gemm_beside_allgather(4), ctx);
  EXPECT_NEAR(few.events.at(0).end_us - few.events.at(0).start_us, gemm.end_us - gemm.start_us, 1e-6);
  EXPECT_NEAR(r.events.at(1).end_us - r.events.at(1).start_us, r.events.at(1).alone_us, 1e-6 * r.events.at(1).alone_us)
      << "the GEMM's HBM traffic leaves the all-gather its share";
}

// nccl.interference on top of the SMs: the GEMM's work beside the resident
// all-gather runs at 1 / (1 + f), the all-gather's work beside the working
// GEMM likewise; with f = 0 the run is the SM-only one.
TEST(Interference, TheFactorSlowsBothSidesWhileTheyRunTogether) {
  const double f = 0.5;
  const Context none{load_topology("dgx-h100", {{"nodes", "1"}, {"nccl.interference", "0"}}), 8, {}};
  const Context some{load_topology("dgx-h100", {{"nodes", "1"}, {"nccl.interference", std::to_string(f)}}), 8, {}};
  const SimResult a = simulate_resolved(gemm_beside_allgather(24), none);
  const SimResult b = simulate_resolved(gemm_beside_allgather(24), some);
  const auto body = [&](const SimEvent& e) { return e.end_us - e.start_us - none.topology.gpu.launch_us; };
  // The GEMM ends before the all-gather: its whole body runs beside it.
  ASSERT_LT(a.events.at(0).end_us, a.events.at(1).end_us);
  EXPECT_NEAR(body(b.events.at(0)), body(a.events.at(0)) * (1 + f), 1e-6);
  EXPECT_GT(b.events.at(1).end_us - b.events.at(1).start_us, a.events.at(1).end_us - a.events.at(1).start_us)
      << "the all-gather is slowed while the GEMM works";
  // The shipped default is what its comment derives: x1.189 measured over x132/116 from the SMs.
  EXPECT_NEAR(load_topology("dgx-h100").nccl.interference, 1.189 / (132.0 / 116.0) - 1, 1e-3);
}

TEST(Trace, OneProcessPerRankOneThreadPerStream) {
  const model::Program p = workload("gpt3_pipeline");
  const Context ctx{load_topology("dgx-h100"), 8, p.params};
  for (auto s : model::enumerate_schedules(p)) {
    if (s.overlaps.empty()) continue;
    s.knobs.chunks = 4;
    const SimResult r = simulate(s, ctx);
    const auto j = nlohmann::json::parse(chrome_trace_json(r, s.name()));
    int processes = 0, complete = 0;
    std::set<std::pair<int, int>> threads;
    for (const auto& e : j.at("traceEvents")) {
      if (e.at("ph") == "M" && e.at("name") == "process_name") ++processes;
      if (e.at("ph") == "X") {
        ++complete;
        threads.insert({e.at("pid").get<int>(), e.at("tid").get<int>()});
        EXPECT_GE(e.at("dur").get<double>(), 0.0);
      }
    }
    EXPECT_EQ(processes, 2) << "two pipeline groups, one representative rank each";
    EXPECT_GE(complete, int(r.events.size()));
    EXPECT_GE(threads.size(), 2u) << s.name();
    return;
  }
  FAIL() << "gpt3_pipeline has no overlapped schedule";
}

// A schedule's name with its ol(MM,X) written MM-X: the same stages in sequence.
std::string without_overlap(std::string name) {
  const std::size_t at = name.find("ol(MM,");
  if (at == std::string::npos) return name;
  int depth = 0;
  std::size_t close = at + 2;
  for (; close < name.size(); ++close) {
    if (name[close] == '(') ++depth;
    if (name[close] == ')' && --depth == 0) break;
  }
  name.erase(close, 1);
  return name.replace(at, 6, "MM-");
}

// overlap: tile is never priced slower than the same stages without the
// overlap plus one block's collective (the pipeline's fill and drain, issue
// 33), over the matmul-then-collective groups of both Megatron blocks, on
// every GPU topology at 1 and 2 nodes, at two batch sizes and every chunk
// count predict searches (the GPU design: one collective call takes the
// blocks, Capabilities::tile_one_collective), besides the barrier that
// design's communication kernel crosses per block (tile_block_barrier_us,
// which the unoverlapped schedule does not pay). Shown to fail: pricing each
// block as GEMM calls of its own (per-call waves, as chunk does) fails 213
// cases on every topology; one collective call per block (each paying its
// latency at the block's size) fails 228.
TEST(TileOverlap, NeverSlowerThanUnoverlappedPlusOneBlocksCollective) {
  int checked = 0;
  for (const char* topology : {"dgx2-v100", "dgx-a100", "dgx-h100", "dgx-h200"})
    for (int nodes : {1, 2})
      for (const char* w : {"megatron_mlp", "megatron_attention"}) {
        const model::Program p = model::load_program(model::resolve_workload(w));
        const auto all = model::enumerate_schedules(p);
        for (std::int64_t batch : {1, 8}) {
          Context ctx{load_topology(topology, {{"nodes", std::to_string(nodes)}}), 8 * nodes, p.params};
          ctx.sizes["B"] = batch;
          for (const auto& s : all) {
            if (s.overlaps.empty() || !plan::why_not_tile(s, ctx.capabilities()).empty()) continue;
            const std::string plain_name = without_overlap(s.name());
            const auto plain = std::find_if(all.begin(), all.end(), [&](const auto& x) { return x.name() == plain_name; });
            ASSERT_NE(plain, all.end()) << s.name() << " -> " << plain_name;
            const double unoverlapped = simulate(*plain, ctx).time_us;
            for (int chunks : {2, 4, 8}) {
              model::Schedule t = s;
              t.knobs.chunks = chunks;
              t.knobs.overlap = model::Grain::tile;
              const plan::StepPlan plan = lower_for(t, ctx);
              double block = 0;  // the longest collective of one block
              for (const Task& k : make_tasks(plan, ctx))
                if (k.is_comm && plan.units.at(std::size_t(k.unit)).tile) block = std::max(block, k.duration_us());
              const double tiled = simulate(plan, ctx).time_us;
              const double barriers = chunks * tile_block_barrier_us(ctx.topology);
              EXPECT_LE(tiled, (unoverlapped + block + barriers) * (1 + 1e-9))
                  << topology << " x" << nodes << " " << w << " B=" << batch << " " << s.name() << " chunks=" << chunks
                  << ": tile " << tiled << " us, unoverlapped " << unoverlapped << " us, a block's collective " << block;
              ++checked;
            }
          }
        }
      }
  EXPECT_GE(checked, 100);
}

// What `run` tunes on cuda (tile_designs off): tiles of a plain collective
// where the backend instance runs them, none where it refuses them
// (tile_here off: a group that is not one LSA team), and never a fused
// collective's tiles, which `predict` still prices as the design. Shown to
// fail: with tile_here ignored, the refusing backend's context allowed tile.
TEST(TileOverlap, RunTunesTilesOnlyWhereTheCudaBackendRunsThem) {
  const model::Program p = model::load_program(model::resolve_workload("megatron_mlp"));
  model::Schedule rs, fused;
  for (const auto& s : model::enumerate_schedules(p)) {
    if (s.name() == "ol(MM,RS)-C-AG") rs = s;
    if (s.name() == "ol(MM,fuse(RS-C-AG))") fused = s;
  }
  ASSERT_FALSE(rs.overlaps.empty());
  ASSERT_FALSE(fused.overlaps.empty());
  Context ctx{load_topology("dgx-h100"), 8, p.params, plan::BackendKind::cuda};
  EXPECT_EQ(plan::why_not_tile(rs, ctx.capabilities()), "");  // predict: both designs
  EXPECT_EQ(plan::why_not_tile(fused, ctx.capabilities()), "");
  ctx.tile_designs = false;  // run
  EXPECT_EQ(plan::why_not_tile(rs, ctx.capabilities()), "");
  EXPECT_NE(plan::why_not_tile(fused, ctx.capabilities()), "");
  ctx.tile_here = false;
  EXPECT_NE(plan::why_not_tile(rs, ctx.capabilities()), "");
  ctx.tile_designs = true;  // predict prices the design whatever the machine
  EXPECT_EQ(plan::why_not_tile(rs, ctx.capabilities()), "");
}

}  // namespace
}  // namespace coconet::sim
