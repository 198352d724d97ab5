// coconet run: executes schedules of a workload (or of every workload of an
// experiment) for real on a backend, times them and verifies their outputs.
//
// Outside mpirun, `--ranks N` first prepares the jobs (model::expand: bad input
// is reported once, before any rank starts), then starts `mpirun -np N` on this
// same command line (with the flags a small machine or a container needs), so
// nobody has to know mpirun. Inside it, each rank prepares the same jobs;
// errors found while preparing (bad input, a rank count the program cannot
// use, sizes that do not fit) are the same on every rank and are reported
// once. A rank that
// fails while running reports itself and aborts the whole job; a watchdog
// aborts a job that stops making progress.

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_out.h"
#include "cli/messages.h"
#include "cli/knob_args.h"
#include "exec/backend.h"
#include "exec/mpirun.h"
#include "exec/mpi_session.h"
#include "exec/nccl_tuner/nccl_ids.h"
#include "exec/nccl_tuner/per_call.h"
#include "exec/rank_status.h"
#include "exec/runtime.h"
#include "exec/watchdog.h"
#include "model/set_flag.h"
#include "model/enumerate.h"
#include "model/catalog.h"
#include "model/error.h"
#include "model/parse.h"
#include "model/limits.h"
#include "model/points.h"
#include "model/schedule_file.h"
#include "plan/capabilities.h"
#include "plan/step_plan.h"
#include "sim/resolve.h"
#include "sim/tasks.h"
#include "sim/topology.h"
#include "sim/tuner.h"
#include "validation/mpirun.h"
#include "validation/machine_identity.h"
#include "validation/progress.h"

