// coconet tune: like predict, over the whole knob space (chunks, algorithm,
// protocol, channels); `--out` writes the best schedule of each point with its
// knobs as YAML (results.h: best_schedules_yaml).
#include <memory>
#include <optional>

#include <fmt/core.h>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/predict_report.h"
#include "cli/results.h"
#include "model/safe_write.h"

namespace coconet::cli {

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
    const auto reports = predict_points(a->predict, /*tune=*/true);
    print_point_reports(reports, a->format, "tune");
    if (!a->out.empty()) {
      model::write_file_safely(a->out, best_schedules_yaml(reports), "--out");
      fmt::print(stderr, "wrote {} ({} schedule(s))\n", a->out, reports.size());
    }
  });
}

}  // namespace coconet::cli
