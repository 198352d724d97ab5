// The files of a validation report and how they are written: report.html (one
// self-contained page, inline SVG, no script, no network), report.md (the same
// numbers as tables), results.csv, results.json (rows and metrics), trace.json
// (the simulator's Chrome trace of the best schedule), trace-measured.json (the
// same schedule's launches as run on every rank, when measured) and inputs/
// (workloads, experiment, topology, schedules, command line, commit and
// machine, to repeat the run).
//
// write_report builds the whole folder under a temporary name next to DIR and
// renames it into place, so a failed run never leaves a half report: DIR holds
// either the previous report or the new one.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "validation/metrics.h"
#include "validation/results.h"

namespace coconet::validation {

[[nodiscard]] std::string render_html(const ReportData& data, const Metrics& m);
[[nodiscard]] std::string render_markdown(const ReportData& data, const Metrics& m);
[[nodiscard]] std::string render_results_csv(const ReportData& data);
// results.json: a coconet.results/1 object whose "metrics" is metrics_json(m).
[[nodiscard]] std::string render_results_json(const ReportData& data, const Metrics& m);
// The one metrics object of results.json and `validate --format json`.
[[nodiscard]] nlohmann::json metrics_json(const Metrics& m);

// The name of the marker file that says a folder is a coconet report (so an
// existing DIR is replaced only when it is one, or empty).
inline constexpr const char* kReportMarker = ".coconet-report";

// Throws UserError unless `dir` can take a report: non-empty text naming a new
// folder, an empty folder or a coconet report (not a symlink, file, FIFO, ...).
// Commands call it before any work; write_report calls it again.
void check_report_target(const std::string& dir);

// Writes every file of the report into `dir`, atomically as a whole. Throws
// UserError when `dir` exists and is neither empty nor a coconet report, or
// when it cannot be written. `after_file` (tests) is called after each file
// is written into the temporary folder, with the file's name.
void write_report(const ReportData& data, const Metrics& m, const std::string& dir,
                  const std::function<void(const std::string&)>& after_file = {});

}  // namespace coconet::validation