namespace coconet::cli {
namespace {

// Default seconds without progress (one schedule measured) before the watchdog aborts the job.
constexpr double kDefaultTimeoutS = 600.0;

struct RunArgs {
  std::string target;
  std::string backend = "cpu";
  int ranks = 0;
  std::string hosts;  // --hosts a,b: the machines the ranks run on
  bool oversubscribe = false;
  std::string schedule = "all";
  std::string topology;  // predict the schedules on it; needed by --schedule best
  std::vector<std::string> sets;
  KnobArgs knobs;
  int iters = -1;
  int warmup = -1;
  std::int64_t interpreter_limit = exec::kDefaultInterpreterLimit;
  double timeout_s = kDefaultTimeoutS;
  Format format = Format::table;
};

struct Job {
  model::Point point;
  std::vector<model::Schedule> schedules;
  std::map<std::string, double> predicted_us;  // by schedule name, with --topology or a tune file
  std::string predicted_on;                     // the topology of those predictions
  std::optional<model::SchedulePoint> tuned;    // where the tune file's schedule was chosen
  std::vector<std::string> notes;               // what the predictions do not match in this run
};

// What a prediction on `t` does not share with a run on `backend` at
// `world_size` ranks: another kind of processor, or another rank count than a
// calibrated topology was fitted at.
std::vector<std::string> prediction_notes(const sim::Topology& t, const std::string& backend, int world_size) {
  std::vector<std::string> notes;
  const bool cpu_topology = t.device == sim::Device::cpu;
  if (cpu_topology != (backend == "cpu"))
    notes.push_back(fmt::format("{} describes {}, but this run measures the {} backend: its prediction is for that "
                                "machine, not this one (`coconet calibrate --backend {}` writes a topology of this "
                                "one)",
                                t.name, cpu_topology ? "CPU cores" : "GPUs", backend, backend));
  else if (cpu_topology && t.total_gpus() != world_size)
    notes.push_back(fmt::format("{} was calibrated on {} ranks ({} node(s) x {}); this run has {}: the prediction "
                                "extrapolates the fit",
                                t.name, t.total_gpus(), t.nodes, t.node.gpus, world_size));
  return notes;
}

// ---- preparing the jobs ----------------------------------------------------

// The schedules `--schedule` names at a job's point: all, one by name, every
// one for `best` (narrowed once predicted), or the tune file's document for the
// point (with its knobs).
std::vector<model::Schedule> named_schedules(Job& j, const RunArgs& a) {
  if (model::is_schedule_file(a.schedule)) {
    const model::PointQuery q{j.point.sizes, j.point.ranks_per_group, j.point.groups, "", a.backend};
    auto chosen = model::schedule_for_point(j.point.program, a.schedule, q);
    j.tuned = chosen.point;
    return {std::move(chosen.schedule)};
  }
  if (a.schedule == "all" || a.schedule == "best") return model::enumerate_schedules(j.point.program);
  return {model::find_schedule(j.point.program, a.schedule)};
}

// Fills a job's schedules and their knobs. With a topology, each schedule's
// knobs are the ones predict chooses (a tune file's and the knob flags pinned)
// and its prediction is kept; `best` keeps the fastest. Without one, the
// file's knobs or the flags' apply, and a tune file's own prediction is shown.
// `tile_here`: the backend that runs refuses no tiles (its instance's
// plan::Capabilities::tile_overlap): false keeps the tuner to chunks.
void select_schedules(Job& j, const RunArgs& a, const std::optional<sim::Topology>& topology, bool tile_here) {
  const bool file = model::is_schedule_file(a.schedule);
  auto schedules = named_schedules(j, a);
  if (!topology) {
    for (auto& s : schedules) s.knobs = a.knobs.applied(s.knobs);
    if (j.tuned && j.tuned->predicted_us && !a.knobs.any()) {
      j.predicted_us[schedules.front().name()] = *j.tuned->predicted_us;
      j.predicted_on = j.tuned->topology;
      if (j.tuned->backend != a.backend)
        j.notes.push_back(fmt::format("{} was tuned for the {} backend on {}; this run measures the {} backend: "
                                      "its prediction is for that machine, not this one",
                                      a.schedule, j.tuned->backend, j.tuned->topology, a.backend));
    }
    j.schedules = std::move(schedules);
    return;
  }
  sim::Context ctx{*topology, j.point.ranks_per_group, j.point.sizes, plan::parse_backend(a.backend, "--backend")};
  ctx.tile_designs = false;  // what this backend runs: tile only where it runs tiles
  ctx.tile_here = tile_here;
  for (auto& s : schedules) {
    const auto c = sim::tune({s}, ctx, a.knobs.space(s, file)).ranked.front();
    s.knobs = c.knobs;
    j.predicted_us[s.name()] = c.time_us;
  }
  const std::size_t best = model::predicted_best_of(
      schedules, [&](const model::Schedule& s) { return j.predicted_us.at(s.name()); },
      [](const model::Schedule& s) { return s.stages.size(); });
  j.predicted_on = topology->name;
  j.notes = prediction_notes(*topology, a.backend, j.point.world_size());
  if (a.schedule == "best") schedules = {schedules[best]};
  j.schedules = std::move(schedules);
}

// The topology the schedules are predicted on (--topology, with the --set
// values for it), when there is one.
std::optional<sim::Topology> run_topology(const RunArgs& a, const model::Assignments& sets) {
  if (!a.topology.empty()) return sim::load_topology(a.topology, sets);
  if (!sets.empty())
    throw UserError(fmt::format("--set {}={}: a topology value, but run predicts nothing without --topology; pass "
                                "--topology T (e.g. cpu-local)",
                                sets.front().first, sets.front().second));
  if (a.schedule == "best")
    throw UserError("--schedule best picks the schedule the cost model predicts fastest, which needs the machine "
                    "described: pass --topology T (e.g. --topology cpu-local, or a file that `coconet calibrate "
                    "--backend cpu --out FILE` wrote on this machine), or use --schedule all");
  return std::nullopt;
}

// A tune file's sizes for a workload target given no sizes: `run W --schedule
// FILE` runs the point tune chose. Appended to the --set values.
void sizes_from_file(const RunArgs& a, const model::Experiment& e, model::Assignments& values) {
  if (!model::is_schedule_file(a.schedule) || e.workloads.size() != 1) return;
  const std::string name = model::load_program(model::resolve_workload(e.workloads.front().workload)).name;
  const auto sizes = model::common_sizes(model::read_schedule_documents(a.schedule), name);
  if (!sizes) return;
  for (const auto& [k, v] : values)
    if (sizes->contains(k)) return;
  for (const auto& [k, v] : *sizes) values.emplace_back(k, std::to_string(v));
}

model::PointOptions point_options(const model::Assignments& values, const std::optional<sim::Topology>& topology,
                                  int world_size) {
  model::PointOptions o{values, world_size, std::nullopt, ""};
  if (topology) {
    o.total_gpus = topology->total_gpus();
    o.machine = fmt::format("--topology {} ({} node(s) x {} GPUs)", topology->name, topology->nodes,
                            topology->node.gpus);
  }
  return o;
}

// Every job of the target on `world_size` ranks, checked: the same on every
// rank, and what `run` checks before it starts any.
std::vector<Job> prepare_jobs(const RunArgs& a, exec::RunOptions& options, int world_size, bool tile_here = true) {
  a.knobs.check();
  model::check_timeout(a.timeout_s, "--timeout");
  model::SetArgs sets = model::split_sets(a.sets);
  const auto topology = run_topology(a, sets.topology);
  const model::Experiment e = model::experiment_from_argument(a.target);
  sizes_from_file(a, e, sets.workload);
  options.iters = a.iters > 0 ? a.iters : e.iters;
  options.warmup = a.warmup >= 0 ? a.warmup : e.warmup;
  options.interpreter_limit = a.interpreter_limit;
  if (topology && a.backend == "cuda")  // each plan's calls as the prediction resolved them (choose_per_call)
    options.resolve = sim::resolve_on(*topology, plan::BackendKind::cuda);
  std::vector<Job> jobs;
  for (auto& pt : model::expand(e, point_options(sets.workload, topology, world_size))) {
    jobs.push_back(Job{std::move(pt), {}, {}, {}, std::nullopt, {}});
    select_schedules(jobs.back(), a, topology, tile_here);
  }
  return jobs;
}

// Predicted seconds of steps past which `run` says how long it expects to
// take before it starts: a minute is where a silent run (no terminal to draw
// progress on) starts to look like a hang.
constexpr double kLongRunS = 60.0;

// The steps' time the cost model predicts for these jobs (warm-up included,
// the references and tuning not); 0 without predictions.
double predicted_run_s(const std::vector<Job>& jobs, const exec::RunOptions& options) {
  double us = 0;
  for (const auto& j : jobs)
    for (const auto& s : j.schedules)
      if (const auto it = j.predicted_us.find(s.name()); it != j.predicted_us.end())
        us += it->second * (options.warmup + options.iters);
  return us * 1e-6;
}

// Says on stderr, before a long run starts, how long its steps are predicted to take.
void note_long_run(const std::vector<Job>& jobs, const exec::RunOptions& options) {
  const double s = predicted_run_s(jobs, options);
  if (s <= kLongRunS || jobs.empty()) return;
  std::size_t schedules = 0;
  for (const auto& j : jobs) schedules += j.schedules.size();
  fmt::print(stderr,
             "coconet: the steps are predicted to take {:.0f} min on {} ({} schedule(s) x {} steps); fewer --iters "
             "or smaller --set sizes shorten the run\n",
             s / 60.0, jobs.front().predicted_on, schedules, options.warmup + options.iters);
}

// One warning line on stderr when some schedules' steps spread past
// exec::kLoadedSpread (validate measures again after such spells,
// validation/spell_guard.h; run says so).
void warn_loaded_machine(const std::vector<exec::RunRow>& rows) {
  const exec::Spread s = exec::loaded_spread(rows);
  const exec::RunRow* worst = s.worst;
  if (worst == nullptr) return;
  std::ifstream in("/proc/loadavg");
  double load = 0;
  const std::string load_text = in >> load ? fmt::format(", load average {:.2f} on {} cores", load,
                                                         ::sysconf(_SC_NPROCESSORS_ONLN))
                                           : std::string();
  fmt::print(stderr,
             "warning: the machine looks loaded{}: {} of {} schedule(s) had steps {:.0f}x or more apart (worst {} "
             "{}: {:.1f} to {:.1f} us, {:.1f}x), so the medians carry other work's time; run again on a quiet "
             "machine, or with more --iters\n",
             load_text, s.rows, rows.size(), exec::kLoadedSpread, worst->workload, worst->schedule, worst->min_us,
             worst->max_us, worst->max_us / worst->min_us);
}

// One warning line on stderr when --topology was calibrated on another
// machine than this one (validation/machine_identity.h).
void warn_other_machine(const RunArgs& a) {
  if (a.topology.empty() || a.backend != "cpu") return;
  const std::string w = validation::other_machine_warning(
      a.topology, "its predictions are for that machine (`coconet calibrate --backend cpu --out FILE` writes a "
                  "topology of this one)");
  if (!w.empty()) fmt::print(stderr, "warning: {}\n", w);
}

// ---- printing --------------------------------------------------------------

std::string stages_text(const exec::RunRow& r) {
  std::string s;
  for (const auto& st : r.stages) s += fmt::format("{}{} {:.1f}", s.empty() ? "" : " | ", st.name, st.median_us);
  return s;
}

// A row with the knobs it ran with and the cost model's prediction of its
// schedule, when there is one.
struct Printed {
  exec::RunRow row;
  model::Knobs knobs;
  std::optional<double> predicted_us;
  std::string predicted_on;
  const Job* job = nullptr;
};

std::vector<Printed> with_predictions(const std::vector<exec::RunRow>& rows, const std::vector<Job>& jobs) {
  std::vector<Printed> out;
  std::size_t i = 0;
  for (const auto& j : jobs)
    for (const auto& s : j.schedules) {
      if (i >= rows.size()) return out;
      Printed p{rows[i++], s.knobs, std::nullopt, j.predicted_on, &j};
      if (const auto it = j.predicted_us.find(s.name()); it != j.predicted_us.end()) p.predicted_us = it->second;
      out.push_back(std::move(p));
    }
  return out;
}

// The knobs as the backend applies them: chunks everywhere; NCCL's algorithm,
// protocol and channels on cuda only (the cpu backend's MPI chooses its own).
std::string knobs_text(const model::Knobs& k, const std::string& backend) {
  const std::string tile = k.overlap == model::Grain::tile ? " tile" : "";
  if (backend != "cuda") return fmt::format("chunks={}{}", k.chunks, tile);
  return fmt::format("chunks={}{} {}/{} channels={}", k.chunks, tile, model::to_string(k.algo), model::to_string(k.proto),
                     k.channels == 0 ? std::string("default") : std::to_string(k.channels));
}

nlohmann::json applied_knobs_json(const model::Knobs& k, const std::string& backend) {
  nlohmann::json j = knobs_json(k);
  if (backend != "cuda") j["not_applied"] = nlohmann::json::array({"algo", "proto", "channels"});
  return j;
}

nlohmann::json row_json(const Printed& p, const std::string& backend) {
  const exec::RunRow& r = p.row;
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& st : r.stages) stages.push_back({{"name", st.name}, {"median_us", st.median_us}});
  nlohmann::json j{{"workload", r.workload}, {"sizes", sizes_json(r.sizes)}, {"label", model::sizes_label(r.sizes)},
                   {"schedule", r.schedule},   {"knobs", applied_knobs_json(p.knobs, backend)},
                   {"median_us", r.median_us}, {"min_us", r.min_us},    {"max_us", r.max_us},
                   {"stages", stages},         {"verified", r.verified}, {"max_abs_error", r.max_abs_error},
                   {"checked_against", r.checked_against}};
  if (!r.verified) j["first_mismatch"] = r.mismatch;
  if (p.predicted_us) {
    j["predicted_us"] = *p.predicted_us;
    j["predicted_on"] = p.predicted_on;
  }
  return j;
}

void print_run_json(const std::vector<Printed>& rows, const RunArgs& a, int ranks, int nodes) {
  nlohmann::json out{{"schema", schema_of("run")}, {"backend", a.backend}, {"ranks", ranks},
                     {"rows", nlohmann::json::array()}};
  if (nodes > 1) out["nodes"] = nodes;
  if (!a.topology.empty()) out["topology"] = a.topology;
  if (a.schedule == "best") out["chosen_by"] = "prediction";
  if (model::is_schedule_file(a.schedule)) out["chosen_by"] = "tune file " + a.schedule;
  std::vector<std::string> notes;
  for (const auto& p : rows) {
    out["rows"].push_back(row_json(p, a.backend));
    for (const auto& n : p.job->notes)
      if (std::find(notes.begin(), notes.end(), n) == notes.end()) notes.push_back(n);
  }
  out["notes"] = notes;
  print_json(out);
}

// The lines above the table that say what was chosen and how it was predicted.
// `nodes`: the hosts the ranks ran on, said when more than one.
void print_header(const std::vector<Printed>& rows, const RunArgs& a, int ranks, int nodes) {
  fmt::print("backend {}, {} ranks{}\n", a.backend, ranks, nodes > 1 ? fmt::format(" on {} nodes", nodes) : "");
  const bool file = model::is_schedule_file(a.schedule);
  if (a.backend != "cuda" && (file || a.knobs.algo || a.knobs.proto || a.knobs.channels))
    fmt::print("knobs: chunks applied; algo, proto and channels are NCCL's and do not apply on {} (MPI chooses its "
               "own algorithms)\n",
               a.backend);
  std::vector<std::string> notes;
  for (const auto& p : rows)
    for (const auto& n : p.job->notes)
      if (std::find(notes.begin(), notes.end(), n) == notes.end()) notes.push_back(n);
  for (const auto& n : notes) fmt::print("note: {}\n", n);
  for (const auto& p : rows) {
    const std::string predicted =
        p.predicted_us ? fmt::format("predicted {:.1f} us on {}", *p.predicted_us, p.predicted_on) : "not predicted";
    if (file && p.job->tuned)
      fmt::print("{}: {} {} {} ({}), tuned for {}: {}, measured {:.1f} us\n", a.schedule, p.row.workload,
                 model::sizes_label(p.row.sizes), p.row.schedule, knobs_text(p.knobs, a.backend),
                 p.job->tuned->text(), predicted, p.row.median_us);
    else if (file)
      fmt::print("{}: {} {} {} ({}): {}, measured {:.1f} us\n", a.schedule, p.row.workload,
                 model::sizes_label(p.row.sizes), p.row.schedule, knobs_text(p.knobs, a.backend), predicted,
                 p.row.median_us);
    else if (a.schedule == "best")
      fmt::print("best on {} by the cost model: {} {} ({}; {}, measured {:.1f} us)\n", a.topology, p.row.workload,
                 p.row.schedule, knobs_text(p.knobs, a.backend), predicted, p.row.median_us);
  }
}

// The knob columns: one text column in the table, one column per knob in CSV
// ("-" for those the backend does not apply).
std::vector<std::string> knob_columns(Format f) {
  if (f == Format::csv) return {"chunks", "algo", "proto", "channels", "overlap"};
  return {"knobs"};
}

std::vector<Cell> knob_cells(const model::Knobs& k, const std::string& backend, Format f) {
  if (f != Format::csv) return {knobs_text(k, backend)};
  if (backend != "cuda")
    return {std::int64_t(k.chunks), std::string("-"), std::string("-"), std::string("-"), model::to_string(k.overlap)};
  return {std::int64_t(k.chunks), model::to_string(k.algo), model::to_string(k.proto), std::int64_t(k.channels),
          model::to_string(k.overlap)};
}

void print_rows(const std::vector<Printed>& rows, const RunArgs& a, int ranks, int nodes) {
  if (a.format == Format::json) return print_run_json(rows, a, ranks, nodes);
  bool predicted = false;
  for (const auto& p : rows) predicted = predicted || p.predicted_us.has_value();
  Table t;
  t.columns = {"workload", "sizes", "schedule"};
  for (auto& c : knob_columns(a.format)) t.columns.push_back(std::move(c));
  t.columns.emplace_back("median_us");
  if (predicted) t.columns.emplace_back("predicted_us");
  for (const char* c : {"min_us", "max_us", "stages_us", "verified", "max_abs_error"}) t.columns.emplace_back(c);
  for (const auto& p : rows) {
    const auto& r = p.row;
    std::vector<Cell> row{r.workload, model::sizes_label(r.sizes), r.schedule};
    for (auto& c : knob_cells(p.knobs, a.backend, a.format)) row.push_back(std::move(c));
    row.emplace_back(r.median_us);
    if (predicted) row.emplace_back(p.predicted_us ? Cell(*p.predicted_us) : Cell(std::string("-")));
    for (Cell c : std::vector<Cell>{r.min_us, r.max_us, stages_text(r), r.verified,
                                    fmt::format("{:.3g}", r.max_abs_error)})
      row.push_back(std::move(c));
    t.add(std::move(row));
  }
  if (a.format == Format::table) print_header(rows, a, ranks, nodes);
  print(t, a.format);
}

// The choices of every collective call the jobs' schedules make: with a
// topology, each schedule's plan resolved on it (sim/resolve.h, as the
// prediction priced it); without, what each schedule's knobs pin (auto
// where they leave NCCL to choose).
std::vector<plan::CollectiveChoice> call_choices(const std::vector<Job>& jobs,
                                                 const std::optional<sim::Topology>& topology) {
  std::vector<plan::CollectiveChoice> out;
  for (const auto& j : jobs)
    for (const auto& s : j.schedules) {
      if (!topology) {
        out.push_back({s.knobs.algo, s.knobs.proto, s.knobs.channels, false});
        continue;
      }
      const sim::Context ctx{*topology, j.point.ranks_per_group, j.point.sizes, plan::BackendKind::cuda};
      for (const auto& c : sim::choices_of(sim::lower_for(s, ctx)))
        if (c.concrete() && !c.local) out.push_back(c);
    }
  return out;
}

// Whether a cuda job's collective calls take the plan's choices call by call:
// with a topology to resolve the plans on (RunOptions::resolve, set by
// prepare_jobs) and coconet's NCCL tuner plugin, which NCCL_TUNER_PLUGIN
// then names (set here unless the user named it) and the backend tells each
// call's choice (exec/nccl_tuner/per_call.h). False, with a note where the
// calls would have needed it, when NCCL_TUNER_PLUGIN names another plugin or
// no plugin was built: the job-wide environment (set_nccl_knobs) applies.
bool choose_per_call(const std::optional<sim::Topology>& topology) {
  if (!topology) return false;
  std::string why_not;
  if (exec::nccl_tuner::name_plugin(why_not)) return true;
  fmt::print(stderr, "coconet: {}; each collective's choice is set for the whole job instead of call by call\n",
             why_not);
  return false;
}

// The NCCL environment of a cuda job (its documented NCCL_ALGO, NCCL_PROTO,
// NCCL_MIN/MAX_NCHANNELS), derived from the choices its plans resolve to
// (call_choices). NCCL reads it once per communicator: one setting for the
// whole job. Where the calls' choices differ, only what they all share is
// set and a note names the choices; NCCL then chooses the rest per call by
// its own rule. Used where the calls cannot take their own choices
// (choose_per_call). Schedules that pin different knobs cannot share one job.
void set_nccl_knobs(const std::vector<Job>& jobs, const std::optional<sim::Topology>& topology) {
  std::optional<model::Knobs> first;
  for (const auto& j : jobs)
    for (const auto& s : j.schedules) {
      model::Knobs k = s.knobs;
      k.chunks = 1;
      if (first && !(*first == k))
        throw UserError("--backend cuda: these schedules ask NCCL for different algorithms, protocols or channels, "
                        "which one job cannot give; run them one at a time (--schedule NAME) or pin --algo, "
                        "--proto and --channels");
      first = k;
    }
  const std::vector<plan::CollectiveChoice> calls = call_choices(jobs, topology);
  if (calls.empty()) return;
  const auto all = [&](auto field) {
    return std::all_of(calls.begin(), calls.end(), [&](const auto& c) { return field(c) == field(calls.front()); });
  };
  const bool one_algo = all([](const plan::CollectiveChoice& c) { return c.algo; });
  const bool one_proto = all([](const plan::CollectiveChoice& c) { return c.proto; });
  const bool one_channels = all([](const plan::CollectiveChoice& c) { return c.channels; });
  const plan::CollectiveChoice& c = calls.front();
  if (one_algo && exec::nccl_tuner::nccl_env_name(c.algo)) setenv("NCCL_ALGO", exec::nccl_tuner::nccl_env_name(c.algo), 1);
  if (one_algo && c.algo == model::Algo::hierarchical)
    fmt::print(stderr, "coconet: algo hierarchical has no NCCL_ALGO value; NCCL chooses its own\n");
  if (one_proto && exec::nccl_tuner::nccl_env_name(c.proto)) setenv("NCCL_PROTO", exec::nccl_tuner::nccl_env_name(c.proto), 1);
  if (one_channels && c.channels > 0) {
    const std::string n = std::to_string(c.channels);
    setenv("NCCL_MIN_NCHANNELS", n.c_str(), 1);
    setenv("NCCL_MAX_NCHANNELS", n.c_str(), 1);
  }
  if (one_algo && one_proto && one_channels) return;
  std::vector<std::string> distinct;
  for (const auto& x : calls)
    if (std::find(distinct.begin(), distinct.end(), plan::to_string(x)) == distinct.end())
      distinct.push_back(plan::to_string(x));
  std::string list;
  for (const auto& d : distinct) list += (list.empty() ? "" : ", ") + d;
  fmt::print(stderr,
             "coconet: the collectives of these plans resolve to different NCCL settings on {} ({}); NCCL takes one "
             "setting per job from its environment, so only what they share is set{}{}{} and NCCL chooses the rest "
             "per call\n",
             topology ? topology->name : "the knobs", list, one_algo ? " (algorithm)" : "",
             one_proto ? " (protocol)" : "", one_channels ? " (channels)" : "");
}

// The world size of this job before any backend starts: mpirun's, else --ranks, else 1.
int expected_world_size(const RunArgs& a) {
  if (const char* n = std::getenv("OMPI_COMM_WORLD_SIZE"); n != nullptr && *n != '\0') return std::atoi(n);
  return a.ranks > 0 ? a.ranks : 1;
}

// ---- running -----------------------------------------------------------------

[[noreturn]] void quiet_exit(std::unique_ptr<exec::Backend>& backend, int code) {
  std::fflush(stdout);
  backend.reset();
  exec::finalize_mpi();
  std::exit(code);
}

// Every rank learns whether any failed; the lowest failing rank rethrows (and
// main reports it once), the others leave quietly with the same code.
void agree_on_failure(std::unique_ptr<exec::Backend>& backend, const std::exception_ptr& error) {
  std::vector<double> code{static_cast<double>(exit_code_of(error))};
  std::vector<double> first{error ? static_cast<double>(backend->world_rank()) : 1e9};
  backend->host_allreduce(code, model::ReduceOp::max);
  backend->host_allreduce(first, model::ReduceOp::min);
  if (code[0] == kExitOk) return;
  if (error && first[0] == backend->world_rank()) {
    if (backend->world_rank() == 0) std::rethrow_exception(error);
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      fmt::print(stderr, "coconet: error (rank {}): {}\n", backend->world_rank(), e.what());
    }
  }
  quiet_exit(backend, static_cast<int>(code[0]));
}

