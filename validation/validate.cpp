// The validation loop. Every rank plans the same jobs and computes the same
// predictions (both deterministic), so only measurements cross ranks, inside
// the runtime.
#include "validation/validate.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/core.h>
#include <unistd.h>

#include "exec/runtime.h"
#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/experiment.h"
#include "model/parse.h"
#include "model/points.h"
#include "sim/resolve.h"
#include "sim/simulator.h"
#include "sim/topology.h"
#include "sim/trace.h"
#include "sim/tuner.h"
#include "validation/calibrate.h"
#include "validation/calibrated_range.h"
#include "validation/machine_identity.h"
#include "validation/machine_speed.h"
#include "validation/measured_trace.h"
#include "validation/spell_guard.h"
#include "validation/stats.h"
#include "validation/timeline.h"

namespace coconet::validation {

namespace {

struct Job {
  model::Point point;
  double scale = 1;  // the point's position on a size axis: the product of its sizes
  std::vector<model::Schedule> schedules;
};

struct Loaded {
  model::Experiment experiment;
  std::string experiment_text;
  std::vector<Job> jobs;
};

// The experiment's points on `world_size` ranks, each with every schedule.
Loaded load_jobs(const ValidateOptions& o, int world_size) {
  Loaded l;
  const std::string path = model::resolve_experiment(o.experiment);
  l.experiment_text = model::read_file(path);
  l.experiment = model::parse_experiment(l.experiment_text, path);
  for (auto& pt : model::expand(l.experiment, model::PointOptions{o.sets, world_size, std::nullopt, ""})) {
    Job j{std::move(pt), 1, {}};
    for (const auto& [k, v] : j.point.sizes) j.scale *= static_cast<double>(v);
    j.schedules = model::enumerate_schedules(j.point.program);
    l.jobs.push_back(std::move(j));
  }
  return l;
}

struct Predicted {
  double time_us = 0;
  model::Knobs knobs;
};

// The predictions are for the plans `kind` runs (the backend being validated).
std::vector<Predicted> predict(const Job& j, const sim::Topology& t, plan::BackendKind kind) {
  const sim::Context ctx{t, j.point.ranks_per_group, j.point.sizes, kind};
  const sim::TuneResult r = sim::tune(j.schedules, ctx, sim::predict_space());
  std::vector<Predicted> out(j.schedules.size());
  for (const auto& c : r.ranked) out.at(static_cast<std::size_t>(c.schedule)) = {c.time_us, c.knobs};
  return out;
}

exec::RunOptions run_options(const ValidateOptions& o, const model::Experiment& e) {
  exec::RunOptions ro;
  ro.iters = o.iters.value_or(e.iters);
  ro.warmup = o.warmup.value_or(e.warmup);
  return ro;
}

// The machine is shared: other work comes and goes over seconds. Each
// schedule's steps are spread over rounds that visit every schedule of the
// point in turn, so a burst of load falls on all of them alike instead of on
// whichever ran during it. A schedule's time is the median of all its timed
// steps, with the order-statistic interval of validation/stats.h. When the
// intervals do not decide the point (stats.h decided(): the fastest, its
// ties and the model's pick narrow), more rounds follow while the point's
// share of the time budget lasts.
constexpr int kRounds = 5;
// The cap on rounds, so that the budget and not the cap ends a point's extra
// rounds. Measured on cpu-local (2 ranks, 21 points, ten back-to-back runs
// each, docs/validation.md): at 40 rounds the points the rounds left
// undecided were 7-14 (median 8) and validate took 15 s; at 120, 4-16 (median
// 5.5; 4-8 but in two runs in a noisy spell) and 36-40 s.
constexpr int kMaxRounds = 120;
// A round runs at least this much of each schedule (by its prediction): a
// 40 us step gets 50 steps a round where a 1 ms one gets the experiment's
// share, so that short steps, where one scheduler hiccup is a 20% outlier,
// are decided by as many samples as their time allows (sgd N=4096, two
// steps a round: one run in eight left it undecided after 40 rounds with
// the pick's interval 36-45 us). At most kMaxStepsPerRound.
constexpr double kMinRoundUs = 2000;
constexpr int kMaxStepsPerRound = 64;

// Steps of schedule `i` in a round of `base` steps.
int steps_in_round(int base, double predicted_us) {
  if (!(predicted_us > 0)) return base;
  const double wanted = std::ceil(kMinRoundUs / predicted_us);
  return std::max(base, static_cast<int>(std::min(wanted, double(kMaxStepsPerRound))));
}

struct Measured {
  std::vector<double> steps;
  std::vector<double> round_medians;  // one per round
  std::vector<std::string> unit_names;
  std::vector<std::vector<double>> unit_medians;  // per unit, one per round
  double min_us = std::numeric_limits<double>::infinity();
  double max_us = 0;
  bool verified = true;
};

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

// The schedule the model ranks first (model::predicted_best).
std::size_t predicted_best(const std::vector<Predicted>& pred, const std::vector<model::Schedule>& schedules) {
  std::vector<std::size_t> index(pred.size());
  std::iota(index.begin(), index.end(), std::size_t{0});
  return model::predicted_best_of(
      index, [&](std::size_t i) { return pred[i].time_us; }, [&](std::size_t i) { return schedules[i].stages.size(); });
}

// Time for extra rounds, shared out over the points still to measure: a point
// may spend what is left divided by the points left (so a noisy early point
// cannot starve the later ones).
class Budget {
 public:
  Budget(double seconds, int points) : left_s_(seconds), points_left_(points) {}
  [[nodiscard]] double share_s() const { return left_s_ / std::max(1, points_left_); }
  void close_point(double spent_s) {
    left_s_ = std::max(0.0, left_s_ - spent_s);
    --points_left_;
  }

