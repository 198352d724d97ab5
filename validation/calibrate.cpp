// Calibration. How the fitted numbers map onto the topology's keys (a CPU run
// has no GPU, so the gpu keys take the values that make the GPU formula the
// CPU one; MPI's collectives have a section of their own):
//   gpu.hbm_GBps, hbm_efficiency 1    element-wise memory bandwidth per rank (all ranks running)
//   gpu.tflops.f32                    element-wise arithmetic rate (the model's FLOP term uses it)
//   gpu.tflops.f16 / bf16 / f32_gemm  GEMM rates; gemm_efficiency 1 (measured rates are achieved ones)
//   gpu.gemm_operand_GBps             rate a GEMM call widens and packs its operands, besides its FLOPs
//   gpu.sms 1, gemm_tile 1x1          one thread per rank: no wave or tile quantisation
//   gpu.launch_us                     per-kernel call overhead (intercept of the element-wise fit)
//   gpu.copy                          a local copy's fixed cost and rate (allreduces on groups of one rank)
//   gpu.op_flops                      each costly operation (sqrt .. dropout's hash) in FLOPs at that rate
//   node.gpus = ranks                 the ranks on this machine
//   mpi.base_latency_us               per-collective fixed cost (MPI has one protocol)
//   mpi.hop_latency_us, link_GBps     the ring's per-step latency and bus bandwidth between the ranks
//   mpi.reduce_GBps                   rate a rank combines received data (the reducing collectives' extra cost)
//   mpi.progress_share                share of the rank's compute a collective's progress takes (overlap fit)
//   mpi.interference                  extra slowdown of a kernel and a collective side by side (overlap fit)
//   mpi.step_sync_us                  a step's first collective beyond a later one (paired microbenchmarks)
//   mpi.handoff_us                    a call's hand-off a fused op's later calls do not pay (fused microbenchmarks)
//   mpi.large_messages, mpi.per_op    MPI's second regime and each op's own constants (fit_regimes.h, fit_per_op.h)
//   device: cpu                       predictions default to the cpu backend's capabilities (plan/capabilities.h)
#include "validation/calibrate.h"
#include "validation/calibrated_range.h"
#include "validation/experiment_sizes.h"
#include "validation/machine_speed.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <set>

#include <fmt/core.h>
#include <yaml-cpp/yaml.h>
#include <unistd.h>

#include "model/error.h"
#include "model/schedule.h"
#include "sim/compute.h"
#include "sim/simulator.h"
#include "sim/context.h"
#include "sim/units.h"
#include "validation/stats.h"

