// Finding workloads, topologies and experiments by name or path.
#include "model/catalog.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/core.h>

#include "model/error.h"
#include "model/limits.h"
#include "model/safe_write.h"

#ifndef COCONET_SOURCE_ROOT
#define COCONET_SOURCE_ROOT "."
#endif

namespace coconet::model {

namespace fs = std::filesystem;

std::string data_root() {
  if (const char* env = std::getenv("COCONET_ROOT"); env && *env) return env;
  return COCONET_SOURCE_ROOT;
}

std::vector<std::string> list_names(const std::string& folder) {
  std::vector<std::string> out;
  const fs::path dir = fs::path(data_root()) / folder;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    if (it->path().extension() == ".yaml") out.push_back(it->path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string nearest_name(const std::string& word, const std::vector<std::string>& choices) {
  std::string best;
  std::size_t best_d = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const auto& c : choices) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& choices) {
  const std::string near = nearest_name(word, choices);
  return near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near);
}

std::string joined_names(const std::vector<std::string>& names) {
  if (names.empty()) return "(none)";
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return out;
}

namespace {

// Whether `p` is a regular file (following links). A name the system cannot
// look up (too long, a symbolic link loop, a folder without permission) is the
// user's input to fix, not coconet's failure: a UserError naming the path.
bool is_file(const fs::path& p, const std::string& kind) {
  std::error_code ec;
  const auto st = fs::status(p, ec);
  if (!ec || ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory) return fs::is_regular_file(st);
  throw UserError(fmt::format("{} '{}' cannot be looked up: {}", kind, p.string(), ec.message()));
}

std::string resolve(const std::string& name_or_path, const std::string& folder,
                    const std::string& kind) {
  const bool looks_like_path = name_or_path.find('/') != std::string::npos ||
                               name_or_path.ends_with(".yaml") || name_or_path.ends_with(".yml");
  if (looks_like_path) {
    if (is_file(name_or_path, kind)) return name_or_path;
    throw UserError(fmt::format("{} file '{}' does not exist", kind, name_or_path));
  }
  const fs::path p = fs::path(data_root()) / folder / (name_or_path + ".yaml");
  if (is_file(p, kind)) return p.string();
  const auto known = list_names(folder);
  throw UserError(fmt::format("unknown {} '{}'{}: known {}s are {} (in {}), or give a path to a "
                              ".yaml file",
                              kind, name_or_path, did_you_mean(name_or_path, known), kind, joined_names(known),
                              (fs::path(data_root()) / folder).string()));
}
}  // namespace

std::string resolve_workload(const std::string& n) { return resolve(n, "workloads", "workload"); }
std::string resolve_topology(const std::string& n) {
  return resolve(n, "configs/topologies", "topology");
}
std::string resolve_experiment(const std::string& n) {
  return resolve(n, "configs/experiments", "experiment");
}

std::string read_file(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
    throw UserError(fmt::format("cannot read '{}': {}", path, ec.message()));
  if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    throw UserError(fmt::format("cannot read '{}': it is not a regular file", path));
  if (!ec && std::filesystem::is_regular_file(status)) {
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec && size > kMaxInputBytes)
      throw UserError(fmt::format("cannot read '{}': it has {} bytes, more than the limit of {} bytes", path, size,
                                  kMaxInputBytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("cannot read '{}': check that the file exists", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file_atomic(const std::string& path, const std::string& text) { write_file_safely(path, text); }

}  // namespace coconet::model