 private:
  double left_s_;
  int points_left_;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<MedianEstimate> estimates_of(const std::vector<Measured>& got) {
  std::vector<MedianEstimate> e;
  for (const auto& g : got) e.push_back(median_interval(g.steps));
  return e;
}

// The simulator's time per unit of the plan the executor runs for `s`, its
// collectives resolved on the context as every prediction's are.
std::vector<double> predicted_units(plan::StepPlan plan, const sim::Context& ctx) {
  sim::resolve_collectives(plan, ctx);
  const sim::SimResult r = sim::simulate(plan, ctx);
  std::vector<double> out;
  for (const auto& u : plan.units) {
    double start = std::numeric_limits<double>::infinity(), end = 0;
    for (int st = u.first_stage; st <= u.last_stage && st < static_cast<int>(r.stages.size()); ++st) {
      start = std::min(start, r.stages[static_cast<std::size_t>(st)].start_us);
      end = std::max(end, r.stages[static_cast<std::size_t>(st)].end_us);
    }
    out.push_back(end > start ? end - start : 0.0);
  }
  return out;
}

struct PointRun {
  const Job& job;
  const std::vector<Predicted>& pred;
  const sim::Topology& topology;
  const std::optional<CalibratedRange>& range;
  exec::RunOptions options;
};

std::string joined(const std::vector<std::string>& parts) {
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : "; ") + p;
  return s;
}

struct PointMeasurement {
  std::vector<ResultRow> rows;
  double extra_s = 0;  // seconds of the rounds after the first kRounds (the budget's)
  double total_s = 0;
};

// Measures a point; its extra rounds may spend the point's budget share.
PointMeasurement measure(exec::Backend& backend, const PointRun& pr, const Budget& budget, Progress& progress) {
  const Job& j = pr.job;
  const model::Program& p = j.point.program;
  const exec::RunOptions& ro = pr.options;
  progress.note(fmt::format("{} {} ({} schedules)", p.name, j.point.label, j.schedules.size()));
  backend.set_groups(j.point.groups);
  exec::check_memory(backend, p, j.schedules, j.point.sizes, ro);
  const auto refs = exec::compute_references(backend, p, j.point.sizes, ro);
  const std::string base = model::baseline(p).name();
  const int rounds = std::clamp(ro.iters, 1, kRounds);
  std::vector<model::Schedule> runs = j.schedules;
  for (std::size_t i = 0; i < runs.size(); ++i) runs[i].knobs = pr.pred[i].knobs;
  std::vector<Measured> got(runs.size());
  const auto t0 = std::chrono::steady_clock::now();
  double extra_from_s = 0;
  int round = 0;
  auto run_round = [&](int steps) {
    exec::RunOptions rr = ro;
    if (round > 0) rr.warmup = std::min(ro.warmup, 1);  // caches and pages are warm after the first round
    // Every rank must run as many steps: the most any rank's predictions ask for.
    std::vector<double> each;
    for (const auto& pred : pr.pred) each.push_back(steps_in_round(steps, pred.time_us));
    backend.host_allreduce(each, model::ReduceOp::max);
    for (std::size_t i = 0; i < runs.size(); ++i) {
      rr.iters = static_cast<int>(each[i]);
      const exec::RunRow run = exec::run_schedule(backend, runs[i], j.point.sizes, refs, rr);
      Measured& g = got[i];
      g.steps.insert(g.steps.end(), run.step_us.begin(), run.step_us.end());
      g.round_medians.push_back(median_of(run.step_us));
      if (g.unit_names.empty())
        for (const auto& st : run.stages) g.unit_names.push_back(st.name);
      g.unit_medians.resize(run.stages.size());
      for (std::size_t u = 0; u < run.stages.size(); ++u) g.unit_medians[u].push_back(run.stages[u].median_us);
      g.min_us = std::min(g.min_us, run.min_us);
      g.max_us = std::max(g.max_us, run.max_us);
      g.verified = g.verified && run.verified;
    }
    ++round;
  };
  while (round < rounds) run_round(ro.iters / rounds + (round < ro.iters % rounds ? 1 : 0));  // run_round counts
  extra_from_s = seconds_since(t0);
  const int extra_steps = std::max(1, ro.iters / rounds);
  const std::size_t pick = predicted_best(pr.pred, j.schedules);
  while (round < kMaxRounds && !decided(estimates_of(got), pick)) {
    const double spent = seconds_since(t0) - extra_from_s;
    const double per_round = round > 0 ? seconds_since(t0) / round : 0.0;
    if (!rank0_says(backend, spent + per_round <= budget.share_s())) break;
    progress.note(fmt::format("{} {}: intervals too wide, round {}", p.name, j.point.label, round + 1));
    run_round(extra_steps);
  }
  PointMeasurement m;
  m.extra_s = seconds_since(t0) - extra_from_s;
  m.total_s = seconds_since(t0);

  const sim::Context ctx{pr.topology, j.point.ranks_per_group, j.point.sizes, backend.capabilities().backend};
  std::vector<ResultRow>& rows = m.rows;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const Measured& g = got[i];
    const MedianEstimate e = median_interval(g.steps);
    ResultRow r;
    r.workload = p.name;
    r.size = j.point.label;
    r.scale = j.scale;
    r.schedule = j.schedules[i].name();
    r.baseline = r.schedule == base;
    r.predicted_us = pr.pred[i].time_us;
    r.schedule_stages = j.schedules[i].stages.size();
    r.measured = {e.median, g.min_us, g.max_us, e.ci.lo, e.ci.hi, e.samples};
    r.rounds = round;
    r.round_medians_us = g.round_medians;
    r.verified = g.verified;
    const plan::StepPlan plan = exec::lower_for(backend, runs[i], j.point.sizes);
    const auto predicted = predicted_units(plan, ctx);
    if (pr.range) r.outside_calibration = joined(beyond_range(plan, *pr.range));
    for (std::size_t u = 0; u < g.unit_names.size(); ++u)
      r.stages.push_back({g.unit_names[u], u < predicted.size() ? predicted[u] : 0.0, median_of(g.unit_medians[u])});
    rows.push_back(std::move(r));
  }
  return m;
}

// The point guard (spell_guard.h): the memory reference's microbenchmark
// (none: no guard) and its baseline.
struct Guard {
  std::vector<MicroSample> probe_samples;
  double baseline_us = 0;
};

// Measures a point between the guard's probes, waiting out and measuring
// again around slow spells while the run's allowance for them (`wait_left_s`,
// which it spends) lasts; the rows say how far off the kept measurement's
// probes were and how many measurements of the point a spell discarded. Each
// measurement may spend the point's budget share on extra rounds (a spell's
// discards its data), and the budget is charged with all of them.
std::vector<ResultRow> measure_guarded(exec::Backend& backend, const PointRun& pr, const Guard& guard,
                                       Budget& budget, double& wait_left_s, Progress& progress) {
  const std::string point = pr.job.point.program.name + " " + pr.job.point.label;
  PointMeasurement m;
  double rounds_s = 0;
  SpellActions a = spell_actions(backend, guard.probe_samples, progress, point);
  a.measure = [&] {
    m = measure(backend, pr, budget, progress);
    rounds_s += m.extra_s;
    return MeasureSeconds{m.total_s, 0.0};
  };
  const SpellOutcome o = guard_measurement(a, guard.baseline_us, wait_left_s);
  wait_left_s = std::max(0.0, wait_left_s - o.spent_s);
  for (auto& r : m.rows) {
    r.probe_ratio = o.probe_ratio;
    r.measured_again = o.measured_again;
    r.in_spell = slow_spell(o.probe_ratio, 1.0);
  }
  budget.close_point(rounds_s);
  progress.step(point);
  return std::move(m.rows);
}

std::string schedules_yaml(const std::vector<Job>& jobs, const std::vector<std::vector<Predicted>>& preds) {
  std::string y = "# Every schedule validated, with the knobs its prediction chose, one YAML document each.\n";
  for (std::size_t j = 0; j < jobs.size(); ++j)
    for (std::size_t i = 0; i < jobs[j].schedules.size(); ++i) {
      model::Schedule s = jobs[j].schedules[i];
      s.knobs = preds[j][i].knobs;
      y += fmt::format("---\n# {} at {}: {}\n{}", jobs[j].point.program.name, jobs[j].point.label, s.name(),
                       model::to_yaml(s));
    }
  return y;
}

// A point's predicted best: the schedule, with the knobs its prediction chose,
// and the job it belongs to.
struct Pick {
  const Job* job = nullptr;
  model::Schedule schedule;
};

std::optional<Pick> pick_of(const PointMetrics& p, const std::vector<Job>& jobs,
                            const std::vector<std::vector<Predicted>>& preds) {
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    if (jobs[j].point.program.name != p.key.workload || jobs[j].point.label != p.key.size) continue;
    for (std::size_t i = 0; i < jobs[j].schedules.size(); ++i) {
      if (jobs[j].schedules[i].name() != p.predicted_best) continue;
      Pick pick{&jobs[j], jobs[j].schedules[i]};
      pick.schedule.knobs = preds[j][i].knobs;
      return pick;
    }
  }
  return std::nullopt;
}