[[noreturn]] void abort_from_rank(exec::Backend& backend, const std::exception& e) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::fflush(stdout);
  fmt::print(stderr, "coconet: rank {} ({}) failed while running: {}; aborting the job\n", backend.world_rank(),
             host, e.what());
  std::fflush(stderr);
  backend.abort_job(exit_code_for(e));
  std::abort();  // abort_job does not return; a virtual call does not carry [[noreturn]]
}

// Test-only fault hook: COCONET_TEST_FAULT=KIND@rankN (KIND throw, die or
// hang) makes world rank N fail on purpose at the top of the run loop, so the
// fault tests (tests/exec.cmake, exec.fault.*) drive this command's own guard
// and watchdog. Unset, as in every normal run, it does nothing.
void test_fault_hook(int world_rank) {
  const char* spec = std::getenv("COCONET_TEST_FAULT");
  if (spec == nullptr || *spec == '\0') return;
  const std::string text(spec);
  const auto at = text.find("@rank");
  if (at == std::string::npos || std::stoi(text.substr(at + 5)) != world_rank) return;
  const std::string kind = text.substr(0, at);
  if (kind == "throw") throw InternalError("COCONET_TEST_FAULT: rank " + std::to_string(world_rank) + " throws");
  if (kind == "die") std::raise(SIGKILL);
  if (kind == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  throw UserError("COCONET_TEST_FAULT=" + text + ": expected throw|die|hang@rankN");
}

std::vector<exec::RunRow> run_jobs(exec::Backend& backend, std::vector<Job>& jobs, const exec::RunOptions& options,
                                   double timeout_s) {
  int total = 0;
  for (const auto& j : jobs) total += static_cast<int>(j.schedules.size());
  // Rank 0 says which point and schedule runs, how many are left and the time taken (a bar on a terminal, else lines).
  validation::Progress progress(
      backend.world_rank() == 0 ? validation::progress_style() : validation::ProgressStyle::off, total);
  exec::Watchdog watchdog(timeout_s, [&backend, timeout_s] {
    fmt::print(stderr, "coconet: rank {} made no progress for {:.0f} s (a peer died or hangs); aborting the job\n",
               backend.world_rank(), timeout_s);
    std::fflush(stderr);
    backend.abort_job(kExitInternal);
  });
  std::vector<exec::RunRow> rows;
  try {
    test_fault_hook(backend.world_rank());
    for (auto& j : jobs) {
      backend.set_groups(j.point.groups);
      const auto refs = exec::compute_references(backend, j.point.program, j.point.sizes, options);
      watchdog.kick();
      for (const auto& s : j.schedules) {
        const std::string what = fmt::format("{} {} {}", j.point.program.name, j.point.label, s.name());
        progress.note(what);
        rows.push_back(exec::run_schedule(backend, s, j.point.sizes, refs, options));
        progress.step(what);
        watchdog.kick();
      }
    }
    progress.finish();
  } catch (const std::exception& e) {
    progress.finish();
    abort_from_rank(backend, e);
  }
  return rows;
}

// --hosts read and checked before anything starts: it needs --ranks and the
// cpu backend, outside mpirun (which already placed the ranks).
exec::Hosts hosts_of(const RunArgs& a) {
  if (a.hosts.empty()) return {};
  if (a.backend != "cpu")
    throw UserError("--hosts starts the ranks with mpirun, which the " + a.backend +
                    " backend does not do; start it with `mpirun --host " + a.hosts + " -np N coconet run ...`");
  if (exec::launched_by_mpirun()) {
    // The ranks coconet started see the launcher's own command line: --hosts was used already.
    if (std::getenv(exec::kRankStatusEnv) != nullptr) return {};
    throw UserError("--hosts inside mpirun: mpirun has placed the ranks already; drop --hosts (or pass --host to "
                    "mpirun)");
  }
  if (a.ranks <= 0)
    throw UserError("--hosts " + a.hosts + " needs --ranks N, the ranks in all (placed in blocks over the hosts)");
  return exec::parse_hosts(a.hosts, a.ranks, "--hosts");
}

void run_command(const RunArgs& a) {
  const exec::Hosts hosts = hosts_of(a);
  if (a.backend == "cpu" && !exec::launched_by_mpirun()) {
    exec::RunOptions checked;
    (void)prepare_jobs(a, checked, std::max(a.ranks, 1));  // bad input is reported once, before any rank starts
    if (a.ranks > 0) {
      exec::check_cores(a.ranks, hosts, a.oversubscribe, true);
      // The ranks draw progress for this terminal.
      validation::run_under_mpirun(a.ranks, plan::BackendKind::cpu, hosts);
    }
  }
  if (a.backend == "cuda") {
    exec::RunOptions checked;
    const auto jobs = prepare_jobs(a, checked, expected_world_size(a));
    const auto topology = run_topology(a, model::split_sets(a.sets).topology);
    if (!choose_per_call(topology)) set_nccl_knobs(jobs, topology);
  }
  auto backend = exec::make_backend(a.backend);
  exec::RunOptions options;
  std::vector<Job> jobs;
  std::exception_ptr error;
  try {
    if (a.ranks > 0 && a.ranks != backend->world_size())
      throw UserError("--ranks " + std::to_string(a.ranks) + " but the job has " +
                      std::to_string(backend->world_size()) + " ranks; drop --ranks inside mpirun");
    jobs = prepare_jobs(a, options, backend->world_size(), backend->capabilities().tile_overlap);
    if (backend->world_rank() == 0) {
      warn_other_machine(a);
      note_long_run(jobs, options);
    }
    for (auto& j : jobs) {
      backend->set_groups(j.point.groups);
      exec::check_memory(*backend, j.point.program, j.schedules, j.point.sizes, options);
    }
  } catch (...) {
    error = std::current_exception();
  }
  agree_on_failure(backend, error);
  const auto rows = run_jobs(*backend, jobs, options, a.timeout_s);
  const exec::RunRow* failed = nullptr;
  for (const auto& r : rows)
    if (!r.verified && failed == nullptr) failed = &r;
  if (backend->world_rank() == 0) {
    print_rows(with_predictions(rows, jobs), a, backend->world_size(), backend->nodes());
    warn_loaded_machine(rows);
  }
  if (failed == nullptr) {
    backend.reset();
    return;
  }
  if (backend->world_rank() != 0) quiet_exit(backend, kExitRunFailed);
  throw RunFailure(failed->workload + " " + failed->schedule + " at " + model::sizes_label(failed->sizes) +
                   " differs: " + failed->mismatch);
}

}  // namespace