namespace coconet::validation {

namespace {

// An upper bound that stands for "no limit" where a GPU key has no CPU meaning
// (the LL protocol's bandwidth cap): far above any fitted bandwidth.
constexpr double kUncappedGBps = 1e6;
// The topology needs a positive unit count; a fit at zero (a spare core) is written as this.
constexpr double kMinPositiveUnits = 1e-3;

std::string machine_model(const std::string& backend, int ranks) {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  return fmt::format("{} ({} cores), {} backend, {} ranks", model, cores, backend, ranks);
}

// gpu.gemm_operand_GBps, for the dtypes whose samples show the cost (none: no line).
std::string gemm_operand_line(const Fitted& f) {
  std::string rates;
  for (const auto& [name, g] :
       {std::pair{"f16", f.gemm_f16}, std::pair{"bf16", f.gemm_bf16}, std::pair{"f32", f.gemm_f32}})
    if (g.GFLOPs > 0 && g.operand_GBps > 0 && std::isfinite(g.operand_GBps))
      rates += fmt::format("{}{}: {:.4g}", rates.empty() ? "" : ", ", name, g.operand_GBps);
  if (rates.empty()) return "";
  return fmt::format("  gemm_operand_GBps: {{{}}}  # fit: GEMM operands widened to f32 and packed per call, besides "
                     "the FLOPs\n",
                     rates);
}

std::string today() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

GemmFit gemm_fit(const std::vector<MicroSample>& s, model::DType t, double launch_us) {
  std::vector<GemmSample> g;
  for (const auto& x : s)
    if (x.kind == MicroKind::gemm && x.dtype == t) g.push_back({x.flops, x.bytes, x.measured_us});
  return g.empty() ? GemmFit{} : fit_gemm(g, launch_us);
}

// The mean and worst relative error of a collectives model over samples (the fit's formulas).
std::string errors_over(const CollectiveRegimes& f, const std::vector<CollectiveSample>& cs) {
  double sum = 0, worst = 0;
  for (const auto& x : cs) {
    const double e = std::abs(regimes_model_us(f, x.op, x.bytes, x.ranks) / x.measured_us - 1.0) * 100.0;
    sum += e;
    worst = std::max(worst, e);
  }
  return fmt::format("mean |error| {:.1f}%, worst {:.1f}%", sum / double(cs.size()), worst);
}

// The collective microbenchmarks as the collective fits see them: one call a
// step, so each paid the step's first-call cost (nccl.step_sync_us), which is
// taken off to leave what a call costs within a step.
std::vector<CollectiveSample> collective_samples(const std::vector<MicroSample>& samples, double step_sync_us) {
  std::vector<CollectiveSample> cs;
  for (const auto& s : samples)
    if (s.kind == MicroKind::collective) cs.push_back({s.op, s.bytes, s.ranks, s.measured_us - step_sync_us});
  return cs;
}

// The collectives' fit with one regime against the written one, on the same
// samples (the fit's own formulas, fit_regimes.h): what the second regime buys.
std::string regime_comments(const Calibration& c) {
  const std::vector<CollectiveSample> cs = collective_samples(c.samples, c.fit.step_sync_us);
  if (cs.empty()) return "";
  const CollectiveRegimes& two = c.fit.collectives;
  CollectiveRegimes one;
  one.small = fit_collectives(cs);
  const auto errors = [&](const CollectiveRegimes& f) { return errors_over(f, cs); };
  std::string s = fmt::format("# Collectives ({} microbenchmarks), the fit's formulas: one regime {}", cs.size(),
                              errors(one));
  const auto split = [&](double at, const std::string& what) {
    if (const auto f = at > 0 ? fit_split(cs, at) : std::nullopt)
      s += fmt::format(";\n#   two regimes split at {:.0f} bytes ({}) {}", at, what, errors(*f));
  };
  if (c.mpi_limit) split(c.mpi_limit->bytes, c.mpi_limit->source);
  split(two.fitted_threshold_bytes, "the residual-minimising split");
  s += two.large ? fmt::format(";\n#   kept: two regimes, split at {:.0f} bytes", two.threshold_bytes)
                 : ";\n#   kept: one regime (a second did not explain the samples better than its extra constants would by chance)";
  s += fmt::format(";\n#   with each op's own constants (nccl.per_op) {}.\n", errors(two));
  for (const auto& [op, g] : two.per_op.ops) {
    std::vector<CollectiveSample> mine;
    for (const auto& x : cs)
      if (x.op == op) mine.push_back(x);
    CollectiveRegimes shared = two;
    shared.per_op = {};
    s += fmt::format("#     {:<14} {} samples: shared constants {}; its own {}\n", op, mine.size(),
                     errors_over(shared, mine), errors_over(two, mine));
  }
  return s;
}

std::string residual_comments(const Calibration& c) {
  std::string s = "# Residuals: each microbenchmark predicted by the simulator with this file, against its\n"
                  "# measured median (error = predicted / measured - 1).\n";
  double sum = 0, worst = 0;
  for (std::size_t i = 0; i < c.samples.size(); ++i) {
    const double e = (c.simulated_us[i] / c.samples[i].measured_us - 1.0) * 100.0;
    sum += std::abs(e);
    worst = std::max(worst, std::abs(e));
    s += fmt::format("#   {:<36} measured {:>10.1f} us  predicted {:>10.1f} us  {:+6.1f}%\n", c.samples[i].label,
                     c.samples[i].measured_us, c.simulated_us[i], e);
  }
  if (!c.samples.empty())
    s += fmt::format("# Mean |error| {:.1f}%, worst {:.1f}%, over {} microbenchmarks.\n",
                     sum / double(c.samples.size()), worst, c.samples.size());
  return s + regime_comments(c);
}

double simulate_sample(const MicroSample& s, const sim::Topology& t) {
  sim::Context ctx{t, s.ranks, s.sizes};
  return sim::simulate(s.schedule, ctx).time_us;
}

// The units a collective's progress occupies, between none (a spare core: the
// overlap is free) and the rank's whole unit (GEMM and collective take turns).
constexpr double kMinUnits = 0.0;
constexpr double kMaxUnits = 1.0;

// The interference searched: none to each side at half its rate (x2 slower).
constexpr double kMinInterference = 0.0;
constexpr double kMaxInterference = 1.0;

// The samples of one kind (of one op only when `op` is not empty), fitted through the simulator.
struct SampleSet {
  std::vector<const MicroSample*> samples;
  std::vector<double> measured;
};

SampleSet sample_set(const std::vector<MicroSample>& samples, MicroKind kind, const std::string& op = "") {
  SampleSet o;
  for (const auto& s : samples)
    if (s.kind == kind && (op.empty() || s.op == op)) {
      o.samples.push_back(&s);
      o.measured.push_back(s.measured_us);
    }
  return o;
}

std::vector<double> simulate_all(const SampleSet& o, const sim::Topology& t) {
  std::vector<double> out;
  for (const auto* s : o.samples) out.push_back(simulate_sample(*s, t));
  return out;
}

SampleSet overlap_set(const std::vector<MicroSample>& samples, const std::string& op = "") {
  return sample_set(samples, MicroKind::overlap, op);
}

std::vector<double> simulate_overlap(const SampleSet& o, sim::Topology& t, double units, double interference) {
  t.nccl.sms_per_channel = std::max(units, kMinPositiveUnits);
  t.nccl.interference = interference;
  return simulate_all(o, t);
}

double fit_units(const SampleSet& o, sim::Topology& t, double interference) {
  return fit_scalar(o.measured, [&](double units) { return simulate_overlap(o, t, units, interference); },
                    kMinUnits, kMaxUnits);
}

}  // namespace

double bounded(double rate) { return std::isfinite(rate) && rate > 0 ? std::min(rate, kUncappedGBps) : kUncappedGBps; }

Fitted fit_samples(const std::vector<MicroSample>& samples, const std::optional<MpiLimit>& limit) {
  Fitted f;
  std::vector<ElementwiseSample> ew;
  for (const auto& s : samples)
    if (s.kind == MicroKind::elementwise) ew.push_back({s.bytes, s.flops, s.measured_us});
  f.elementwise = fit_elementwise(ew);
  f.gemm_f16 = gemm_fit(samples, model::DType::f16, f.elementwise.launch_us);
  f.gemm_bf16 = gemm_fit(samples, model::DType::bf16, f.elementwise.launch_us);
  f.gemm_f32 = gemm_fit(samples, model::DType::f32, f.elementwise.launch_us);
  f.step_sync_us = fit_step_sync(samples, f);
  const std::vector<CollectiveSample> cs = collective_samples(samples, f.step_sync_us);
  if (!cs.empty())
    f.collectives = fit_collective_regimes(cs, limit ? std::optional(limit->bytes) : std::nullopt,
                                           limit ? limit->source : "");
  else f.collectives.small = {0.0, 0.0, f.elementwise.GBps, kUncappedGBps};  // one rank: no collective ever runs
  const OverlapFit o = fit_overlap(samples, f);
  f.sms_per_channel = o.sms_per_channel;
  f.interference = o.interference;
  f.op_sms_per_channel = o.per_op;
  f.handoff_us = fit_handoff(samples, f);
  fit_copy(samples, f);
  fit_op_flops(samples, f);
  return f;
}

double fit_step_sync(const std::vector<MicroSample>& samples, const Fitted& f) {
  const auto first = std::find_if(samples.begin(), samples.end(), [](const MicroSample& s) { return s.kind == MicroKind::paired; });
  if (first == samples.end()) return 0.0;
  // How many times the simulator charges nccl.step_sync_us in a sample: its
  // time with the charge at 1 us less its time without. The collectives'
  // constants are not fitted yet and do not change the count.
  Fitted placeholder = f;
  placeholder.collectives = {};
  placeholder.collectives.small = {0.0, 0.0, bounded(f.elementwise.GBps), kUncappedGBps};
  placeholder.step_sync_us = 0.0;
  sim::Topology t = sim::parse_topology(topology_yaml(placeholder, CalibrateOptions{}, "cpu", first->ranks),
                                        "<step-sync fit>");
  const auto charges = [&](const MicroSample& s) {
    t.nccl.step_sync_us = 0.0;
    const double without = simulate_sample(s, t);
    t.nccl.step_sync_us = 1.0;
    return simulate_sample(s, t) - without;
  };
  // The f16 `op` of the same N measured alone.
  const auto alone = [&](const std::string& op, const MicroSample& pair) -> const MicroSample* {
    for (const auto& s : samples)
      if (s.kind == MicroKind::collective && s.op == op && s.label.rfind(op + " f16 ", 0) == 0 &&
          s.sizes.at("N") == pair.sizes.at("N"))
        return &s;
    return nullptr;
  };
  // Each alone pays the charge as often as the pair does, or more: what the
  // two cost alone beyond the pair is the charges they pay beyond it.
  std::vector<double> per_charge;
  for (const auto& s : samples) {
    if (s.kind != MicroKind::paired) continue;
    const MicroSample* rs = alone("reducescatter", s);
    const MicroSample* ag = alone("allgather", s);
    if (!rs || !ag) continue;
    const double extra = charges(*rs) + charges(*ag) - charges(s);
    if (extra > 0) per_charge.push_back((rs->measured_us + ag->measured_us - s.measured_us) / extra);
  }
  if (per_charge.empty()) return 0.0;
  double sync = std::max(0.0, median_interval(per_charge).median);
  // A call within a step still costs at least a launch: on a loaded machine
  // the pairs can claim more than the cheapest collective alone took.
  for (const auto& s : samples)
    if (s.kind == MicroKind::collective)
      sync = std::min(sync, std::max(0.0, s.measured_us - f.elementwise.launch_us));
  return sync;
}

// Each costly operation's weight: what its kernels took beyond the launch and
// their other arithmetic, per operation. A kernel that the rest explains
// already (a norm of 1024 elements, measured 1.0 us against a 1.3 us launch:
// the reduction is a loop of the cpu backend's own, not an engine kernel)
// says nothing of the weight but that it is not negative; left in, it pulled
// the norm's weight from 0.47 to 0.38 FLOPs, its largest kernel 29% low.
void fit_op_flops(const std::vector<MicroSample>& samples, Fitted& f) {
  const auto first = std::find_if(samples.begin(), samples.end(), [](const MicroSample& s) { return s.kind == MicroKind::costly; });
  if (first == samples.end()) return;
  // The topology of the fit so far: the simulator's arithmetic terms at its rate and launch.
  const sim::Topology t =
      sim::parse_topology(topology_yaml(f, CalibrateOptions{}, "cpu", first->ranks), "<costly-operation fit>");
  for (int k = 0; k < model::kCostlyOps; ++k) {
    std::vector<std::vector<double>> features;
    std::vector<double> measured, known;
    bool sampled = false;
    for (const auto& s : samples) {
      if (s.kind != MicroKind::costly || s.costly[std::size_t(k)] <= 0) continue;
      sampled = true;
      const sim::ArithmeticTerms terms = sim::elementwise_arithmetic(t, s.flops, s.costly);
      const double rest = t.gpu.launch_us + terms.base_us;
      if (s.measured_us <= rest) continue;
      features.push_back({terms.per_weight_us[std::size_t(k)]});
      known.push_back(rest);
      measured.push_back(s.measured_us);
    }
    if (!features.empty()) f.op_flops[std::size_t(k)] = fit_relative_nonnegative(features, measured, known)[0];
    else if (sampled) f.op_flops[std::size_t(k)] = 0.0;  // every kernel explained without it
  }
}

void fit_copy(const std::vector<MicroSample>& samples, Fitted& f) {
  std::vector<std::vector<double>> features;
  std::vector<double> measured;
  for (const auto& s : samples)
    if (s.kind == MicroKind::copy) {
      const sim::LocalCopyTerms terms = sim::local_copy_terms(s.bytes);
      features.push_back({terms.base, terms.per_GBps});
      measured.push_back(s.measured_us);
    }
  if (features.size() < 2) return;  // an intercept and a slope need two sizes
  const std::vector<double> x = fit_relative_nonnegative(features, measured);
  f.copy_us = x[0];
  f.copy_GBps = bounded(x[1] > 0 ? 1.0 / x[1] : 0.0);
}

OverlapFit fit_overlap(const std::vector<MicroSample>& samples, const Fitted& f) {
  const SampleSet o = overlap_set(samples);
  if (o.samples.empty()) return {kMaxUnits, 0.0};
  const int ranks = o.samples.front()->ranks;
  Fitted shared = f;
  shared.op_sms_per_channel.clear();  // the share being fitted stands for every op's own
  sim::Topology t = sim::parse_topology(topology_yaml(shared, CalibrateOptions{}, "cpu", ranks), "<overlap fit>");
  const auto residual = [&](double units, double x) {
    return relative_residual(simulate_overlap(o, t, units, x), o.measured);
  };
  double interference = fit_scalar(o.measured, [&](double x) {
    return simulate_overlap(o, t, fit_units(o, t, x), x);
  }, kMinInterference, kMaxInterference);
  // The share and the interference trade against each other on these samples:
  // interference is kept only when the pair explains them better than the
  // share alone by Schwarz's criterion (three calibrations in a row fitted
  // 1, 0 and 0.025 with the overlapped samples within 5% each time).
  const double alone = fit_units(o, t, 0.0);
  if (schwarz_criterion(residual(fit_units(o, t, interference), interference), o.samples.size(), 2) >=
      schwarz_criterion(residual(alone, 0.0), o.samples.size(), 1))
    interference = 0.0;
  OverlapFit fit{fit_units(o, t, interference), interference, {}};
  // A sample overlaps one op, so the shared value stands in for its own while it is fitted.
  std::set<std::string> ops;
  for (const auto* s : o.samples) ops.insert(s->op);
  for (const auto& op : ops) fit.per_op[op] = fit_units(overlap_set(samples, op), t, interference);
  return fit;
}

// The hand-off searched: none to 10 us, most of the collectives' fixed cost
// here (11-14 us per call on 2 ranks, configs/topologies/cpu-local.yaml).
constexpr double kMaxHandoffUs = 10.0;

double fit_handoff(const std::vector<MicroSample>& samples, const Fitted& f) {
  const SampleSet fused = sample_set(samples, MicroKind::fused);
  if (fused.samples.empty()) return 0.0;
  sim::Topology t =
      sim::parse_topology(topology_yaml(f, CalibrateOptions{}, "cpu", fused.samples.front()->ranks), "<hand-off fit>");
  return fit_scalar(fused.measured, [&](double x) {
    t.nccl.handoff_us = x;
    return simulate_all(fused, t);
  }, 0.0, kMaxHandoffUs);
}

// A value as one YAML scalar, quoted and escaped by the YAML emitter, so that
// no text (a --name with a quote or a newline) can add keys to the file.
std::string yaml_scalar(const std::string& value) {
  YAML::Emitter out;
  out << YAML::DoubleQuoted << value;
  return out.c_str();
}

// Text for a comment: control characters (a newline would end the comment) become spaces.
std::string comment_text(std::string text) {
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  return text;
}

// The second regime of the collectives (validation/fit_regimes.h), when the fit kept one.
std::string large_messages_yaml(const CollectiveRegimes& r) {
  if (!r.large) return "";
  const CollectiveFit& l = *r.large;
  std::string y = "  large_messages:                # fit: the collectives from MPI's protocol switch on (a step up in time)\n";
  y += fmt::format("    from_bytes: {:.0f}             # source: {}\n", r.threshold_bytes, comment_text(r.threshold_source));
  y += fmt::format("    base_latency_us: {:.4g}        # fit: per-collective fixed cost, large messages\n", l.base_us);
  y += fmt::format("    hop_latency_us: {:.4g}         # fit: per ring step, large messages\n", l.hop_us);
  y += fmt::format("    link_GBps: {:.4g}              # fit: bus bandwidth, large messages\n", bounded(l.GBps));
  y += fmt::format("    reduce_GBps: {:.4g}            # fit: reduction rate, large messages (f16 sums)\n",
                   bounded(l.reduce_GBps));
  return y;
}

// Each op's own constants (validation/fit_per_op.h) and overlap share, where fitted.
std::string per_op_yaml(const Fitted& f, int ranks) {
  const CollectiveRegimes& r = f.collectives;
  const auto regime = [&](const char* key, const std::optional<OpFit>& g, const std::string& where) {
    if (!g) return std::string();
    return fmt::format("      {}: {{base_latency_us: {:.4g}, link_GBps: {:.4g}}}  # fit: {} microbenchmarks {}\n", key,
                       g->base_us, bounded(g->GBps), g->samples, where);
  };
  const std::string below = r.large ? fmt::format("below {:.0f} bytes", r.threshold_bytes) : "of every size";
  const std::string from = fmt::format("from {:.0f} bytes on", r.threshold_bytes);
  std::set<std::string> names;
  for (const auto& [op, g] : r.per_op.ops) names.insert(op);
  for (const auto& [op, units] : f.op_sms_per_channel) names.insert(op);
  std::string ops;
  for (const auto& op : names) {
    std::string body;
    if (const auto g = r.per_op.ops.find(op); g != r.per_op.ops.end())
      body = regime("small", g->second.small, below) + (r.large ? regime("large", g->second.large, from) : "");
    if (const auto u = f.op_sms_per_channel.find(op); u != f.op_sms_per_channel.end())
      body += fmt::format("      progress_share: {:.3g}  # fit: this op overlapped with a GEMM ({})\n",
                          std::max(u->second, kMinPositiveUnits), overlap_label(op));
    if (!body.empty()) ops += fmt::format("    {}:\n{}", op, body);
  }
  if (ops.empty()) return "";
  return fmt::format(
             "  per_op:                        # fit: each collective's own constants (MPI picks an algorithm per op and size);\n"
             "                                 # base = fixed cost with the steps' latency, link = bus bandwidth with the reduction's cost\n"
             "    ranks: {}                     # the rank count they were fitted at; other counts take the shared constants\n",
             r.per_op.ranks > 0 ? r.per_op.ranks : ranks) +
         ops;
}

std::string topology_yaml(const Fitted& f, const CalibrateOptions& o, const std::string& backend, int ranks) {
  ElementwiseFit e = f.elementwise;
  e.GBps = bounded(e.GBps);
  e.GFLOPs = bounded(e.GFLOPs);
  const auto& c = f.collectives.small;
  const double link = bounded(c.GBps);
  std::string y = fmt::format(
      "# {0}: calibrated on this machine by `{1}` on {2}.\n"
      "# Every constant below is fitted (least squares on relative error) to microbenchmarks run\n"
      "# through coconet's own runtime with {3} ranks, or says why it is fixed. A CPU has no GPU:\n"
      "# keys take the values that turn the GPU formulas into the CPU ones (see docs/validation.md).\n"
      "{4}\n",
      comment_text(o.name), comment_text(o.command.empty() ? "coconet calibrate" : o.command), today(), ranks,
      machine_comment(o.machine ? *o.machine : this_machine()));
  y += fmt::format("name: {}\ndescription: {}\ndevice: cpu                     # ranks are CPU processes: predictions default to the cpu backend\nnodes: 1                        # one machine\n",
                   yaml_scalar(o.name), yaml_scalar(machine_model(backend, ranks)));
  y += "gpu:\n";
  y += fmt::format("  model: {}\n", yaml_scalar(backend + " backend rank"));
  y += "  sms: 1                        # one thread computes per rank: no wave quantisation\n";
  y += fmt::format("  hbm_GBps: {:.4g}                # fit: element-wise kernels, bytes over time, all ranks running\n", e.GBps);
  y += "  hbm_efficiency: 1.0           # the fitted bandwidth is already the achieved one\n";
  const bool f32_gemm = f.gemm_f32.GFLOPs > 0 && std::isfinite(f.gemm_f32.GFLOPs);
  y += fmt::format("  tflops: {{f16: {:.4g}, bf16: {:.4g}, f32: {:.4g}{}}}  # fit: GEMM f16, GEMM bf16; f32 = element-wise "
                   "arithmetic rate{}\n",
                   f.gemm_f16.GFLOPs / sim::kGflopsPerTflops, f.gemm_bf16.GFLOPs / sim::kGflopsPerTflops,
                   e.GFLOPs / sim::kGflopsPerTflops,
                   f32_gemm ? fmt::format(", f32_gemm: {:.4g}", f.gemm_f32.GFLOPs / sim::kGflopsPerTflops) : "",
                   f32_gemm ? "; f32_gemm = GEMM f32" : "");
  y += "  gemm_efficiency: 1.0          # the fitted GEMM rates are achieved ones\n";
  y += "  gemm_tile: {m: 1, n: 1}       # no tile quantisation on a CPU GEMM\n";
  y += gemm_operand_line(f);
  y += fmt::format("  launch_us: {:.4g}               # fit: intercept of the element-wise kernels (runtime call overhead)\n",
                   e.launch_us);
  std::string weights;
  for (int k = 0; k < model::kCostlyOps; ++k)
    if (const auto& w = f.op_flops[std::size_t(k)])
      weights += fmt::format("{}{}: {:.3g}", weights.empty() ? "" : ", ", model::to_string(model::CostlyOp(k)), *w);
  if (!weights.empty())
    y += fmt::format("  op_flops: {{{}}}  # fit: a kernel per operation (z = op(x) + y), FLOPs at tflops.f32\n", weights);
  if (f.copy_us && f.copy_GBps)
    y += fmt::format("  copy: {{us: {:.4g}, GBps: {:.4g}}}  # fit: allreduces on groups of one rank (a local copy, no MPI call)\n",
                     *f.copy_us, *f.copy_GBps);
  y += "node:\n";
  y += fmt::format("  gpus: {}                       # ranks on this machine\n", ranks);
  y += "mpi:                            # MPI's collectives between the ranks, and the cpu backend's threads around them\n";
  y += fmt::format("  base_latency_us: {:.4g}         # fit: per-collective fixed cost\n", c.base_us);
  y += fmt::format("  hop_latency_us: {:.4g}          # fit: per ring step\n", c.hop_us);
  y += fmt::format("  link_GBps: {:.4g}               # fit: ring collectives, bus bandwidth between the ranks\n", link);
  y += fmt::format("  reduce_GBps: {:.4g}             # fit: reducing collectives' extra cost per byte combined (f16 sums)\n",
                   bounded(c.reduce_GBps));
  y += fmt::format("  progress_share: {:.3g}           # fit: share of the rank's compute a collective's progress takes (overlapped GEMM + allreduce or reduce-scatter)\n",
                   std::max(f.sms_per_channel, kMinPositiveUnits));
  y += fmt::format("  interference: {:.3g}             # fit: extra slowdown of a kernel and a collective side by side (overlapped GEMM + allreduce or reduce-scatter)\n",
                   f.interference);
  if (f.step_sync_us > 0)
    y += fmt::format("  step_sync_us: {:.3g}             # fit: a step's first collective beyond a later one (reduce-scatter and all-gather alone, and in one step)\n",
                     f.step_sync_us);
  if (f.handoff_us > 0)
    y += fmt::format("  handoff_us: {:.3g}               # fit: a call's hand-off that a fused op's later calls do not pay (fused microbenchmarks)\n",
                     f.handoff_us);
  return y + large_messages_yaml(f.collectives) + per_op_yaml(f, ranks);
}

namespace {

// The sweep between the spell guard's probes (spell_guard.h): its baseline is
// the faster of the calibration it replaces (when there is one for as many
// ranks) and the first probe now, and the sweep's own time of the memory
// reference counts with the probes around it. Fills the samples, the
// outcome, and what the report says of it.
void sweep_guarded(exec::Backend& backend, const CalibrateOptions& o, const MicroOptions& micro, Calibration& c,
                   Progress& progress) {
  const int world = backend.world_size();
  SpellActions a = spell_actions(backend, speed_samples(world, {kGuardReference}), progress, "calibrate");
  const double first = a.probe();
  const bool has_previous = o.previous && o.previous->ranks == world;
  const double baseline = guard_baseline_us(has_previous ? *o.previous : CalibratedSpeed{}, {{kGuardReference, first}});
  a.measure = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    c.samples = microbenchmark_plan(world, micro);
    progress.grow(static_cast<int>(c.samples.size()) * microbenchmark_rounds(micro));
    run_microbenchmarks(backend, c.samples, micro, progress);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return MeasureSeconds{s, reference_in(c.samples, kGuardReference)};
  };
  c.spell = guard_measurement(a, baseline, o.wait_s);
  if (c.spell.measured_again > 0)
    c.note = fmt::format("the sweep was measured {} more time(s): a slow spell (the memory reference more than "
                         "{:.0f}% over {:.1f} us) fell on it",
                         c.spell.measured_again, kGuardTolerance * 100, baseline);
  if (!slow_spell(c.spell.probe_ratio, 1.0)) return;
  const bool against_previous = has_previous && baseline < first;
  c.warning = fmt::format(
      "the sweep was kept from a slow spell: the memory reference ({}) ran {:.2f}x {} and the spell outlasted "
      "--wait-s {:g}. The constants carry it: predictions will run long. Calibrate again when the machine is "
      "quiet{}",
      reference_label(kGuardReference), c.spell.probe_ratio,
      against_previous ? fmt::format("its time in the calibration this replaces ({:.1f} us)", baseline)
                       : fmt::format("its time at the start ({:.1f} us)", baseline),
      o.wait_s,
      against_previous ? " (or, if this machine is slower than the one calibrated before, keep this calibration: "
                         "the next will compare with it)"
                       : "");
}

}  // namespace

Calibration calibrate(exec::Backend& backend, const CalibrateOptions& o, Progress& progress) {
  Calibration c;
  MicroOptions micro = o.micro;
  if (!o.experiment.empty())
    micro.extra = experiment_sizes(o.experiment, backend.world_size(), backend.capabilities(), o.sets);
  sweep_guarded(backend, o, micro, c, progress);
  // MPI's protocol switch, where the library says (the cpu backend's MPI): the threshold tried first.
  if (backend.name() == "cpu") c.mpi_limit = read_mpi_limit();
  c.fit = fit_samples(c.samples, c.mpi_limit);
  const std::string body = topology_yaml(c.fit, o, backend.name(), backend.world_size());
  c.topology = sim::parse_topology(body, "<calibrated " + o.name + ">");
  for (const auto& s : c.samples) c.simulated_us.push_back(simulate_sample(s, c.topology));
  c.range = range_of(c.samples);
  c.yaml = body + residual_comments(c) + range_comment(c.range) + speed_comment(c.samples, backend.world_size()) +
           (c.warning.empty() ? "" : "# warning: " + c.warning + "\n");
  return c;
}

}  // namespace coconet::validation