// The simulated timeline of a predicted best: one that overlaps stages if any
// point has one (what a timeline shows best), at the point where the model
// expects the largest gain over the baseline.
// The same schedule, run once more with a launch recorder on every rank, is
// the measured timeline beside it (collective: every rank picks the same).
void add_timeline(exec::Backend& backend, ReportData& d, const Metrics& m, const std::vector<Job>& jobs,
                  const std::vector<std::vector<Predicted>>& preds, const sim::Topology& t,
                  const exec::RunOptions& ro) {
  const plan::BackendKind kind = backend.capabilities().backend;
  std::optional<Pick> top;
  std::pair<bool, double> top_rank{false, 0.0};
  for (const auto& p : m.per_point) {
    auto pick = pick_of(p, jobs, preds);
    if (!pick) continue;
    const std::pair<bool, double> rank{!pick->schedule.overlaps.empty(), p.speedup_predicted};
    if (top && rank <= top_rank) continue;
    top = std::move(pick);
    top_rank = rank;
  }
  if (!top) return;
  const model::Schedule& s = top->schedule;
  const sim::Context ctx{t, top->job->point.ranks_per_group, top->job->point.sizes, kind};
  d.timeline_title = fmt::format("{} at {}: {} ({} chunks), simulated", top->job->point.program.name,
                                 top->job->point.label,
                                 s.name(), s.knobs.chunks);
  d.trace_json = sim::chrome_trace_json(sim::simulate(s, ctx), d.timeline_title);
  d.timeline = timeline_from_trace(d.trace_json);
  backend.set_groups(top->job->point.groups);
  d.measured_timeline_title = fmt::format("{} at {}: {} ({} chunks), measured: one step, every rank",
                                          top->job->point.program.name, top->job->point.label, s.name(),
                                          s.knobs.chunks);
  d.measured_trace_json = record_measured_trace(backend, s, top->job->point.sizes, ro, d.measured_timeline_title);
  d.measured_timeline = timeline_from_trace(d.measured_trace_json);
}

