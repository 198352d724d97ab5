// coconet list: the workloads, experiments and topologies found in the data root.
#include <fmt/core.h>

#include "cli/commands.h"
#include "model/catalog.h"

namespace coconet::cli {

void register_list(CLI::App& app) {
  auto* cmd = app.add_subcommand("list", "List the workloads, experiments and topologies found");
  cmd->callback([] {
    const auto show = [](const char* title, const char* folder) {
      fmt::print("{} ({}/{}):\n", title, model::data_root(), folder);
      for (const auto& n : model::list_names(folder)) fmt::print("  {}\n", n);
    };
    show("workloads", "workloads");
    show("experiments", "configs/experiments");
    show("topologies", "configs/topologies");
  });
}

}  // namespace coconet::cli
