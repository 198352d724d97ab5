// From a StepPlan's launches to tasks. One function per class of op; each
// returns a task whose duration alone is the roofline or collective formula,
// and whose bandwidth demands are what it moves divided by that duration
// (never more than the resource has, so a task alone always runs at full rate).
#include "sim/tasks.h"

#include <algorithm>
#include <limits>
#include <array>
#include <cmath>
#include <map>
#include <span>
#include <tuple>
#include <utility>

#include <fmt/core.h>

#include "model/error.h"
#include "sim/resolve.h"
#include "sim/units.h"

namespace coconet::sim {

namespace {

constexpr double kScalarBytes = 4;  // an f32 norm partial sum

double demand(double bytes, double us, double cap) { return std::min(cap, rate_GBps(bytes, us)); }

double scalar_allreduce_us(const Context& ctx) {
  CollectiveRequest r{model::OpKind::allreduce, kScalarBytes, ctx.placement()};
  r.in_place = true;  // the partial sum is reduced where it lies
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

// `share` of an element-wise op's arithmetic and costly operations (priced
// at the topology's weights, gpu.op_flops).
ArithmeticTerms arithmetic(const Topology& t, const plan::Work& w, double share) {
  CostlyCounts costly;
  for (std::size_t k = 0; k < costly.size(); ++k) costly[k] = w.costly[k] * share;
  return elementwise_arithmetic(t, w.flops * share, costly);
}

bool computes(const plan::Work& w) {
  return w.hbm_bytes > 0 || w.flops > 0 ||
         std::any_of(w.costly.begin(), w.costly.end(), [](double n) { return n > 0; });
}

// `describe`: write the task's detail (the resolution's trials are priced, never shown).
Task elementwise_task(const plan::Work& w, const Context& ctx, double share, int calls, bool describe = true) {
  const Topology& t = ctx.topology;
  Task k;
  k.is_compute = true;
  k.latency_us = calls * t.gpu.launch_us + (w.norm_across_group ? scalar_allreduce_us(ctx) : 0.0);
  const double bytes = w.hbm_bytes * share;
  k.work_us = elementwise_body_us(t, bytes, arithmetic(t, w, share));
  k.demand_GBps[int(Resource::hbm)] = demand(bytes, k.work_us, capacity_GBps(ctx, Resource::hbm));
  const bool math_bound = k.work_us > transfer_us(bytes, t.gpu.hbm_effective_GBps()) * (1 + 1e-9);
  if (describe)
    k.detail = fmt::format("{} over {}, {}", bytes_text(bytes), memory_word(t),
                           math_bound ? "FLOP-bound" : memory_word(t) + "-bound");
  return k;
}

// How a GEMM launch is cut: `calls` GEMMs share the chunk's rows (one per
// range of rows the rank holds), or (tile) the launch is block `chunk` of
// one GEMM over the whole output (plan::Unit::tile).
struct GemmCut {
  double share = 1;
  int calls = 1;
  bool tile = false;
  int chunk = 0;
};

// A tile block is its share of the whole GEMM, priced at the whole GEMM's
// efficiency (its waves over every tile of the output, its operands once),
// launched once (with the first block); the sharing of cores or SMs with
// the collective its blocks overlap is the simulator's interference.
Task gemm_task(const plan::Gemm& g, const Context& ctx, const GemmCut& cut, bool describe = true) {
  const Topology& t = ctx.topology;
  Task k;
  k.is_gemm = true;
  k.is_compute = true;
  const plan::Gemm part = cut.tile ? g : g.part(cut.share, cut.calls);
  const int calls = cut.tile ? 1 : cut.calls;
  const double body_share = cut.tile ? cut.share : 1.0;
  const int launches = cut.tile ? (cut.chunk == 0 ? 1 : 0) : calls;
  k.gemm = GemmShape{part.m, part.n, part.k, part.dtype, part.batch};
  k.gemm.fp8 = ctx.fp8_gemms && part.batch == 1 && part.dtype != model::DType::f32;
  k.latency_us = launches * t.gpu.launch_us;
  k.work_us = calls * gemm_body_us(t, k.gemm, t.gpu.sms) * body_share;
  if (k.gemm.fp8) {  // the cast of its first operand to FP8 (with its amax): a kernel of its own
    // (of this rank's slice only, before the gather, when the operand was all-gathered)
    k.latency_us += launches * t.gpu.launch_us;
    k.work_us += calls * fp8_cast_body_us(t, double(part.m) * double(part.k) / part.a_gathered) * body_share;
  }
  k.demand_GBps[int(Resource::hbm)] = demand(k.gemm.bytes(), k.work_us, capacity_GBps(ctx, Resource::hbm));
  if (!describe) return k;
  k.detail = fmt::format("{}[{}x{}]x[{}x{}] {}, {} tiles on {} {}{}",
                         k.gemm.batch > 1 ? fmt::format("{} x ", k.gemm.batch) : "", k.gemm.m, k.gemm.k, k.gemm.k, k.gemm.n,
                         k.gemm.fp8 ? "fp8 (cast from " + model::to_string(k.gemm.dtype) + ")" : model::to_string(k.gemm.dtype),
                         gemm_tiles(t, k.gemm), t.gpu.sms, units_word(t),
                         cut.tile ? fmt::format(", block {} ({:.0f}%)", cut.chunk, 100 * cut.share) : "");
  return k;
}

// A kernel stage as one kernel (plan::Kernel): one launch; a fused
// element-wise kernel by its bytes and FLOPs, a flash-attention kernel by
// its GEMMs' FLOPs at the GPU's flash-attention efficiency (and sustained
// share) or its bytes,
// whichever takes longer.
Task kernel_task(const plan::Kernel& kn, const Context& ctx, double share, bool describe = true) {
  const Topology& t = ctx.topology;
  Task k = elementwise_task(kn.work, ctx, share, 1, describe);
  if (kn.attention_flops <= 0) return k;
  const double bytes = kn.work.hbm_bytes * share;
  const double efficiency =
      (kn.attention_backward ? t.gpu.flash_bwd_efficiency() : t.gpu.flash_efficiency()) * t.gpu.sustained();
  const double peak = t.gpu.gemm_tflops(kn.dtype) * efficiency;
  const double math = kn.attention_flops * share / (peak * kFlopsPerTflopsUs);
  k.work_us = std::max(math, transfer_us(bytes, t.gpu.hbm_effective_GBps()));
  k.demand_GBps[int(Resource::hbm)] = demand(bytes, k.work_us, capacity_GBps(ctx, Resource::hbm));
  if (!describe) return k;
  k.detail = fmt::format("flash attention{}: {:.3g} GFLOP at {:.0f}% of {} {:.0f} TFLOP/s, {} over {}",
                         kn.attention_backward ? " backward" : "", kn.attention_flops * share / 1e9, 100 * efficiency, model::to_string(kn.dtype),
                         t.gpu.gemm_tflops(kn.dtype), bytes_text(bytes), memory_word(t));
  return k;
}

// The element-wise part of a fused op is a kernel of its own per piece, on
// the compute stream beside the collectives (exec/fused_call.h), not code in
// the collective's CTAs: the roofline of its bytes and FLOPs; its HBM is
// shared with the collective's (the bound below).
double fused_compute_us(const Topology& t, const plan::Work& w, double share) {
  if (!computes(w)) return 0.0;
  return elementwise_body_us(t, w.hbm_bytes * share, arithmetic(t, w, share));
}

// What a fused op's form calls besides its collectives and one kernel per
// piece, as exec/fused_call.h runs it: a kernel per further pass and piece,
// a kernel per norm (once per chunk: a norm waits for its pass's last
// piece), and for a norm of a sliced value the allreduce of its partial sums.
double fused_form_latency_us(const plan::FusedForm& f, const Context& ctx, int calls) {
  int norms = 0, across = 0;
  const auto count = [&](const std::vector<plan::FusedNorm>& ns) {
    for (const auto& n : ns) {
      ++norms;
      across += n.across_group ? 1 : 0;
    }
  };
  count(f.norms_before);
  for (const auto& pass : f.passes) count(pass.norms_after);
  const double extra_passes = double(std::max<std::size_t>(f.passes.size(), 1) - 1);
  return (double(calls) * extra_passes + norms) * ctx.topology.gpu.launch_us + across * scalar_allreduce_us(ctx);
}

// A collective, or a fused collective whose element-wise work runs on each
// piece as it arrives: latency once per call (a fused op calls each of its
// collectives once per piece), transfers back to back, the element-wise part
// pipelined under them with the last piece exposed. A chunk
// of an overlap group is a call of its own (paying the latency again) unless
// the backend keeps its collectives resident across chunks.
// How a launch's collectives are chosen: pricing reads each collective's
// resolved choice of the chunk (plan::Collective::chosen); resolution
// (sim/resolve.h) tries a setting of the knobs (`trial`), each collective
// taking NCCL's own choice of what the setting leaves open, and records
// what each one took (`taken`).
struct Choosing {
  int chunk = 0;
  const model::Knobs* trial = nullptr;
  std::vector<plan::CollectiveChoice>* taken = nullptr;
  bool describe = true;  // false: no task's detail is written (a resolution's kernels are priced, never shown)
};

// The resolved choice of `c` for `chunk`, as the plan states it.
const plan::CollectiveChoice& resolved_choice(const plan::Collective& c, int chunk) {
  if (std::size_t(chunk) >= c.chosen.size() || !c.chosen[std::size_t(chunk)].concrete())
    throw InternalError(fmt::format("sim: the {} of {} (chunk {}) is priced without a resolved algorithm, protocol "
                                    "and channels; resolve the plan first (sim/resolve.h resolve_collectives)",
                                    model::to_string(c.op), c.stmt, chunk));
  return c.chosen[std::size_t(chunk)];
}

// The cost of one call of `c` as `how` chooses it.
CollectiveCost collective_cost(const Topology& t, const plan::Collective& c, CollectiveRequest r, const Choosing& how) {
  if (how.trial) {
    r.algo = how.trial->algo;
    r.proto = how.trial->proto;
    r.channels = how.trial->channels;
    const CollectiveCost cost = predict_collective_or_auto(t, r);
    how.taken->push_back(one_rank(r) ? plan::CollectiveChoice{model::Algo::auto_, model::Proto::auto_, 0, true}
                                     : plan::CollectiveChoice{cost.algo, cost.proto, cost.channels, false});
    return cost;
  }
  const plan::CollectiveChoice& chosen = resolved_choice(c, how.chunk);
  if (!chosen.local) {
    r.algo = chosen.algo;
    r.proto = chosen.proto;
    r.channels = chosen.channels;
  }
  return predict_collective(t, r);
}

// `whole`: the launch is the share of one collective call over the whole
// message (a tile unit's resident collective, Capabilities::tile_one_collective):
// priced at the whole message's size, its transfers and hops scaled to the share.
Task comm_task(const plan::Work& w, const plan::FusedForm* form, const Context& ctx, const Choosing& how,
               bool pays_latency, double share, int calls, bool whole = false) {
  const Topology& t = ctx.topology;
  const Placement where = ctx.placement();
  Task k;
  k.is_comm = true;
  double base = 0, hops = 0, transfer = 0;
  LinkTraffic traffic;  // what the collectives put on each resource they cross
  Link link = Link::nvlink;
  int channels = 0;
  double units_per_channel = 0;  // the most any of its collectives holds
  double smallest_base = std::numeric_limits<double>::infinity();  // of one call of any of its collectives
  std::string detail;
  bool crosses = false;  // some collective moves data between ranks
  for (const auto& c : w.collectives) {
    // An allgather into an FP8 GEMM moves the operand already cast (plan::Collective::fp8_bytes).
    const double size = ctx.fp8_gemms && c.fp8_bytes > 0 ? c.fp8_bytes : c.bytes;
    const double bytes = size * share;
    const CollectiveRequest r{c.op, whole ? size : bytes / calls, where, model::Algo::auto_, model::Proto::auto_, 0,
                              c.in_place};
    const CollectiveCost cost = collective_cost(t, c, r, how);
    const double times = whole ? share : double(calls);  // of the priced call
    base += cost.base_us;  // each collective is a call of its own (a fused op: per piece)
    smallest_base = std::min(smallest_base, cost.base_us);
    hops += times * cost.hops_us;
    transfer += times * cost.transfer_us;
    const LinkTraffic one = traffic_of(t, r, cost);
    traffic.nvlink += times * one.nvlink;
    traffic.network += times * one.network;
    traffic.hbm += times * one.hbm;
    if (cost.transfer_us > 0 && cost.bottleneck == Link::network) link = Link::network;
    channels = std::max(channels, cost.channels);
    units_per_channel = std::max(units_per_channel, sms_per_channel(t, c.op, where));
    const bool local = one_rank(r);
    crosses = crosses || !local;
    if (how.trial || !how.describe) continue;  // a trial of the resolution is priced, never shown
    detail += fmt::format("{}{} {} ", detail.empty() ? "" : ", ", model::to_string(c.op), bytes_text(bytes));
    if (local) detail += c.in_place ? "on one rank, in place: nothing" : "on one rank: a local copy";
    else
      detail += fmt::format("{}/{}{}", model::to_string(cost.algo), model::to_string(cost.proto),
                            cost.channels == t.nccl.channels ? "" : fmt::format(" x{} channels", cost.channels));
  }
  k.sms_held = channels * units_per_channel;
  // A piece's collectives hand off once between them (nccl.handoff_us), never
  // more than a call's own fixed cost: the fused microbenchmarks that fit it
  // are one piece each, so a piece, not the whole op, is what was measured.
  if (w.collectives.size() > 1)
    base -= double(w.collectives.size() - 1) * std::min(t.nccl.handoff_us, smallest_base);
  const double compute = fused_compute_us(t, w, share);
  // Everything the kernel moves through HBM (its own traffic and the element-wise work) bounds it too.
  const double hbm = traffic.hbm + w.hbm_bytes * share;
  const double moved = transfer_us(hbm, t.gpu.hbm_effective_GBps());
  // The element-wise part hides under the transfers but for one step of the
  // pipeline: a ring step (1/ranks of the data), or one piece of a fused op
  // that pipelines its rows in `calls` pieces (plan/fused_form.h).
  const double pipeline_depth = std::max({2, where.ranks, calls});
  const double launches = compute > 0 ? calls * t.gpu.launch_us : 0.0;  // a fused op's kernel per piece
  // A resident call (whole) pays its fixed cost once, and each block its
  // share of the ring's hops and the barrier its communication kernel
  // crosses before reading the peers' block (tile_block_barrier_us).
  const double block_barrier = whole && crosses ? tile_block_barrier_us(t) : 0.0;
  k.latency_us = (pays_latency ? (whole ? 1 : calls) * base : 0.0) + (pays_latency || whole ? hops : 0.0) + launches +
                 block_barrier + (form != nullptr ? fused_form_latency_us(*form, ctx, calls) : 0.0);
  // The element-wise part runs beside the transfers only on compute units the
  // collectives leave free; with none left (a CPU rank whose one core drives
  // MPI, sms_per_channel fitted by calibrate) the two take turns.
  // Taking turns, the element-wise part's own time already holds its memory
  // traffic (its roofline), so the bound applies to the whole, not to the
  // transfers alone (which counted the update's bytes twice).
  const bool beside = double(t.gpu.sms) - k.sms_held >= 1.0;
  const double transfers = beside ? std::max(transfer, moved) : transfer;
  k.work_us = beside ? std::max(transfers, compute) + std::min(transfers, compute) / pipeline_depth
                     : std::max(transfer + compute, moved);
  // Every resource it crosses, at the rate its work phase moves its bytes there.
  k.demand_GBps[int(Resource::nvlink)] = demand(traffic.nvlink, k.work_us, capacity_GBps(ctx, Resource::nvlink));
  k.demand_GBps[int(Resource::network)] = demand(traffic.network, k.work_us, capacity_GBps(ctx, Resource::network));
  k.demand_GBps[int(Resource::hbm)] = demand(hbm, k.work_us, capacity_GBps(ctx, Resource::hbm));
  if (!how.trial && how.describe) k.detail = detail + ", " + (crosses ? link_bound(t, link) : memory_word(t) + "-bound");
  return k;
}

Task launch_task(const plan::StepPlan& p, const plan::Unit& u, const plan::Op& op, int chunk, const Context& ctx,
                 const Choosing& how) {
  const double share = plan::chunk_share(u, chunk);
  const int calls = op.calls.at(std::size_t(chunk));
  if (calls == 0) return Task{};  // this chunk holds no rows of the op's value on rank 0: nothing is called
  const bool describe = how.trial == nullptr && how.describe;
  if (op.kernel) return kernel_task(*op.kernel, ctx, share, describe);
  if (op.kernel_op >= 0) return Task{};  // priced in its kernel stage's first op
  switch (op.cls) {
    case plan::OpClass::collective:
    case plan::OpClass::fused:
    {
      const bool whole = u.tile && p.caps.tile_one_collective;
      const bool resident = p.caps.resident_overlap || whole;
      return comm_task(op.work, op.fused ? &*op.fused : nullptr, ctx, how, chunk == 0 || !resident, share, calls,
                       whole);
    }
    case plan::OpClass::matmul: return gemm_task(*op.work.gemm, ctx, {share, calls, u.tile, chunk}, describe);
    case plan::OpClass::elementwise:
    case plan::OpClass::norm:
    case plan::OpClass::rowreduce: return elementwise_task(op.work, ctx, share, calls, describe);
  }
  throw InternalError("launch_task: unknown op class");
}

// Whether `op` of the unit makes collective calls, and whether the unit
// computes beside them (a fused op's element-wise part, or a kernel of the
// unit): then the channels the collectives hold matter to the unit's time.
bool calls_collectives(const plan::Op& op) {
  return op.cls == plan::OpClass::collective || op.cls == plan::OpClass::fused;
}
bool computes_beside(const plan::StepPlan& p, const plan::Unit& u) {
  bool comm = false, compute = false;
  for (int id : u.ops) {
    const plan::Op& op = p.op(id);
    comm = comm || calls_collectives(op);
    compute = compute || !calls_collectives(op) ||
              (op.cls == plan::OpClass::fused && computes(op.work));
  }
  return comm && compute;
}

// Whether some collective of the ops `ids` can run algorithm `a` with
// protocol `pr` (either may be auto: some concrete choice for it).
bool usable(const plan::StepPlan& p, const std::vector<int>& ids, const Context& ctx, model::Algo a, model::Proto pr) {
  const Placement where = ctx.placement();
  constexpr std::array<model::Algo, 4> kAlgos = {model::Algo::ring, model::Algo::tree, model::Algo::nvls,
                                                 model::Algo::hierarchical};
  constexpr std::array<model::Proto, 3> kProtos = {model::Proto::ll, model::Proto::ll128, model::Proto::simple};
  for (int id : ids)
    for (const auto& c : p.op(id).work.collectives)
      for (model::Algo x : kAlgos)
        for (model::Proto y : kProtos)
          if ((a == model::Algo::auto_ || a == x) && (pr == model::Proto::auto_ || pr == y) &&
              supported(ctx.topology, c.op, where, x, y))
            return true;
  return false;
}

// The knobs a unit may run under: the plan's first, then every choice they
// leave open: NCCL's algorithms (ring, tree, NVLS: never hierarchical, which
// is three NCCL calls, run only by name) and protocols that some collective of
// the unit can use, and, where the unit computes beside its collectives and
// the channels are left to the default, half and twice the default channels.
std::vector<model::Knobs> unit_choices(const plan::StepPlan& p, const plan::Unit& u, const Context& ctx) {
  const model::Knobs& k = p.knobs;
  std::vector<model::Knobs> out = {k};
  if (!std::any_of(u.ops.begin(), u.ops.end(), [&](int id) { return calls_collectives(p.op(id)); })) return out;
  // On one rank every collective is local under every setting (collective_cost
  // records it so): the settings would all resolve the unit alike.
  const bool local = ctx.placement().ranks <= 1 && std::none_of(u.ops.begin(), u.ops.end(), [&](int id) {
                       const plan::Op& op = p.op(id);
                       return op.dest_group >= 0 ||
                              std::any_of(op.work.collectives.begin(), op.work.collectives.end(),
                                          [](const plan::Collective& c) { return c.op == model::OpKind::send; });
                     });
  if (local) return out;
  using model::Algo;
  using model::Proto;
  const std::vector<Algo> algos = k.algo == Algo::auto_
                                      ? std::vector<Algo>{Algo::auto_, Algo::ring, Algo::tree, Algo::nvls}
                                      : std::vector<Algo>{k.algo};
  const std::vector<Proto> protos = k.proto == Proto::auto_
                                        ? std::vector<Proto>{Proto::auto_, Proto::ll, Proto::ll128, Proto::simple}
                                        : std::vector<Proto>{k.proto};
  const int ch = ctx.topology.nccl.channels;
  const std::vector<int> channels = k.channels == 0 && computes_beside(p, u)
                                        ? std::vector<int>{0, std::max(1, ch / kChannelSpread), ch * kChannelSpread}
                                        : std::vector<int>{k.channels};
  for (Algo a : algos)
    for (Proto pr : protos) {
      if ((a != Algo::auto_ || pr != Proto::auto_) && !usable(p, u.ops, ctx, a, pr)) continue;
      for (int c : channels) {
        const model::Knobs choice{k.chunks, a, pr, c, k.overlap};
        if (!(choice == k)) out.push_back(choice);
      }
    }
  return out;
}

// The time a unit's tasks take alone, from the unit's start (tasks of the
// unit before count as done).
double unit_span_us(std::span<const Task> tasks, int first_id) {
  std::vector<double> end(tasks.size(), 0.0);
  double span = 0;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    double start = 0;
    for (int a : tasks[i].after)
      if (a >= first_id) start = std::max(start, end[std::size_t(a - first_id)]);
    end[i] = start + tasks[i].duration_us();
    span = std::max(span, end[i]);
  }
  return span;
}

// Builds a unit's tasks with their waits: stream order on each class taking
// part, producers' same chunk, and the unit before when nothing earlier in
// this unit orders the task. A kernel is one task per class of its group
// (priced with the class's scales); a collective or send is one task over
// every class of its group(s), priced with their slowest rates. Pricing
// reads each collective's resolved choice from the plan. Resolving
// (`resolving`, the plan to write the choices into: sim/resolve.h) builds
// each unit under every setting unit_choices gives, keeps the one under
// which the unit alone ends first (the choice is the unit's: its collectives
// and the compute beside them together, not each collective's by its own
// time), and writes what each collective took under it into the plan.
class TaskBuilder {
  // A launch's tasks: the one on each class (-1: none there), and all of
  // them; launched in the unit being built when `build` is build_'s count.
  struct Launched {
    std::vector<int> on;
    std::vector<int> tasks;
    unsigned build = 0;
    // Its kernels in kernels_ (one per distinct scales, side by side from
    // kernels_at), made while unit `kernels_unit` (units_'s count) is built.
    std::size_t kernels_at = 0;
    std::size_t kernels_count = 0;
    unsigned kernels_unit = 0;
  };
  // A trial build's collective and send tasks: where each is in tasks_, its
  // launch and the context it is priced on (fastest_choice reprices them).
  struct Joint {
    int task = 0;
    int op = 0;
    int chunk = 0;
    const Context* ctx = nullptr;
  };