struct TopologyChoice {
  sim::Topology topology;
  std::string text;
  std::string note;
  std::optional<CalibratedRange> range;  // the sizes its calibration measured, when recorded
  std::optional<CalibratedSpeed> speed;  // its reference microbenchmarks' times, when recorded
  double waited_s = 0;                   // of --wait-s, by a calibration on the spot
  std::string calibration_warning;       // that calibration's, kept from a slow spell
};

// Where the calibration of `topology_path` for this machine and `world` ranks
// is kept: the user's cache folder, never the repository.
std::string cache_path(const std::string& topology_path, int world, const MachineIdentity& here) {
  return fmt::format("{}/{}-{}ranks-{}.yaml", user_cache_dir(), std::filesystem::path(topology_path).stem().string(),
                     world, machine_key(here));
}

// The cached calibration at `path` when it exists, was taken on this machine
// and every rank has it (the ranks agree, so all take the same branch).
std::optional<std::string> cached_calibration(exec::Backend& backend, const std::string& path,
                                              const MachineIdentity& here) {
  std::optional<std::string> text;
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) {
    try {
      text = model::read_file(path);
      const auto m = recorded_machine(*text);
      if (!m || !differences(*m, here).empty()) text.reset();
    } catch (const UserError&) {
      text.reset();  // a damaged cache file is calibrated over
    }
  }
  std::vector<double> missing{text ? 0.0 : 1.0};
  backend.host_allreduce(missing, model::ReduceOp::max);
  if (missing.front() > 0) return std::nullopt;
  return text;
}

