// Published whole-step throughputs (validation/reference/*.yaml, the
// `training_steps` list) and the model's prediction for each (moved from
// step/: validation reads step, not the other way): the spec's
// layout, with the choices the publication leaves open (micro-batch, pipeline
// schedule) searched, and the best compared.
#pragma once

#include <string>
#include <vector>

#include "step/compose.h"

namespace coconet::validation {

struct PublishedStep {
  std::string model;  // models/NAME.yaml
  std::string topology;
  int nodes = 0;
  double tflops_per_gpu = 0;
  bool search_micro_batch = false;
  bool search_schedule = false;
  std::string source;
};

// Every `training_steps` entry of the YAML text; throws UserError naming file:line.
[[nodiscard]] std::vector<PublishedStep> parse_published_steps(const std::string& yaml_text,
                                                               const std::string& origin);

struct StepComparison {
  PublishedStep published;
  step::StepReport predicted;  // the best layout searched
  [[nodiscard]] double error() const { return predicted.eq3_tflops_per_gpu / published.tflops_per_gpu - 1.0; }
};

[[nodiscard]] StepComparison compare_published(const PublishedStep& p);

}  // namespace coconet::validation
