// What predict, tune and simulate share: building the prediction options from
// their common flags, and printing per-point reports (table, json or csv).
// Defined in cmd_predict.cpp.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/format.h"
#include "sim/predict.h"

namespace coconet::cli {

// The flags predict, tune and simulate share: the target, topology, nodes,
// ranks (the world size), --set for topology fields, workload sizes and
// scalars, and the backend the prediction is for.
struct PredictArgs {
  std::optional<std::string> target;
  std::optional<std::string> topology;
  std::optional<int> nodes;
  std::optional<int> ranks;
  std::vector<std::string> sets;
  std::optional<std::string> backend;

  [[nodiscard]] sim::PredictOptions options() const;
};

// Registers the flags above on `cmd`; `target_required` for simulate.
void add_predict_flags(CLI::App* cmd, PredictArgs& a, bool target_required = false);

// The reports as one coconet.<kind>/1 object ("predict" or "tune").
[[nodiscard]] nlohmann::json point_reports_json(const std::vector<sim::PointReport>& reports, const std::string& kind);

// Prints the reports in `f`; tune's ("tune") show every knob in the table.
void print_point_reports(const std::vector<sim::PointReport>& reports, Format f, const std::string& kind);

}  // namespace coconet::cli