 public:
  // `describe`: write each task's name and detail (false when resolving: its trials are priced, never shown).
  TaskBuilder(const plan::StepPlan& p, const Context& ctx, const std::vector<RankClass>& classes,
              plan::StepPlan* resolving, bool describe)
      : p_(p), ctx_(ctx), classes_(classes), resolving_(resolving), describe_(describe && resolving == nullptr),
        slots_of_(std::size_t(std::max(1, p.groups))) {
    orders_.reserve(p.units.size());
    for (const plan::Unit& u : p.units) orders_.push_back(plan::issue_order(p, u));
    for (std::size_t c = 0; c < classes.size(); ++c) {
      const int g = classes[c].group;
      if (g >= int(slots_of_.size())) slots_of_.resize(std::size_t(g) + 1);
      slots_of_[std::size_t(g)].push_back(int(c));
    }
    gated_ = classes.size() > slots_of_.size();  // not one class per group: join units through a gate
    first_sync_ = first_exchange();
    for (const plan::Unit& u : p.units) max_chunks_ = std::max(max_chunks_, u.chunks);
    launched_.resize(p.ops.size() * std::size_t(max_chunks_));
    // A task per launch and class of its group at most, and a gate per unit.
    std::size_t launches = 0, widest = 1;
    for (const std::vector<plan::Launch>& order : orders_) launches += order.size();
    for (const std::vector<int>& s : slots_of_) widest = std::max(widest, s.size());
    tasks_.reserve(launches * widest + p.units.size());
  }

