// The analytic cost of one collective, NCCL's way: time = latency + bytes over
// bandwidth, for each algorithm (ring, tree, NVLS, hierarchical) and protocol
// (LL, LL128, Simple); `auto` picks the fastest pair as NCCL's tuner does, by
// NCCL's tuning table. The time reported is at the measured latency level where
// the topology states a measurement (nccl.measured_latency): every latency of
// the table moved by the one correction that makes the measured point's time
// the measured one, so choices stay NCCL's and times follow the measurement.
// Bandwidths are reported like nccl-tests: algbw = bytes / time, busbw =
// algbw x the collective's bus factor (2(n-1)/n for allreduce, (n-1)/n for
// reduce-scatter and all-gather, 1 otherwise), so they compare with measurements.
//
// Sizes follow nccl-tests: `bytes` is the whole buffer (the input of an
// allreduce or reduce-scatter, the output of an all-gather; for a send, what
// one rank sends).
#pragma once

#include <string>

#include "model/schedule.h"
#include "sim/topology.h"
#include "sim/units.h"

namespace coconet::sim {

// Collectives are model::OpKind (allreduce .. send), one enum for the program and the cost model.
// Parses a collective's name (model::to_string); throws UserError for anything else.
[[nodiscard]] model::OpKind parse_coll_op(const std::string& s);

// Where a group of ranks sits: `ranks` GPUs over `nodes` nodes, `per_node` each.
struct Placement {
  int ranks = 1;
  int nodes = 1;
  int per_node = 1;
  bool send_crosses_nodes = false;  // send: peer on another node
  // The network pods (network.pod_gpus) the group's nodes lie in; for a send,
  // more than 1 when its peer is in another pod. 0: its nodes are consecutive
  // from a pod's first node (what place() gives); a caller whose group is
  // strided over the cluster (a data-parallel group) states it.
  int pods = 0;
};
// A group of `ranks` consecutive ranks packed onto the topology's nodes.
[[nodiscard]] Placement place(const Topology& t, int ranks);
// A group of `ranks` ranks `stride` apart in the job's rank order, the first
// on a node's first GPU: with tensor parallelism innermost (Megatron-LM's
// order), a context-parallel group is tp apart and a data-parallel one tp x
// cp. A node holds gpus / stride of its members (at least one); with a
// stride of a node or more its nodes are strided too, and the pods it spans
// are stated. place_strided(t, n, 1) is place(t, n).
[[nodiscard]] Placement place_strided(const Topology& t, int ranks, int stride);
// The two ends of a send between ranks `distance` apart (a pipeline's
// neighbour stages are tp x cp x dp apart): across nodes when the distance is
// a node or more, across pods when it is a pod or more.
[[nodiscard]] Placement place_send(const Topology& t, int distance);

// The share of its network bandwidth a collective on `where` reaches when it
// spans more than one pod of an oversubscribed network (1 inside one pod, or
// on a flat network). A pod's uplinks carry 1/k of what its NICs inject
// (k = network.oversubscription), so under the load the model prices every
// collective at (every node's NICs busy, each group its node's share) each
// node is entitled to 1/k of its network bandwidth above the pod. A ring,
// chain or tree over consecutive nodes leaves a pod on one node's stream
// (one edge per channel, the channels spread over that node's NICs), which
// the collective's q nodes in that pod share the uplinks for: the network
// bound is multiplied by min(1, q / k), q the collective's nodes in its
// least-populated pod. A send that crosses pods is one node's stream: 1/k.
[[nodiscard]] double pod_network_share(const Topology& t, model::OpKind op, const Placement& where);
// The pods `where` spans (1 on a flat network).
[[nodiscard]] int pods_spanned(const Topology& t, const Placement& where);

struct CollectiveRequest {
  model::OpKind op = model::OpKind::allreduce;
  double bytes = 0;
  Placement where;
  model::Algo algo = model::Algo::auto_;
  model::Proto proto = model::Proto::auto_;
  int channels = 0;  // 0: the topology's NCCL default
  // Output and input are the same memory: on one rank nothing is moved at all.
  bool in_place = false;
};

enum class Link { nvlink, network };

// A local copy (a collective on one rank) reads each byte once and writes it once.
inline constexpr double kLocalCopyBytesPerByte = 2.0;

// The local copy's time, t = us + kLocalCopyBytesPerByte x bytes / GBps
// (gpu.copy), as the coefficients of its two constants: `base` of us and
// `per_GBps` of 1 / GBps. The model prices a one-rank collective by them and
// calibration fits gpu.copy to them (validation::fit_copy).
struct LocalCopyTerms {
  double base = 1.0;
  double per_GBps = 0;
};
[[nodiscard]] LocalCopyTerms local_copy_terms(double bytes);

struct CollectiveCost {
  model::Algo algo = model::Algo::ring;
  model::Proto proto = model::Proto::simple;
  double base_us = 0;      // launch and setup, paid once per collective (at the measured level)
  double hops_us = 0;      // per-step latencies along the algorithm's path
  double transfer_us = 0;  // bytes over the bottleneck bandwidth, plus reduce_us
  double reduce_us = 0;    // combining what a reducing collective receives (part of transfer_us)
  double link_GBps = 0;    // the bottleneck bandwidth (algorithm bandwidth)
  Link bottleneck = Link::nvlink;
  int channels = 0;        // channels (one SM each) the collective occupies

