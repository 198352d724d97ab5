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
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>

#include "cli/commands.h"
#include "cli/format.h"
#include "exec/backend.h"
#include "exec/launch.h"
#include "exec/mpi_session.h"
#include "exec/runtime.h"
#include "exec/watchdog.h"
#include "model/assign.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/limits.h"
#include "model/points.h"
#include "plan/capabilities.h"
#include "sim/topology.h"
#include "sim/tuner.h"

namespace coconet::cli {
namespace {

// Default seconds without progress (one schedule measured) before the watchdog aborts the job.
constexpr double kDefaultTimeoutS = 600.0;

struct RunArgs {
  std::string target;
  std::string backend = "cpu";
  int ranks = 0;
  std::string schedule = "all";
  std::string topology;  // predict the schedules on it; needed by --schedule best
  std::vector<std::string> sets;
  int iters = -1;
  int warmup = -1;
  double timeout_s = kDefaultTimeoutS;
  Format format = Format::table;
};

struct Job {
  model::Point point;
  std::vector<model::Schedule> schedules;
  std::map<std::string, double> predicted_us;  // by schedule name, with --topology
};

// ---- preparing the jobs ----------------------------------------------------

// The cost model's ranking of every schedule of a job on `topology`, as `backend` would run it.
sim::TuneResult predict_job(const Job& j, const std::vector<model::Schedule>& all, const sim::Topology& topology,
                            const std::string& backend) {
  const sim::Context ctx{topology, j.point.ranks_per_group, j.point.sizes, plan::parse_backend(backend, "--backend")};
  return sim::tune(all, ctx, sim::predict_space());
}

// Fills a job's schedules: all, the predicted best (knobs included), or one by
// name; with a topology, the prediction of each.
void select_schedules(Job& j, const RunArgs& a, const std::optional<sim::Topology>& topology) {
  auto all = model::enumerate_schedules(j.point.program);
  if (topology) {
    const auto ranked = predict_job(j, all, *topology, a.backend);
    for (const auto& c : ranked.ranked) j.predicted_us[c.name] = c.time_us;
    if (a.schedule == "best") {
      const auto& best = ranked.ranked.front();
      model::Schedule s = all.at(static_cast<std::size_t>(best.schedule));
      s.knobs = best.knobs;
      j.schedules = {std::move(s)};
      return;
    }
  }
  j.schedules = a.schedule == "all" ? std::move(all)
                                    : std::vector<model::Schedule>{model::find_schedule(j.point.program, a.schedule)};
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
std::vector<Job> prepare_jobs(const RunArgs& a, exec::RunOptions& options, int world_size) {
  model::check_timeout(a.timeout_s, "--timeout");
  const model::SetArgs sets = model::split_sets(a.sets);
  const auto topology = run_topology(a, sets.topology);
  const model::Experiment e = model::experiment_from_argument(a.target);
  options.iters = a.iters > 0 ? a.iters : e.iters;
  options.warmup = a.warmup >= 0 ? a.warmup : e.warmup;
  std::vector<Job> jobs;
  for (auto& pt : model::expand(e, point_options(sets.workload, topology, world_size))) {
    jobs.push_back(Job{std::move(pt), {}, {}});
    select_schedules(jobs.back(), a, topology);
  }
  return jobs;
}

// ---- printing --------------------------------------------------------------

std::string stages_text(const exec::RunRow& r) {
  std::string s;
  for (const auto& st : r.stages) s += fmt::format("{}{} {:.1f}", s.empty() ? "" : " | ", st.name, st.median_us);
  return s;
}

// A row with the cost model's prediction of its schedule, when there is one.
struct Printed {
  exec::RunRow row;
  std::optional<double> predicted_us;
};

std::vector<Printed> with_predictions(const std::vector<exec::RunRow>& rows, const std::vector<Job>& jobs) {
  std::vector<Printed> out;
  std::size_t i = 0;
  for (const auto& j : jobs)
    for (const auto& s : j.schedules) {
      if (i >= rows.size()) return out;
      Printed p{rows[i++], std::nullopt};
      if (const auto it = j.predicted_us.find(s.name()); it != j.predicted_us.end()) p.predicted_us = it->second;
      out.push_back(std::move(p));
    }
  return out;
}

nlohmann::json row_json(const exec::RunRow& r) {
  nlohmann::json sizes = nlohmann::json::object();
  for (const auto& [k, v] : r.sizes) sizes[k] = v;
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& st : r.stages) stages.push_back({{"name", st.name}, {"median_us", st.median_us}});
  nlohmann::json j{{"workload", r.workload}, {"sizes", sizes},          {"schedule", r.schedule},
                   {"median_us", r.median_us}, {"min_us", r.min_us},    {"max_us", r.max_us},
                   {"stages", stages},         {"verified", r.verified}, {"max_abs_error", r.max_abs_error},
                   {"checked_against", r.checked_against}};
  if (!r.verified) j["first_mismatch"] = r.mismatch;
  return j;
}

void print_json(const std::vector<Printed>& rows, const RunArgs& a, int ranks) {
  nlohmann::json out{{"backend", a.backend}, {"ranks", ranks}, {"rows", nlohmann::json::array()}};
  if (!a.topology.empty()) out["topology"] = a.topology;
  if (a.schedule == "best") out["chosen_by"] = "prediction";
  for (const auto& p : rows) {
    auto j = row_json(p.row);
    if (p.predicted_us) j["predicted_us"] = *p.predicted_us;
    out["rows"].push_back(std::move(j));
  }
  fmt::print("{}\n", out.dump(2));
}

void print_rows(const std::vector<Printed>& rows, const RunArgs& a, int ranks) {
  if (a.format == Format::json) return print_json(rows, a, ranks);
  const bool predicted = !a.topology.empty();
  Table t;
  t.columns = {"workload", "sizes", "schedule", "median_us"};
  if (predicted) t.columns.emplace_back("predicted_us");
  for (const char* c : {"min_us", "max_us", "stages_us", "verified", "max_abs_error"}) t.columns.emplace_back(c);
  for (const auto& p : rows) {
    const auto& r = p.row;
    std::vector<Cell> row{r.workload, model::sizes_label(r.sizes), r.schedule, r.median_us};
    if (predicted) row.emplace_back(p.predicted_us ? Cell(*p.predicted_us) : Cell(std::string("-")));
    for (Cell c : std::vector<Cell>{r.min_us, r.max_us, stages_text(r), r.verified,
                                    fmt::format("{:.3g}", r.max_abs_error)})
      row.push_back(std::move(c));
    t.add(std::move(row));
  }
  if (a.format == Format::table) {
    fmt::print("backend {}, {} ranks\n", a.backend, ranks);
    if (a.schedule == "best")
      for (const auto& p : rows)
        fmt::print("best on {} by the cost model: {} {} (predicted {:.1f} us, measured {:.1f} us)\n", a.topology,
                   p.row.workload, p.row.schedule, p.predicted_us.value_or(0.0), p.row.median_us);
  }
  print(t, a.format);
}

// ---- running -----------------------------------------------------------------

int exit_code_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const UserError&) {
    return kExitUserError;
  } catch (const RunFailure&) {
    return kExitRunFailed;
  } catch (...) {
    return kExitInternal;
  }
}

