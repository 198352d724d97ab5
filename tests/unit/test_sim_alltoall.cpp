// The all-to-all's cost (sim/alltoall.h): (P-1)/P of each rank's slice, the
// part for its node's peers over NVLink and the rest over its share of the
// NICs, both at once, each at the share of its rate NCCL's all-to-all
// reaches (nccl.alltoall_efficiency); on one rank a local copy; nccl-tests'
// bus factor (P-1)/P.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "sim/alltoall.h"
#include "sim/collective.h"
#include "sim/topology.h"
#include "sim/units.h"

namespace coconet::sim {
namespace {

using model::OpKind;
using model::Proto;

constexpr double kBytes = 256.0 * (1 << 20);  // 256 MiB a rank: bandwidth-bound

CollectiveCost cost(const Topology& t, int ranks, double bytes = kBytes, Proto p = Proto::simple) {
  return predict_collective(t, {OpKind::alltoall, bytes, place(t, ranks), model::Algo::auto_, p});
}

TEST(Alltoall, OneNodeSendsSevenEighthsOverNvlink) {
  const Topology t = load_topology("dgx-h100");
  const CollectiveCost c = cost(t, 8);
  EXPECT_NEAR(c.transfer_us, transfer_us(kBytes * 7 / 8, t.node.nvlink_GBps() * t.nccl.alltoall_efficiency.nvlink),
              1e-6);
  EXPECT_EQ(c.bottleneck, Link::nvlink);
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::alltoall, 8), 7.0 / 8);
  const LinkTraffic tr = traffic_of(t, {OpKind::alltoall, kBytes, place(t, 8)}, c);
  EXPECT_DOUBLE_EQ(tr.nvlink, kBytes * 7 / 8);
  EXPECT_DOUBLE_EQ(tr.network, 0.0);
}

TEST(Alltoall, AcrossNodesHalfTheSliceCrossesTheNetwork) {
  const Topology t = load_topology("dgx-h100");
  const CollectiveCost c = cost(t, 16);  // 2 nodes of 8: 8 of 16 peers are on the other node
  const double nic_share =
      std::min(t.network.nics, 8) * t.network.nic_GBps() / 8 * t.nccl.alltoall_efficiency.network;
  EXPECT_NEAR(c.transfer_us, transfer_us(kBytes * 8 / 16, nic_share), 1e-6);
  EXPECT_EQ(c.bottleneck, Link::network);
  const LinkTraffic tr = traffic_of(t, {OpKind::alltoall, kBytes, place(t, 16)}, c);
  EXPECT_DOUBLE_EQ(tr.network, kBytes / 2);
  EXPECT_DOUBLE_EQ(tr.nvlink, kBytes * 7 / 16);
  // The network hop is paid on top of the node's.
  EXPECT_GT(c.hops_us, cost(t, 8).hops_us);
}

// A topology without nccl.alltoall_efficiency prices the links' full rates;
// the shares scale the links and not the bytes they carry.
TEST(Alltoall, TheMeasuredSharesScaleTheLinksRates) {
  const Topology t = load_topology("dgx-h100");
  ASSERT_LT(t.nccl.alltoall_efficiency.nvlink, 1.0);
  ASSERT_LT(t.nccl.alltoall_efficiency.network, 1.0);
  Topology full = t;
  full.nccl.alltoall_efficiency = {};
  EXPECT_NEAR(cost(full, 8).transfer_us * 1 / t.nccl.alltoall_efficiency.nvlink, cost(t, 8).transfer_us, 1e-6);
  EXPECT_NEAR(cost(full, 16).transfer_us * 1 / t.nccl.alltoall_efficiency.network, cost(t, 16).transfer_us, 1e-6);
  const CollectiveRequest r{OpKind::alltoall, kBytes, place(t, 16)};
  EXPECT_DOUBLE_EQ(traffic_of(t, r, cost(t, 16)).network, traffic_of(full, r, cost(full, 16)).network);
  EXPECT_EQ(load_topology("dgx-a100").nccl.alltoall_efficiency.nvlink, 1.0);
}

TEST(Alltoall, OneRankCopiesLocallyAndMoreBytesTakeLonger) {
  const Topology t = load_topology("dgx-a100");
  const CollectiveCost one = cost(t, 1);  // its own block from the send buffer to the receive buffer
  EXPECT_NEAR(one.time_us(), t.gpu.launch_us + transfer_us(2 * kBytes, t.gpu.hbm_effective_GBps()), 1e-6);
  EXPECT_DOUBLE_EQ(traffic_of(t, {OpKind::alltoall, kBytes, place(t, 1)}, one).nvlink, 0.0);
  EXPECT_LT(cost(t, 8, kBytes).time_us(), cost(t, 8, 2 * kBytes).time_us());
  EXPECT_GT(cost(t, 8, 1024).time_us(), 0.0);  // latency alone for a small one
}

// `auto` is the protocol the test finds fastest by trying each by name: the
// same time and, at both sizes here, the same protocol (LL for a small
// message, simple for a large one: the choice matters).
TEST(Alltoall, AutoPicksTheFastestProtocolAndRingIsItsOnlyAlgorithm) {
  const Topology t = load_topology("dgx-h100");
  std::vector<Proto> chosen;
  for (double bytes : {4096.0, kBytes}) {
    const CollectiveCost best = predict_collective(t, {OpKind::alltoall, bytes, place(t, 8)});
    Proto fastest = Proto::ll;
    for (Proto p : {Proto::ll128, Proto::simple})
      if (cost(t, 8, bytes, p).time_us() < cost(t, 8, bytes, fastest).time_us()) fastest = p;
    EXPECT_DOUBLE_EQ(best.time_us(), cost(t, 8, bytes, fastest).time_us()) << bytes;
    EXPECT_EQ(best.proto, fastest) << bytes;
    EXPECT_EQ(best.algo, model::Algo::ring) << bytes;
    chosen.push_back(best.proto);
  }
  EXPECT_NE(chosen.front(), chosen.back()) << "one protocol at both sizes: the comparison above tells nothing";
  EXPECT_TRUE(supported(t, OpKind::alltoall, place(t, 8), model::Algo::ring, Proto::simple));
  EXPECT_FALSE(supported(t, OpKind::alltoall, place(t, 8), model::Algo::tree, Proto::simple));
  EXPECT_EQ(parse_coll_op("alltoall"), OpKind::alltoall);
}

}  // namespace
}  // namespace coconet::sim
