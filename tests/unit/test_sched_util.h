// Helpers shared by the schedule tests: the repository's workloads and small
// sizes for them (ragged ones included) so the interpreter runs in microseconds.
#pragma once

#include <string>
#include <vector>

#include "model/error.h"
#include "model/parse.h"
#include "model/program.h"
#include "tests/paths.h"

namespace coconet::model::sched_test {

inline const std::vector<std::string>& workload_names() {
  static const std::vector<std::string> names{
      "sgd", "adam", "lamb", "megatron_mlp", "megatron_attention", "gpt3_pipeline"};
  return names;
}

inline Program workload(const std::string& name) {
  return load_program(coconet::test::source_root() + "/workloads/" + name + ".yaml");
}

// Small sizes for a workload: one that no P in {2, 3, 4, 8} divides (37 rows,
// 3 rows of 5 or 20 columns) and one that several divide.
inline std::vector<Bindings> small_sizes(const Program& p) {
  if (p.params.contains("N")) return {{{"N", 37}}, {{"N", 48}}};
  return {{{"B", 1}, {"S", 3}, {"H", 5}}, {{"B", 2}, {"S", 4}, {"H", 4}}};
}

}  // namespace coconet::model::sched_test
