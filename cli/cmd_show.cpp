// coconet show: a workload's program and every enumerated schedule with its stages.
#include <cstdio>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/workload_args.h"
#include "model/catalog.h"
#include "model/enumerate.h"

namespace coconet::cli {

namespace {

nlohmann::json schedule_json(const model::Schedule& s) {
  nlohmann::json stages = nlohmann::json::array();
  for (std::size_t i = 0; i < s.stages.size(); ++i) {
    const auto& st = s.stages[i];
    stages.push_back({{"code", st.code(s.program)},
                      {"statements", st.stmts},
                      {"overlap_group", s.overlap_of(static_cast<int>(i))}});
  }
  nlohmann::json history = nlohmann::json::array();
  for (const auto& d : s.history)
    history.push_back({{"op", model::op_of(d)}, {"args", model::args_of(d)}});
  return {{"name", s.name()},
          {"stages", stages},
          {"history", history},
          {"knobs",
           {{"chunks", s.knobs.chunks},
            {"algo", model::to_string(s.knobs.algo)},
            {"proto", model::to_string(s.knobs.proto)},
            {"channels", s.knobs.channels}}}};
}

void show_one(const std::string& workload, const std::vector<std::string>& sets, Format f) {
  const model::Program p = load_workload(workload, sets);
  const auto schedules = model::enumerate_schedules(p);
  if (f == Format::json) {
    nlohmann::json j = {{"workload", p.name}, {"program", model::to_string(p)}};
    j["schedules"] = nlohmann::json::array();
    for (const auto& s : schedules) j["schedules"].push_back(schedule_json(s));
    std::fputs((j.dump(2) + "\n").c_str(), stdout);
    return;
  }
  fmt::print("{}", model::to_string(p));
  fmt::print("  {} schedules:\n", schedules.size());
  for (const auto& s : schedules) fmt::print("{}", model::describe(s));
  fmt::print("\n");
}

}  // namespace

void register_show(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "show", "Print a workload's program and every schedule coconet enumerates for it");
  struct Args {
    std::vector<std::string> workloads;
    std::vector<std::string> sets;
    Format format = Format::table;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("workload", args->workloads,
                  "Workload names or YAML files (default: every workload in workloads/)");
  cmd->add_option("--set", args->sets, "Override a size or scalar: NAME=VALUE (repeatable)");
  add_format_option(cmd, args->format);
  cmd->callback([args] {
    auto names = args->workloads.empty() ? model::list_names("workloads") : args->workloads;
    if (args->format == Format::json && names.size() > 1) {
      std::fputs("[\n", stdout);
    }
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (args->format == Format::json && i) std::fputs(",\n", stdout);
      show_one(names[i], args->sets, args->format);
    }
    if (args->format == Format::json && names.size() > 1) std::fputs("]\n", stdout);
  });
}

}  // namespace coconet::cli
