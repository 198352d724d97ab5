// Writing a report folder atomically: every file goes into a hidden sibling
// folder with a random name first (registered, so an interrupt removes it);
// only when all are written is it exchanged with the old report in one
// rename (RENAME_EXCHANGE), and the old one, now under the hidden name,
// removed. Leftovers of an interrupted earlier run are removed first.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>  // renameat2
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/core.h>

#include "model/error.h"
#include "model/safe_write.h"
#include "validation/report.h"

namespace coconet::validation {

namespace fs = std::filesystem;

namespace {

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw UserError(fmt::format("cannot write '{}': check that its folder is writable", path.string()));
  out << text;
  out.flush();
  if (!out) throw UserError(fmt::format("writing '{}' failed (disk full?)", path.string()));
}

void check_input_name(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos || name.find("..") != std::string::npos)
    throw InternalError(fmt::format("report input file name '{}' must be a plain file name", name));
}

void write_all(const ReportData& data, const Metrics& m, const fs::path& stage,
               const std::function<void(const std::string&)>& after_file) {
  auto put = [&](const fs::path& rel, const std::string& text) {
    write_text(stage / rel, text);
    if (after_file) after_file(rel.string());
  };
  put("results.csv", render_results_csv(data));
  put("results.json", render_results_json(data, m));
  put("report.md", render_markdown(data, m));
  put("trace.json", data.trace_json.empty() ? std::string("{\"traceEvents\": []}\n") : data.trace_json);
  if (!data.measured_trace_json.empty()) put("trace-measured.json", data.measured_trace_json);
  fs::create_directories(stage / "inputs");
  for (const auto& [name, text] : data.inputs) {
    check_input_name(name);
    put(fs::path("inputs") / name, text);
  }
  put("report.html", render_html(data, m));
  put(kReportMarker, "coconet validation report\n");
}

// Removes what an earlier, interrupted run left next to `target`: hidden
// siblings ".<name>.<pid>.<hex>.partial" whose process is gone.
void clean_leftovers(const fs::path& target) {
  std::error_code ec;
  std::string prefix = ".";
  prefix += target.filename().string();
  prefix += '.';
  for (const auto& e : fs::directory_iterator(target.parent_path(), ec)) {
    const std::string n = e.path().filename().string();
    if (n.size() <= prefix.size() || n.rfind(prefix, 0) != 0 || !n.ends_with(".partial")) continue;
    const long pid = std::strtol(n.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && pid != ::getpid() && ::kill(static_cast<pid_t>(pid), 0) == 0) continue;  // still running
    std::error_code ignore;
    fs::remove_all(e.path(), ignore);
  }
}

// Puts `stage` at `dir` in one step: a new name is renamed; an existing report
// is exchanged with the stage (renameat2 RENAME_EXCHANGE), so `dir` holds the
// old report or the new one at every moment; the old one, now at `stage`, is removed.
void move_into_place(const fs::path& stage, const fs::path& dir) {
  std::error_code ec;
  const bool had_old = fs::exists(fs::symlink_status(dir, ec));
  const int rc = had_old ? ::renameat2(AT_FDCWD, stage.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE)
                         : ::renameat2(AT_FDCWD, stage.c_str(), AT_FDCWD, dir.c_str(), RENAME_NOREPLACE);
  if (rc != 0)
    throw UserError(fmt::format("cannot move the finished report into place at '{}': {}", dir.string(),
                                std::strerror(errno)));
  if (had_old) fs::remove_all(stage, ec);
}

}  // namespace

void check_report_target(const std::string& dir_text) {
  if (dir_text.empty()) throw UserError("--out is empty: name a folder for the report");
  const fs::path dir = fs::absolute(fs::path(dir_text)).lexically_normal();
  const fs::path target = dir.has_filename() ? dir : dir.parent_path();
  struct stat st {};
  if (::lstat(target.c_str(), &st) != 0) {  // a new folder, in a folder that must exist: nothing else is created
    struct stat parent {};
    if (::stat(target.parent_path().c_str(), &parent) != 0 || !S_ISDIR(parent.st_mode))
      throw UserError(fmt::format("--out '{}': the folder '{}' does not exist; create it first, or give --out a new "
                                  "folder in an existing one",
                                  dir_text, target.parent_path().string()));
    return;
  }
  if (S_ISLNK(st.st_mode))
    throw UserError(fmt::format("--out '{}' is a symbolic link: give --out a new folder or a coconet report folder",
                                dir_text));
  if (!S_ISDIR(st.st_mode))
    throw UserError(fmt::format("--out '{}' exists and is not a folder: give --out a new or empty folder", dir_text));
  std::error_code ec;
  if (!fs::is_empty(target, ec) && !fs::exists(fs::symlink_status(target / kReportMarker, ec)))
    throw UserError(fmt::format("'{}' exists and is not a coconet report (no {} in it): give --out a new or "
                                "empty folder, or remove it first",
                                target.string(), kReportMarker));
}

void write_report(const ReportData& data, const Metrics& m, const std::string& dir_text,
                  const std::function<void(const std::string&)>& after_file) {
  check_report_target(dir_text);
  const fs::path dir = fs::absolute(fs::path(dir_text)).lexically_normal();
  const fs::path target = dir.has_filename() ? dir : dir.parent_path();
  std::error_code ec;
  clean_leftovers(target);
  fs::path stage;
  for (int attempt = 0; attempt < 100; ++attempt) {
    stage = target.parent_path() /
            model::random_sibling_name(fmt::format("{}.{}", target.filename().string(), ::getpid()), "partial");
    if (::mkdir(stage.c_str(), 0777) == 0) break;
    if (errno != EEXIST)
      throw UserError(fmt::format("cannot create '{}': check that '{}' is writable", stage.string(),
                                  target.parent_path().string()));
  }
  const int slot = model::register_temporary(stage.string());
  try {
    write_all(data, m, stage, after_file);
    move_into_place(stage, target);
  } catch (...) {
    fs::remove_all(stage, ec);
    model::unregister_temporary(slot);
    throw;
  }
  model::unregister_temporary(slot);
}

}  // namespace coconet::validation