  [[nodiscard]] double latency_us() const { return base_us + hops_us; }
  [[nodiscard]] double time_us() const { return base_us + hops_us + transfer_us; }
};

// Whether `algo`/`proto` can run `op` on this placement and hardware with
// `channels` channels (0: the topology's default; NVLS needs at least 2).
[[nodiscard]] bool supported(const Topology& t, model::OpKind op, const Placement& where, model::Algo algo,
                             model::Proto proto, int channels = 0);
// What the tuning table's latency of every collective is lowered by (raised
// by, when negative) to meet the topology's measured small-message time: the
// table's latency of the measured collective minus its measured time (taken
// as all latency: at a few KB its transfer is a few ns). 0 without a measurement.
[[nodiscard]] double latency_correction_us(const Topology& t);

// The compute units one channel of `op` holds on `where` while it progresses:
// the op's own nccl.per_op value where the topology has one for this
// placement (the calibrated rank count on one node), else nccl.sms_per_channel.
[[nodiscard]] double sms_per_channel(const Topology& t, model::OpKind op, const Placement& where);

// The cost of one collective. `auto` algorithm or protocol: the fastest
// supported choice among NCCL's own (ring, tree, NVLS: never hierarchical,
// which is not an NCCL algorithm but three NCCL calls, chosen only by name).
// A concrete unsupported choice is a UserError. On one rank (a send aside)
// nothing is exchanged: as NCCL's one-rank path (src/enqueue.cc, taskAppend
// -> ncclLaunchOneRank: "for 1 rank, out-of-place is memcpy to self, and
// in-place is nop"), an out-of-place call is a device-local copy, its launch
// and its bytes read and written over HBM, and an in-place one costs nothing.
[[nodiscard]] CollectiveCost predict_collective(const Topology& t, const CollectiveRequest& r);
// Whether `r` is on one rank and exchanges nothing (a send aside): a local copy or nothing.
[[nodiscard]] bool one_rank(const CollectiveRequest& r);
// As predict_collective, but an unsupported concrete choice falls back to auto
// (what the tuner's schedule-wide knobs need).
[[nodiscard]] CollectiveCost predict_collective_or_auto(const Topology& t, const CollectiveRequest& r);

// The bytes one rank's collective puts on each resource it crosses, as its
// algorithm moves them (protocol flags included): its NVLink (the NVSwitch
// port), its share of its node's NICs, and its HBM. A ring across nodes
// crosses both: each node's NICs carry one ring edge per channel, so the node
// sends what one GPU sends and each GPU's share of the NICs a 1/per_node part
// of it, while the GPUs whose ring successor is in the node send over NVLink.
struct LinkTraffic {
  double nvlink = 0;
  double network = 0;
  double hbm = 0;
};
[[nodiscard]] LinkTraffic traffic_of(const Topology& t, const CollectiveRequest& r, const CollectiveCost& c);

// The share of the buffer a rank combines in a reducing collective: (n-1)/n for
// allreduce, reduce-scatter and reduce (each rank sums n-1 incoming parts of its
// 1/n), 0 for the others.
[[nodiscard]] double reduce_factor(model::OpKind op, int ranks);

// nccl-tests' bus bandwidth factor.
[[nodiscard]] double bus_factor(model::OpKind op, int ranks);
[[nodiscard]] inline double algbw_GBps(double bytes, double time_us) {
  return rate_GBps(bytes, time_us);
}

}  // namespace coconet::sim
