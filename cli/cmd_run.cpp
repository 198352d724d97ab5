// coconet run: executes schedules of a workload (or of every workload of an
// experiment) for real on a backend, times them and verifies their outputs.
//
// Outside mpirun, `--ranks N` starts `mpirun -np N` on this same command line
// (with the flags a small machine or a container needs), so nobody has to
// know mpirun. Inside it, each rank prepares the same jobs; errors found while
// preparing (bad input, a rank count the program cannot use, sizes that do
// not fit) are the same on every rank and are reported once. A rank that
// fails while running reports itself and aborts the whole job; a watchdog
// aborts a job that stops making progress.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/workload_args.h"
#include "exec/backend.h"
#include "exec/mpi_session.h"
#include "exec/runtime.h"
#include "exec/watchdog.h"
#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/experiment.h"
#include "model/parse.h"

namespace coconet::cli {
namespace {

// Default seconds without progress (one schedule measured) before the watchdog aborts the job.
constexpr double kDefaultTimeoutS = 600.0;
// Exit codes of main.cpp: 1 a run failed, 2 bad input, 3 internal error.
constexpr int kExitRunFailed = 1;
constexpr int kExitUserError = 2;
constexpr int kExitInternal = 3;

struct RunArgs {
  std::string target;
  std::string backend = "cpu";
  int ranks = 0;
  std::string schedule = "all";
  std::vector<std::string> sets;
  int iters = -1;
  int warmup = -1;
  double timeout_s = kDefaultTimeoutS;
  Format format = Format::table;
};

struct Job {
  model::Program program;
  model::Bindings sizes;
  std::vector<model::Schedule> schedules;
};

// ---- launching under mpirun ----------------------------------------------

std::optional<std::string> find_on_path(const std::string& name) {
  if (const char* forced = std::getenv("COCONET_MPIRUN")) return std::string(forced);
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

std::vector<std::string> own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  std::string cur;
  for (char c : all) {
    if (c == '\0') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  return args;
}

[[noreturn]] void relaunch_under_mpirun(int ranks) {
  const auto mpirun = find_on_path("mpirun");
  if (!mpirun)
    throw UserError("--ranks " + std::to_string(ranks) +
                    " starts the ranks with mpirun, which is not on PATH; install Open MPI "
                    "(e.g. apt-get install openmpi-bin) or set COCONET_MPIRUN to its path");
  char self[4096] = {};
  const auto n = readlink("/proc/self/exe", self, sizeof self - 1);
  auto args = own_command_line();
  if (n <= 0 || args.empty()) throw UserError("cannot find this program's own path to start it under mpirun");
  std::vector<std::string> argv{*mpirun, "-np", std::to_string(ranks), "--oversubscribe", "--bind-to", "none",
                                // Shared memory between local ranks without ptrace (containers forbid it).
                                "--mca", "btl", "self,vader", "--mca", "btl_vader_single_copy_mechanism", "none",
                                // Ranks waiting in MPI yield the core: a small machine runs more threads than cores.
                                "--mca", "mpi_yield_when_idle", "1"};
  if (geteuid() == 0) argv.emplace_back("--allow-run-as-root");
  argv.emplace_back(self);
  argv.insert(argv.end(), args.begin() + 1, args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::fflush(stdout);
  execv(mpirun->c_str(), cargv.data());
  throw UserError("could not start " + *mpirun + ": " + std::string(std::strerror(errno)));
}

// ---- preparing the jobs ----------------------------------------------------

bool is_workload(const std::string& target) {
  try {
    (void)model::resolve_workload(target);
    return true;
  } catch (const UserError&) {
    return false;
  }
}

std::vector<model::Schedule> select_schedules(const model::Program& p, const std::string& which) {
  auto all = model::enumerate_schedules(p);
  if (which == "all") return all;
  if (which == "best")
    throw UserError("--schedule best needs the cost model's prediction for the machine at hand, which "
                    "`run` does not have for the cpu backend yet; use --schedule all (every schedule, "
                    "measured) or a schedule's name");
  std::string names;
  for (auto& s : all) {
    if (s.name() == which) return {std::move(s)};
    names += "\n  " + s.name();
  }
  throw UserError("workload '" + p.name + "' has no schedule named '" + which + "'; its schedules:" + names);
}

void apply_size_sets(model::Bindings& sizes, const std::vector<std::string>& sets) {
  for (const auto& s : sets) {
    const auto [k, v] = model::parse_assignment(s);
    if (sizes.count(k) != 0) sizes[k] = std::stoll(v);
  }
}

std::vector<Job> prepare_jobs(const RunArgs& a, exec::RunOptions& options) {
  std::vector<Job> jobs;
  if (is_workload(a.target)) {
    Job j{load_workload(a.target, a.sets), {}, {}};
    j.sizes = j.program.bind();
    jobs.push_back(std::move(j));
  } else {
    const auto e = model::load_experiment(model::resolve_experiment(a.target));
    options.iters = e.iters;
    options.warmup = e.warmup;
    for (const auto& run : e.workloads) {
      auto p = load_workload(run.workload, a.sets);
      for (const auto& [k, v] : run.scalars) p.scalars[k] = v;
      for (auto sizes : model::size_points(run, p)) {
        apply_size_sets(sizes, a.sets);
        jobs.push_back(Job{p, sizes, {}});
      }
    }
  }
  if (a.iters > 0) options.iters = a.iters;
  if (a.warmup >= 0) options.warmup = a.warmup;
  for (auto& j : jobs) j.schedules = select_schedules(j.program, a.schedule);
  return jobs;
}

// ---- printing --------------------------------------------------------------

std::string stages_text(const exec::RunRow& r) {
  std::string s;
  for (const auto& st : r.stages) s += fmt::format("{}{} {:.1f}", s.empty() ? "" : " | ", st.name, st.median_us);
  return s;
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

void print_rows(const std::vector<exec::RunRow>& rows, const RunArgs& a, int ranks) {
  if (a.format == Format::json) {
    nlohmann::json out{{"backend", a.backend}, {"ranks", ranks}, {"rows", nlohmann::json::array()}};
    for (const auto& r : rows) out["rows"].push_back(row_json(r));
    fmt::print("{}\n", out.dump(2));
    return;
  }
  Table t;
  t.columns = {"workload", "sizes", "schedule", "median_us", "min_us", "max_us", "stages_us", "verified",
               "max_abs_error"};
  for (const auto& r : rows)
    t.add({r.workload, exec::sizes_text(r.sizes), r.schedule, r.median_us, r.min_us, r.max_us, stages_text(r),
           r.verified, fmt::format("{:.3g}", r.max_abs_error)});
  if (a.format == Format::table) fmt::print("backend {}, {} ranks\n", a.backend, ranks);
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
    for (auto& j : jobs) {
      backend.set_groups(j.program.groups());
      const auto refs = exec::compute_references(backend, j.program, j.sizes, options);
      watchdog.kick();
      for (const auto& s : j.schedules) {
        rows.push_back(exec::run_schedule(backend, s, j.sizes, refs, options));
        watchdog.kick();
      }
    }
  } catch (const std::exception& e) {
    abort_from_rank(backend, e);
  }
  return rows;
}

void run_command(const RunArgs& a) {
  if (a.backend == "cpu" && !exec::launched_by_mpirun() && a.ranks > 0) relaunch_under_mpirun(a.ranks);
  auto backend = exec::make_backend(a.backend);
  exec::RunOptions options;
  std::vector<Job> jobs;
  std::exception_ptr error;
  try {
    if (a.ranks > 0 && a.ranks != backend->world_size())
      throw UserError("--ranks " + std::to_string(a.ranks) + " but the job has " +
                      std::to_string(backend->world_size()) + " ranks; drop --ranks inside mpirun");
    jobs = prepare_jobs(a, options);
    for (auto& j : jobs) {
      backend->set_groups(j.program.groups());
      exec::check_memory(*backend, j.program, j.schedules, j.sizes, options);
    }
  } catch (...) {
    error = std::current_exception();
  }
  agree_on_failure(backend, error);
  const auto rows = run_jobs(*backend, jobs, options, a.timeout_s);
  const exec::RunRow* failed = nullptr;
  for (const auto& r : rows)
    if (!r.verified && failed == nullptr) failed = &r;
  if (backend->world_rank() == 0) print_rows(rows, a, backend->world_size());
  if (failed == nullptr) {
    backend.reset();
    return;
  }
  if (backend->world_rank() != 0) quiet_exit(backend, kExitRunFailed);
  throw RunFailure(failed->workload + " " + failed->schedule + " at " + exec::sizes_text(failed->sizes) +
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
  cmd->add_option("--schedule", args->schedule, "Schedule name, all, or best")->capture_default_str();
  cmd->add_option("--set", args->sets, "Override a size or scalar, NAME=VALUE (repeatable)");
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
