// Workload loading with --set overrides.
#include "cli/workload_args.h"

#include "model/set_flag.h"
#include "model/catalog.h"
#include "model/parse.h"

namespace coconet::cli {

model::Program load_workload(const std::string& name_or_path, const std::vector<std::string>& sets) {
  model::Program p = model::load_program(model::resolve_workload(name_or_path));
  for (const auto& s : sets) {
    const auto [k, v] = model::parse_assignment(s);
    model::override_value(p, k, v);
  }
  return p;
}

}  // namespace coconet::cli