TopologyChoice calibrate_on_the_spot(exec::Backend& backend, const ValidateOptions& o, Progress& progress,
                                     const std::string& name, const std::string& command) {
  CalibrateOptions co;
  co.name = name;
  co.command = command;
  co.micro = o.calibration;
  co.experiment = o.experiment;  // its sizes join the quick sweep
  co.sets = o.sets;
  co.wait_s = o.wait_s;
  Calibration c = calibrate(backend, co, progress);
  return {c.topology, c.yaml, "", c.range, parse_speed(c.yaml), c.spell.spent_s, c.warning};
}

// A topology calibrated on another machine, calibrated again on this one
// into the cache (or read back from it); says so once on stderr (rank 0) and
// in the report's notes.
TopologyChoice recalibrated(exec::Backend& backend, const ValidateOptions& o, Progress& progress,
                            const std::string& path, const std::string& warning, const MachineIdentity& here) {
  const bool lead = backend.world_rank() == 0;
  const std::string cached = cache_path(path, backend.world_size(), here);
  if (const auto text = cached_calibration(backend, cached, here)) {
    const std::string said = warning + fmt::format("predicting with this machine's calibration in {} (delete it to "
                                                   "calibrate again; --no-calibrate uses {} as it is)",
                                                   cached, *o.topology);
    if (lead) fmt::print(stderr, "warning: {}\n", said);
    return {sim::parse_topology(*text, cached), *text, said, parse_range(*text), parse_speed(*text)};
  }
  const std::string said = warning + fmt::format("calibrating this machine into {} first (the quick sweep; "
                                                 "--no-calibrate uses {} as it is)",
                                                 cached, *o.topology);
  if (lead) {
    fmt::print(stderr, "warning: {}\n", said);
    std::fflush(stderr);
    std::error_code ec;  // the folder first: a cache that cannot be written is said before the sweep
    const auto folder = std::filesystem::path(cached).parent_path();
    std::filesystem::create_directories(folder, ec);
    if (ec)
      throw UserError(fmt::format("cannot make the cache folder {}: {}; set XDG_CACHE_HOME to a folder you can "
                                  "write, or pass --no-calibrate",
                                  folder.string(), ec.message()));
  }
  const std::string name = sim::parse_topology(model::read_file(path), path).name;
  TopologyChoice t = calibrate_on_the_spot(
      backend, o, progress, name,
      fmt::format("coconet validate (calibrating {} again on this machine, quick sweep)", *o.topology));
  if (lead) model::write_file_atomic(cached, t.text);
  t.note = said;
  return t;
}

