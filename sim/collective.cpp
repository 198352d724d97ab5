// The collective cost formulas. Each algorithm is one small function returning
// latency (base + per-step hops) and transfer time (bytes x bus factor over the
// bus bandwidth it can reach); the channels and the protocol scale the
// bandwidth and the protocol caps it, as NCCL 2.28's tuning model
// (src/graph/tuning.cc) applies them, with the NVLS traffic made explicit.
// Constants come from the topology. traffic_of says what each algorithm puts
// on every link it crosses.
#include "sim/collective.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include <fmt/core.h>

#include "model/error.h"
#include "sim/alltoall.h"
#include "sim/collective_mpi.h"
#include "sim/ring_features.h"
#include "sim/units.h"

namespace coconet::sim {

using model::Algo;
using model::Proto;

model::OpKind parse_coll_op(const std::string& s) {
  for (model::OpKind op : {model::OpKind::allreduce, model::OpKind::reducescatter, model::OpKind::allgather,
                           model::OpKind::broadcast, model::OpKind::reduce, model::OpKind::send,
                           model::OpKind::alltoall})
    if (s == model::to_string(op)) return op;
  throw UserError(fmt::format("unknown collective '{}': use allreduce, reducescatter, allgather, "
                              "broadcast, reduce, send or alltoall",
                              s));
}

Placement place(const Topology& t, int ranks) {
  if (ranks < 1) throw UserError(fmt::format("a process group needs at least 1 rank, got {}", ranks));
  Placement p;
  p.ranks = ranks;
  p.per_node = std::min(ranks, t.node.gpus);
  p.nodes = (ranks + t.node.gpus - 1) / t.node.gpus;
  p.send_crosses_nodes = t.nodes > 1 && ranks >= t.node.gpus;  // one node: no network to cross
  return p;
}

Placement place_strided(const Topology& t, int ranks, int stride) {
  if (stride < 1) throw UserError(fmt::format("a process group's stride must be at least 1, got {}", stride));
  if (stride == 1) return place(t, ranks);
  if (ranks < 1) throw UserError(fmt::format("a process group needs at least 1 rank, got {}", ranks));
  const int gpus = t.node.gpus;
  Placement p;
  p.ranks = ranks;
  p.per_node = std::max(1, std::min(ranks, gpus / stride));
  p.nodes = (ranks + p.per_node - 1) / p.per_node;
  p.send_crosses_nodes = p.nodes > 1;
  if (t.network.pod_gpus > 0 && stride >= gpus) {
    // Its nodes lie stride / gpus apart: the span from the first to the last, in pods.
    const std::int64_t span_gpus = std::int64_t(ranks - 1) * stride + gpus;
    p.pods = int((span_gpus + t.network.pod_gpus - 1) / t.network.pod_gpus);
  }
  return p;
}

Placement place_send(const Topology& t, int distance) {
  if (distance < 1) throw UserError(fmt::format("a send's peer must be at least 1 rank away, got {}", distance));
  Placement p;
  p.ranks = 2;
  p.send_crosses_nodes = t.nodes > 1 && distance >= t.node.gpus;
  p.nodes = p.send_crosses_nodes ? 2 : 1;
  p.per_node = p.send_crosses_nodes ? 1 : 2;
  if (t.network.pod_gpus > 0 && p.send_crosses_nodes) p.pods = distance >= t.network.pod_gpus ? 2 : 1;
  return p;
}

int pods_spanned(const Topology& t, const Placement& where) {
  if (t.network.pod_gpus <= 0) return 1;
  if (where.pods > 0) return where.pods;
  const int nodes_per_pod = std::max(1, t.network.pod_gpus / t.node.gpus);
  return (where.nodes + nodes_per_pod - 1) / nodes_per_pod;
}

double pod_network_share(const Topology& t, model::OpKind op, const Placement& where) {
  const int pods = pods_spanned(t, where);
  if (pods <= 1) return 1.0;
  const double k = t.network.oversubscription;
  if (op == model::OpKind::send) return 1.0 / k;  // one node's stream leaves the pod
  // The collective's nodes in its least-populated pod: the last one when its
  // nodes are consecutive from a pod's start, else an even spread.
  const int nodes_per_pod = std::max(1, t.network.pod_gpus / t.node.gpus);
  const int q = where.pods > 0 ? std::max(1, where.nodes / pods) : where.nodes - (pods - 1) * nodes_per_pod;
  return std::min(1.0, q / k);
}

double bus_factor(model::OpKind op, int ranks) {
  const double n = ranks;
  switch (op) {
    case model::OpKind::allreduce: return 2.0 * (n - 1) / n;
    case model::OpKind::reducescatter:
    case model::OpKind::allgather:
    case model::OpKind::alltoall: return (n - 1) / n;
    default: return 1.0;
  }
}

double reduce_factor(model::OpKind op, int ranks) {
  switch (op) {
    case model::OpKind::allreduce:
    case model::OpKind::reducescatter:
    case model::OpKind::reduce: return (ranks - 1.0) / ranks;
    default: return 0.0;
  }
}

namespace {


struct Env {
  const Topology& t;
  const CollectiveRequest& r;
  int channels;
  [[nodiscard]] bool multi_node() const { return r.where.nodes > 1; }
  [[nodiscard]] double intra_GBps() const { return t.node.nvlink_GBps(); }
  // The network bandwidth of one node: its NICs, one per GPU at most in use,
  // at the collective's share of the uplinks where it spans pods.
  [[nodiscard]] double net_GBps() const {
    return std::min(t.network.nics, r.where.per_node) * t.network.nic_GBps() * pod_network_share(t, r.op, r.where);
  }
  // The bandwidth every rank of a ring reaches on the slowest link it crosses.
  [[nodiscard]] double ring_bound_GBps() const {
    if (!multi_node()) return intra_GBps();
    return r.where.per_node > 1 ? std::min(intra_GBps(), net_GBps()) : net_GBps();
  }
  [[nodiscard]] Link ring_bottleneck() const {
    return multi_node() && net_GBps() < intra_GBps() ? Link::network : Link::nvlink;
  }
  // A send's bound: NVLink inside a node, else its share of the NICs (a
  // one-node CPU topology has no network: its sends stay in shared memory).
  [[nodiscard]] bool send() const { return r.op == model::OpKind::send; }
  [[nodiscard]] double send_bound_GBps() const {
    return r.where.send_crosses_nodes ? net_GBps() / r.where.per_node : intra_GBps();
  }
  // The link that bounds a ring or a send.
  [[nodiscard]] Link bottleneck() const {
    if (send()) return r.where.send_crosses_nodes ? Link::network : Link::nvlink;
    return ring_bottleneck();
  }
  // NCCL's bus bandwidth is nChannels x the bandwidth of one channel of its
  // graph (tuning.cc: busBw = nChannels * bw): the default channels share the
  // bound, fewer reach their part of it, more cannot pass it.
  [[nodiscard]] double channels_GBps(double bound) const {
    return bound * std::min(1.0, double(channels) / t.nccl.channels);
  }
  // The ring's bus bandwidth with protocol `p` over a link of `bound` GB/s
  // (NCCL 2.28 tuning.cc): LL x ll_efficiency up to the LL ceiling; LL128 x
  // ll128_efficiency up to channels x the per-channel LL128 ceiling
  // (perChMaxRingLL128Bws); Simple as the channels reach it.
  [[nodiscard]] double ring_GBps(double bound, Proto p) const {
    const double bw = channels_GBps(bound);
    switch (p) {
      case Proto::ll: return std::min(bw * t.nccl.ll_efficiency, t.nccl.ll_max_GBps(r.where.nodes));
      case Proto::ll128: return std::min(bw * t.nccl.ll128_efficiency, channels * t.nccl.channel_GBps);
      default: return bw;
    }
  }
  // The tree's (NCCL 2.28 tuning.cc): x tree_efficiency, then LL x
  // tree_ll_efficiency up to the LL ceiling, LL128 x its one-node or
  // multi-node factor up to the channels' LL128 ceiling.
  [[nodiscard]] double tree_GBps(double bound, Proto p) const {
    const double bw = channels_GBps(bound) * t.nccl.tree_efficiency;
    switch (p) {
      case Proto::ll: return std::min(bw * t.nccl.tree_ll_efficiency, t.nccl.ll_max_GBps(r.where.nodes));
      case Proto::ll128: {
        const double f = multi_node() ? t.nccl.tree_ll128_multi_node_efficiency : t.nccl.tree_ll128_one_node_efficiency;
        return std::min(bw * f, channels * t.nccl.channel_GBps);
      }
      default: return bw;
    }
  }
  [[nodiscard]] double transfer_us(double bytes, double GBps) const {
    return sim::transfer_us(bytes, GBps);
  }
  // Time a rank spends combining what it receives (added to the transfer).
  [[nodiscard]] double reduce_us() const {
    return transfer_us(r.bytes * reduce_factor(r.op, r.where.ranks), t.nccl.reduce_GBps);
  }
};

// Adds the reduction to a cost's transfer (NVLS reduces in the switch: not here).
CollectiveCost with_reduction(const Env& e, CollectiveCost c) {
  c.reduce_us = e.reduce_us();
  c.transfer_us += c.reduce_us;
  return c;
}

// The depth of NCCL's tree over `n` nodes: log2i, the floor of log2 (NCCL 2.28 src/include/utils.h).
int floor_log2(int n) {
  int l = 0;
  while ((2 << l) <= n) ++l;
  return l;
}

// The constants of a ring, or of a send (a ring of one step), with protocol
// `p` (sim/ring_features.h), its reduction aside (with_reduction adds it).
// A ring with one GPU per node crosses the network at every step, at the
// tree's per-step network latency (NCCL 2.28 tuning.cc: "with ppn=1
// latencies are fully exposed"); a send at the network's hop latency.
RingConstants ring_constants(const Env& e, Proto p) {
  RingConstants k;
  k.base_us = e.t.nccl.ring_base_us.at(p);
  k.hop_us = e.t.node.hop_latency_us.at(p);
  const bool tree_hop = !e.send() && e.r.where.per_node == 1;
  k.net_hop_us = (tree_hop ? e.t.network.tree_hop_latency_us : e.t.network.hop_latency_us).at(p);
  k.link_GBps = e.ring_GBps(e.send() ? e.send_bound_GBps() : e.ring_bound_GBps(), p);
  return k;
}

CollectiveCost ring(const Env& e, Proto p) {
  const RingConstants k = ring_constants(e, p);
  const RingFeatures x = ring_features(e.r);
  CollectiveCost c{Algo::ring, p};
  c.base_us = k.base_us;
  c.hops_us = ring_hops_us(k, x);
  c.link_GBps = k.link_GBps / bus_factor(e.r.op, e.r.where.ranks);
  c.transfer_us = ring_transfer_us(k, x);
  c.bottleneck = e.ring_bottleneck();
  return c;
}

// Intra-node chain, inter-node double binary tree: log latency at the tree's
// own per-step latencies, half the bus bandwidth per direction (data goes up,
// then down).
CollectiveCost tree(const Env& e, Proto p) {
  CollectiveCost c{Algo::tree, p};
  c.base_us = e.t.nccl.tree_base_us.at(p);
  c.hops_us = 2.0 * ((e.r.where.per_node - 1) * e.t.node.tree_hop_latency_us.at(p) +
                     floor_log2(e.r.where.nodes) * e.t.network.tree_hop_latency_us.at(p));
  const double bus = e.tree_GBps(e.ring_bound_GBps(), p);
  constexpr double kUpAndDown = 2.0;
  c.link_GBps = bus / kUpAndDown;
  c.transfer_us = e.transfer_us(e.r.bytes, c.link_GBps);
  c.bottleneck = e.ring_bottleneck();
  return c;
}

// NVLink SHARP: each GPU's link carries its whole buffer to the switch (the
// multimem reductions read every part) plus its own reduced part back out as a
// multicast store: (P+1)/P of the buffer per direction. One channel of the set
// manages the switch (NCCL's (channels-1)/channels; NVLS needs at least 2
// channels, `supported` says so).
CollectiveCost nvls(const Env& e, Proto p) {
  const double n = e.r.where.ranks;
  CollectiveCost c{Algo::nvls, p};
  c.base_us = e.t.nccl.nvls_base_us.at(p);
  const double managed = (e.channels - 1.0) / e.channels;
  c.link_GBps = e.intra_GBps() * e.t.node.nvls_efficiency * managed * n / (n + 1);
  c.transfer_us = e.transfer_us(e.r.bytes, c.link_GBps);
  return c;
}

// Not an NCCL algorithm: a two-level allreduce made of three NCCL calls, as
// Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE runs it. Reduce-scatter inside each
// node, allreduce of 1/per_node of the buffer across nodes (every GPU its own
// ring, the node's NICs shared), all-gather inside. Chosen only by name: `auto`
// models NCCL's own choice and never picks it.
CollectiveCost hierarchical(const Env& e, Proto p) {
  const int g = e.r.where.per_node;
  const int nodes = e.r.where.nodes;
  CollectiveCost c{Algo::hierarchical, p};
  c.base_us = e.t.nccl.ring_base_us.at(p);
  c.hops_us = 2.0 * (g - 1) * e.t.node.hop_latency_us.at(p) + 2.0 * (nodes - 1) * e.t.network.hop_latency_us.at(p);
  const double intra = e.ring_GBps(e.intra_GBps(), p);
  const double inter = e.ring_GBps(e.net_GBps() / g, p);
  const double intra_us = 2.0 * e.transfer_us(e.r.bytes * (g - 1.0) / g, intra);
  const double inter_us = e.transfer_us(e.r.bytes / g * 2.0 * (nodes - 1.0) / nodes, inter);
  c.transfer_us = intra_us + inter_us;
  c.link_GBps = rate_GBps(e.r.bytes, c.transfer_us);
  c.bottleneck = inter_us > intra_us ? Link::network : Link::nvlink;
  return c;
}

// One rank to its peer: over NVLink inside a node, else over its share of the
// NICs. A one-node CPU topology has no network: its sends stay in shared memory.
CollectiveCost send(const Env& e, Proto p) {
  const RingConstants k = ring_constants(e, p);
  const RingFeatures x = ring_features(e.r);
  CollectiveCost c{Algo::ring, p};
  c.base_us = k.base_us;
  c.hops_us = ring_hops_us(k, x);
  c.link_GBps = k.link_GBps;
  c.transfer_us = ring_transfer_us(k, x);
  c.bottleneck = e.bottleneck();
  return c;
}

CollectiveCost cost_of(const Env& e, Algo a, Proto p) {
  if (e.r.op == model::OpKind::send) return send(e, p);
  if (e.r.op == model::OpKind::alltoall) return alltoall_cost(e.t, e.r, p, e.channels);  // sim/alltoall.h
  switch (a) {
    case Algo::tree: return with_reduction(e, tree(e, p));
    case Algo::nvls: return nvls(e, p);
    case Algo::hierarchical: return with_reduction(e, hierarchical(e, p));
    default: return with_reduction(e, ring(e, p));
  }
}

// NCCL's algorithms, the ones `auto` chooses from (hierarchical is not one).
constexpr std::array<Algo, 3> kNcclAlgos = {Algo::ring, Algo::tree, Algo::nvls};
constexpr std::array<Proto, 3> kProtos = {Proto::ll, Proto::ll128, Proto::simple};

CollectiveCost best_of(const Topology& t, const CollectiveRequest& r, const Env& e) {
  CollectiveCost best;
  double best_us = std::numeric_limits<double>::infinity();
  const std::span<const Algo> algos = r.algo == Algo::auto_ ? std::span<const Algo>(kNcclAlgos) : std::span(&r.algo, 1);
  for (Algo a : algos) {
    for (Proto p : kProtos) {
      if (r.proto != Proto::auto_ && r.proto != p) continue;
      if (!supported(t, r.op, r.where, a, p, e.channels)) continue;
      const CollectiveCost c = cost_of(e, a, p);
      if (c.time_us() < best_us) {
        best_us = c.time_us();
        best = c;
      }
    }
  }
  return best;
}

}  // namespace

double sms_per_channel(const Topology& t, model::OpKind op, const Placement& where) {
  const OpRegimes* g = own_regimes(t.nccl.per_op, op, where);
  return g && g->sms_per_channel ? *g->sms_per_channel : t.nccl.sms_per_channel;
}

namespace {

// The MPI fit a cpu topology's keys state for `r` (sim/collective_mpi.h): its
// shared ring constants are the simple protocol's ring (or send) on this
// placement, the large
// regime's the same with nccl.large_messages's values in place of the base
// latencies, node hop latencies, link rates and reduction rate.
MpiFit mpi_fit_of(const Topology& t, const CollectiveRequest& r, int channels) {
  const auto shared = [&](const Topology& on) {
    RingConstants k = ring_constants(Env{on, r, channels}, Proto::simple);
    k.reduce_GBps = on.nccl.reduce_GBps;
    return k;
  };
  MpiFit f;
  f.small = shared(t);
  f.per_op = t.nccl.per_op;
  f.bottleneck = Env{t, r, channels}.bottleneck();
  if (t.nccl.large_messages) {
    const LargeMessages& l = *t.nccl.large_messages;
    Topology big = t;
    const ProtoTable base{l.base_latency_us, l.base_latency_us, l.base_latency_us};
    const ProtoTable hop{l.hop_latency_us, l.hop_latency_us, l.hop_latency_us};
    big.nccl.ring_base_us = base;
    big.node.hop_latency_us = big.node.tree_hop_latency_us = hop;
    big.node.nvlink_link_GBps = big.node.nccl_link_GBps = l.link_GBps;
    big.nccl.reduce_GBps = l.reduce_GBps;
    f.large = shared(big);
    f.from_bytes = l.from_bytes;
  }
  return f;
}

// The cost at the measured latency level: the latency lowered by the
// correction, never below zero.
CollectiveCost at_measured_level(double correction, CollectiveCost c) {
  c.base_us -= std::min(correction, c.latency_us());
  return c;
}

// One rank exchanges nothing (predict_collective, sim/collective.h): a copy
// when out of place, nothing in place. It holds no channel.
CollectiveCost one_rank_cost(const Topology& t, const CollectiveRequest& r) {
  CollectiveCost c;
  c.channels = 0;
  if (r.in_place || r.bytes <= 0) return c;
  const LocalCopyTerms terms = local_copy_terms(r.bytes);
  c.base_us = terms.base * t.gpu.local_copy_us();
  c.link_GBps = t.gpu.local_copy_GBps() / kLocalCopyBytesPerByte;
  c.transfer_us = terms.per_GBps / t.gpu.local_copy_GBps();
  return c;
}

}  // namespace

LocalCopyTerms local_copy_terms(double bytes) {
  return {1.0, transfer_us(kLocalCopyBytesPerByte * bytes, 1.0)};
}

bool one_rank(const CollectiveRequest& r) { return r.where.ranks <= 1 && r.op != model::OpKind::send; }

double latency_correction_us(const Topology& t) {
  if (!t.nccl.measured_latency) return 0.0;
  const NcclSpec::MeasuredLatency& m = *t.nccl.measured_latency;
  const CollectiveRequest r{m.op, m.bytes, Placement{m.ranks, 1, m.ranks, false}, m.algo, m.proto};
  const CollectiveCost table = cost_of(Env{t, r, t.nccl.channels}, m.algo, m.proto);
  return table.latency_us() - m.time_us;
}

bool supported(const Topology& t, model::OpKind op, const Placement& where, Algo algo, Proto proto, int channels) {
  if (algo == Algo::auto_ || proto == Proto::auto_) return true;
  if (op == model::OpKind::send || op == model::OpKind::alltoall) return algo == Algo::ring;
  switch (algo) {
    case Algo::ring: return true;
    case Algo::tree: return op == model::OpKind::allreduce;
    case Algo::nvls:
      // NCCL 2.28 tuning.cc: "NVLS/NVLStree needs at least 2 channels".
      return op == model::OpKind::allreduce && t.node.nvls && where.nodes == 1 && where.ranks > 1 &&
             proto == Proto::simple && (channels > 0 ? channels : t.nccl.channels) >= 2;
    case Algo::hierarchical: return op == model::OpKind::allreduce && where.nodes > 1 && where.per_node > 1;
    case Algo::auto_: return true;
  }
  return false;
}

CollectiveCost predict_collective(const Topology& t, const CollectiveRequest& r) {
  if (r.bytes < 0) throw UserError(fmt::format("a {} of {} bytes is impossible", model::to_string(r.op), r.bytes));
  const int channels = r.channels > 0 ? r.channels : t.nccl.channels;
  if (one_rank(r)) return one_rank_cost(t, r);
  if (r.algo != Algo::auto_) {
    bool any = false;
    for (Proto p : kProtos)
      any = any || ((r.proto == Proto::auto_ || r.proto == p) && supported(t, r.op, r.where, r.algo, p, channels));
    if (!any)
      throw UserError(fmt::format(
          "{} cannot run {}{} on {} ranks over {} node(s) of {}: tree and hierarchical run allreduce "
          "only (hierarchical on 2+ nodes), nvls allreduce on one node with NVLS hardware, the "
          "simple protocol and at least 2 channels; use --algo ring or auto",
          model::to_string(r.algo), model::to_string(r.op),
          r.proto == Proto::auto_ ? "" : " with protocol " + model::to_string(r.proto), r.where.ranks,
          r.where.nodes, t.name));
  }
  // NCCL's tuning table on a GPU, the MPI fit on a CPU (its all-to-all, which
  // calibration does not fit, by the pairwise model of sim/alltoall.h on the
  // topology's constants); timed at the measured latency level.
  CollectiveCost c = at_measured_level(t.nccl.latency_correction_us, t.device == Device::cpu && r.op != model::OpKind::alltoall
                                                                         ? mpi_cost(mpi_fit_of(t, r, channels), r)
                                                                         : best_of(t, r, Env{t, r, channels}));
  c.channels = channels;
  return c;
}

LinkTraffic traffic_of(const Topology& t, const CollectiveRequest& r, const CollectiveCost& c) {
  const Placement& w = r.where;
  LinkTraffic out;
  if (one_rank(r)) {
    // A copy at HBM speed loads HBM with its bytes; a fitted copy rate
    // (gpu.copy.GBps) is an achieved one, its memory traffic in it (as a
    // calibrated transfer's, nccl.hbm_bytes_per_link_byte: 0).
    if (!r.in_place && !t.gpu.copy_GBps) out.hbm = kLocalCopyBytesPerByte * r.bytes;
    return out;
  }
  if (r.op == model::OpKind::alltoall) return alltoall_traffic(t, r, c);  // sim/alltoall.h
  const double g = w.per_node;
  const double wire = 1.0 / [&] {  // bytes on a link per payload byte: the protocol's flags
    switch (c.proto) {
      case Proto::ll: return c.algo == Algo::tree ? t.nccl.tree_ll_efficiency : t.nccl.ll_efficiency;
      case Proto::ll128: return t.nccl.ll128_efficiency;
      default: return 1.0;
    }
  }();
  // `payload` bytes a GPU sends along a chain or ring: all of it over NVLink on
  // one node; across nodes, (g-1)/g of it over NVLink and the node's one
  // crossing, shared by its g GPUs, over the NICs.
  const auto along = [&](double payload) {
    if (w.nodes <= 1) {
      out.nvlink = payload * wire;
    } else {
      out.nvlink = payload * (g - 1) / g * wire;
      out.network = payload / g * wire;
    }
  };
  if (r.op == model::OpKind::send) {
    (w.send_crosses_nodes ? out.network : out.nvlink) = r.bytes * wire;
  } else {
    switch (c.algo) {
      case Algo::tree: along(2.0 * r.bytes); break;  // up the tree, then down
      case Algo::nvls: out.nvlink = r.bytes * (w.ranks + 1.0) / w.ranks; break;
      case Algo::hierarchical: {
        const double nodes = w.nodes;
        out.nvlink = 2.0 * r.bytes * (g - 1) / g * wire;
        out.network = r.bytes / g * 2.0 * (nodes - 1) / nodes * wire;
        break;
      }
      default: along(r.bytes * bus_factor(r.op, w.ranks)); break;
    }
  }
  out.hbm = r.bytes * bus_factor(r.op, w.ranks) * t.nccl.hbm_bytes_per_link_byte;
  return out;
}

CollectiveCost predict_collective_or_auto(const Topology& t, const CollectiveRequest& r) {
  CollectiveRequest q = r;
  if (q.algo != Algo::auto_) {
    bool any = false;
    for (Proto p : kProtos)
      any = any || ((q.proto == Proto::auto_ || q.proto == p) && supported(t, q.op, q.where, q.algo, p, q.channels));
    if (!any) q.algo = Algo::auto_;
  }
  if (q.proto != Proto::auto_ && !supported(t, q.op, q.where, q.algo, q.proto, q.channels)) q.proto = Proto::auto_;
  return predict_collective(t, q);
}

}  // namespace coconet::sim