  std::vector<Task> run() {
    for (std::size_t u = 0; u < p_.units.size(); ++u) add_unit(int(u));
    return std::move(tasks_);
  }

 private:
  const std::vector<int>& slots(int group) const {
    static const std::vector<int> kNone;
    return group >= 0 && group < int(slots_of_.size()) ? slots_of_[std::size_t(group)] : kNone;
  }

  // The step's first launch that exchanges data between ranks (a collective
  // on more than one rank, or a send): it pays nccl.step_sync_us. None: {-1, -1}.
  std::pair<int, int> first_exchange() const {
    for (const std::vector<plan::Launch>& order : orders_)
      for (const plan::Launch& l : order) {
        const plan::Op& op = p_.op(l.op);
        const bool comm = op.cls == plan::OpClass::collective || op.cls == plan::OpClass::fused;
        if (op.calls.at(std::size_t(l.chunk)) > 0 && (op.dest_group >= 0 || (comm && p_.ranks_per_group > 1)))
          return {l.op, l.chunk};
      }
    return {-1, -1};
  }

  // The context for rates `s`, made once per distinct scales (unscaled: the context given).
  const Context& context(const RankScales& s) {
    if (s == RankScales{}) return ctx_;
    auto it = contexts_.find(s);
    if (it == contexts_.end()) it = contexts_.emplace(s, class_context(ctx_, s)).first;
    return it->second;
  }

