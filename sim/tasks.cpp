// From stage demands to tasks. One function per kind of stage; each returns a
// task whose duration alone is the roofline or collective formula, and whose
// bandwidth demands are what it moves divided by that duration (never more
// than the resource has, so a task alone always runs at full rate).
#include "sim/tasks.h"

#include <algorithm>
#include <cmath>

#include <fmt/core.h>

#include "model/error.h"

namespace coconet::sim {

namespace {

constexpr double kBytesPerGBpsUs = 1e3;  // 1 GB/s moves 1e3 bytes per microsecond
constexpr double kScalarBytes = 4;       // an f32 norm partial sum

double demand(double bytes, double us, double cap) {
  return us > 0 ? std::min(cap, bytes / (us * kBytesPerGBpsUs)) : 0.0;
}

double proto_efficiency(const Topology& t, model::Proto p) {
  switch (p) {
    case model::Proto::ll: return t.nccl.ll_efficiency;
    case model::Proto::ll128: return t.nccl.ll128_efficiency;
    default: return 1.0;
  }
}

// Bytes one GPU puts on its links for a collective of `bytes`.
double link_traffic(const Topology& t, const CollectiveWork& c, const CollectiveCost& cost, int ranks) {
  const double n = ranks;
  const double factor = cost.algo == model::Algo::nvls ? (n + 1) / n : bus_factor(c.op, ranks);
  return c.bytes * factor / proto_efficiency(t, cost.proto);
}

double scalar_allreduce_us(const Context& ctx, int count) {
  if (count == 0) return 0.0;
  CollectiveRequest r{CollOp::allreduce, kScalarBytes, ctx.placement()};
  return count * predict_collective(ctx.topology, r).time_us();
}

std::string bytes_text(double b) {
  constexpr double kK = 1e3, kM = 1e6, kG = 1e9;
  if (b >= kG) return fmt::format("{:.2f} GB", b / kG);
  if (b >= kM) return fmt::format("{:.1f} MB", b / kM);
  if (b >= kK) return fmt::format("{:.1f} KB", b / kK);
  return fmt::format("{:.0f} B", b);
}

std::string chunk_name(const std::string& code, int chunk, int chunks) {
  return chunks > 1 ? fmt::format("{} [{}/{}]", code, chunk + 1, chunks) : code;
}

Task elementwise_task(const StageWork& w, const Context& ctx, int chunks) {
  const Topology& t = ctx.topology;
  Task k;
  k.is_compute = true;
  k.latency_us = t.gpu.launch_us + scalar_allreduce_us(ctx, w.sliced_norms);
  const double bytes = w.hbm_bytes / chunks;
  k.work_us = elementwise_body_us(t, bytes, w.flops / chunks);
  k.demand_GBps[int(Resource::hbm)] = demand(bytes, k.work_us, capacity_GBps(ctx, Resource::hbm));
  const bool math_bound = k.work_us > bytes / (t.gpu.hbm_effective_GBps() * kBytesPerGBpsUs) * (1 + 1e-9);
  k.detail = fmt::format("{} over HBM, {}", bytes_text(bytes), math_bound ? "FLOP-bound" : "HBM-bound");
  return k;
}

Task gemm_task(const StageWork& w, const Context& ctx, int chunk, int chunks) {
  const Topology& t = ctx.topology;
  Task k;
  k.is_gemm = true;
  k.is_compute = true;
  k.gemm = w.gemm;
  const std::int64_t rows = (w.gemm.m + chunks - 1) / chunks;
  k.gemm.m = std::min(rows, w.gemm.m - rows * chunk);
  k.latency_us = t.gpu.launch_us;
  k.work_us = gemm_body_us(t, k.gemm, t.gpu.sms);
  k.demand_GBps[int(Resource::hbm)] = demand(k.gemm.bytes(), k.work_us, capacity_GBps(ctx, Resource::hbm));
  k.detail = fmt::format("[{}x{}]x[{}x{}] {}, {} tiles on {} SMs", k.gemm.m, k.gemm.k, k.gemm.k, k.gemm.n,
                         model::to_string(k.gemm.dtype), gemm_tiles(t, k.gemm), t.gpu.sms);
  return k;
}

// The element-wise part of a fused collective runs on the collective's own
// CTAs, one per channel, each moving at most nccl.channel_GBps: a ceiling
// besides the HBM roofline.
double fused_compute_us(const Topology& t, const StageWork& w, int chunks, int channels) {
  if (w.hbm_bytes <= 0 && w.flops <= 0) return 0.0;
  const double bytes = w.hbm_bytes / chunks;
  const double cta_ceiling = bytes / (std::max(1, channels) * t.nccl.channel_GBps * kBytesPerGBpsUs);
  return std::max(elementwise_body_us(t, bytes, w.flops / chunks), cta_ceiling);
}

// A collective, or a collective fused with element-wise work that runs on each
// piece as it arrives: latency once (one kernel), transfers back to back, the
// element-wise part pipelined under them with the last piece exposed. In an
// overlap group the kernel stays resident and takes chunk after chunk as its
// producer flags them (the CoCoNet paper's design): like one NCCL collective
// whose data arrives in pieces, it pays its latency (base and pipeline fill
// over the ring's hops) once, with the first chunk. Where the backend calls
// the collective once per chunk instead (nccl.resident_overlap false), every
// chunk pays it.
Task comm_task(const StageWork& w, const Context& ctx, const model::Knobs& knobs, int chunk, int chunks) {
  const Topology& t = ctx.topology;
  const Placement where = ctx.placement();
  Task k;
  double base = 0, base_sum = 0, hops = 0, transfer = 0, traffic = 0, hbm = 0;
  Link link = Link::nvlink;
  int channels = 0;
  std::string detail;
  for (const auto& c : w.collectives) {
    CollectiveWork piece = c;
    piece.bytes = c.bytes / chunks;
    const CollectiveRequest r{piece.op, piece.bytes, where, knobs.algo, knobs.proto, knobs.channels};
    const CollectiveCost cost = predict_collective_or_auto(t, r);
    base = std::max(base, cost.base_us);
    base_sum += cost.base_us;
    hops += cost.hops_us;
    transfer += cost.transfer_us;
    traffic += link_traffic(t, piece, cost, where.ranks);
    hbm += piece.bytes * bus_factor(piece.op, where.ranks) * t.nccl.hbm_bytes_per_link_byte;
    if (cost.transfer_us > 0 && cost.bottleneck == Link::network) link = Link::network;
    channels = std::max(channels, cost.channels);
    detail += fmt::format("{}{} {} {}/{}", detail.empty() ? "" : ", ", to_string(c.op), bytes_text(piece.bytes),
                          model::to_string(cost.algo), model::to_string(cost.proto));
  }
  k.sms_held = channels * t.nccl.sms_per_channel;
  const bool pays_latency = chunk == 0 || !t.nccl.resident_overlap;
  if (!t.nccl.fused_kernels) {
    // No fused kernels: every collective is a call of its own and the
    // computation a kernel of its own, one after another.
    const bool computes = w.hbm_bytes > 0 || w.flops > 0;
    base = base_sum;
    base += computes ? t.gpu.launch_us : 0.0;
    transfer += computes ? elementwise_body_us(t, w.hbm_bytes / chunks, w.flops / chunks) : 0.0;
  }
  const double compute = t.nccl.fused_kernels ? fused_compute_us(t, w, chunks, channels) : 0.0;
  // Everything the kernel moves through HBM (its own traffic and the element-wise work) bounds it too.
  transfer = std::max(transfer, (hbm + w.hbm_bytes / chunks) / (t.gpu.hbm_effective_GBps() * kBytesPerGBpsUs));
  const double pipeline_depth = std::max(2, where.ranks);
  k.latency_us = (pays_latency ? base + hops : 0.0) + scalar_allreduce_us(ctx, w.sliced_norms);
  k.work_us = std::max(transfer, compute) + std::min(transfer, compute) / pipeline_depth;
  const Resource r = link == Link::network ? Resource::network : Resource::nvlink;
  k.demand_GBps[int(r)] = demand(traffic, k.work_us, capacity_GBps(ctx, r));
  k.demand_GBps[int(Resource::hbm)] = demand(hbm + w.hbm_bytes / chunks, k.work_us, capacity_GBps(ctx, Resource::hbm));
  k.detail = detail + (chunks > 1 ? fmt::format(" per chunk of {}", chunks) : "") +
             (link == Link::network ? ", network-bound" : ", NVLink-bound");
  return k;
}

Task stage_task(const StageWork& w, const Context& ctx, const model::Knobs& knobs, int chunk, int chunks) {
  if (!w.collectives.empty()) return comm_task(w, ctx, knobs, chunk, chunks);
  if (w.has_gemm) return gemm_task(w, ctx, chunk, chunks);
  return elementwise_task(w, ctx, chunks);
}

std::vector<int> overlap_index(std::size_t stages, const std::vector<model::OverlapGroup>& overlaps) {
  std::vector<int> of(stages, -1);
  for (std::size_t g = 0; g < overlaps.size(); ++g)
    for (int s = overlaps[g].first; s <= overlaps[g].last; ++s) {
      if (s < 0 || std::size_t(s) >= stages) throw InternalError("overlap group outside the stages");
      of[s] = int(g);
    }
  return of;
}

// The longest path through a pipeline of stages [first, last] cut into chunks
// without contention: the first chunk through the stages before some stage b,
// every chunk of b, the last chunk through the stages after b.
double pipeline_us(const std::vector<std::vector<double>>& chunk_us, const model::OverlapGroup& g) {
  double longest = 0;
  for (int b = g.first; b <= g.last; ++b) {
    double path = 0;
    for (int i = g.first; i < b; ++i) path += chunk_us[i].front();
    for (double d : chunk_us[b]) path += d;
    for (int i = b + 1; i <= g.last; ++i) path += chunk_us[i].back();
    longest = std::max(longest, path);
  }
  return longest;
}

}  // namespace

double capacity_GBps(const Context& ctx, Resource r) {
  const Topology& t = ctx.topology;
  switch (r) {
    case Resource::hbm: return t.gpu.hbm_effective_GBps();
    case Resource::nvlink: return t.node.nvlink_GBps();
    case Resource::network: {
      const int per_node = ctx.placement().per_node;
      return std::min(t.network.nics, per_node) * t.network.nic_GBps() / per_node;
    }
    case Resource::count_: break;
  }
  return 0.0;
}

std::vector<Task> make_tasks(const std::vector<StageWork>& work, const std::vector<model::OverlapGroup>& overlaps,
                             const Context& ctx, const model::Knobs& knobs) {
  const std::vector<int> of = overlap_index(work.size(), overlaps);
  std::vector<Task> tasks;
  for (std::size_t s = 0; s < work.size(); ++s) {
    const int chunks = of[s] >= 0 ? std::max(1, knobs.chunks) : 1;
    const int stream = of[s] >= 0 ? int(s) - overlaps[of[s]].first : 0;
    for (int c = 0; c < chunks; ++c) {
      Task k = stage_task(work[s], ctx, knobs, c, chunks);
      k.stage = int(s);
      k.chunk = c;
      k.chunks = chunks;
      k.stream = stream;
      k.rank = work[s].group;
      k.peer = work[s].dest_group;
      k.name = chunk_name(work[s].code, c, chunks);
      tasks.push_back(std::move(k));
    }
  }
  return tasks;
}

Prediction predict_analytic(const std::vector<StageWork>& work, const std::vector<model::OverlapGroup>& overlaps,
                            const Context& ctx, const model::Knobs& knobs) {
  const std::vector<Task> tasks = make_tasks(work, overlaps, ctx, knobs);
  Prediction p;
  p.stages.resize(work.size());
  std::vector<std::vector<double>> chunk_us(work.size());
  for (const Task& k : tasks) {
    StageCost& c = p.stages[k.stage];
    c.code = work[k.stage].code;
    c.time_us += k.duration_us();
    c.latency_us += k.latency_us;
    (work[k.stage].collectives.empty() ? c.compute_us : c.comm_us) += k.work_us;
    c.detail = k.detail;
    chunk_us[k.stage].push_back(k.duration_us());
  }
  const std::vector<int> of = overlap_index(work.size(), overlaps);
  for (std::size_t s = 0; s < work.size(); ++s) {
    if (of[s] < 0) {
      p.time_us += p.stages[s].time_us;
      continue;
    }
    const auto& g = overlaps[of[s]];
    if (int(s) == g.first) p.time_us += pipeline_us(chunk_us, g);
  }
  return p;
}

Prediction predict_analytic(const model::Schedule& s, const Context& ctx) {
  return predict_analytic(stage_work(s, ctx), s.overlaps, ctx, s.knobs);
}

}  // namespace coconet::sim
