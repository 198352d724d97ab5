// Our own wording for CLI11's errors (see messages.h). CLI11 reports a few
// kinds of error; each is rewritten from what it carries (the option's name,
// the value) and what the option says of itself (its type, its description).
#include "cli/messages.h"

#include <algorithm>
#include <regex>
#include <sstream>

#include <fmt/core.h>

#include "cli/build_info.h"
#include "model/catalog.h"

namespace coconet::cli {

namespace {

std::string joined(const std::vector<std::string>& v, const std::string& last_sep) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i)
    out += (i == 0 ? "" : i + 1 == v.size() ? last_sep : ", ") + v[i];
  return out;
}

std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> out;
  for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) out.push_back(sub->get_name());
  return out;
}

// The subcommand being parsed when the error came (nullptr: the top level).
const CLI::App* current_command(const CLI::App& app) {
  for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (sub->parsed()) return sub;
  return nullptr;
}

const CLI::Option* find_option(const CLI::App* cmd, const std::string& name) {
  if (cmd == nullptr) return nullptr;
  for (const auto* o : cmd->get_options([](const CLI::Option*) { return true; }))
    if (o->check_name(name) || o->get_name() == name) return o;
  return nullptr;
}

std::vector<std::string> flag_names(const CLI::App* cmd) {
  std::vector<std::string> out;
  if (cmd == nullptr) return out;
  for (const auto* o : cmd->get_options([](const CLI::Option*) { return true; }))
    for (const auto& l : o->get_lnames()) out.push_back("--" + l);
  return out;
}

std::string what_it_takes(const CLI::Option* o) {
  if (o == nullptr) return "a value of another form";
  const std::string type = o->get_type_name();
  if (type == "INT" || type == "UINT") return "a whole number such as 2";
  if (type == "FLOAT") return "a number such as 0.5";
  if (type.find('|') != std::string::npos) return "one of " + type;
  return "a value: " + o->get_description();
}

std::string help_hint(const CLI::App* cmd) {
  return cmd == nullptr ? "see `coconet --help`" : fmt::format("see `coconet {} --help`", cmd->get_name());
}

std::string message(const CLI::App& app, const CLI::Error& e, const std::string& first_arg) {
  const CLI::App* cmd = current_command(app);
  const std::string what = e.what();
  const std::string name = e.get_name();
  std::smatch m;
  if (name == "RequiredError" && what.find("subcommand") != std::string::npos) {
    const auto commands = command_names(app);
    if (!first_arg.empty() && first_arg[0] != '-') {
      const std::string near = nearest(first_arg, commands);
      return fmt::format("unknown command '{}'{}; the commands are {}", first_arg,
                         near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near), joined(commands, " and "));
    }
    return fmt::format("name a command: {} ({})", joined(commands, " or "), help_hint(nullptr));
  }
  if (name == "RequiredError" && std::regex_match(what, m, std::regex("(.+) is required"))) {
    const CLI::Option* o = find_option(cmd, m[1]);
    return fmt::format("{} is required{}", m[1].str(), o ? ": " + o->get_description() : std::string());
  }
  if (name == "ConversionError" && std::regex_match(what, m, std::regex("Could not convert: (\\S+) = (.*)"))) {
    const CLI::Option* o = find_option(cmd, m[1]);
    return fmt::format("{} {}: expected {}", m[1].str(), m[2].str(), what_it_takes(o));
  }
  if (what.find("not expected: ") != std::string::npos) {
    const auto colon = what.find(": ");
    const std::string extras = colon == std::string::npos ? what : what.substr(colon + 2);
    // CLI11 lists the extras in no useful order ("dgx-a100 --topolgy"): the
    // first that looks like a flag (its name before any '=') is the one to suggest for.
    std::string near;
    std::istringstream words(extras);
    for (std::string w; near.empty() && words >> w;)
      if (w.starts_with("-")) near = nearest(w.substr(0, w.find('=')), flag_names(cmd));
    return fmt::format("unexpected {} for `coconet{}`{}; {}", extras, cmd ? " " + cmd->get_name() : "",
                       near.empty() ? "" : fmt::format(" (did you mean {}?)", near), help_hint(cmd));
  }
  if (name == "ArgumentMismatch" && std::regex_search(what, m, std::regex("^(\\S+?):"))) {
    return fmt::format("{} takes one value; give it once ({})", m[1].str(), help_hint(cmd));
  }
  return fmt::format("{} ({})", what, help_hint(cmd));
}

}  // namespace

std::string version_text() {
  return fmt::format("coconet {}\ncommit {}\nbuild type {}\nCUDA {}\nNCCL {}\nMPI {}", build_info::kVersion,
                     build_info::kCommit, build_info::kBuildType, build_info::kCuda, build_info::kNccl,
                     build_info::kMpi);
}

void configure_messages(CLI::App& app, int argc, char** argv) {
  const std::string first = argc > 1 ? argv[1] : "";
  app.set_version_flag("--version", version_text(), "Print the version, the commit, the build type and the "
                                                    "CUDA, NCCL and MPI versions built with");
  app.failure_message([first](const CLI::App* a, const CLI::Error& e) {
    return fmt::format("coconet: error: {}\n", message(*a, e, first));
  });
}

CLI::Validator at_least(long min) {
  return CLI::Validator(
      [min](std::string& s) -> std::string {
        long v = 0;
        std::size_t used = 0;
        try {
          v = std::stol(s, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != s.size() || used == 0) return fmt::format("needs a whole number of at least {}, got '{}'", min, s);
        if (v < min) return fmt::format("needs a whole number of at least {}, got {}", min, s);
        return "";
      },
      "", fmt::format("at least {}", min));
}

CLI::Validator one_of(std::vector<std::string> names) {
  return CLI::Validator(
      [names](std::string& s) -> std::string {
        if (std::find(names.begin(), names.end(), s) != names.end()) return "";
        const std::string near = nearest(s, names);
        return fmt::format("expected {}, got '{}'{}", joined(names, " or "), s,
                           near.empty() ? "" : fmt::format(" (did you mean {}?)", near));
      },
      "", "one of");
}

std::string nearest(const std::string& word, const std::vector<std::string>& choices) {
  return model::nearest_name(word, choices);
}

}  // namespace coconet::cli
