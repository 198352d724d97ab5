// coconet compare: one experiment predicted on two or more sides (each
// --topology, times each --nodes when several are given), side by side: the
// best schedule of each point on each side, its time, and its ratio to the
// first side (the reference; ratio = time / reference time, so above 1 is
// slower). Every side shares the experiment, --ranks, --set and --backend.
// Given a model (models/*.yaml), each side is the model's training step
// there (cli/step_results.h), with --search each side's best layout.
#include <fmt/core.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_out.h"
#include "cli/messages.h"
#include "cli/compare_results.h"
#include "cli/predict_report.h"
#include "cli/step_results.h"
#include "model/error.h"
#include "model/points.h"
#include "sim/predict.h"
#include "step/spec.h"

namespace coconet::cli {

namespace {

struct CompareArgs {
  PredictArgs shared;  // target, --ranks, --set, --backend (topology and nodes come from the sides)
  std::vector<std::string> topologies;
  std::vector<int> nodes;
  bool search = false;  // a model's sides: each its best layout
  Format format = Format::table;
};

Table compare_table(const std::vector<Side>& sides) {
  Table t{{"workload", "sizes", "side", "nodes", "ranks", "best", "time_us", "ratio"}};
  for (std::size_t i = 0; i < sides.front().reports.size(); ++i) {
    const double reference_us = sides.front().reports[i].best().time_us;
    for (const auto& s : sides) {
      const sim::PointReport& r = s.reports[i];
      t.add({r.workload, r.sizes, s.name, std::int64_t(r.nodes), std::int64_t(r.ranks), r.best().name,
             r.best().time_us, r.best().time_us / reference_us});
    }
  }
  return t;
}

// A warning when a point runs on different rank counts on different sides.
void warn_when_ranks_differ(const std::vector<Side>& sides) {
  for (std::size_t i = 0; i < sides.front().reports.size(); ++i)
    for (const auto& s : sides)
      if (s.reports[i].ranks != sides.front().reports[i].ranks) {
        fmt::print(stderr, "coconet: warning: {} runs on {} ranks on {} but {} on {}: the ratio compares different "
                           "rank counts\n",
                   s.reports[i].workload, sides.front().reports[i].ranks, sides.front().name, s.reports[i].ranks,
                   s.name);
        return;
      }
}

Table compare_steps_table(const std::vector<StepSide>& sides) {
  Table t{{"side", "nodes", "gpus", "step_ms", "ratio", "tokens_per_s", "model_tflops_per_gpu", "mfu", "memory_GB",
           "fits", "layout"}};
  const double reference = sides.front().outcome.reports.front().step_us;
  for (const auto& s : sides) {
    const step::StepReport& r = s.outcome.reports.front();
    t.add({s.name, std::int64_t(s.outcome.topology.nodes), std::int64_t(s.outcome.topology.total_gpus()),
           r.step_us / kUsPerMs, r.step_us / reference, r.tokens_per_s, r.model_tflops_per_gpu, r.mfu,
           r.memory.total_GB(), r.memory.fits(), layout_label(r)});
  }
  return t;
}

// `compare MODEL`: the model's step on each side.
void run_steps(const CompareArgs& a) {
  if (a.shared.ranks || a.shared.backend)
    throw UserError(fmt::format("compare {}: a model's step runs on every GPU of each side: --ranks and --backend "
                                "are for workloads and experiments; give --nodes",
                                *a.shared.target));
  StepRequest base;
  base.model = *a.shared.target;
  base.sets = a.shared.sets;
  base.search = a.search;
  const std::vector<StepSide> sides = compare_steps(base, a.topologies, a.nodes);
  if (const std::string note = gpu_count_note(sides); !note.empty() && a.format != Format::json)
    fmt::print(stderr, "coconet: note: {}\n", note);
  if (a.format == Format::json) return print_json(compare_steps_json(sides));
  if (a.format == Format::table)
    fmt::print("# {} step on each side{}; ratio = step time / step time on {}\n", sides.front().outcome.spec.name,
               a.search ? " (each side's best layout)" : "", sides.front().name);
  print(compare_steps_table(sides), a.format);
}

void run(const CompareArgs& a) {
  if (a.shared.target && step::names_a_model(*a.shared.target)) return run_steps(a);
  if (a.search) throw UserError("--search compares a model's best layouts: give a model (models/*.yaml)");
  const model::Experiment e = model::experiment_from_argument(a.shared.target);
  std::vector<Side> sides = compare_sides(a.topologies, a.nodes);
  predict_sides(e, a.shared, sides);
  warn_when_ranks_differ(sides);
  if (a.format == Format::json) return print_json(compare_json(sides));
  if (a.format == Format::table)
    fmt::print("# best schedule per point on each side; ratio = time / time on {}\n",
               sides.front().name);
  print(compare_table(sides), a.format);
}

}  // namespace

void register_compare(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "compare",
      "Predict one experiment on several topologies or node counts, side by side, with ratios");
  auto a = std::make_shared<CompareArgs>();
  cmd->add_option("target", a->shared.target,
                  "Experiment (configs/experiments/ or a YAML file), a workload, or a model (models/: its "
                  "training step on each side); default: the embedded default");
  cmd->add_option("--topology,-t", a->topologies,
                  "A side: topology name or YAML file (repeatable)");
  cmd->add_option("--nodes,-N", a->nodes,
                  "Node counts to compare (repeatable; each topology at each)")
      ->check(at_least(1));
  cmd->add_option("--ranks,-r", a->shared.ranks,
                  "Ranks in all, on every side (default: as predict)")
      ->check(at_least(1));
  cmd->add_option("--set", a->shared.sets,
                  "KEY=VALUE on every side, as predict takes it (repeatable)");
  cmd->add_option("--backend", a->shared.backend,
                  "The backend the predictions are for: cuda or cpu")
      ->check(one_of({"cuda", "cpu"}))
      ->type_name("cuda|cpu");
  cmd->add_flag("--search", a->search, "With a model: each side's best layout (coconet step --search)");
  add_format_option(cmd, a->format);
  cmd->callback([a] { run(*a); });
}

}  // namespace coconet::cli