  void add_unit(int unit) {
    const plan::Unit& u = p_.units[std::size_t(unit)];
    const int first = int(tasks_.size());
    kernels_.clear();
    ++units_;
    if (!resolving_) {
      std::vector<int> mine = build_unit(unit, nullptr);
      if (!mine.empty()) previous_unit_ = std::move(mine);
      return;
    }
    // A unit that calls no collective has nothing to resolve, and no later
    // unit's span reads its tasks (a span starts at its own unit's start).
    if (std::none_of(u.ops.begin(), u.ops.end(), [&](int id) { return calls_collectives(p_.op(id)); })) return;
    const std::vector<model::Knobs> choices = unit_choices(p_, u, ctx_);
    // The unit is built once, under the first setting: the settings change
    // only what its collective and send tasks cost (their waits, and every
    // kernel, are the same under each), so each other setting reprices those
    // tasks in place (fastest_choice), and the kept one takes its choices.
    taken_.clear();
    joints_.clear();
    std::vector<int> mine = build_unit(unit, &choices.front());
    if (!mine.empty()) previous_unit_ = std::move(mine);
    if (choices.size() > 1) {
      const model::Knobs& best = choices[fastest_choice(u, first, choices)];
      taken_.clear();
      for (const Joint& j : joints_) reprice(u, j, best, &taken_[{j.op, j.chunk}]);
    }
    joints_.clear();
    for (auto& [launch, taken] : taken_) {  // what each collective of the kept setting took, chunk by chunk
      plan::Op& op = resolving_->ops.at(std::size_t(launch.first));
      for (std::size_t i = 0; i < taken.size() && i < op.work.collectives.size(); ++i)
        op.work.collectives[i].chosen.at(std::size_t(launch.second)) = taken[i];
    }
  }

