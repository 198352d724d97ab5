// results.csv, results.json and report.md: the report's numbers as data and
// as tables. Numbers are printed with enough digits to recompute the metrics.
#include <cmath>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "validation/report.h"

namespace coconet::validation {

namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

nlohmann::json optional_number(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json row_json(const ResultRow& r) {
  nlohmann::json j = {{"workload", r.workload},
                      {"size", r.size},
                      {"schedule", r.schedule},
                      {"baseline", r.baseline},
                      {"predicted_us", r.predicted_us},
                      {"measured_us", {{"median", r.measured.median_us}, {"min", r.measured.min_us}, {"max", r.measured.max_us}}},
                      {"error_pct", r.error_pct()},
                      {"verified", r.verified}};
  if (!r.source.empty()) j["source"] = r.source;
  return j;
}

nlohmann::json point_json(const PointMetrics& p) {
  return {{"workload", p.key.workload},
          {"size", p.key.size},
          {"schedules", p.schedules},
          {"predicted_best", p.predicted_best},
          {"measured_best", p.measured_best},
          {"top1", p.top1},
          {"regret_pct", p.regret_pct},
          {"spearman", optional_number(p.spearman)},
          {"mape_pct", p.mape_pct},
          {"speedup_predicted", p.speedup_predicted},
          {"speedup_measured", p.speedup_measured},
          {"speedup_of_pick_measured", p.speedup_of_pick_measured}};
}

std::string yes_no(bool b) { return b ? "yes" : "no"; }

std::string rho_text(const std::optional<double>& r) { return r ? fmt::format("{:.2f}", *r) : "n/a"; }

}  // namespace

std::string render_results_csv(const ReportData& data) {
  std::string out =
      "workload,size,schedule,baseline,predicted_us,measured_median_us,measured_min_us,measured_max_us,"
      "error_pct,verified\n";
  for (const auto& r : data.rows)
    out += fmt::format("{},{},{},{},{},{},{},{},{},{}\n", csv_field(r.workload), csv_field(r.size),
                       csv_field(r.schedule), r.baseline, r.predicted_us, r.measured.median_us,
                       r.measured.min_us, r.measured.max_us, r.error_pct(), r.verified);
  return out;
}

nlohmann::json metrics_json(const Metrics& m) {
  return {{"rows", m.rows},
          {"points", m.points},
          {"mape_pct", m.mape_pct},
          {"max_error_pct", m.max_error_pct},
          {"spearman", optional_number(m.spearman)},
          {"top1_agreement", m.top1_agreement},
          {"regret_pct", m.regret_pct},
          {"mean_regret_pct", m.mean_regret_pct}};
}

std::string render_results_json(const ReportData& data, const Metrics& m) {
  nlohmann::json j;
  j["schema"] = "coconet.results/1";
  j["title"] = data.title;
  j["backend"] = data.backend;
  j["topology"] = data.topology;
  j["ranks"] = data.ranks;
  j["command"] = data.command;
  j["metrics"] = metrics_json(m);
  j["points"] = nlohmann::json::array();
  for (const auto& p : m.per_point) j["points"].push_back(point_json(p));
  j["rows"] = nlohmann::json::array();
  for (const auto& r : data.rows) j["rows"].push_back(row_json(r));
  return j.dump(2) + "\n";
}

std::string render_markdown(const ReportData& data, const Metrics& m) {
  std::string s = fmt::format("# {}\n\n", data.title);
  s += fmt::format("Backend `{}`, topology `{}`, {} ranks. Regenerate with:\n\n```sh\n{}\n```\n\n", data.backend,
                   data.topology, data.ranks, data.command);
  for (const auto& n : data.notes) s += fmt::format("- {}\n", n);
  if (!data.notes.empty()) s += "\n";
  s += "## Summary\n\n| metric | value |\n|---|---|\n";
  s += fmt::format("| rows (workload x size x schedule) | {} |\n| points (workload x size) | {} |\n", m.rows, m.points);
  s += fmt::format("| MAPE | {:.1f}% |\n| max error | {:.1f}% |\n", m.mape_pct, m.max_error_pct);
  s += fmt::format("| Spearman (mean over points) | {} |\n", rho_text(m.spearman));
  s += fmt::format("| top-1 agreement | {:.0f}% |\n", m.top1_agreement * 100);
  s += fmt::format("| regret (worst point) | {:.1f}% |\n| regret (mean where they disagree) | {:.1f}% |\n\n",
                   m.regret_pct, m.mean_regret_pct);
  s += "## Per point\n\n| workload | size | predicted best | measured best | top-1 | regret | Spearman | "
       "speed-up predicted | speed-up measured | speed-up of the pick |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& p : m.per_point)
    s += fmt::format("| {} | {} | `{}` | `{}` | {} | {:.1f}% | {} | {:.2f}x | {:.2f}x | {:.2f}x |\n", p.key.workload,
                     p.key.size, p.predicted_best, p.measured_best, yes_no(p.top1), p.regret_pct,
                     rho_text(p.spearman), p.speedup_predicted, p.speedup_measured, p.speedup_of_pick_measured);
  s += "\n## Every schedule\n\n| workload | size | schedule | predicted (us) | measured median (us) | min | max | "
       "error | verified |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : data.rows)
    s += fmt::format("| {} | {} | `{}`{} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | {:+.1f}% | {} |\n", r.workload, r.size,
                     r.schedule, r.baseline ? " (baseline)" : "", r.predicted_us, r.measured.median_us,
                     r.measured.min_us, r.measured.max_us, r.error_pct(), yes_no(r.verified));
  bool sources = false;
  for (const auto& r : data.rows) sources = sources || !r.source.empty();
  if (sources) {
    s += "\n## Sources\n\n";
    for (const auto& r : data.rows)
      if (!r.source.empty()) s += fmt::format("- {} / {} / {}: {}\n", r.workload, r.size, r.schedule, r.source);
  }
  return s;
}

}  // namespace coconet::validation
