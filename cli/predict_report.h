// What predict, tune and simulate share: building the prediction options from
// their common flags, and printing per-point reports (table, json or csv).
// Defined in cmd_predict.cpp.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/format.h"
#include "sim/predict.h"

namespace coconet::cli {

[[nodiscard]] sim::PredictOptions predict_options(const std::optional<std::string>& topology,
                                                  const std::optional<int>& nodes,
                                                  const std::vector<std::string>& sets);

void print_point_reports(const std::vector<sim::PointReport>& reports, Format f, bool show_all_knobs);

}  // namespace coconet::cli