  // The first of `choices` under which the unit (built from task `first` on,
  // under the first choice) alone ends first, each other choice repricing
  // the unit's collective and send tasks (joints_) in place.
  std::size_t fastest_choice(const plan::Unit& u, int first, const std::vector<model::Knobs>& choices) {
    std::size_t best = 0;
    double best_us = 0;
    std::vector<plan::CollectiveChoice> scratch;
    for (std::size_t i = 0; i < choices.size(); ++i) {
      if (i > 0)
        for (const Joint& j : joints_) reprice(u, j, choices[i], &scratch);
      const double us = unit_span_us(std::span<const Task>(tasks_).subspan(std::size_t(first)), first);
      if (i == 0 || us < best_us) {
        best = i;
        best_us = us;
      }
    }
    return best;
  }

  // The task of `j` priced again under `trial` (what it takes written into `taken`).
  void reprice(const plan::Unit& u, const Joint& j, const model::Knobs& trial,
               std::vector<plan::CollectiveChoice>* taken) {
    const Task k = joint_task(u, p_.op(j.op), j.chunk, *j.ctx, &trial, taken);
    Task& t = tasks_[std::size_t(j.task)];
    t.latency_us = k.latency_us;
    t.work_us = k.work_us;
  }

  // A collective's or send's task for (op, chunk) on `ctx` (its classes'
  // slowest rates), under `trial` when resolving.
  Task joint_task(const plan::Unit& u, const plan::Op& op, int chunk, const Context& ctx, const model::Knobs* trial,
                  std::vector<plan::CollectiveChoice>* taken) const {
    if (taken) taken->clear();
    Task k = launch_task(p_, u, op, chunk, ctx, Choosing{chunk, trial, taken, describe_});
    if (std::pair{op.id, chunk} == first_sync_) k.latency_us += ctx_.topology.nccl.step_sync_us;
    return k;
  }

