// From a StepPlan's launches to tasks. One function per class of op; each
// returns a task whose duration alone is the roofline or collective formula,
// and whose bandwidth demands are what it moves divided by that duration
// (never more than the resource has, so a task alone always runs at full rate).
#include "sim/tasks.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include <fmt/core.h>

#include "model/error.h"
#include "sim/units.h"

namespace coconet::sim {

namespace {

constexpr double kScalarBytes = 4;  // an f32 norm partial sum

double demand(double bytes, double us, double cap) { return std::min(cap, rate_GBps(bytes, us)); }

double scalar_allreduce_us(const Context& ctx) {
  const CollectiveRequest r{model::OpKind::allreduce, kScalarBytes, ctx.placement()};
  return predict_collective(ctx.topology, r).time_us();
}

// The words for a topology's resources: a GPU's HBM, SMs and NVLink, or on a
// CPU topology its memory, cores and the MPI transport between local ranks.
std::string memory_word(const Topology& t) { return t.device == Device::cpu ? "memory" : "HBM"; }
std::string units_word(const Topology& t) { return t.device == Device::cpu ? "cores" : "SMs"; }
std::string link_bound(const Topology& t, Link link) {
  if (link == Link::network) return "network-bound";
  return t.device == Device::cpu ? "MPI-transport-bound" : "NVLink-bound";
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

Task elementwise_task(const plan::Work& w, const Context& ctx, double share, int calls) {
  const Topology& t = ctx.topology;
  Task k;
  k.is_compute = true;
  k.latency_us = calls * t.gpu.launch_us + (w.norm_across_group ? scalar_allreduce_us(ctx) : 0.0);
  const double bytes = w.hbm_bytes * share;
  k.work_us = elementwise_body_us(t, bytes, w.flops * share);
  k.demand_GBps[int(Resource::hbm)] = demand(bytes, k.work_us, capacity_GBps(ctx, Resource::hbm));
  const bool math_bound = k.work_us > transfer_us(bytes, t.gpu.hbm_effective_GBps()) * (1 + 1e-9);
  k.detail = fmt::format("{} over {}, {}", bytes_text(bytes), memory_word(t),
                         math_bound ? "FLOP-bound" : memory_word(t) + "-bound");
  return k;
}

// `calls` GEMMs share the chunk's rows (one per range of rows the rank holds).
Task gemm_task(const plan::Gemm& g, const Context& ctx, double share, int calls) {
  const Topology& t = ctx.topology;
  Task k;
  k.is_gemm = true;
  k.is_compute = true;
  const plan::Gemm part = g.part(share, calls);
  k.gemm = GemmShape{part.m, part.n, part.k, part.dtype, part.batch};
  k.latency_us = calls * t.gpu.launch_us;
  k.work_us = calls * gemm_body_us(t, k.gemm, t.gpu.sms);
  k.demand_GBps[int(Resource::hbm)] = demand(k.gemm.bytes(), k.work_us, capacity_GBps(ctx, Resource::hbm));
  k.detail = fmt::format("{}[{}x{}]x[{}x{}] {}, {} tiles on {} {}",
                         k.gemm.batch > 1 ? fmt::format("{} x ", k.gemm.batch) : "", k.gemm.m, k.gemm.k, k.gemm.k, k.gemm.n,
                         model::to_string(k.gemm.dtype), gemm_tiles(t, k.gemm), t.gpu.sms, units_word(t));
  return k;
}

// The element-wise part of a fused op is a kernel of its own per piece, on
// the compute stream beside the collectives (exec/fused_call.h), not code in
// the collective's CTAs: the roofline of its bytes and FLOPs; its HBM is
// shared with the collective's (the bound below).
double fused_compute_us(const Topology& t, const plan::Work& w, double share) {
  if (w.hbm_bytes <= 0 && w.flops <= 0) return 0.0;
  return elementwise_body_us(t, w.hbm_bytes * share, w.flops * share);
}

// A collective, or a fused collective whose element-wise work runs on each
// piece as it arrives: latency once per call (a fused op calls each of its
// collectives once per piece), transfers back to back, the element-wise part
// pipelined under them with the last piece exposed. A chunk
// of an overlap group is a call of its own (paying the latency again) unless
// the backend keeps its collectives resident across chunks.
Task comm_task(const plan::Work& w, const Context& ctx, const model::Knobs& knobs, bool pays_latency,
               double share, int calls) {
  const Topology& t = ctx.topology;
  const Placement where = ctx.placement();
  Task k;
  k.is_comm = true;
  double base = 0, hops = 0, transfer = 0;
  Traffic traffic;  // what the collectives put on each resource they cross
  Link link = Link::nvlink;
  int channels = 0;
  std::string detail;
  for (const auto& c : w.collectives) {
    const double bytes = c.bytes * share;
    const CollectiveRequest r{c.op, bytes / calls, where, knobs.algo, knobs.proto, knobs.channels};
    const CollectiveCost cost = predict_collective_or_auto(t, r);
    base += cost.base_us;  // each collective is a call of its own (a fused op: per piece)
    hops += calls * cost.hops_us;
    transfer += calls * cost.transfer_us;
    const Traffic one = traffic_of(t, r, cost);
    traffic.nvlink += calls * one.nvlink;
    traffic.network += calls * one.network;
    traffic.hbm += calls * one.hbm;
    if (cost.transfer_us > 0 && cost.bottleneck == Link::network) link = Link::network;
    channels = std::max(channels, cost.channels);
    detail += fmt::format("{}{} {} {}/{}", detail.empty() ? "" : ", ", model::to_string(c.op), bytes_text(bytes),
                          model::to_string(cost.algo), model::to_string(cost.proto));
  }
  k.sms_held = channels * t.nccl.sms_per_channel;
  const double compute = fused_compute_us(t, w, share);
  // Everything the kernel moves through HBM (its own traffic and the element-wise work) bounds it too.
  const double hbm = traffic.hbm + w.hbm_bytes * share;
  transfer = std::max(transfer, transfer_us(hbm, t.gpu.hbm_effective_GBps()));
  // The element-wise part hides under the transfers but for one step of the
  // pipeline: a ring step (1/ranks of the data), or one piece of a fused op
  // that pipelines its rows in `calls` pieces (plan/fused_form.h).
  const double pipeline_depth = std::max({2, where.ranks, calls});
  const double launches = compute > 0 ? calls * t.gpu.launch_us : 0.0;  // a fused op's kernel per piece
  k.latency_us = (pays_latency ? calls * base + hops : 0.0) + launches;
  // The element-wise part runs beside the transfers only on compute units the
  // collectives leave free; with none left (a CPU rank whose one core drives
  // MPI, sms_per_channel fitted by calibrate) the two take turns.
  const bool beside = double(t.gpu.sms) - k.sms_held >= 1.0;
  k.work_us = beside ? std::max(transfer, compute) + std::min(transfer, compute) / pipeline_depth
                     : transfer + compute;
  // Every resource it crosses, at the rate its work phase moves its bytes there.
  k.demand_GBps[int(Resource::nvlink)] = demand(traffic.nvlink, k.work_us, capacity_GBps(ctx, Resource::nvlink));
  k.demand_GBps[int(Resource::network)] = demand(traffic.network, k.work_us, capacity_GBps(ctx, Resource::network));
  k.demand_GBps[int(Resource::hbm)] = demand(hbm, k.work_us, capacity_GBps(ctx, Resource::hbm));
  k.detail = detail + ", " + link_bound(t, link);
  return k;
}

// A fused op whose algorithm or protocol is left to `auto`: NCCL's choice
// for the collective alone ignores the computation it hides, so the pair is
// chosen for the whole op (the collective's latency per piece against the
// transfer the computation hides under). Each fixed pair is priced as is;
// the fastest wins, so making any pair faster never makes the op slower.
Task fused_task(const plan::Work& w, const Context& ctx, const model::Knobs& knobs, bool pays_latency, double share,
                int calls) {
  constexpr std::array<model::Algo, 4> kAlgos = {model::Algo::auto_, model::Algo::ring, model::Algo::tree,
                                                 model::Algo::nvls};
  constexpr std::array<model::Proto, 4> kProtos = {model::Proto::auto_, model::Proto::ll, model::Proto::ll128,
                                                   model::Proto::simple};
  Task best = comm_task(w, ctx, knobs, pays_latency, share, calls);
  if (w.hbm_bytes <= 0 && w.flops <= 0) return best;
  for (const model::Algo a : kAlgos)
    for (const model::Proto p : kProtos) {
      if ((knobs.algo != model::Algo::auto_ && a != knobs.algo) ||
          (knobs.proto != model::Proto::auto_ && p != knobs.proto) || (a == knobs.algo && p == knobs.proto))
        continue;  // not a choice the knobs leave, or the knobs' own (priced first)
      model::Knobs k = knobs;
      k.algo = a;
      k.proto = p;
      Task t = comm_task(w, ctx, k, pays_latency, share, calls);
      if (t.latency_us + t.work_us < best.latency_us + best.work_us) best = std::move(t);
    }
  return best;
}

Task launch_task(const plan::StepPlan& p, const plan::Unit& u, const plan::Op& op, int chunk, const Context& ctx) {
  const double share = plan::chunk_share(u, chunk);
  const int calls = op.calls.at(std::size_t(chunk));
  if (calls == 0) return Task{};  // this chunk holds no rows of the op's value on rank 0: nothing is called
  switch (op.cls) {
    case plan::OpClass::collective:
      return comm_task(op.work, ctx, p.knobs, chunk == 0 || !p.caps.resident_overlap, share, calls);
    case plan::OpClass::fused:
      return fused_task(op.work, ctx, p.knobs, chunk == 0 || !p.caps.resident_overlap, share, calls);
    case plan::OpClass::matmul: return gemm_task(*op.work.gemm, ctx, share, calls);
    case plan::OpClass::elementwise:
    case plan::OpClass::norm:
    case plan::OpClass::rowreduce: return elementwise_task(op.work, ctx, share, calls);
  }
  throw InternalError("launch_task: unknown op class");
}

// Builds a unit's tasks with their waits: stream order on each rank taking
// part, producers' same chunk, and the unit before when nothing earlier in
// this unit orders the task.
class TaskBuilder {
 public:
  TaskBuilder(const plan::StepPlan& p, const Context& ctx) : p_(p), ctx_(ctx) {}

  std::vector<Task> run() {
    for (std::size_t u = 0; u < p_.units.size(); ++u) add_unit(int(u));
    return std::move(tasks_);
  }

 private:
  void add_unit(int unit) {
    const plan::Unit& u = p_.units[std::size_t(unit)];
    std::map<std::pair<int, int>, int> last_on;  // (rank, stream) -> task
    std::map<std::pair<int, int>, int> launched;  // (op, chunk) -> task
    std::vector<int> mine;
    for (const plan::Launch& l : plan::issue_order(p_, u)) {
      const plan::Op& op = p_.op(l.op);
      Task k = launch_task(p_, u, op, l.chunk, ctx_);
      k.op = op.id;
      k.unit = unit;
      k.stage = op.stage;
      k.chunk = l.chunk;
      k.chunks = u.chunks;
      k.rank = op.group;
      k.peer = op.dest_group;
      k.stream = int(op.stream);
      k.name = chunk_name(op.code, l.chunk, u.chunks);
      if (u.chunks > 1 && k.is_comm) k.detail += fmt::format(" per chunk of {}", u.chunks);
      const int id = int(tasks_.size());
      for (int rank : {op.group, op.dest_group}) {
        if (rank < 0) continue;
        const auto key = std::make_pair(rank, k.stream);
        if (const auto it = last_on.find(key); it != last_on.end()) k.after.push_back(it->second);
        last_on[key] = id;
      }
      for (int producer : op.producers)
        if (const auto it = launched.find({producer, l.chunk}); it != launched.end()) k.after.push_back(it->second);
      if (k.after.empty()) k.after = previous_unit_;
      std::sort(k.after.begin(), k.after.end());
      k.after.erase(std::unique(k.after.begin(), k.after.end()), k.after.end());
      launched[{op.id, l.chunk}] = id;
      mine.push_back(id);
      tasks_.push_back(std::move(k));
    }
    if (!mine.empty()) previous_unit_ = std::move(mine);
  }

  const plan::StepPlan& p_;
  const Context& ctx_;
  std::vector<Task> tasks_;
  std::vector<int> previous_unit_;
};

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

std::vector<Task> make_tasks(const plan::StepPlan& p, const Context& ctx) { return TaskBuilder(p, ctx).run(); }

Prediction predict_analytic(const plan::StepPlan& p, const Context& ctx) {
  const std::vector<Task> tasks = make_tasks(p, ctx);
  Prediction out;
  out.stages.resize(p.stage_codes.size());
  for (std::size_t s = 0; s < p.stage_codes.size(); ++s) out.stages[s].code = p.stage_codes[s];
  std::vector<double> end(tasks.size(), 0.0);
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const Task& k = tasks[i];
    double start = 0;
    for (int a : k.after) start = std::max(start, end[std::size_t(a)]);
    end[i] = start + k.duration_us();
    out.time_us = std::max(out.time_us, end[i]);
    StageCost& c = out.stages[std::size_t(k.stage)];
    c.time_us += k.duration_us();
    c.latency_us += k.latency_us;
    (k.is_comm ? c.comm_us : c.compute_us) += k.work_us;
    if (c.detail.empty()) c.detail = k.detail;
  }
  return out;
}

plan::StepPlan lower_for(const model::Schedule& s, const Context& ctx) {
  return plan::lower(s, ctx.sizes, ctx.ranks, ctx.capabilities());
}

Prediction predict_analytic(const model::Schedule& s, const Context& ctx) {
  return predict_analytic(lower_for(s, ctx), ctx);
}

}  // namespace coconet::sim
