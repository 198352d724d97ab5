// coconet tune: like predict, over the whole knob space (chunks, algorithm,
// protocol, channels); `--out` writes the best schedule with its knobs as YAML.
#include <memory>
#include <optional>

#include <fmt/core.h>

#include "cli/commands.h"
#include "cli/predict_report.h"
#include "model/catalog.h"
#include "cli/format.h"
#include "model/error.h"
#include "model/points.h"
#include "model/schedule_file.h"
#include "model/safe_write.h"
#include "sim/predict.h"
#include "sim/trace.h"

namespace coconet::cli {

namespace {

// One YAML document per point, separated by `---`, each naming its point as
// data (model/schedule_file.h) so that run and simulate can pick theirs.
std::string best_yaml(const std::vector<sim::PointReport>& reports) {
  std::string out;
  for (const auto& r : reports) {
    if (!out.empty()) out += "---\n";
    out += fmt::format("# best for {} {} on {} ({} node(s), {} ranks per group): {:.1f} us predicted, {:.2f}x over {}\n",
                       r.workload, r.sizes, r.topology, r.nodes, r.ranks, r.best().time_us, r.speedup, r.baseline);
    out += model::point_yaml(model::SchedulePoint{r.workload, r.bindings, r.ranks, r.groups, r.topology, r.nodes,
                                                  r.backend, r.best().time_us});
    out += model::to_yaml(r.best_schedule());
    if (!out.ends_with('\n')) out += '\n';
  }
  return out;
}

}  // namespace

void register_tune(CLI::App& app) {
  auto* cmd = app.add_subcommand("tune", "Search every schedule x knob setting; write the best schedule as YAML");
  struct Args {
    PredictArgs predict;
    std::string out;
    Format format = Format::table;
  };
  auto a = std::make_shared<Args>();
  add_predict_flags(cmd, a->predict);
  cmd->add_option("--out,-o", a->out, "Write the best schedule (with its knobs) to this YAML file");
  add_format_option(cmd, a->format);
  cmd->callback([a] {
    if (!a->out.empty()) model::check_output_file(a->out, "--out");  // before any work
    const model::Experiment e = model::experiment_from_argument(a->predict.target);
    sim::PredictOptions o = a->predict.options();
    o.tune_space = true;
    const auto reports = sim::predict_experiment(e, o);
    print_point_reports(reports, a->format, "tune");
    if (!a->out.empty()) {
      model::write_file_safely(a->out, best_yaml(reports), "--out");
      fmt::print(stderr, "wrote {} ({} schedule(s))\n", a->out, reports.size());
    }
  });
}

}  // namespace coconet::cli
