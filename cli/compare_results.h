// `coconet compare` of a workload or experiment: the sides (each topology at
// each node count), each predicted, and the JSON `compare --format json`
// prints; shared by the command and the Python module. A model's sides are
// cli/step_results.h's.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/results.h"
#include "model/experiment.h"
#include "sim/predict.h"

namespace coconet::cli {

struct Side {
  std::string name;  // "dgx-h100", or "dgx-h100 x2" when several node counts are given
  std::optional<std::string> topology;
  std::optional<int> nodes;
  std::vector<sim::PointReport> reports;
};

// Each topology at each node count (none given: the experiment's); a UserError under two sides.
[[nodiscard]] std::vector<Side> compare_sides(const std::vector<std::string>& topologies,
                                              const std::vector<int>& nodes);
// Predicts every side with `shared`'s target, ranks, sets and backend; every side must have the same points.
void predict_sides(const model::Experiment& e, const PredictArgs& shared, std::vector<Side>& sides);
// Tagged "compare": each point's best schedule on each side and its ratio to the first side's.
[[nodiscard]] nlohmann::json compare_json(const std::vector<Side>& sides);

}  // namespace coconet::cli
