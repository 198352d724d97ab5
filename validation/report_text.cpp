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

nlohmann::json interval_json(const Interval& i) { return nlohmann::json::array({i.lo, i.hi}); }

nlohmann::json row_json(const ResultRow& r) {
  nlohmann::json j = {{"workload", r.workload},
                      {"size", r.size},
                      {"schedule", r.schedule},
                      {"baseline", r.baseline},
                      {"predicted_us", r.predicted_us},
                      {"measured_us",
                       {{"median", r.measured.median_us},
                        {"min", r.measured.min_us},
                        {"max", r.measured.max_us},
                        {"ci", interval_json(r.measured.estimate().ci)},
                        {"samples", r.measured.samples}}},
                      {"error_pct", r.error_pct()},
                      {"verified", r.verified}};
  if (!r.source.empty()) j["source"] = r.source;
  if (r.rounds > 0) j["rounds"] = r.rounds;
  if (!r.round_medians_us.empty()) j["round_medians_us"] = r.round_medians_us;
  if (r.probe_ratio > 0)
    j["speed_probe"] = {{"ratio", r.probe_ratio}, {"measured_again", r.measured_again}, {"in_spell", r.in_spell}};
  if (!r.outside_calibration.empty()) j["outside_calibration"] = r.outside_calibration;
  if (!r.stages.empty()) {
    j["stages"] = nlohmann::json::array();
    for (const auto& st : r.stages)
      j["stages"].push_back({{"name", st.name}, {"predicted_us", st.predicted_us}, {"measured_us", st.measured_us}});
  }
  return j;
}

nlohmann::json point_json(const PointMetrics& p) {
  return {{"workload", p.key.workload},
          {"size", p.key.size},
          {"schedules", p.schedules},
          {"predicted_best", p.predicted_best},
          {"measured_best", p.measured_best},
          {"measured_best_set", p.measured_best_set},
          {"predicted_best_set", p.predicted_best_set},
          {"top1", p.fastest_in_predicted_set},
          {"top1_pick", p.top1_strict},
          {"top1_in_set", p.top1_in_set},
          {"decided", p.decided},
          {"regret_pct", p.regret_pct},
          {"regret_ci", interval_json(p.regret_ci)},
          {"spearman", optional_number(p.spearman)},
          {"mape_pct", p.mape_pct},
          {"speedup_predicted", p.speedup_predicted},
          {"speedup_measured", p.speedup_measured},
          {"speedup_of_pick_measured", p.speedup_of_pick_measured}};
}

std::string yes_no(bool b) { return b ? "yes" : "no"; }

std::string interval_text(const Interval& i) { return fmt::format("{:.0f}% CI {:.1f}-{:.1f}%", kConfidence * 100, i.lo, i.hi); }

std::string set_text(const PointMetrics& p) {
  std::string s;
  for (const auto& n : p.measured_best_set) s += (s.empty() ? "`" : ", `") + n + "`";
  return p.decided ? s : s + " (undecided)";
}

std::string rho_text(const std::optional<double>& r) { return r ? fmt::format("{:.2f}", *r) : "n/a"; }

}  // namespace

std::string render_results_csv(const ReportData& data) {
  std::string out =
      "workload,size,schedule,baseline,predicted_us,measured_median_us,measured_min_us,measured_max_us,"
      "error_pct,verified,measured_ci_lo_us,measured_ci_hi_us,samples\n";
  for (const auto& r : data.rows) {
    const Interval ci = r.measured.estimate().ci;
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(r.workload), csv_field(r.size),
                       csv_field(r.schedule), r.baseline, r.predicted_us, r.measured.median_us,
                       r.measured.min_us, r.measured.max_us, r.error_pct(), r.verified, ci.lo, ci.hi,
                       r.measured.samples);
  }
  return out;
}

nlohmann::json metrics_json(const Metrics& m) {
  return {{"rows", m.rows},
          {"points", m.points},
          {"mape_pct", m.mape_pct},
          {"mape_ci", interval_json(m.mape_ci)},
          {"max_error_pct", m.max_error_pct},
          {"spearman", optional_number(m.spearman)},
          {"top1_agreement", m.fastest_in_predicted_set},
          {"top1_pick", m.top1_strict},
          {"top1_in_set", m.top1_in_set},
          {"undecided_points", m.undecided_points},
          {"regret_pct", m.regret_pct},
          {"regret_ci", interval_json(m.regret_ci)},
          {"mean_regret_pct", m.mean_regret_pct},
          {"confidence", kConfidence}};
}