TopologyChoice choose_topology(exec::Backend& backend, const ValidateOptions& o, Progress& progress) {
  if (o.topology) {
    const std::string path = model::resolve_topology(*o.topology);
    std::string text = model::read_file(path);
    const MachineIdentity here = this_machine();
    const std::string name = sim::parse_topology(text, path).name;
    if (o.calibrate_other_machine) {
      if (const std::string w = other_machine_warning(name, text, here, ""); !w.empty())
        return recalibrated(backend, o, progress, path, w, here);
    } else if (const std::string w = other_machine_warning(
                   name, text, here, "its constants predict as they are (--no-calibrate)");
               !w.empty() && backend.world_rank() == 0) {
      fmt::print(stderr, "warning: {}\n", w);
    }
    auto range = parse_range(text);
    auto speed = parse_speed(text);
    return {sim::parse_topology(text, path), text,
            fmt::format("topology {} (inputs/topology.yaml holds it, with its calibration residuals if calibrated)", *o.topology),
            range, speed};
  }
  TopologyChoice t =
      calibrate_on_the_spot(backend, o, progress, "calibrated", "coconet validate (calibrating on the spot, quick sweep)");
  t.note = "topology calibrated on the spot from a quick microbenchmark sweep (inputs/topology.yaml has the fit and "
           "its residuals)";
  return t;
}

// "1.23 0.98 0.77" (1, 5 and 15 minutes) from /proc/loadavg; "unknown" elsewhere.
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  double a = 0, b = 0, c = 0;
  if (!(in >> a >> b >> c)) return "unknown";
  return fmt::format("[{}, {}, {}]", a, b, c);
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

// inputs/machine.yaml: what ran the validation, and how loaded the machine was.
std::string machine_yaml(const std::string& load_start, int world) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return fmt::format(
      "# The machine this report was measured on. Load averages are /proc/loadavg's 1, 5 and 15 minute\n"
      "# figures: above the core count at the start, other work competed with the measurement.\n"
      "host: \"{}\"\ncpu: \"{}\"\ncores: {}\nranks: {}\nload_average_start: {}\nload_average_end: {}\n",
      host, cpu_model(), ::sysconf(_SC_NPROCESSORS_ONLN), world, load_start, load_average());
}

// inputs/workload-<name>.yaml for every workload of the experiment, as read now:
// the report can be repeated after the workload file changes.
void add_workloads(ReportData& d, const model::Experiment& e) {
  for (const auto& w : e.workloads) {
    const std::string path = model::resolve_workload(w.workload);
    std::string name = std::filesystem::path(path).stem().string();
    for (char& c : name)
      if (c == '/' || c == '.') c = '_';
    d.inputs["workload-" + name + ".yaml"] = model::read_file(path);
  }
}