  // Appends the unit's tasks, priced from the plan's choices (`trial` null) or
  // under the setting `trial` (resolving); returns their ids (the gate's not included).
  std::vector<int> build_unit(int unit, const model::Knobs* trial) {
    const plan::Unit& u = p_.units[std::size_t(unit)];
    last_on_.assign(classes_.size() * 2, -1);  // (class, stream) -> task
    ++build_;  // every launch of launched_ from an earlier build (a unit, or a trial of it) is stale
    std::vector<int> mine;
    const int gate = gated_ && !previous_unit_.empty() ? add_gate(unit, u.first_stage) : -1;
    for (const plan::Launch& l : orders_[std::size_t(unit)]) {
      const plan::Op& op = p_.op(l.op);
      Launched& done = launched_[launch_index(op.id, l.chunk)];
      if (done.build != build_) {
        done.tasks.clear();
        done.build = build_;
      }
      done.on.assign(classes_.size(), -1);
      const bool joint = op.cls == plan::OpClass::collective || op.cls == plan::OpClass::fused ||
                         op.dest_group >= 0;
      // The task is made in place in tasks_ (reserved for the plan's launches: no task is moved).
      const auto one = [&](std::span<const int> on, std::span<const int> to, const Task& proto) {
        const int id = int(tasks_.size());
        Task& k = tasks_.emplace_back(proto);
        k.op = op.id;
        k.unit = unit;
        k.stage = op.stage;
        k.chunk = l.chunk;
        k.chunks = u.chunks;
        k.stream = int(op.stream);
        if (describe_) k.name = chunk_name(op.code, l.chunk, u.chunks);
        if (u.chunks > 1 && k.is_comm && !k.detail.empty()) k.detail += fmt::format(" per chunk of {}", u.chunks);
        k.rank = on.empty() ? -1 : on.front();
        k.peer = to.empty() ? -1 : to.front();
        k.ranks.assign(on.begin(), on.end());
        // A receiving class that also sends (a send within a group) is counted once, as a sender.
        for (int c : to)
          if (std::find(on.begin(), on.end(), c) == on.end()) k.peers.push_back(c);
        for (const auto* side : {&k.ranks, &k.peers})
          for (int c : *side) {
            int& last = last_on_[std::size_t(c) * 2 + std::size_t(k.stream)];
            if (last >= 0) k.after.push_back(last);
            last = id;
            for (int producer : op.producers) add_producer(k, producer, l.chunk, c);
            done.on[std::size_t(c)] = id;
          }
        done.tasks.push_back(id);
        if (k.after.empty()) k.after = gate >= 0 ? std::vector<int>{gate} : previous_unit_;
        std::sort(k.after.begin(), k.after.end());
        k.after.erase(std::unique(k.after.begin(), k.after.end()), k.after.end());
        mine.push_back(id);
      };
      if (joint) {
        RankScales slowest;
        for (int g : {op.group, op.dest_group})
          for (int c : slots(g)) slowest = slowest.slowest(classes_[std::size_t(c)].scales);
        std::vector<plan::CollectiveChoice>* taken = trial ? &taken_[{op.id, l.chunk}] : nullptr;
        const Context& on = context(slowest);
        const Task k = joint_task(u, op, l.chunk, on, trial, taken);
        if (trial) joints_.push_back(Joint{int(tasks_.size()), op.id, l.chunk, &on});
        one(slots(op.group), op.dest_group >= 0 ? std::span<const int>(slots(op.dest_group)) : std::span<const int>{}, k);
        continue;
      }
      for (int c : slots(op.group)) {
        const RankScales& s = classes_[std::size_t(c)].scales;
        // A kernel per distinct scales, the same under every choice of the unit's knobs.
        one(std::span<const int>(&c, 1), {}, kernel(done, u, op, l.chunk, s));
      }
    }
    return mine;
  }

