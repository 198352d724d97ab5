// coconet list: the workloads, experiments, topologies and models (whole
// training steps for `coconet step`) found in the data root,
// as text, a CSV of (kind, name) or a coconet.list/1 JSON object.
#include <fmt/core.h>

#include <memory>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_out.h"
#include "model/catalog.h"

namespace coconet::cli {

namespace {

struct Kind {
  const char* title;
  const char* folder;
};

constexpr Kind kKinds[] = {{"workloads", "workloads"},
                           {"experiments", "configs/experiments"},
                           {"topologies", "configs/topologies"},
                           {"models", "models"}};

void print_text() {
  for (const auto& k : kKinds) {
    fmt::print("{} ({}/{}):\n", k.title, model::data_root(), k.folder);
    for (const auto& n : model::list_names(k.folder)) fmt::print("  {}\n", n);
  }
}

Table names_table() {
  Table t{{"kind", "name"}};
  for (const auto& k : kKinds)
    for (const auto& n : model::list_names(k.folder)) t.add({std::string(k.title), n});
  return t;
}

nlohmann::json names_json() {
  nlohmann::json j{{"root", model::data_root()}};
  for (const auto& k : kKinds) j[k.title] = model::list_names(k.folder);
  return tagged("list", std::move(j));
}

}  // namespace

void register_list(CLI::App& app) {
  auto* cmd = app.add_subcommand("list", "List the workloads, experiments, topologies and models (for `coconet step`) found");
  auto format = std::make_shared<Format>(Format::table);
  add_format_option(cmd, *format);
  cmd->callback([format] {
    if (*format == Format::table)
      print_text();
    else if (*format == Format::csv)
      print(names_table(), Format::csv);
    else
      print_json(names_json());
  });
}

}  // namespace coconet::cli
