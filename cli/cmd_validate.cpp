// coconet validate: predict -> pick -> execute -> compare, written as a report
// (validation/validate.h, validation/report.h); --reference compares the model
// with the published figures instead (validation/reference.h). Outside mpirun,
// --ranks N starts N ranks; inputs are checked before any rank starts.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>

#include <fmt/core.h>
#include <unistd.h>

#include "cli/build_info.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_out.h"
#include "cli/messages.h"
#include "model/set_flag.h"
#include "model/error.h"
#include "plan/capabilities.h"

#ifdef COCONET_VALIDATION_HAVE_SIM
#include "validation/reference.h"
#include "validation/report.h"
#endif
#ifdef COCONET_VALIDATION_HAVE_RUN
#include "exec/backend.h"
#include "exec/nccl_tuner/per_call.h"
#include "exec/mpi_session.h"
#include "exec/mpirun.h"
#include "validation/mpirun.h"
#include "validation/spell_guard.h"
#include "validation/validate.h"
#endif

namespace coconet::cli {

namespace {

struct ValidateArgs {
  std::string experiment;
  std::string backend = "cpu";
  int ranks = 0;
  std::string topology;
  std::string out;
  bool reference = false;
  int iters = 0;
  int warmup = -1;
  int budget_s = -1;
  int wait_s = -1;
  bool oversubscribe = false;
  bool no_calibrate = false;
  std::vector<std::string> sets;
  Format format = Format::table;
};

#ifdef COCONET_VALIDATION_HAVE_SIM
Table metrics_table(const validation::Metrics& m) {
  Table t;
  t.precision = 3;
  t.columns = {"metric", "value"};
  t.add({std::string("rows"), std::int64_t{m.rows}});
  t.add({std::string("points"), std::int64_t{m.points}});
  t.add({std::string("mape_pct"), m.mape_pct});
  t.add({std::string("max_error_pct"), m.max_error_pct});
  t.add({std::string("spearman"), m.spearman ? *m.spearman : 0.0});
  t.add({std::string("top1_agreement"), m.fastest_in_predicted_set});
  t.add({std::string("regret_pct"), m.regret_pct});
  t.add({std::string("mean_regret_pct"), m.mean_regret_pct});
  return t;
}

void finish(const validation::ReportData& d, const validation::Metrics& m, const ValidateArgs& a) {
  validation::write_report(d, m, a.out);
  for (const auto& w : d.warnings) fmt::print(stderr, "warning: {}\n", w);  // the report has them too
  if (a.format == Format::table) fmt::print("{}\nwrote {}/report.html (and report.md, results.csv, results.json)\n", d.title, a.out);
  if (a.format == Format::json) print_json(tagged("validate", {{"report", a.out}, {"metrics", validation::metrics_json(m)}}));
  else print(metrics_table(m), a.format);
}

void reference_command(const ValidateArgs& a) {
  validation::check_report_target(a.out);  // before any work
  const std::string cmd = fmt::format("coconet validate --reference --out {}", a.out);
  const auto v = validation::validate_reference(validation::reference_dir(), cmd);
  finish(v.report, v.metrics, a);
}
#endif

#ifdef COCONET_VALIDATION_HAVE_RUN
std::string command_line(const ValidateArgs& a) {
  std::string s = "coconet validate";
  if (!a.experiment.empty()) s += " " + a.experiment;
  s += " --backend " + a.backend;
  if (a.ranks > 0) s += fmt::format(" --ranks {}", a.ranks);
  if (!a.topology.empty()) s += " --topology " + a.topology;
  if (a.iters > 0) s += fmt::format(" --iters {}", a.iters);
  if (a.warmup >= 0) s += fmt::format(" --warmup {}", a.warmup);
  if (a.budget_s >= 0) s += fmt::format(" --budget-s {}", a.budget_s);
  if (a.wait_s >= 0) s += fmt::format(" --wait-s {}", a.wait_s);
  if (a.oversubscribe) s += " --oversubscribe";
  if (a.no_calibrate) s += " --no-calibrate";
  for (const auto& set : a.sets) s += " --set " + set;
  return s + " --out " + a.out;
}

validation::ValidateOptions options_of(const ValidateArgs& a) {
  validation::ValidateOptions o;
  if (!a.experiment.empty()) o.experiment = a.experiment;
  if (!a.topology.empty()) o.topology = a.topology;
  if (a.iters > 0) o.iters = a.iters;
  if (a.warmup >= 0) o.warmup = a.warmup;
  if (a.budget_s >= 0) o.budget_s = a.budget_s;
  if (a.wait_s >= 0) o.wait_s = a.wait_s;
  o.calibrate_other_machine = !a.no_calibrate;
  const model::SetArgs sets = model::split_sets(a.sets);
  if (!sets.topology.empty())
    throw UserError(fmt::format("--set {}={}: validate measures this machine; put topology values in the file "
                                "--topology names",
                                sets.topology.front().first, sets.topology.front().second));
  o.sets = sets.workload;
  o.command = command_line(a);
  o.commit = build_info::kCommit;
  return o;
}

void validate_command(const ValidateArgs& a) {
  const auto o = options_of(a);
  validation::check_report_target(a.out);  // before any rank starts
  if (!exec::launched_by_mpirun()) {
    exec::check_cores(std::max(a.ranks, 1), a.oversubscribe, a.ranks <= 1);
    validation::check_validate_inputs(o, std::max(a.ranks, 1));  // reported once, before any rank starts
    if (a.ranks > 1) validation::run_under_mpirun(a.ranks, plan::parse_backend(a.backend));
  }
  if (a.backend == "cuda") {  // each collective call as the prediction resolved it (validation/validate.cpp)
    std::string why_not;
    if (!exec::nccl_tuner::name_plugin(why_not))
      fmt::print(stderr, "coconet: {}; NCCL makes its own choice for each collective call\n", why_not);
  }
  auto backend = exec::make_backend(a.backend);
  int unverified = 0;
  validation::run_guarded(*backend, [&] {
    if (a.ranks > 0 && a.ranks != backend->world_size())
      throw UserError(fmt::format("--ranks {} but the job has {} ranks; drop --ranks inside mpirun", a.ranks,
                                  backend->world_size()));
    const bool lead = backend->world_rank() == 0;
    exec::check_cores(backend->world_size(), a.oversubscribe, lead);
    validation::Progress progress(lead ? validation::progress_style() : validation::ProgressStyle::off, 0);
    const auto v = validation::run_validation(*backend, o, progress);
    unverified = v.unverified;
    if (lead) finish(v.report, v.metrics, a);
  });
  const bool lead = backend->world_rank() == 0;
  backend.reset();
  if (unverified > 0 && lead)
    throw RunFailure(fmt::format("{} schedule run(s) gave a wrong result (see 'verified' in {}/results.csv)",
                                 unverified, a.out));
  if (unverified > 0) {
    exec::finalize_mpi();
    std::exit(kExitRunFailed);
  }
}
#endif

void dispatch(const ValidateArgs& a) {
  if (a.reference) {
#ifdef COCONET_VALIDATION_HAVE_SIM
    reference_command(a);
    return;
#endif
  } else {
#ifdef COCONET_VALIDATION_HAVE_RUN
    validate_command(a);
    return;
#endif
  }
  throw UserError("coconet validate needs the simulator and the executor, absent from this build");
}

}  // namespace

void register_validate(CLI::App& app) {
  auto args = std::make_shared<ValidateArgs>();
  auto* cmd = app.add_subcommand(
      "validate", "Predict every schedule, run it, and report predictions next to measurements");
  cmd->add_option("experiment", args->experiment,
                  "Experiment name (configs/experiments/) or YAML path (default: cpu-local)");
  cmd->add_option("--backend", args->backend, "Backend to measure on: cpu (MPI) or cuda")->capture_default_str()
      ->check(one_of({"cpu", "cuda"}))
      ->type_name("cpu|cuda");
  cmd->add_option("--ranks", args->ranks, "Ranks to start with mpirun (outside mpirun); default: mpirun's, or 1")
      ->check(at_least(1));
  cmd->add_option("--topology", args->topology,
                  "Topology to predict with (name or YAML path); default: calibrate this machine first");
  cmd->add_flag("--no-calibrate", args->no_calibrate,
                "Predict with --topology as it is even when it was calibrated on another machine (default: calibrate "
                "this machine into $XDG_CACHE_HOME/coconet, else ~/.cache/coconet, first and predict with that)");
  cmd->add_option("--out", args->out, "Folder for the report (replaced atomically)")->required();
  cmd->add_flag("--reference", args->reference,
                "Compare the model with the published figures in validation/reference/ instead of running");
  cmd->add_option("--iters", args->iters, "Timed steps per schedule (default: the experiment's)")
      ->check(at_least(1));
  cmd->add_option("--warmup", args->warmup, "Untimed steps first (default: the experiment's)")
      ->check(at_least(0));
  cmd->add_option("--budget-s", args->budget_s,
                  fmt::format("Seconds, over the whole run, for extra rounds on points whose confidence intervals "
                              "are too wide to decide (default: {:g}; 0: none)",
                              validation::kDefaultBudgetS))
      ->check(at_least(0));
  cmd->add_option("--wait-s", args->wait_s,
                  fmt::format("Seconds, over the whole run, to wait out slow spells of a shared machine (the memory "
                              "reference {:.0f}% over its baseline around a point) and measure their points again "
                              "(default: {:g}; 0: flag them)",
                              validation::kGuardTolerance * 100, validation::kDefaultWaitS))
      ->check(at_least(0));
  cmd->add_flag("--oversubscribe", args->oversubscribe,
                "Allow more ranks than cores (refused by default: time slicing distorts the times; warned about)");
  cmd->add_option("--set", args->sets,
                  "Override a size or scalar of every workload that has it, NAME=VALUE (repeatable; the rules "
                  "of predict and run)");
  add_format_option(cmd, args->format);
  cmd->callback([args] { dispatch(*args); });
}

}  // namespace coconet::cli