  // The launch's kernel on ranks of scales `s`: made once per unit (every
  // trial of the unit's knobs prices it alike), found again among the
  // launch's own.
  const Task& kernel(Launched& done, const plan::Unit& u, const plan::Op& op, int chunk, const RankScales& s) {
    if (done.kernels_unit != units_) {
      done.kernels_unit = units_;
      done.kernels_at = kernels_.size();
      done.kernels_count = 0;
    }
    for (std::size_t i = done.kernels_at; i < done.kernels_at + done.kernels_count; ++i)
      if (kernels_[i].first == s) return kernels_[i].second;
    if (done.kernels_at + done.kernels_count != kernels_.size())
      throw InternalError("sim: a launch's kernels are not side by side");
    ++done.kernels_count;
    return kernels_.emplace_back(s, launch_task(p_, u, op, chunk, context(s), Choosing{chunk, nullptr, nullptr, describe_}))
        .second;
  }

  // A wait on the producer's same chunk on class `c`; a producer that did not
  // run on `c` (another group's op) is waited for wherever it ran.
  void add_producer(Task& k, int producer, int chunk, int c) const {
    const Launched& it = launched_[launch_index(producer, chunk)];
    if (it.build != build_) return;  // not launched in this unit
    if (it.on[std::size_t(c)] >= 0) {
      k.after.push_back(it.on[std::size_t(c)]);
      return;
    }
    k.after.insert(k.after.end(), it.tasks.begin(), it.tasks.end());
  }

  // The slot of launched_ of (op, chunk): op-major, max_chunks_ per op.
  [[nodiscard]] std::size_t launch_index(int op, int chunk) const {
    if (op < 0 || std::size_t(op) >= p_.ops.size() || chunk < 0 || chunk >= max_chunks_)
      throw InternalError(fmt::format("sim: launch of op {} chunk {} outside the plan's {} ops of {} chunks", op,
                                      chunk, p_.ops.size(), max_chunks_));
    return std::size_t(op) * std::size_t(max_chunks_) + std::size_t(chunk);
  }

  // The join of the unit before: one task without work that every task
  // starting the unit waits for (instead of each waiting for all of it).
  int add_gate(int unit, int stage) {
    Task g;
    g.is_gate = true;
    g.unit = unit;
    g.stage = stage;
    g.rank = -1;
    g.name = "unit sync";
    g.after = previous_unit_;
    tasks_.push_back(std::move(g));
    return int(tasks_.size()) - 1;
  }