std::string render_results_json(const ReportData& data, const Metrics& m) {
  nlohmann::json j;
  j["schema"] = "coconet.results/1";
  j["title"] = data.title;
  j["backend"] = data.backend;
  j["topology"] = data.topology;
  j["ranks"] = data.ranks;
  j["command"] = data.command;
  j["warnings"] = data.warnings;
  j["machine_speed"] = nlohmann::json::array();
  for (const auto& c : data.speed)
    j["machine_speed"].push_back({{"reference", c.label},
                                  {"calibrated_us", c.calibrated_us},
                                  {"start_us", c.start_us},
                                  {"end_us", c.end_us},
                                  {"drift", c.drift()}});
  j["metrics"] = metrics_json(m);
  if (const auto quiet = metrics_outside_spells(data.rows)) j["metrics_outside_spells"] = metrics_json(*quiet);
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
  for (const auto& w : data.warnings) s += fmt::format("> **Warning:** {}\n\n", w);
  for (const auto& n : data.notes) s += fmt::format("- {}\n", n);
  if (!data.notes.empty()) s += "\n";
  s += "## Summary\n\n| metric | value |\n|---|---|\n";
  s += fmt::format("| rows (workload x size x schedule) | {} |\n| points (workload x size) | {} |\n", m.rows, m.points);
  s += fmt::format("| MAPE | {:.1f}% ({}) |\n| max error | {:.1f}% |\n", m.mape_pct, interval_text(m.mape_ci),
                   m.max_error_pct);
  s += fmt::format("| Spearman (mean over points) | {} |\n", rho_text(m.spearman));
  s += fmt::format("| the fastest median in the predicted-best set (the pick's or one's priced alike with it) | "
                   "{:.0f}% |\n| top-1, strict (the pick itself has the fastest median) | {:.0f}% |\n",
                   m.fastest_in_predicted_set * 100, m.top1_strict * 100);
  s += fmt::format("| top-1 agreement, predicted best inside the measured-best set | {:.0f}% |\n",
                   m.top1_in_set * 100);
  s += fmt::format("| points too noisy to decide | {} |\n", m.undecided_points);
  s += fmt::format("| regret (worst point) | {:.1f}% ({}) |\n| regret (mean where they disagree) | {:.1f}% |\n",
                   m.regret_pct, interval_text(m.regret_ci), m.mean_regret_pct);
  if (const auto q = metrics_outside_spells(data.rows))
    s += fmt::format("| the {} of {} points outside slow spells: MAPE, top-1 in the set, fastest in the predicted set, worst regret | "
                     "{:.1f}%, {:.0f}%, {:.0f}%, {:.1f}% |\n",
                     q->points, m.points, q->mape_pct, q->top1_in_set * 100, q->fastest_in_predicted_set * 100, q->regret_pct);
  s += "\n";
  s += "## Per point\n\n| workload | size | predicted best | measured best | measured-best set | fastest in predicted set | in set | "
       "regret | Spearman | speed-up predicted | speed-up measured | speed-up of the pick |\n"
       "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& p : m.per_point)
    s += fmt::format("| {} | {} | `{}` | `{}` | {} | {} | {} | {:.1f}% ({}) | {} | {:.2f}x | {:.2f}x | {:.2f}x |\n",
                     p.key.workload, p.key.size, predicted_text(p), p.measured_best, set_text(p), yes_no(p.fastest_in_predicted_set),
                     yes_no(p.top1_in_set), p.regret_pct, interval_text(p.regret_ci), rho_text(p.spearman),
                     p.speedup_predicted, p.speedup_measured, p.speedup_of_pick_measured);
  s += "\n## Every schedule\n\n| workload | size | schedule | predicted (us) | measured median (us) | median's CI | "
       "min | max | error | verified |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : data.rows) {
    const Interval ci = r.measured.estimate().ci;
    s += fmt::format("| {} | {} | `{}`{} | {:.1f} | {:.1f} | {:.1f}-{:.1f} | {:.1f} | {:.1f} | {:+.1f}% | {} |\n",
                     r.workload, r.size, r.schedule, r.baseline ? " (baseline)" : "", r.predicted_us,
                     r.measured.median_us, ci.lo, ci.hi, r.measured.min_us, r.measured.max_us, r.error_pct(),
                     yes_no(r.verified));
  }
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
