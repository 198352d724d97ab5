// Properties every prediction must have, checked through the library over
// every workload x schedule on the GPU topologies at 1, 2, 3, 5 and 16 nodes:
// more bandwidth or a higher rate (any bandwidth, rate or efficiency key of a
// topology, raised by 1% and by 2x) never makes a step slower, and a larger
// size (any symbolic size of a workload, raised by 1% and by 2x) never makes
// it faster; both for the analytic model and for the event simulator.
//
// How the check was shown to fail: on the model before issue 11 the same sweep
// reported 30 violations: a faster GEMM slowing an overlapped step by up to
// 0.16% (bandwidth shared in proportion to demand), a better LL128 or tree
// factor choosing a protocol that overlapped worse (up to 0.8%), and 4 of the
// ragged-chunk size cases exempted below. With bandwidth shared max-min in
// rates instead of bytes it reported 11 on DGX A100, 17 on DGX H100 (a faster
// GEMM up to +4.4%), 1 on DGX H200; with a deliberately broken Simple formula
// (x0.9 once the link passes 200 GB/s), 1 on DGX H100. `PropertyCheckCanFail`
// keeps a synthetic jump as a standing test of the checker itself.
#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <map>
#include <sstream>
#include <vector>

#include <fmt/core.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/parse.h"
#include "sim/simulator.h"
#include "sim/tasks.h"