  const plan::StepPlan& p_;
  const Context& ctx_;
  const std::vector<RankClass>& classes_;
  plan::StepPlan* resolving_ = nullptr;  // resolving: the plan the choices are written into (p_ itself)
  bool describe_ = true;                 // tasks carry their names and details
  std::vector<std::vector<plan::Launch>> orders_;  // unit -> plan::issue_order, made once
  std::map<std::pair<int, int>, std::vector<plan::CollectiveChoice>> taken_;  // (op, chunk) -> each collective's
  std::vector<std::vector<int>> slots_of_;  // group -> its classes
  std::map<RankScales, Context> contexts_;
  // The unit's kernels, per launch and distinct scales (Launched::kernels_at;
  // cleared per unit, its room reused).
  std::vector<std::pair<RankScales, Task>> kernels_;
  unsigned units_ = 0;  // units built so far (add_unit)
  bool gated_ = false;
  std::pair<int, int> first_sync_{-1, -1};  // (op, chunk) paying nccl.step_sync_us
  std::vector<int> last_on_;
  int max_chunks_ = 1;               // the most chunks of any unit
  std::vector<Launched> launched_;   // (op, chunk) -> its tasks, kept across builds (their vectors reused)
  unsigned build_ = 0;               // units (and trials of one) built so far
  std::vector<Task> tasks_;
  std::vector<int> previous_unit_;
  std::vector<Joint> joints_;
};

}  // namespace

namespace {

// One GPU's capacity of `r` on topology `t`, its node's NICs shared by `gpus_sharing` GPUs.
double capacity_on(const Topology& t, Resource r, int gpus_sharing) {
  switch (r) {
    case Resource::hbm: return t.gpu.hbm_effective_GBps();
    case Resource::nvlink: return t.node.nvlink_GBps();
    case Resource::network: return t.network.share_GBps(gpus_sharing);
    case Resource::count_: break;
  }
  return 0.0;
}

}  // namespace

double capacity_GBps(const Context& ctx, Resource r) {
  return capacity_on(ctx.topology, r, ctx.placement().per_node);
}

double capacity_GBps(const Topology& scaled, const RankClass& c, Resource r) {
  return capacity_on(scaled, r, c.node_peers);
}

Context class_context(const Context& ctx, const RankScales& s) {
  Context c = ctx;
  c.topology = ctx.topology.scaled(s);
  return c;
}

std::vector<Task> make_tasks(const plan::StepPlan& p, const Context& ctx, const std::vector<RankClass>& classes,
                             bool describe) {
  if (p.resolved_on.empty())
    throw InternalError(fmt::format("sim: the plan of {} is priced before its collectives are resolved; resolve it "
                                    "first (sim/resolve.h resolve_collectives)",
                                    p.schedule));
  return TaskBuilder(p, ctx, classes, nullptr, describe).run();
}

void resolve_collectives(plan::StepPlan& p, const Context& ctx, const std::vector<RankClass>& classes) {
  for (plan::Op& op : p.ops)
    for (plan::Collective& c : op.work.collectives)
      c.chosen.assign(std::size_t(p.units.at(std::size_t(op.unit)).chunks), plan::CollectiveChoice{});
  (void)TaskBuilder(p, ctx, classes, &p, false).run();
  p.resolved_on = ctx.topology.name;
}

void resolve_collectives(plan::StepPlan& p, const Context& ctx) {
  resolve_collectives(p, ctx, rank_classes(ctx.topology, p.ranks_per_group, p.groups, ctx.rank_mode));
}

std::function<void(plan::StepPlan&)> resolve_on(Topology topology, plan::BackendKind backend) {
  return [t = std::move(topology), backend](plan::StepPlan& p) {
    resolve_collectives(p, Context{t, p.ranks_per_group, p.sizes, backend});
  };
}

bool pins_apply(const plan::StepPlan& p, const Context& ctx, const model::Knobs& k) {
  if (k.algo == model::Algo::auto_ && k.proto == model::Proto::auto_) return true;
  std::vector<int> all(p.ops.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = int(i);
  return usable(p, all, ctx, k.algo, k.proto);
}

std::vector<plan::CollectiveChoice> choices_of(const plan::StepPlan& p) {
  std::vector<plan::CollectiveChoice> out;
  for (const plan::Op& op : p.ops)
    for (const plan::Collective& c : op.work.collectives) out.insert(out.end(), c.chosen.begin(), c.chosen.end());
  return out;
}

std::vector<Task> make_tasks(const plan::StepPlan& p, const Context& ctx) {
  return make_tasks(p, ctx, rank_classes(ctx.topology, p.ranks_per_group, p.groups, ctx.rank_mode));
}

Prediction predict_analytic(const plan::StepPlan& p, const Context& ctx) {
  return predict_analytic(p, ctx, rank_classes(ctx.topology, p.ranks_per_group, p.groups, ctx.rank_mode));
}

Prediction predict_analytic(const plan::StepPlan& p, const Context& ctx, const std::vector<RankClass>& classes) {
  const std::vector<Task> tasks = make_tasks(p, ctx, classes);
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
    if (k.is_gate) continue;
    StageCost& c = out.stages[std::size_t(k.stage)];
    c.time_us += k.duration_us();
    c.latency_us += k.latency_us;
    (k.is_comm ? c.comm_us : c.compute_us) += k.work_us;
    if (c.detail.empty()) c.detail = k.detail;
  }
  return out;
}

double tile_block_barrier_us(const Topology& t) { return t.node.hop_latency_us.at(model::Proto::ll); }

plan::StepPlan lower_for(const model::Schedule& s, const Context& ctx) {
  plan::StepPlan p = plan::lower(s, ctx.sizes, ctx.ranks, ctx.capabilities());
  resolve_collectives(p, ctx);
  return p;
}

Prediction predict_analytic(const model::Schedule& s, const Context& ctx) {
  return predict_analytic(lower_for(s, ctx), ctx);
}

}  // namespace coconet::sim