// What makes this run's numbers less trustworthy, said in the report.
void add_setup_warnings(ReportData& d, const TopologyChoice& topo, int world) {
  if (!topo.calibration_warning.empty()) d.warnings.push_back("calibrating on the spot, " + topo.calibration_warning);
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (cores > 0 && world > cores)
    d.warnings.push_back(fmt::format(
        "oversubscribed: {} ranks on {} cores (--oversubscribe). Ranks take turns on the cores, so step times "
        "carry the scheduler's time slices and waits for descheduled peers, not only the schedules' work",
        world, cores));
  if (!topo.range) {
    d.warnings.push_back("the topology records no calibrated range (no '" + std::string(kRangeComment) +
                         "' line): points were not checked against the sizes its constants were fitted on");
    return;
  }
  std::vector<std::string> outside;
  for (const auto& r : d.rows)
    if (!r.outside_calibration.empty() &&
        std::find(outside.begin(), outside.end(), r.workload + " " + r.size) == outside.end())
      outside.push_back(r.workload + " " + r.size);
  if (!outside.empty())
    d.warnings.push_back(fmt::format("{} point(s) run ops past the calibrated range, where the fitted constants are "
                                     "extrapolated: {} (see 'outside_calibration' in results.json; calibrate "
                                     "with sizes that cover them)",
                                     outside.size(), joined(outside)));
}

// What the point guard did: the time it waited and the points it measured
// again after a slow spell (notes), and those kept with a probe still past
// the tolerance (a warning).
void add_guard_notes(ReportData& d, double waited_s, double wait_s) {
  std::vector<std::string> again, spell;
  std::string last;  // a point's rows are consecutive
  for (const auto& r : d.rows) {
    const std::string point = r.workload + " " + r.size;
    if (point == last) continue;
    last = point;
    if (r.measured_again > 0) again.push_back(fmt::format("{} ({}x)", point, r.measured_again));
    if (r.in_spell) spell.push_back(fmt::format("{} ({:.2f}x)", point, r.probe_ratio));
  }
  if (waited_s > 0)
    d.notes.push_back(fmt::format("slow spells waited out and points measured again after them: {:.1f} s of "
                                  "--wait-s {:g}",
                                  waited_s, wait_s));
  if (!again.empty())
    d.notes.push_back(fmt::format("measured again after a slow spell (the memory reference more than {:.0f}% over "
                                  "its baseline before or after the point, validation/spell_guard.h): {}",
                                  kGuardTolerance * 100, joined(again)));
  if (!spell.empty())
    d.warnings.push_back(fmt::format("{} point(s) kept from a slow spell (--wait-s or the retries ran out): {}; "
                                     "their times carry the spell",
                                     spell.size(), joined(spell)));
}

// The machine against the topology's calibration: a note with the figures
// (or why there are none), a warning past kSpeedTolerance.
void add_speed_notes(ReportData& d, const TopologyChoice& topo, int world, double waited_s, double wait_s) {
  if (!topo.speed) {
    d.notes.push_back("the topology records no reference times (no '" + std::string(kSpeedComment) +
                      "' line): this machine's speed was not compared with its calibration's");
    return;
  }
  if (topo.speed->ranks != world) {
    d.notes.push_back(fmt::format("the topology's reference times were measured on {} ranks and this run has {}: "
                                  "this machine's speed was not compared with its calibration's",
                                  topo.speed->ranks, world));
    return;
  }
  std::string figures;
  for (const auto& c : d.speed)
    figures += fmt::format("{}{}: {:.1f} us when calibrated, {:.1f} us before the points, {:.1f} us after",
                           figures.empty() ? "" : "; ", c.label, c.calibrated_us, c.start_us, c.end_us);
  d.notes.push_back("this machine against its calibration (the reference microbenchmarks, "
                    "validation/machine_speed.h): " + figures);
  if (const std::string w = speed_warning(d.speed); !w.empty()) d.warnings.push_back(w);
  add_guard_notes(d, waited_s, wait_s);
}

}  // namespace

void check_validate_inputs(const ValidateOptions& o, int world_size) {
  (void)load_jobs(o, world_size);
  if (o.topology) (void)sim::load_topology(*o.topology);
}