void register_run(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "Run schedules for real on a backend, timed and verified");
  cmd->add_option("target", args->target, "Workload (name or YAML path) or experiment")->required();
  cmd->add_option("--backend", args->backend, "Backend: cpu (MPI) or cuda")->capture_default_str()
      ->check(one_of({"cpu", "cuda"}))
      ->type_name("cpu|cuda");
  cmd->add_option("--ranks", args->ranks,
                  "Ranks to start with mpirun (outside mpirun); default: the ranks mpirun gave, or 1")
      ->check(at_least(1));
  cmd->add_option("--hosts", args->hosts,
                  "Machines to run the --ranks on, comma-separated (mpirun --host; reached with ssh, or "
                  "OMPI_MCA_plm_rsh_agent): ranks placed in blocks, TCP between hosts")
      ->type_name("HOST,...");
  cmd->add_flag("--oversubscribe", args->oversubscribe,
                "Allow more --ranks than this machine has cores (times then include time slicing)");
  cmd->add_option("--schedule", args->schedule,
                  "Schedule name, all, best (the one the cost model predicts fastest on --topology), or a schedule "
                  "YAML file (e.g. what `coconet tune --out` wrote: its document for the point, with its knobs)")
      ->capture_default_str();
  cmd->add_option("--topology", args->topology,
                  "Topology (name or YAML, e.g. cpu-local from `coconet calibrate`): predict each schedule on it "
                  "and print the prediction next to the measurement; needed by --schedule best");
  cmd->add_option("--set", args->sets,
                  "NAME=VALUE: a workload size (e.g. N=1048576, N=4K, N=1e6) or scalar (e.g. lr=0.1), or a "
                  "value of the --topology (dotted, e.g. gpu.hbm_GBps=4000); repeatable");
  add_knob_flags(cmd, args->knobs);
  cmd->add_option("--iters", args->iters, "Timed steps (default: the experiment's, else 10)")
      ->check(at_least(1));
  cmd->add_option("--warmup", args->warmup, "Untimed steps first (default 2)")->check(at_least(0));
  cmd->add_option("--interpreter-limit", args->interpreter_limit,
                  "Total elements (every rank) up to which the reference interpreter also checks the run "
                  "(double precision, every rank in each process: larger sizes cost seconds and memory)")
      ->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--timeout", args->timeout_s, "Seconds without progress before the job is aborted")
      ->capture_default_str()
      ->check(at_least(1));
  add_format_option(cmd, args->format);
  cmd->callback([args] { run_command(*args); });
}

}  // namespace coconet::cli
