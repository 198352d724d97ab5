// The small model the step tests price (8 layers, hidden 1024, tp 2, pp 2)
// and the DGX A100 cluster they price it on, shared by test_step and
// test_step_layout; the DGX H100 cluster and a substring check the model
// tests (test_step_models, test_step_moe) share.
#pragma once

#include <string>

#include "sim/topology.h"

namespace coconet::step::testing {

inline constexpr const char* kSmall = R"(name: small
model:
  layers: 8
  hidden: 1024
  heads: 16
  sequence: 1024
  vocabulary: 32000
training:
  micro_batch: 2
  global_batch: 64
parallel:
  tp: 2
  pp: 2
)";

inline sim::Topology a100(int nodes) { return sim::load_topology("dgx-a100", {{"nodes", std::to_string(nodes)}}); }
inline sim::Topology h100(int nodes) { return sim::load_topology("dgx-h100", {{"nodes", std::to_string(nodes)}}); }

inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace coconet::step::testing