namespace coconet::sim {
namespace {

constexpr double kSlack = 1e-9;  // relative: float noise, not a model effect
// Under AddressSanitizer (make sanitize) the sweep runs 10x slower (78-86 s
// a topology on this 2-core machine: about 165 s of the sanitized tests'
// 252 s) and is there for memory errors, which the smallest and largest
// clusters reach as well: each topology takes one of those two (1 node on
// DGX A100 and H200, 16 on DGX H100 and DGX-2 V100: every topology's code
// paths and both cluster sizes; the four took 46 s of CPU at load average 3-5,
// about 60 s with both counts each); the plain build takes every node count
// on every topology.
#if defined(__SANITIZE_ADDRESS__)
#define COCONET_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COCONET_ASAN 1
#endif
#endif
const int kNodes[] = {1, 2, 3, 5, 16};
constexpr int kSmallest = 1, kLargest = 16;  // the node counts a sanitized sweep alternates
const char* const kWorkloads[] = {"sgd", "adam", "lamb", "megatron_mlp", "megatron_attention", "gpt3_pipeline"};
const double kFactors[] = {1.01, 2.0};
const int kChunks[] = {1, 2, 4, 8};  // predict_space()'s chunk counts

// Keys whose raise must never slow a step: bandwidths, rates, efficiencies
// (held at 1), and the counts of links and NICs (raised by whole units).
enum class KeyKind { rate, efficiency, count };
struct Key {
  const char* path;
  KeyKind kind;
};
const Key kKeys[] = {
    {"gpu.hbm_GBps", KeyKind::rate},
    {"gpu.hbm_efficiency", KeyKind::efficiency},
    {"gpu.tflops.f16", KeyKind::rate},
    {"gpu.tflops.bf16", KeyKind::rate},
    {"gpu.tflops.f32", KeyKind::rate},
    {"gpu.gemm_efficiency", KeyKind::efficiency},
    {"node.nvlink_links", KeyKind::count},
    {"node.nvlink_link_GBps", KeyKind::rate},
    {"node.nccl_link_GBps", KeyKind::rate},
    {"node.nvls_efficiency", KeyKind::efficiency},
    {"network.nics", KeyKind::count},
    {"network.nic_Gbps", KeyKind::rate},
    {"network.nic_efficiency", KeyKind::efficiency},
    {"nccl.channel_GBps", KeyKind::rate},
    {"nccl.ll_max_GBps.one_node", KeyKind::rate},
    {"nccl.ll_max_GBps.two_nodes", KeyKind::rate},
    {"nccl.ll_max_GBps.multi_node", KeyKind::rate},
    {"nccl.ll_efficiency", KeyKind::efficiency},
    {"nccl.ll128_efficiency", KeyKind::efficiency},
    {"nccl.tree_efficiency", KeyKind::efficiency},
    {"nccl.tree_ll_efficiency", KeyKind::efficiency},
    {"nccl.tree_ll128_efficiency.one_node", KeyKind::efficiency},
    {"nccl.tree_ll128_efficiency.multi_node", KeyKind::efficiency},
    {"nccl.reduce_GBps", KeyKind::rate},
};

std::string topology_path(const std::string& name) { return model::resolve_topology(name); }

// The value at a dotted key of a YAML document, if it is there.
std::optional<double> value_at(const YAML::Node& root, const std::string& dotted) {
  YAML::Node n = root;
  std::stringstream ss(dotted);
  std::string part;
  while (std::getline(ss, part, '.')) {
    if (!n.IsMap() || !n[part]) return std::nullopt;
    n.reset(n[part]);
  }
  return n.as<double>();
}

// The overrides that raise `key` by `factor` (nullopt: nothing to raise).
std::optional<Overrides> raised(const YAML::Node& root, const Key& key, double factor) {
  const auto v = value_at(root, key.path);
  if (!v) return std::nullopt;
  Overrides o;
  switch (key.kind) {
    case KeyKind::rate: o.emplace_back(key.path, fmt::format("{:.17g}", *v * factor)); break;
    case KeyKind::efficiency:
      if (*v >= 1.0) return std::nullopt;
      o.emplace_back(key.path, fmt::format("{:.17g}", std::min(1.0, *v * factor)));
      break;
    case KeyKind::count:
      o.emplace_back(key.path, fmt::format("{:.0f}", std::max(*v + 1, std::ceil(*v * factor))));
      break;
  }
  // NCCL's achievable per-link rate cannot exceed the line rate: raise both.
  if (std::string(key.path) == "node.nccl_link_GBps")
    o.emplace_back("node.nvlink_link_GBps",
                   fmt::format("{:.17g}", std::max(*value_at(root, "node.nvlink_link_GBps"), *v * factor)));
  return o;
}

struct Times {
  double analytic = 0;
  double simulated = 0;
};

Times times(const model::Schedule& s, const Context& ctx) {
  const plan::StepPlan p = lower_for(s, ctx);
  return {predict_analytic(p, ctx).time_us, simulate(p, ctx).time_us};
}

// A broken property: `what` changed a time the wrong way.
struct Violation {
  std::string what;
  double before = 0;
  double after = 0;
};

// Records a violation when `after` is below (`must_not_drop`) or above `before`.
void expect_order(std::vector<Violation>& out, const std::string& what, double before, double after,
                  bool must_not_drop) {
  const bool bad = must_not_drop ? after < before * (1 - kSlack) : after > before * (1 + kSlack);
  if (bad) out.push_back({what, before, after});
}

std::string report(const std::vector<Violation>& v) {
  std::string s = fmt::format("{} violation(s)", v.size());
  for (std::size_t i = 0; i < std::min<std::size_t>(v.size(), 20); ++i)
    s += fmt::format("\n  {}: {:.3f} -> {:.3f} us ({:+.2f}%)", v[i].what, v[i].before, v[i].after,
                     100 * (v[i].after / v[i].before - 1));
  return s;
}

// Whether some op's chunks run their collectives with different protocols:
// NCCL picks a protocol per call by its size, so a call's cost is the lowest
// of a few affine costs, concave in its bytes, and when a larger size cuts a
// value's rows into less even chunks (plan/rows.h: ragged slices) a big chunk
// on a faster protocol and smaller ones can cost less in all than even chunks
// of fewer bytes. The executor makes these calls as planned and NCCL tunes
// each, so the drop is the modelled system's, not the model's: the size
// property is not asked of such plans.
bool protocols_differ_across_chunks(const model::Schedule& s, const Context& ctx) {
  std::map<int, std::string> proto_of;
  for (const Task& k : make_tasks(lower_for(s, ctx), ctx)) {
    if (!k.is_comm) continue;
    const std::string d = k.detail.substr(0, k.detail.find(" per chunk"));
    const auto [it, fresh] = proto_of.emplace(k.op, d.substr(d.rfind('/') == std::string::npos ? 0 : d.rfind('/')));
    if (!fresh && it->second != d.substr(d.rfind('/') == std::string::npos ? 0 : d.rfind('/'))) return true;
  }
  return false;
}

struct Case {
  std::string topology;
  int nodes;
  model::Program program;
  std::vector<model::Schedule> schedules;
};

Context context(const Topology& t, const model::Program& p, const model::Bindings& sizes) {
  return Context{t, std::max(1, t.total_gpus() / p.groups()), sizes};
}

// Every schedule of the case under every raised key and every raised size.
void check_case(const Case& c, const YAML::Node& root, std::vector<Violation>& out) {
  const Overrides nodes = {{"nodes", std::to_string(c.nodes)}};
  const Topology base = load_topology(c.topology, nodes);
  if (base.total_gpus() < c.program.groups()) return;
  const Context ctx = context(base, c.program, c.program.params);
  std::vector<Times> before;
  for (const auto& s : c.schedules) before.push_back(times(s, ctx));
  const auto where = [&](const model::Schedule& s, const std::string& change) {
    return fmt::format("{} N={} {} {} chunks={} {}", c.topology, c.nodes, c.program.name, s.name(), s.knobs.chunks,
                       change);
  };
  for (const Key& key : kKeys)
    for (double f : kFactors) {
      auto o = raised(root, key, f);
      if (!o) continue;
      o->insert(o->begin(), nodes.begin(), nodes.end());
      const Context up = context(load_topology(c.topology, *o), c.program, c.program.params);
      for (std::size_t i = 0; i < c.schedules.size(); ++i) {
        const Times t = times(c.schedules[i], up);
        const std::string what = where(c.schedules[i], fmt::format("{} x{}", key.path, f));
        expect_order(out, what + " analytic", before[i].analytic, t.analytic, false);
        expect_order(out, what + " simulated", before[i].simulated, t.simulated, false);
      }
    }
  for (const auto& [name, value] : c.program.params)
    for (double f : kFactors) {
      model::Bindings sizes = c.program.params;
      sizes[name] = std::max<std::int64_t>(value + 1, std::llround(double(value) * f));
      const Context up = context(base, c.program, sizes);
      for (std::size_t i = 0; i < c.schedules.size(); ++i) {
        const Times t = times(c.schedules[i], up);
        const std::string what = where(c.schedules[i], fmt::format("{} x{}", name, f));
        std::vector<Violation> v;
        expect_order(v, what + " analytic", before[i].analytic, t.analytic, true);
        expect_order(v, what + " simulated", before[i].simulated, t.simulated, true);
        if (!v.empty() && protocols_differ_across_chunks(c.schedules[i], up)) continue;
        out.insert(out.end(), v.begin(), v.end());
      }
    }
}

// Every enumerated schedule, and those whose plan is cut into chunks at every
// chunk count predict tries.
std::vector<model::Schedule> schedules_with_chunks(const model::Program& p, const Context& ctx) {
  std::vector<model::Schedule> out;
  for (model::Schedule s : model::enumerate_schedules(p)) {
    const plan::StepPlan plan = lower_for(s, ctx);
    const bool chunked =
        std::any_of(plan.units.begin(), plan.units.end(), [](const plan::Unit& u) { return u.rows > 0; });
    for (int chunks : kChunks) {
      if (chunks > 1 && !chunked) break;
      s.knobs.chunks = chunks;
      out.push_back(s);
    }
  }
  return out;
}

// The node counts a topology's sweep takes: every one, or under AddressSanitizer the one given.
std::vector<int> nodes_to_sweep(int sanitized_nodes) {
#ifdef COCONET_ASAN
  return {sanitized_nodes};
#else
  (void)sanitized_nodes;
  return {std::begin(kNodes), std::end(kNodes)};
#endif
}

void sweep(const char* topology, int sanitized_nodes) {
  // The values the topology takes from its NCCL table are raised too (through --set, as a what-if does).
  const YAML::Node root = YAML::Load(with_nccl_table(model::read_file(topology_path(topology)), topology));
  std::vector<Violation> violations;
  for (int nodes : nodes_to_sweep(sanitized_nodes))
    for (const char* w : kWorkloads) {
      const model::Program p = model::load_program(model::resolve_workload(w));
      const Topology t = load_topology(topology, {{"nodes", std::to_string(nodes)}});
      if (t.total_gpus() < p.groups()) continue;
      check_case(Case{topology, nodes, p, schedules_with_chunks(p, context(t, p, p.params))}, root, violations);
    }
  EXPECT_TRUE(violations.empty()) << topology << ": " << report(violations);
}

TEST(Properties, MonotoneOnDgxA100) { sweep("dgx-a100", kSmallest); }
TEST(Properties, MonotoneOnDgxH100) { sweep("dgx-h100", kLargest); }
TEST(Properties, MonotoneOnDgxH200) { sweep("dgx-h200", kSmallest); }
TEST(Properties, MonotoneOnDgx2V100) { sweep("dgx2-v100", kLargest); }

// The checker flags a prediction that jumps when a bandwidth crosses a
// threshold (as a collective charged to one link label did: more NVLink
// bandwidth moved its label to the network and added contention there).
TEST(Properties, PropertyCheckCanFail) {
  const auto predict = [](double nvlink_GBps) {
    constexpr double kNetwork = 192, kBytes = 1e9, kContention = 1.4;
    const double us = kBytes / (std::min(nvlink_GBps, kNetwork) * 1e3);
    return nvlink_GBps > kNetwork ? us * kContention : us;  // network-bound: shares the NICs with a send
  };
  std::vector<Violation> v;
  expect_order(v, "synthetic nvlink 190 -> 193", predict(190), predict(193), false);
  EXPECT_EQ(v.size(), 1u);
  std::vector<Violation> sizes;
  expect_order(sizes, "synthetic size", 10.0, 9.0, true);
  EXPECT_EQ(sizes.size(), 1u);
}

}  // namespace
}  // namespace coconet::sim