Validation run_validation(exec::Backend& backend, const ValidateOptions& o, Progress& progress) {
  const int world = backend.world_size();
  const std::string load_start = load_average();
  Loaded l = load_jobs(o, world);
  const TopologyChoice topo = choose_topology(backend, o, progress);
  progress.grow(static_cast<int>(l.jobs.size()));
  exec::RunOptions ro = run_options(o, l.experiment);
  if (backend.capabilities().backend == plan::BackendKind::cuda)  // NCCL's tuner plugin applies them (cmd_validate)
    ro.resolve = sim::resolve_on(topo.topology, plan::BackendKind::cuda);
  Validation v;
  ReportData& d = v.report;
  std::vector<std::vector<Predicted>> preds;
  Budget budget(o.budget_s, static_cast<int>(l.jobs.size()));
  const bool compare_speed = topo.speed && topo.speed->ranks == world;
  const auto references = compare_speed ? speed_samples(world, reference_keys(*topo.speed)) : std::vector<MicroSample>{};
  const auto speed_start = compare_speed ? measure_speed(backend, references, progress) : std::map<std::string, double>{};
  const double baseline_us = compare_speed ? guard_baseline_us(*topo.speed, speed_start) : 0.0;
  const Guard guard = baseline_us > 0 ? Guard{speed_samples(world, {kGuardReference}), baseline_us} : Guard{};
  double wait_left_s = std::max(0.0, o.wait_s - topo.waited_s);
  int most_rounds = 0;
  for (const auto& j : l.jobs) {
    preds.push_back(predict(j, topo.topology, backend.capabilities().backend));
    auto rows =
        measure_guarded(backend, PointRun{j, preds.back(), topo.topology, topo.range, ro}, guard, budget,
                        wait_left_s, progress);
    for (const auto& r : rows) most_rounds = std::max(most_rounds, r.rounds);
    d.rows.insert(d.rows.end(), rows.begin(), rows.end());
  }
  if (compare_speed) d.speed = speed_checks(*topo.speed, speed_start, measure_speed(backend, references, progress));
  progress.finish();
  v.metrics = compute_metrics(d.rows);
  d.title = fmt::format("{} on {}, {} ranks", l.experiment.name, backend.name(), world);
  d.backend = backend.name();
  d.topology = topo.topology.name;
  d.ranks = world;
  d.command = o.command;
  d.notes.push_back(topo.note);
  d.notes.push_back(fmt::format(
      "each time is the median of the timed steps (a step's time being its slowest rank's): {} steps after {} "
      "warm-up steps, in {} rounds that visit every schedule of a point in turn, and more where a schedule's "
      "predicted step is short (each round runs at least {:.0f} ms of it, up to {} steps); a point whose "
      "intervals stayed wider than {:g}% of the medians got more rounds (up to {} in all, {} at most here) "
      "within a budget of {:g} s (--budget-s). Intervals are {:.0f}% order-statistic intervals of the median "
      "(docs/validation.md)",
      ro.iters, ro.warmup, std::clamp(ro.iters, 1, kRounds), kMinRoundUs / 1000, kMaxStepsPerRound,
      kDecisiveWidth * 100, kMaxRounds, most_rounds, o.budget_s, kConfidence * 100));
  add_setup_warnings(d, topo, world);
  add_speed_notes(d, topo, world, o.wait_s - wait_left_s, o.wait_s);
  add_timeline(backend, d, v.metrics, l.jobs, preds, topo.topology, ro);
  d.inputs["experiment.yaml"] = l.experiment_text;
  d.inputs["topology.yaml"] = topo.text;
  d.inputs["schedules.yaml"] = schedules_yaml(l.jobs, preds);
  add_workloads(d, l.experiment);
  d.inputs["command.txt"] = o.command + "\n";
  d.inputs["commit.txt"] = (o.commit.empty() ? std::string("unknown") : o.commit) + "\n";
  d.inputs["machine.yaml"] = machine_yaml(load_start, world);
  for (const auto& r : d.rows) v.unverified += r.verified ? 0 : 1;
  return v;
}

}  // namespace coconet::validation
