// Writing a report folder atomically: every file goes into a hidden sibling
// folder first; only when all are written is the old report (if any) moved
// aside, the new folder renamed into place, and the old one removed.
#include <filesystem>
#include <fstream>

#include <fmt/core.h>
#include <unistd.h>

#include "model/error.h"
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

bool replaceable(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return true;
  if (!fs::is_directory(dir, ec)) return false;
  return fs::is_empty(dir, ec) || fs::exists(dir / kReportMarker, ec);
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
  fs::create_directories(stage / "inputs");
  for (const auto& [name, text] : data.inputs) {
    check_input_name(name);
    put(fs::path("inputs") / name, text);
  }
  put("report.html", render_html(data, m));
  put(kReportMarker, "coconet validation report\n");
}

void move_into_place(const fs::path& stage, const fs::path& dir, const fs::path& old) {
  std::error_code ec;
  const bool had_old = fs::exists(dir, ec);
  if (had_old) {
    fs::rename(dir, old, ec);
    if (ec) throw UserError(fmt::format("cannot move the previous report '{}' aside: {}", dir.string(), ec.message()));
  }
  fs::rename(stage, dir, ec);
  if (ec) {
    std::error_code ignore;
    if (had_old) fs::rename(old, dir, ignore);
    throw UserError(fmt::format("cannot move the finished report into place at '{}': {}", dir.string(), ec.message()));
  }
  if (had_old) fs::remove_all(old, ec);
}

}  // namespace

namespace {
fs::path report_target(const std::string& dir_text) {
  const fs::path dir = fs::absolute(fs::path(dir_text)).lexically_normal();
  return dir.has_filename() ? dir : dir.parent_path();
}
}  // namespace

void check_report_folder(const std::string& dir_text) {
  const fs::path target = report_target(dir_text);
  if (!replaceable(target))
    throw UserError(fmt::format("--out {}: '{}' exists and is not a coconet report (no {} in it): give --out a new "
                                "or empty folder, or remove it first",
                                dir_text, target.string(), kReportMarker));
}

void write_report(const ReportData& data, const Metrics& m, const std::string& dir_text,
                  const std::function<void(const std::string&)>& after_file) {
  const fs::path target = report_target(dir_text);
  check_report_folder(dir_text);
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  const std::string tag = fmt::format("{}.{}", target.filename().string(), ::getpid());
  const fs::path stage = target.parent_path() / ("." + tag + ".partial");
  const fs::path old = target.parent_path() / ("." + tag + ".old");
  fs::remove_all(stage, ec);
  if (!fs::create_directories(stage, ec) || ec)
    throw UserError(fmt::format("cannot create '{}': check that '{}' is writable", stage.string(),
                                target.parent_path().string()));
  try {
    write_all(data, m, stage, after_file);
    move_into_place(stage, target, old);
  } catch (...) {
    fs::remove_all(stage, ec);
    throw;
  }
}

}  // namespace coconet::validation
