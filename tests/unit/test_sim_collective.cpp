// The collective model against published nccl-tests figures
// (validation/reference/published.yaml), and its scaling properties: time
// grows with bytes, ring busbw approaches its bound from below, more nodes
// never make a fixed-size allreduce faster, auto is never slower than a fixed
// choice.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "model/catalog.h"
#include "model/error.h"
#include "sim/collective.h"
#include "sim/ring_features.h"
#include "sim/topology.h"
#include "tests/paths.h"

namespace coconet::sim {
namespace {

using model::Algo;
using model::Proto;

constexpr double kLargeMessage = 16.0 * (1ull << 30);  // 16 GiB, as in the NCCL inspector figure
constexpr double kDefaultTolerance = 0.15;

double busbw(const Topology& t, model::OpKind op, const Placement& where, double bytes, Algo a, Proto p = Proto::auto_) {
  const CollectiveCost c = predict_collective(t, {op, bytes, where, a, p});
  return algbw_GBps(bytes, c.time_us()) * bus_factor(op, where.ranks);
}

Placement nodes_of(int nodes, int per_node) {
  return Placement{nodes * per_node, nodes, per_node, nodes > 1};
}

// The accuracy verdict: |predicted - published| <= tolerance x published.
bool within(double predicted, double published, double tolerance) {
  return std::abs(predicted - published) <= tolerance * published;
}

struct Reference {
  std::string system;
  std::string algo;
  double busbw = 0;
  double tolerance = kDefaultTolerance;
  bool per_nic = false;
};

std::vector<Reference> published_collectives() {
  const YAML::Node root = YAML::LoadFile(coconet::test::source_root() + "/validation/reference/published.yaml");
  std::vector<Reference> out;
  for (const auto& c : root["collectives"]) {
    Reference r{c["system"].as<std::string>(), c["algo"].as<std::string>()};
    r.per_nic = bool(c["busbw_GBps_per_nic"]);
    r.busbw = r.per_nic ? c["busbw_GBps_per_nic"].as<double>() : c["busbw_GBps"].as<double>();
    if (c["tolerance"]) r.tolerance = c["tolerance"].as<double>();
    out.push_back(r);
  }
  return out;
}

// The model's figure for a published system.
double predicted_for(const Reference& r) {
  if (r.per_nic) {  // one GPU and one NIC per node: the ring runs at the NIC's rate
    const Topology t = load_topology("dgx-h100", {{"nodes", "2"}});
    return busbw(t, model::OpKind::allreduce, nodes_of(2, 1), kLargeMessage, Algo::ring);
  }
  const bool h100 = r.system.find("H100") != std::string::npos;
  const Topology t = load_topology(h100 ? "dgx-h100" : "dgx-a100", {{"nodes", "1"}});
  return busbw(t, model::OpKind::allreduce, nodes_of(1, 8), kLargeMessage, model::parse_algo(r.algo));
}

TEST(CollectiveAccuracy, PublishedBusBandwidths) {
  const auto refs = published_collectives();
  ASSERT_EQ(refs.size(), 4u);
  for (const auto& r : refs) {
    const double p = predicted_for(r);
    EXPECT_TRUE(within(p, r.busbw, r.tolerance))
        << r.system << " " << r.algo << ": predicted " << p << " GB/s, published " << r.busbw;
  }
}

TEST(CollectiveAccuracy, VerdictCanFail) {
  // NVLink at its line rate instead of NCCL's achievable rate: A100 ring 300 GB/s, not ~230.
  const Topology t = load_topology("dgx-a100", {{"nodes", "1"}, {"node.nccl_link_GBps", "25"}});
  const double p = busbw(t, model::OpKind::allreduce, nodes_of(1, 8), kLargeMessage, Algo::ring);
  EXPECT_FALSE(within(p, 230, kDefaultTolerance)) << p;
}

// NCCL's all-to-all of one MoE dispatch's size on 1-16 DGX H100 nodes
// (published.yaml `alltoall`): each measured time within its tolerance, and
// with the links' full rates (no nccl.alltoall_efficiency) the one-node time
// is not (it came out 17% fast).
struct AllToAllRow {
  int ranks = 0;
  double time_us = 0;
};

double predicted_alltoall_us(const Topology& t, int ranks, double bytes) {
  const int per_node = std::min(ranks, t.node.gpus);
  return predict_collective(t, {model::OpKind::alltoall, bytes, nodes_of(ranks / per_node, per_node)}).time_us();
}

TEST(CollectiveAccuracy, PublishedAllToAllTimes) {
  const YAML::Node a =
      YAML::LoadFile(coconet::test::source_root() + "/validation/reference/published.yaml")["alltoall"];
  const double bytes = a["bytes"].as<double>(), tolerance = a["tolerance"].as<double>();
  std::vector<AllToAllRow> rows;
  for (const auto& kv : a["times_us"]) rows.push_back({kv.first.as<int>(), kv.second.as<double>()});
  ASSERT_EQ(rows.size(), 5u);
  const Topology t = load_topology("dgx-h100", {{"nodes", "16"}});
  for (const AllToAllRow& r : rows) {
    const double p = predicted_alltoall_us(t, r.ranks, bytes);
    EXPECT_TRUE(within(p, r.time_us, tolerance)) << r.ranks << " ranks: predicted " << p << " us, published "
                                                 << r.time_us;
  }
  Topology line_rate = t;
  line_rate.nccl.alltoall_efficiency = {};
  const double p = predicted_alltoall_us(line_rate, rows.front().ranks, bytes);
  EXPECT_FALSE(within(p, rows.front().time_us, tolerance)) << p;
}

TEST(CollectiveModel, TimeGrowsWithBytes) {
  for (const char* name : {"dgx2-v100", "dgx-a100", "dgx-h100"}) {
    const Topology t = load_topology(name);
    for (model::OpKind op : {model::OpKind::allreduce, model::OpKind::reducescatter, model::OpKind::allgather, model::OpKind::broadcast, model::OpKind::send}) {
      double last = 0;
      for (double bytes = 8; bytes <= 8.0 * (1ull << 30); bytes *= 2) {
        const double us = predict_collective(t, {op, bytes, place(t, t.total_gpus())}).time_us();
        EXPECT_GE(us, last) << name << " " << to_string(op) << " " << bytes;
        last = us;
      }
    }
  }
}

// One rank exchanges nothing: as NCCL's one-rank path, out of place a local
// copy (its launch, its bytes read and written over HBM), in place nothing;
// a send still crosses to its peer.
TEST(CollectiveModel, OneRankIsALocalCopyOrNothing) {
  const Topology t = load_topology("dgx-h100");
  constexpr double kBytes = 64.0 * (1 << 20);
  for (model::OpKind op : {model::OpKind::allreduce, model::OpKind::reducescatter, model::OpKind::allgather,
                           model::OpKind::broadcast, model::OpKind::reduce}) {
    CollectiveRequest r{op, kBytes, place(t, 1)};
    const CollectiveCost copy = predict_collective(t, r);
    EXPECT_NEAR(copy.time_us(), t.gpu.launch_us + kBytes * 2 / (t.gpu.hbm_effective_GBps() * 1e3), 1e-6)
        << to_string(op);
    EXPECT_EQ(copy.channels, 0) << to_string(op);
    const LinkTraffic moved = traffic_of(t, r, copy);
    EXPECT_DOUBLE_EQ(moved.hbm, 2 * kBytes);
    EXPECT_DOUBLE_EQ(moved.nvlink + moved.network, 0.0);
    r.in_place = true;
    EXPECT_DOUBLE_EQ(predict_collective(t, r).time_us(), 0.0) << to_string(op);
    EXPECT_DOUBLE_EQ(traffic_of(t, r, predict_collective(t, r)).hbm, 0.0);
  }
  const CollectiveRequest send{model::OpKind::send, kBytes, place(t, 1)};
  EXPECT_GT(traffic_of(t, send, predict_collective(t, send)).nvlink, 0.0);
}

// gpu.copy, where a topology has it, prices the one-rank copy instead of a
// launch and HBM; its values are checked where they are read.
TEST(CollectiveModel, OneRankCopyTakesTheTopologysCopyConstants) {
  std::ifstream in(model::resolve_topology("dgx-h100"));
  std::string text, line;
  while (std::getline(in, line)) {
    text += line + "\n";
    if (line == "gpu:") text += "  copy: {us: 0.5, GBps: 1000}\n";
  }
  const Topology t = parse_topology(text, "copy.yaml");
  const CollectiveRequest r{model::OpKind::allgather, 1e6, place(t, 1)};
  EXPECT_NEAR(predict_collective(t, r).time_us(), 0.5 + 2e6 / 1e6, 1e-9);
  EXPECT_DOUBLE_EQ(traffic_of(t, r, predict_collective(t, r)).hbm, 0.0);  // an achieved rate: its traffic in it
  const auto error_of = [&](const std::string& from, const std::string& to) {
    std::string bad = text;
    bad.replace(bad.find(from), from.size(), to);
    try {
      (void)parse_topology(bad, "bad.yaml");
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(error_of("us: 0.5", "us: -1").find("gpu.copy"), std::string::npos) << error_of("us: 0.5", "us: -1");
  EXPECT_NE(error_of("GBps: 1000", "GBps: 0").find("gpu.copy"), std::string::npos);
  EXPECT_NE(error_of("GBps: 1000", "GBs: 1000").find("GBs"), std::string::npos) << error_of("GBps: 1000", "GBs: 1000");
}

TEST(CollectiveModel, RingBusBandwidthApproachesBoundFromBelow) {
  const Topology t = load_topology("dgx-h100", {{"nodes", "1"}});
  const double bound = t.node.nvlink_GBps();
  double last = 0;
  for (double bytes = 1024; bytes <= 64.0 * (1ull << 30); bytes *= 4) {
    const double bw = busbw(t, model::OpKind::allreduce, nodes_of(1, 8), bytes, Algo::ring, Proto::simple);
    EXPECT_LT(bw, bound);
    EXPECT_GT(bw, last);
    last = bw;
  }
  EXPECT_GT(last, 0.99 * bound);
}

TEST(CollectiveModel, ReductionsCostPerByteCombined) {
  // A slow combiner (a CPU summing f16) makes allreduce and reduce-scatter dearer
  // by (n-1)/n of the buffer over reduce_GBps; all-gather and send do not reduce.
  const Topology fast = load_topology("dgx-h100", {{"nodes", "1"}});
  const Topology slow = load_topology("dgx-h100", {{"nodes", "1"}, {"nccl.reduce_GBps", "1"}});
  const double bytes = 1e8;
  for (model::OpKind op : {model::OpKind::allreduce, model::OpKind::reducescatter, model::OpKind::allgather, model::OpKind::send}) {
    const CollectiveRequest r{op, bytes, nodes_of(1, 8), Algo::ring, Proto::simple};
    const double extra = predict_collective(slow, r).time_us() - predict_collective(fast, r).time_us();
    const double expected = bytes * reduce_factor(op, 8) * (1.0 / 1e3 - 1.0 / (fast.nccl.reduce_GBps * 1e3));
    EXPECT_NEAR(extra, expected, 1e-6 * predict_collective(slow, r).time_us()) << to_string(op);
  }
  EXPECT_DOUBLE_EQ(reduce_factor(model::OpKind::allreduce, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(reduce_factor(model::OpKind::allgather, 8), 0.0);
}

TEST(CollectiveModel, MoreNodesNeverFaster) {
  for (const char* name : {"dgx2-v100", "dgx-a100", "dgx-h100"}) {
    const Topology t = load_topology(name);
    for (double bytes : {1e3, 1e6, 1e9}) {
      double last = 0;
      for (int nodes = 1; nodes <= 512; nodes *= 2) {
        const double us = predict_collective(t, {model::OpKind::allreduce, bytes, nodes_of(nodes, t.node.gpus)}).time_us();
        EXPECT_GE(us, last) << name << " " << bytes << " bytes on " << nodes << " nodes";
        last = us;
      }
    }
  }
}

// Among NCCL's algorithms: hierarchical is three NCCL calls, not one of them.
// `auto` is the fastest supported choice the test finds by trying each one
// by name: the same time (neither above it nor below it) and, where one
// choice is strictly fastest, the same algorithm and protocol.
TEST(CollectiveModel, AutoIsTheFastestChoice) {
  const Topology t = load_topology("dgx-h100");
  int strict = 0;
  for (const Placement& where : {nodes_of(1, 8), nodes_of(4, 8), nodes_of(64, 8)})
    for (double bytes : {1e3, 1e6, 1e9}) {
      const CollectiveCost best = predict_collective(t, {model::OpKind::allreduce, bytes, where});
      double fastest = std::numeric_limits<double>::infinity();
      std::vector<std::pair<Algo, Proto>> at_fastest;
      for (Algo a : {Algo::ring, Algo::tree, Algo::nvls})
        for (Proto p : {Proto::ll, Proto::ll128, Proto::simple}) {
          if (!supported(t, model::OpKind::allreduce, where, a, p)) continue;
          const double us = predict_collective(t, {model::OpKind::allreduce, bytes, where, a, p}).time_us();
          if (us < fastest) fastest = us, at_fastest.clear();
          if (us == fastest) at_fastest.emplace_back(a, p);
        }
      const std::string what = std::to_string(where.nodes) + " nodes, " + std::to_string(bytes) + " bytes";
      EXPECT_DOUBLE_EQ(best.time_us(), fastest) << what;
      if (at_fastest.size() == 1) {
        ++strict;
        EXPECT_EQ(best.algo, at_fastest.front().first) << what;
        EXPECT_EQ(best.proto, at_fastest.front().second) << what;
      }
    }
  EXPECT_GT(strict, 0);
}

TEST(CollectiveModel, NcclTestsBusFactors) {
  EXPECT_DOUBLE_EQ(bus_factor(model::OpKind::allreduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(bus_factor(model::OpKind::allgather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(bus_factor(model::OpKind::reducescatter, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(bus_factor(model::OpKind::broadcast, 8), 1.0);
}

TEST(CollectiveModel, SmallMessagesPickLowLatencyProtocols) {
  const Topology t = load_topology("dgx-h100", {{"nodes", "1"}});
  EXPECT_EQ(predict_collective(t, {model::OpKind::allreduce, 1024, nodes_of(1, 8)}).proto, Proto::ll);
  EXPECT_EQ(predict_collective(t, {model::OpKind::allreduce, 4e9, nodes_of(1, 8)}).algo, Algo::nvls);
}

TEST(CollectiveModel, UnsupportedChoicesAreUserErrors) {
  const Topology a100 = load_topology("dgx-a100", {{"nodes", "1"}});
  EXPECT_THROW((void)predict_collective(a100, {model::OpKind::allreduce, 1e6, nodes_of(1, 8), Algo::nvls}), UserError);
  EXPECT_THROW((void)predict_collective(a100, {model::OpKind::allgather, 1e6, nodes_of(1, 8), Algo::tree}), UserError);
  EXPECT_NO_THROW((void)predict_collective_or_auto(a100, {model::OpKind::allgather, 1e6, nodes_of(1, 8), Algo::tree}));
}

// NCCL 2.28 tuning.cc, as NCCL applies it (issue 11, item 4).
TEST(NcclTuning, AutoNeverChoosesHierarchical) {
  for (const char* name : {"dgx2-v100", "dgx-a100", "dgx-h100"}) {
    const Topology t = load_topology(name);
    for (int nodes : {2, 16, 64})
      for (double bytes = 1e3; bytes <= 1e10; bytes *= 10) {
        const CollectiveCost c = predict_collective(t, {model::OpKind::allreduce, bytes, nodes_of(nodes, t.node.gpus)});
        EXPECT_NE(c.algo, Algo::hierarchical) << name << " " << nodes << " nodes, " << bytes << " B";
      }
  }
  // Still there by name.
  const Topology t = load_topology("dgx2-v100");
  EXPECT_EQ(predict_collective(t, {model::OpKind::allreduce, 1e9, nodes_of(16, 16), Algo::hierarchical}).algo,
            Algo::hierarchical);
}

TEST(NcclTuning, NvlsNeedsTwoChannels) {
  const Topology t = load_topology("dgx-h100", {{"nodes", "1"}});
  const Placement p = nodes_of(1, 8);
  EXPECT_FALSE(supported(t, model::OpKind::allreduce, p, Algo::nvls, Proto::simple, 1));
  EXPECT_TRUE(supported(t, model::OpKind::allreduce, p, Algo::nvls, Proto::simple, 2));
  EXPECT_THROW((void)predict_collective(t, {model::OpKind::allreduce, 1e9, p, Algo::nvls, Proto::auto_, 1}), UserError);
  EXPECT_NE(predict_collective(t, {model::OpKind::allreduce, 4e9, p, Algo::auto_, Proto::auto_, 1}).algo, Algo::nvls);
  // More channels are never slower: (channels-1)/channels of the bandwidth.
  double last = std::numeric_limits<double>::infinity();
  for (int ch : {2, 4, 8, 16, 32}) {
    const double us = predict_collective(t, {model::OpKind::allreduce, 4e9, p, Algo::nvls, Proto::simple, ch}).time_us();
    EXPECT_LE(us, last) << ch;
    last = us;
  }
}

TEST(NcclTuning, Ll128CapIsNotSimples) {
  // The per-channel LL128 ceiling (perChMaxRingLL128Bws, 36.7 GB/s on Hopper)
  // binds LL128, not Simple. On a DGX H100 a channel's share of the link
  // (370.8 / 16) is below it; with twice the NVLinks (a what-if) LL128 stops
  // at 16 x 36.7 = 587.2 GB/s and Simple reaches the links' 741.6.
  const Topology t = load_topology("dgx-h100", {{"nodes", "1"}, {"node.nvlink_links", "36"}});
  const Placement p = nodes_of(1, 8);
  const double bytes = 64e9;
  const auto bw = [&](Proto pr, int ch) {
    const CollectiveCost c = predict_collective(t, {model::OpKind::allreduce, bytes, p, Algo::ring, pr, ch});
    return algbw_GBps(bytes, c.time_us()) * bus_factor(model::OpKind::allreduce, 8);
  };
  EXPECT_NEAR(bw(Proto::ll128, 0), 16 * 36.7, 0.01 * 587.2);
  EXPECT_NEAR(bw(Proto::simple, 0), 741.6, 0.02 * 741.6);  // the reduction costs ~1%
  // Fewer channels reach their share of the link (NCCL: busBw = nChannels x a channel's bw).
  EXPECT_NEAR(bw(Proto::simple, 2), 741.6 * 2 / 16, 0.01 * 92.7);
  EXPECT_NEAR(bw(Proto::simple, 32), 741.6, 0.02 * 741.6);
}

TEST(NcclTuning, TreeHasItsOwnLatenciesAndFactors) {
  const Topology t = load_topology("dgx-h100");
  // 5 nodes: floor(log2 5) = 2 levels, not ceil = 3.
  const CollectiveRequest r{model::OpKind::allreduce, 8, nodes_of(5, 8), Algo::tree, Proto::ll};
  const CollectiveCost c = predict_collective(t, r);
  EXPECT_NEAR(c.hops_us, 2.0 * (7 * t.node.tree_hop_latency_us.ll + 2 * t.network.tree_hop_latency_us.ll), 1e-9);
  EXPECT_DOUBLE_EQ(t.node.tree_hop_latency_us.ll128, 1.25);  // hwLat[NVLINK][TREE], not the ring's 1.9
  EXPECT_DOUBLE_EQ(t.network.tree_hop_latency_us.ll, 5.0);   // hwLat[NET][TREE], not the ring's 2.7
  // Tree LL: busBw / 3.8 (the ring's LL: / 2), both under the LL ceiling.
  const Topology one = load_topology("dgx-h100", {{"nodes", "1"}});
  const double big = 1e10;
  const auto algbw = [&](Algo a, Proto p) {
    return algbw_GBps(big, predict_collective(one, {model::OpKind::allreduce, big, nodes_of(1, 8), a, p, 0}).transfer_us -
                               predict_collective(one, {model::OpKind::allreduce, big, nodes_of(1, 8), a, p, 0}).reduce_us);
  };
  EXPECT_NEAR(algbw(Algo::tree, Proto::simple), 370.8 * 0.92 / 2, 0.5);
  EXPECT_NEAR(algbw(Algo::tree, Proto::ll), 370.8 * 0.92 / 3.8 / 2, 0.5);
  EXPECT_NEAR(algbw(Algo::tree, Proto::ll128), 370.8 * 0.92 * 0.778 / 2, 0.5);  // 7/9 on one node
}

TEST(NcclTuning, LlCeilingByNodeCount) {
  // llMaxBws across nodes follows the host CPU (DGX H100: Intel): 39.0 GB/s on 2 nodes, 20.4 on 3+.
  const Topology t = load_topology("dgx-h100");
  EXPECT_DOUBLE_EQ(t.nccl.ll_max_GBps(1), 141.0);
  EXPECT_DOUBLE_EQ(t.nccl.ll_max_GBps(2), 39.0);
  EXPECT_DOUBLE_EQ(t.nccl.ll_max_GBps(3), 20.4);
  EXPECT_DOUBLE_EQ(t.nccl.ll128_efficiency, 0.92);
}

// Small-message latency (issue 11, item 6): each published small-message time
// of validation/reference/published.yaml against the model on the topology
// standing for its system, within 50%.
constexpr double kLatencyTolerance = 0.5;

struct LatencyFigure {
  std::string system;
  model::OpKind op = model::OpKind::allreduce;
  Algo algo = Algo::auto_;
  double bytes = 0;
  double time_us = 0;
};

std::vector<LatencyFigure> published_latencies() {
  const YAML::Node root = YAML::LoadFile(coconet::test::source_root() + "/validation/reference/published.yaml");
  std::vector<LatencyFigure> out;
  for (const auto& f : root["latency"])
    out.push_back({f["system"].as<std::string>(), parse_coll_op(f["op"].as<std::string>()),
                   f["algo"] ? model::parse_algo(f["algo"].as<std::string>()) : Algo::auto_, f["bytes"].as<double>(),
                   f["time_us"].as<double>()});
  return out;
}

// The topology standing for a system ("4x H800, ..."): Hopper -> dgx-h100,
// A100 -> dgx-a100; its leading count is the ranks, all on one node.
std::string topology_of(const std::string& system) {
  return system.find("A100") != std::string::npos ? "dgx-a100" : "dgx-h100";
}
int ranks_of(const std::string& system) { return std::stoi(system.substr(0, system.find('x'))); }

// A shipped topology without its measured latency (the tuning table's alone).
Topology without_measurement(const std::string& name) {
  std::istringstream in(model::read_file(model::resolve_topology(name)));
  std::string text, line;
  while (std::getline(in, line))
    if (line.find("measured_latency:") == std::string::npos) text += line + "\n";
  return parse_topology(text, name + " (no measured latency)", {{"nodes", "1"}});
}

double latency_of(const Topology& t, const LatencyFigure& f) {
  const int n = ranks_of(f.system);
  return predict_collective(t, {f.op, f.bytes, nodes_of(1, n), f.algo}).time_us();
}

TEST(CollectiveAccuracy, PublishedSmallMessageLatencies) {
  const auto figures = published_latencies();
  ASSERT_GE(figures.size(), 2u);  // at least two systems
  for (const auto& f : figures) {
    const double p = latency_of(load_topology(topology_of(f.system), {{"nodes", "1"}}), f);
    EXPECT_TRUE(within(p, f.time_us, kLatencyTolerance))
        << f.system << ": predicted " << p << " us, published " << f.time_us;
  }
  // The acceptance case of issue 11: 4x H800, 1 KB allreduce, 3.5 us.
  const Topology h = load_topology("dgx-h100", {{"nodes", "1"}, {"node.gpus", "4"}});
  EXPECT_TRUE(within(predict_collective(h, {model::OpKind::allreduce, 1024, nodes_of(1, 4)}).time_us(), 3.5,
                     kLatencyTolerance));
}

// The verdict fails on the tuning table's latencies alone: 10.2 us for the
// H800 figure, 7.2 us for the A100 one (9.85 published: inside 50%, so the
// H800 figure is the one that shows it).
TEST(CollectiveAccuracy, SmallMessageVerdictCanFail) {
  const auto figures = published_latencies();
  int failed = 0;
  for (const auto& f : figures)
    failed += within(latency_of(without_measurement(topology_of(f.system)), f), f.time_us, kLatencyTolerance) ? 0 : 1;
  EXPECT_GE(failed, 1);
}

// The measurement moves times, not choices: `auto` picks what NCCL's tuning
// table picks, and every choice is moved by the same correction.
TEST(CollectiveModel, MeasuredLatencyKeepsNcclsChoices) {
  for (const char* name : {"dgx-h100", "dgx-a100", "dgx-h200"}) {
    const Topology t = load_topology(name);
    const Topology table = without_measurement(name);
    const double correction = latency_correction_us(t);
    EXPECT_NE(correction, 0.0) << name;
    EXPECT_EQ(latency_correction_us(table), 0.0);
    for (int nodes : {1, 2, 16})
      for (model::OpKind op : {model::OpKind::allreduce, model::OpKind::allgather, model::OpKind::send})
        for (double bytes = 8; bytes <= 1e10; bytes *= 8) {
          const Placement where = nodes_of(nodes, t.node.gpus);
          const CollectiveCost a = predict_collective(t, {op, bytes, where});
          const CollectiveCost b = predict_collective(table, {op, bytes, where});
          EXPECT_EQ(a.algo, b.algo) << name << " " << bytes;
          EXPECT_EQ(a.proto, b.proto) << name << " " << bytes;
          EXPECT_NEAR(a.latency_us(), std::max(0.0, b.latency_us() - correction), 1e-9);
        }
  }
}

TEST(CollectiveModel, MeasuredLatencyErrorsNameThePlace) {
  std::string text = model::read_file(model::resolve_topology("dgx-h100"));
  const auto bad = [&](const std::string& from, const std::string& to) {
    std::string s = text;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  const auto error_of = [](const std::string& yaml) {
    try {
      (void)parse_topology(yaml, "x.yaml");
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::pair<std::string, std::string> cases[][2] = {
      {{"op: allreduce, algo: ring", "op: alltoall, algo: ring"}, {"'alltoall' is not a collective", ""}},
      {{"algo: ring, proto: ll", "algo: auto, proto: ll"}, {"not auto", ""}},
      {{"time_us: 3.5", "time_us: -1"}, {"nccl.measured_latency.time_us", ""}},
      {{"algo: ring, proto: ll", "algo: hierarchical, proto: ll"}, {"NCCL does not run", ""}},
      {{"op: allreduce, algo: ring", "op: allgather, algo: tree"}, {"NCCL does not run allgather tree", ""}},
      {{"algo: ring, proto: ll", "algo: nvls, proto: ll"}, {"nvls (allreduce, simple)", ""}},
      {{"algo: ring, proto: ll", "algo: ring, proto: fast"}, {"name the algorithm and protocol", ""}},
      {{"op: allreduce, algo: ring, proto: ll, ranks: 4", "op: send, algo: ring, proto: ll, ranks: 0"},
       {"nccl.measured_latency.ranks", ""}},
  };
  for (const auto& c : cases) {
    const std::string e = error_of(bad(c[0].first, c[0].second));
    EXPECT_NE(e.find("x.yaml:"), std::string::npos) << c[0].second << ": " << e;
    EXPECT_NE(e.find(c[1].first), std::string::npos) << c[0].second << ": " << e;
  }
  // An NVLS measurement on a node without NVLS, and MPI's second regime on a GPU topology.
  std::string no_nvls = bad("algo: ring, proto: ll", "algo: nvls, proto: simple");
  no_nvls.replace(no_nvls.find("nvls: true"), 10, "nvls: false");
  EXPECT_NE(error_of(no_nvls).find("an nvls measurement needs node.nvls: true"), std::string::npos)
      << error_of(no_nvls);
  const std::string large = bad("  measured_latency:", "  large_messages: {from_bytes: 32768, base_latency_us: 1, "
                                                       "hop_latency_us: 1, link_GBps: 1, reduce_GBps: 1}\n  measured_latency:");
  EXPECT_NE(error_of(large).find("it needs `device: cpu`"), std::string::npos) << error_of(large);
  try {
    (void)parse_topology(bad("ranks: 4,", "ranks: 1,"), "x.yaml");
    FAIL() << "one rank accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("x.yaml:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nccl.measured_latency.ranks"), std::string::npos) << e.what();
  }
}

// A network oversubscribed above a pod size (network.pod_gpus,
// network.oversubscription; docs/cost-model.md "Pods"): a collective inside
// one pod is priced as on a flat network; one spanning pods reaches min(1,
// q/k) of its network bandwidth, q its nodes in its least-populated pod, k
// the oversubscription; a send across pods 1/k.
Topology without_pods(const std::string& name, const Overrides& o = {}) {
  std::istringstream in(model::read_file(model::resolve_topology(name)));
  std::string text;
  for (std::string l; std::getline(in, l);)
    if (l.find("pod_gpus:") == std::string::npos && l.find("oversubscription:") == std::string::npos) text += l + "\n";
  return parse_topology(text, name + " (flat)", o);
}

constexpr model::OpKind kPricedOps[] = {model::OpKind::allreduce, model::OpKind::reducescatter,
                                        model::OpKind::allgather, model::OpKind::broadcast,
                                        model::OpKind::reduce,    model::OpKind::send,
                                        model::OpKind::alltoall};

TEST(Pods, InsideOnePodPricedAsOnAFlatNetwork) {
  const Topology pods = load_topology("llama3-h100-roce");
  const Topology flat = without_pods("llama3-h100-roce");
  ASSERT_EQ(pods.network.pod_gpus, 3072);
  int compared = 0;
  for (int nodes : {1, 2, 3, 16, 384})
    for (int per_node : {1, 8})
      for (model::OpKind op : kPricedOps)
        for (Algo a : {Algo::auto_, Algo::ring, Algo::tree, Algo::hierarchical})
          for (Proto p : {Proto::auto_, Proto::ll, Proto::ll128, Proto::simple})
            for (double bytes : {1024.0, 64.0 * (1 << 20)}) {
              const CollectiveRequest r{op, bytes, Placement{nodes * per_node, nodes, per_node, nodes > 1}, a, p};
              EXPECT_DOUBLE_EQ(predict_collective_or_auto(pods, r).time_us(), predict_collective_or_auto(flat, r).time_us())
                  << to_string(op) << " " << nodes << "x" << per_node << " " << to_string(a) << " " << to_string(p);
              ++compared;
            }
  EXPECT_GT(compared, 1000);
  // Every rank count of one pod as place() packs it.
  for (int ranks = 1; ranks <= pods.network.pod_gpus; ranks *= 2) {
    const CollectiveRequest r{model::OpKind::allreduce, kLargeMessage, place(pods, ranks)};
    EXPECT_DOUBLE_EQ(predict_collective(pods, r).time_us(), predict_collective(flat, r).time_us()) << ranks;
  }
}

TEST(Pods, ShippedTopologiesWithoutPodsAreFlat) {
  for (const char* name : {"dgx2-v100", "dgx-a100", "dgx-h100", "dgx-h200", "cpu-local", "hgx-h100-4nic", "gb200-nvl72"}) {
    const Topology t = load_topology(name);
    EXPECT_EQ(t.network.pod_gpus, 0) << name;
    const Placement wide{4096 * t.node.gpus, 4096, t.node.gpus, true};
    EXPECT_EQ(pods_spanned(t, wide), 1) << name;
    EXPECT_DOUBLE_EQ(pod_network_share(t, model::OpKind::allreduce, wide), 1.0) << name;
  }
}

// The network's part of a collective's time: its transfer less the reduction.
double network_transfer_us(const Topology& t, model::OpKind op, const Placement& where, Algo a) {
  const CollectiveCost c = predict_collective(t, {op, kLargeMessage, where, a, Proto::simple});
  return c.transfer_us - c.reduce_us;
}

// One GPU per node (a data-parallel group's layout): the ring and the tree
// are bound by one NIC, so the factor shows whole.
TEST(Pods, TwoPodsSlowerByTheOversubscription) {
  const Overrides node_pods = {{"network.pod_gpus", "8"}};  // a pod of one node
  const Topology pods = load_topology("llama3-h100-roce", node_pods);
  const Topology flat = without_pods("llama3-h100-roce");
  const double k = pods.network.oversubscription;
  ASSERT_DOUBLE_EQ(k, 7.0);
  const Placement two{2, 2, 1, true};
  EXPECT_EQ(pods_spanned(pods, two), 2);
  for (model::OpKind op : {model::OpKind::allreduce, model::OpKind::reducescatter, model::OpKind::allgather})
    EXPECT_NEAR(network_transfer_us(pods, op, two, Algo::ring) / network_transfer_us(flat, op, two, Algo::ring), k, 1e-9)
        << to_string(op);
  EXPECT_NEAR(network_transfer_us(pods, model::OpKind::allreduce, two, Algo::tree) /
                  network_transfer_us(flat, model::OpKind::allreduce, two, Algo::tree),
              k, 1e-9);
  EXPECT_NEAR(network_transfer_us(pods, model::OpKind::send, two, Algo::ring) /
                  network_transfer_us(flat, model::OpKind::send, two, Algo::ring),
              k, 1e-9);
  // Eight GPUs a node: the ring's bound falls from NVLink's to the node's NICs over k.
  const Placement full{16, 2, 8, true};
  const double nvlink = pods.node.nvlink_GBps();
  const double nics = 8 * pods.network.nic_GBps();
  EXPECT_NEAR(network_transfer_us(pods, model::OpKind::allreduce, full, Algo::ring) /
                  network_transfer_us(flat, model::OpKind::allreduce, full, Algo::ring),
              std::min(nvlink, nics) / (nics / k), 1e-9);
  EXPECT_GT(predict_collective(pods, {model::OpKind::allreduce, kLargeMessage, full}).time_us(),
            predict_collective(flat, {model::OpKind::allreduce, kLargeMessage, full}).time_us());
  // One node: no network, no pods crossed.
  const Placement one{8, 1, 8, false};
  EXPECT_DOUBLE_EQ(predict_collective(pods, {model::OpKind::allreduce, kLargeMessage, one}).time_us(),
                   predict_collective(flat, {model::OpKind::allreduce, kLargeMessage, one}).time_us());
}

// A ring leaves a pod on one node's stream, which the collective's q nodes
// in that pod share the uplinks for: min(1, q/k) of the bandwidth.
TEST(Pods, ShareGrowsWithTheCollectivesNodesInEachPod) {
  const Topology flat = without_pods("llama3-h100-roce");
  const auto factor = [&](int pod_nodes, int nodes) {
    const Topology pods = load_topology("llama3-h100-roce", {{"network.pod_gpus", std::to_string(8 * pod_nodes)}});
    const Placement p{nodes, nodes, 1, true};
    return network_transfer_us(pods, model::OpKind::allreduce, p, Algo::ring) /
           network_transfer_us(flat, model::OpKind::allreduce, p, Algo::ring);
  };
  EXPECT_NEAR(factor(2, 4), 7.0 / 2, 1e-9);   // two pods of 2 nodes
  EXPECT_NEAR(factor(2, 3), 7.0, 1e-9);       // the second pod holds one node of it
  EXPECT_NEAR(factor(4, 12), 7.0 / 4, 1e-9);  // three pods of 4
  EXPECT_NEAR(factor(7, 14), 1.0, 1e-9);      // 7 nodes a pod carry one stream at 1:7
  EXPECT_NEAR(factor(384, 768), 1.0, 1e-9);   // Llama 3's pods, two of them, whole
}

// A group strided over the cluster (data parallelism) states the pods it spans.
TEST(Pods, StridedGroupStatesItsPods) {
  const Topology pods = load_topology("llama3-h100-roce");
  const Topology flat = without_pods("llama3-h100-roce");
  Placement dp{16, 16, 1, true};
  EXPECT_EQ(pods_spanned(pods, dp), 1);  // 16 consecutive nodes: one pod
  EXPECT_DOUBLE_EQ(network_transfer_us(pods, model::OpKind::allreduce, dp, Algo::ring),
                   network_transfer_us(flat, model::OpKind::allreduce, dp, Algo::ring));
  dp.pods = 8;  // one rank a node, two nodes in each of 8 pods
  EXPECT_NEAR(network_transfer_us(pods, model::OpKind::allreduce, dp, Algo::ring) /
                  network_transfer_us(flat, model::OpKind::allreduce, dp, Algo::ring),
              7.0 / 2, 1e-9);
}

}  // namespace
}  // namespace coconet::sim

namespace coconet::sim {
namespace {

// The ring's features (sim/ring_features.h): the steps that cross the network
// are the node boundaries the ring passes (twice for an allreduce), a send's
// one step crosses when its peer is on another node.
TEST(RingFeatures, StepsSplitAtTheNodeBoundaries) {
  const RingFeatures ar = ring_features(model::OpKind::allreduce, 16, 2, 1600);
  EXPECT_DOUBLE_EQ(ar.inter_steps, 2);
  EXPECT_DOUBLE_EQ(ar.intra_steps, 28);
  EXPECT_DOUBLE_EQ(ar.bus_bytes, 3000);
  EXPECT_DOUBLE_EQ(ar.reduced_bytes, 1500);
  const RingFeatures ag = ring_features(model::OpKind::allgather, 16, 4, 1600);
  EXPECT_DOUBLE_EQ(ag.inter_steps, 3);
  EXPECT_DOUBLE_EQ(ag.intra_steps, 12);
  EXPECT_DOUBLE_EQ(ag.reduced_bytes, 0);
  EXPECT_DOUBLE_EQ(ring_features(model::OpKind::send, 2, 2, 100, true).inter_steps, 1);
  EXPECT_DOUBLE_EQ(ring_features(model::OpKind::send, 2, 1, 100, false).intra_steps, 1);
  const RingConstants k{10, 1, 5, 2, 4};
  // 10 + 28 x 1 + 2 x 5 + 3000 B at 2 GB/s (1.5 us) + 1500 B at 4 GB/s (0.375 us).
  EXPECT_DOUBLE_EQ(ring_us(k, ar), 10 + 28 + 10 + 1.5 + 0.375);
}

// A cpu topology's collectives are MPI's fit (sim/collective_mpi.h): NCCL's
// algorithms and protocols are reported as asked and priced alike (MPI runs
// its own), where a GPU topology prices each its own way.
TEST(CollectiveCostModels, MpiPricesItsOwnAlgorithmWhateverIsAsked) {
  const Topology cpu = load_topology("cpu-local");
  const Placement two = place(cpu, 2);
  for (double bytes : {1024.0, 1048576.0}) {
    const CollectiveCost ring = predict_collective(cpu, {model::OpKind::allreduce, bytes, two, Algo::ring, Proto::simple});
    const CollectiveCost tree = predict_collective(cpu, {model::OpKind::allreduce, bytes, two, Algo::tree, Proto::ll});
    EXPECT_DOUBLE_EQ(tree.time_us(), ring.time_us()) << bytes;
    EXPECT_EQ(tree.algo, Algo::tree);
    EXPECT_EQ(tree.proto, Proto::ll);
    const CollectiveCost any = predict_collective(cpu, {model::OpKind::allreduce, bytes, two});
    EXPECT_EQ(any.algo, Algo::ring);
    EXPECT_EQ(any.proto, Proto::simple);
    EXPECT_DOUBLE_EQ(any.time_us(), ring.time_us());
  }
  const Topology gpu = load_topology("dgx-h100");
  const Placement eight = place(gpu, 8);
  EXPECT_NE(predict_collective(gpu, {model::OpKind::allreduce, 1 << 20, eight, Algo::tree, Proto::ll}).time_us(),
            predict_collective(gpu, {model::OpKind::allreduce, 1 << 20, eight, Algo::ring, Proto::simple}).time_us());
}

}  // namespace
}  // namespace coconet::sim