[[noreturn]] void quiet_exit(std::unique_ptr<exec::Backend>& backend, int code) {
  std::fflush(stdout);
  backend.reset();
  exec::finalize_mpi();
  std::exit(code);
}

// Every rank learns whether any failed; the lowest failing rank rethrows (and
// main reports it once), the others leave quietly with the same code.
void agree_on_failure(std::unique_ptr<exec::Backend>& backend, const std::exception_ptr& error) {
  std::vector<double> code{error ? static_cast<double>(exit_code_of(error)) : 0.0};
  std::vector<double> first{error ? static_cast<double>(backend->world_rank()) : 1e9};
  backend->host_allreduce(code, model::ReduceOp::max);
  backend->host_allreduce(first, model::ReduceOp::min);
  if (code[0] == 0) return;
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
  backend.abort_job(dynamic_cast<const UserError*>(&e) != nullptr ? kExitUserError : kExitInternal);
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
        rows.push_back(exec::run_schedule(backend, s, j.point.sizes, refs, options));
        watchdog.kick();
      }
    }
  } catch (const std::exception& e) {
    abort_from_rank(backend, e);
  }
  return rows;
}

void run_command(const RunArgs& a) {
  if (a.backend == "cpu" && !exec::launched_by_mpirun() && a.ranks > 0) {
    exec::RunOptions checked;
    (void)prepare_jobs(a, checked, a.ranks);  // bad input is reported once, before any rank starts
    exec::relaunch_under_mpirun(a.ranks);
  }
  auto backend = exec::make_backend(a.backend);
  exec::RunOptions options;
  std::vector<Job> jobs;
  std::exception_ptr error;
  try {
    if (a.ranks > 0 && a.ranks != backend->world_size())
      throw UserError("--ranks " + std::to_string(a.ranks) + " but the job has " +
                      std::to_string(backend->world_size()) + " ranks; drop --ranks inside mpirun");
    jobs = prepare_jobs(a, options, backend->world_size());
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
  if (backend->world_rank() == 0) print_rows(with_predictions(rows, jobs), a, backend->world_size());
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
  cmd->add_option("--backend", args->backend, "Backend: cpu (MPI) or cuda")->capture_default_str();
  cmd->add_option("--ranks", args->ranks,
                  "Ranks to start with mpirun (outside mpirun); default: the ranks mpirun gave, or 1")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--schedule", args->schedule,
                  "Schedule name, all, or best (the one the cost model predicts fastest on --topology)")
      ->capture_default_str();
  cmd->add_option("--topology", args->topology,
                  "Topology (name or YAML, e.g. cpu-local from `coconet calibrate`): predict each schedule on it "
                  "and print the prediction next to the measurement; needed by --schedule best");
  cmd->add_option("--set", args->sets,
                  "NAME=VALUE: a workload size (e.g. N=1048576, N=4K, N=1e6) or scalar (e.g. lr=0.1), or a "
                  "value of the --topology (dotted, e.g. gpu.hbm_GBps=4000); repeatable");
  cmd->add_option("--iters", args->iters, "Timed steps (default: the experiment's, else 10)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", args->warmup, "Untimed steps first (default 2)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--timeout", args->timeout_s, "Seconds without progress before the job is aborted")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  add_format_option(cmd, args->format);
  cmd->callback([args] { run_command(*args); });
}

}  // namespace coconet::cli
