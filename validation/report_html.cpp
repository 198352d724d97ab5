// report.html: one page a person can read top to bottom. Summary first (the
// metrics and the verdict per point), then for each workload predicted and
// measured time across sizes with the error of every point, then all points
// against y = x, the speed-ups, the simulated timeline of the best schedule,
// and every row. Polyglot markup (well-formed XML), inline CSS and SVG only.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/core.h>

#include "validation/report.h"
#include "validation/svg.h"

namespace coconet::validation {

namespace {

using svg::escape;

constexpr const char* kStyle = R"(
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 24px auto; max-width: 1000px; color: #222; padding: 0 16px; }
h1 { font-size: 1.6em; margin-bottom: 4px; } h2 { margin-top: 32px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.meta { color: #555; } code { background: #f4f4f4; padding: 1px 4px; border-radius: 3px; }
table { border-collapse: collapse; margin: 8px 0; font-size: 0.82em; } th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; }
th { background: #f6f6f6; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 12px 0; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px; min-width: 120px; }
.card .v { font-size: 1.6em; font-weight: 600; } .card .k { color: #555; font-size: 0.85em; }
.good { color: #0a7d32; } .bad { color: #b3261e; }
.warning { border: 1px solid #b3261e; background: #fdecea; padding: 6px 10px; border-radius: 4px; }
svg.chart { display: block; margin: 8px 0; font-size: 11px; }
svg .title { font-size: 13px; font-weight: 600; } svg .tick { fill: #444; } svg .label { fill: #222; font-size: 12px; }
svg .legend { fill: #222; } svg .frame { fill: none; stroke: #999; } svg .grid { stroke: #eee; }
svg .axis { stroke: #666; } svg .identity { stroke: #888; stroke-dasharray: 4 3; }
)";

std::string fmt_pct(double v) { return fmt::format("{:.1f}%", v); }

std::string ci_text(const Interval& i) { return fmt::format("{:.0f}% CI {:.1f}-{:.1f}%", kConfidence * 100, i.lo, i.hi); }

std::string set_text(const PointMetrics& p) {
  std::string s;
  for (const auto& n : p.measured_best_set) s += (s.empty() ? "" : ", ") + n;
  return p.decided ? s : s + " (undecided: intervals too wide)";
}

std::string card(const std::string& key, const std::string& value, const std::string& cls = "") {
  return fmt::format("<div class=\"card\"><div class=\"v{}\">{}</div><div class=\"k\">{}</div></div>\n",
                     cls.empty() ? "" : " " + cls, escape(value), escape(key));
}

std::string summary(const Metrics& m, const std::optional<Metrics>& quiet) {
  std::string s = "<div class=\"cards\">\n";
  s += card(fmt::format("MAPE (mean |error|), {}", ci_text(m.mape_ci)), fmt_pct(m.mape_pct),
            m.mape_pct < 25 ? "good" : "bad");
  s += card("max |error|", fmt_pct(m.max_error_pct));
  s += card("Spearman (mean per point)", m.spearman ? fmt::format("{:.2f}", *m.spearman) : "n/a");
  s += card("top-1, predicted best in the measured-best set",
            fmt::format("{:.0f}% of {}", m.top1_in_set * 100, m.points), m.top1_in_set >= 0.8 ? "good" : "bad");
  s += card("fastest median in the predicted-best set (the pick's or one's priced alike)",
            fmt::format("{:.0f}% of {}", m.fastest_in_predicted_set * 100, m.points), m.fastest_in_predicted_set >= 0.5 ? "good" : "bad");
  s += card("top-1, strict (the pick itself)", fmt::format("{:.0f}% of {}", m.top1_strict * 100, m.points));
  s += card(fmt::format("regret (worst point), {}", ci_text(m.regret_ci)), fmt_pct(m.regret_pct),
            m.regret_pct < 10 ? "good" : "bad");
  s += card("points too noisy to decide", fmt::format("{}", m.undecided_points),
            m.undecided_points == 0 ? "good" : "bad");
  if (quiet)
    s += card(fmt::format("the {} of {} points outside slow spells: MAPE, top-1 in the set, fastest in the predicted set, worst regret",
                          quiet->points, m.points),
              fmt::format("{:.1f}%, {:.0f}%, {:.0f}%, {:.1f}%", quiet->mape_pct, quiet->top1_in_set * 100,
                          quiet->fastest_in_predicted_set * 100, quiet->regret_pct));
  return s + "</div>\n";
}

std::string td(const std::string& text, bool num = false) {
  return fmt::format("<td{}>{}</td>", num ? " class=\"num\"" : "", escape(text));
}

std::string points_table(const Metrics& m) {
  std::string s =
      "<table>\n<tr><th>workload</th><th>size</th><th>predicted best</th><th>measured best</th>"
      "<th>measured-best set (tied)</th><th>fastest in predicted set</th><th>in set</th><th>regret</th><th>Spearman</th><th>speed-up (pred.)</th><th>speed-up (meas.)</th><th>pick (meas.)</th></tr>\n";
  for (const auto& p : m.per_point) {
    s += "<tr>" + td(p.key.workload) + td(p.key.size) + td(predicted_text(p)) + td(p.measured_best) + td(set_text(p));
    s += fmt::format("<td class=\"{}\">{}</td>", p.fastest_in_predicted_set ? "good" : "bad", p.fastest_in_predicted_set ? "yes" : "no");
    s += fmt::format("<td class=\"{}\">{}</td>", p.top1_in_set ? "good" : "bad", p.top1_in_set ? "yes" : "no");
    s += td(fmt::format("{} ({:.1f}-{:.1f})", fmt_pct(p.regret_pct), p.regret_ci.lo, p.regret_ci.hi), true) + td(p.spearman ? fmt::format("{:.2f}", *p.spearman) : "n/a", true);
    s += td(fmt::format("{:.2f}x", p.speedup_predicted), true) + td(fmt::format("{:.2f}x", p.speedup_measured), true);
    s += td(fmt::format("{:.2f}x", p.speedup_of_pick_measured), true) + "</tr>\n";
  }
  return s + "</table>\n";
}

std::vector<std::string> workloads_of(const std::vector<ResultRow>& rows) {
  std::vector<std::string> out;
  for (const auto& r : rows)
    if (std::find(out.begin(), out.end(), r.workload) == out.end()) out.push_back(r.workload);
  return out;
}

std::vector<std::string> schedules_of(const std::vector<ResultRow>& rows, const std::string& workload) {
  std::vector<std::string> out;
  for (const auto& r : rows)
    if (r.workload == workload && std::find(out.begin(), out.end(), r.schedule) == out.end())
      out.push_back(r.schedule);
  return out;
}

std::string tip(const ResultRow& r) {
  return fmt::format("{} {} {}: predicted {:.1f} us, measured {:.1f} us (min {:.1f}, max {:.1f}), error {:+.1f}%",
                     r.workload, r.size, r.schedule, r.predicted_us, r.measured.median_us, r.measured.min_us,
                     r.measured.max_us, r.error_pct());
}

std::string workload_charts(const ReportData& d, const std::string& w) {
  const auto schedules = schedules_of(d.rows, w);
  std::vector<svg::Series> series;
  for (std::size_t i = 0; i < schedules.size(); ++i) {
    svg::Series meas{schedules[i] + " measured", svg::palette(static_cast<int>(i)), {}, false, true};
    svg::Series pred{"", svg::palette(static_cast<int>(i)), {}, true, true};
    for (const auto& r : d.rows)
      if (r.workload == w && r.schedule == schedules[i]) {
        meas.points.push_back({r.scale, r.measured.median_us, tip(r)});
        pred.points.push_back({r.scale, r.predicted_us, tip(r)});
      }
    series.push_back(std::move(meas));
    series.push_back(std::move(pred));
  }
  std::string s = svg::line_chart(fmt::format("{}: time per schedule (solid measured, dashed predicted)", w), series,
                                  svg::Axes{"size (product of the sizes)", "time (us)", true, true},
                                  svg::Size{840, 340});
  std::vector<svg::BarGroup> groups;
  for (const auto& r : d.rows) {
    if (r.workload != w) continue;
    auto g = std::find_if(groups.begin(), groups.end(), [&](const svg::BarGroup& x) { return x.label == r.size; });
    if (g == groups.end()) {
      groups.push_back({r.size, std::vector<double>(schedules.size(), std::nan("")),
                        std::vector<std::string>(schedules.size())});
      g = groups.end() - 1;
    }
    const auto k = std::find(schedules.begin(), schedules.end(), r.schedule) - schedules.begin();
    g->values[k] = r.error_pct();
    g->tips[k] = tip(r);
  }
  s += svg::bar_chart(fmt::format("{}: prediction error per point", w), schedules, groups,
                      "error (%) = (predicted - measured) / measured", 0.0, svg::Size{840, 300});
  return s;
}

std::string scatter(const ReportData& d) {
  const auto ws = workloads_of(d.rows);
  std::vector<svg::Series> series;
  for (std::size_t i = 0; i < ws.size(); ++i) {
    svg::Series s{ws[i], svg::palette(static_cast<int>(i)), {}, false, false};
    for (const auto& r : d.rows)
      if (r.workload == ws[i]) s.points.push_back({r.predicted_us, r.measured.median_us, tip(r)});
    series.push_back(std::move(s));
  }
  return svg::line_chart("every point: measured against predicted (dashed: y = x)", series,
                         svg::Axes{"predicted (us)", "measured (us)", true, true}, svg::Size{840, 460}, true);
}

std::string speedups(const Metrics& m) {
  std::vector<svg::BarGroup> groups;
  for (const auto& p : m.per_point)
    groups.push_back({p.key.workload + " " + p.key.size,
                      {p.speedup_predicted, p.speedup_measured, p.speedup_of_pick_measured},
                      {fmt::format("predicted: {} is {:.2f}x the baseline", p.predicted_best, p.speedup_predicted),
                       fmt::format("measured: {} is {:.2f}x the baseline", p.measured_best, p.speedup_measured),
                       fmt::format("measured, the predicted pick {}: {:.2f}x", p.predicted_best,
                                   p.speedup_of_pick_measured)}});
  return svg::bar_chart("speed-up of the best schedule over the baseline (line: 1x)",
                        {"predicted", "measured (measured best)", "measured (predicted pick)"}, groups,
                        "baseline time / best time", 1.0, svg::Size{960, 380});
}

std::string rows_table(const ReportData& d) {
  std::string s =
      "<table>\n<tr><th>workload</th><th>size</th><th>schedule</th><th>predicted (us)</th><th>measured median "
      "(us)</th><th>median's CI</th><th>min</th><th>max</th><th>error</th><th>verified</th></tr>\n";
  for (const auto& r : d.rows) {
    s += "<tr>" + td(r.workload) + td(r.size) + td(r.schedule + (r.baseline ? " (baseline)" : ""));
    s += td(fmt::format("{:.1f}", r.predicted_us), true) + td(fmt::format("{:.1f}", r.measured.median_us), true);
    const Interval ci = r.measured.estimate().ci;
    s += td(fmt::format("{:.1f}-{:.1f}", ci.lo, ci.hi), true);
    s += td(fmt::format("{:.1f}", r.measured.min_us), true) + td(fmt::format("{:.1f}", r.measured.max_us), true);
    s += td(fmt::format("{:+.1f}%", r.error_pct()), true);
    s += fmt::format("<td class=\"{}\">{}</td></tr>\n", r.verified ? "good" : "bad", r.verified ? "yes" : "no");
  }
  return s + "</table>\n";
}

// Each schedule's units, predicted next to measured: where the whole-step
// error comes from. Every row, folded (details) so the page stays short.
std::string stages_table(const ReportData& d) {
  std::string s = "<details>\n<summary>every unit of every schedule (" + std::to_string(d.rows.size()) +
                  " schedules)</summary>\n<table>\n<tr><th>workload</th><th>size</th><th>schedule</th><th>unit</th>"
                  "<th>predicted (us)</th><th>measured (us)</th><th>error</th></tr>\n";
  for (const auto& r : d.rows)
    for (const auto& st : r.stages) {
      s += "<tr>" + td(r.workload) + td(r.size) + td(r.schedule) + td(st.name);
      s += td(fmt::format("{:.1f}", st.predicted_us), true) + td(fmt::format("{:.1f}", st.measured_us), true);
      s += td(st.measured_us > 0 ? fmt::format("{:+.1f}%", (st.predicted_us - st.measured_us) / st.measured_us * 100)
                                 : std::string("n/a"),
              true) +
           "</tr>\n";
    }
  return s + "</table>\n</details>\n";
}

std::string how_to_read() {
  return "<h2>How to read this page</h2>\n<ul>\n"
         "<li><b>error</b> of a point is (predicted - measured) / measured; <b>MAPE</b> is the mean of its absolute "
         "value over every row.</li>\n"
         "<li><b>Spearman</b> compares the order of the schedules by predicted time with their order by measured time "
         "at one (workload, size) point: 1 is the same order, -1 the reverse.</li>\n"
         "<li><b>top-1, strict</b>: the schedule the model predicts fastest, or one it prices alike (the same "
         "time to a part in 10^9: the model makes no difference between them, and picks the one with fewer "
         "stages), has the fastest measured median; <b>the pick itself</b>: the one it picks does. "
         "<b>measured-best set</b>: the schedules whose median's 95% confidence interval (order statistics of every "
         "timed step) overlaps the fastest's, i.e. that this run cannot tell apart from the fastest; <b>top-1 in "
         "set</b>: the predicted best is one of them. A point is <b>undecided</b> when the tied schedules' "
         "intervals stay wider than " + fmt::format("{:g}", kDecisiveWidth * 100) +
         "% of their medians after the extra rounds the time budget allowed. "
         "<b>regret</b>: how much slower the predicted pick ran than the measured best (0% when it is the fastest); "
         "its interval, and MAPE's, take every median anywhere in its interval.</li>\n"
         "<li><b>speed-up (pred.)</b> is the baseline's predicted time over the predicted best's; <b>speed-up "
         "(meas.)</b> the baseline's measured time over the measured best's; <b>pick (meas.)</b> the baseline's "
         "measured time over the predicted best's: what trusting the model gained on this machine.</li>\n"
         "<li>In the time charts, the solid line is measured and the dashed line predicted, one colour per schedule; "
         "hover a mark for its numbers. In the scatter, points on the dashed diagonal are exact predictions, points "
         "above it ran slower than predicted.</li>\n"
         "<li>The timeline is the event simulator's schedule of the predicted best at its largest size: one row per "
         "rank and stream; trace.json holds the same timeline for Perfetto or the Chrome tracing viewer.</li>\n"
         "</ul>\n";
}

}  // namespace

std::string render_html(const ReportData& d, const Metrics& m) {
  std::string s = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n";
  s += fmt::format("<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n", escape(d.title), kStyle);
  s += fmt::format("<h1>{}</h1>\n", escape(d.title));
  s += fmt::format("<p class=\"meta\">backend <b>{}</b>, topology <b>{}</b>, {} ranks; {} rows over {} points. "
                   "Regenerate with <code>{}</code>.</p>\n",
                   escape(d.backend), escape(d.topology), d.ranks, m.rows, m.points, escape(d.command));
  for (const auto& w : d.warnings) s += fmt::format("<p class=\"warning\"><b>Warning:</b> {}</p>\n", escape(w));
  if (!d.notes.empty()) {
    s += "<ul>\n";
    for (const auto& n : d.notes) s += fmt::format("<li>{}</li>\n", escape(n));
    s += "</ul>\n";
  }
  s += "<h2>Summary</h2>\n" + summary(m, metrics_outside_spells(d.rows)) + points_table(m);
  s += "<h2>Predicted and measured time per schedule</h2>\n";
  for (const auto& w : workloads_of(d.rows)) {
    const bool sized = std::any_of(d.rows.begin(), d.rows.end(), [&](const ResultRow& r) { return r.workload == w && r.scale > 0; });
    if (sized) s += workload_charts(d, w);
  }
  s += "<h2>Every point against y = x</h2>\n" + scatter(d);
  s += "<h2>Speed-up over the baseline</h2>\n" + speedups(m);
  if (!d.timeline.empty())
    s += "<h2>Simulated timeline of the best schedule</h2>\n" + svg::gantt_chart(d.timeline_title, d.timeline);
  if (!d.measured_timeline.empty())
    s += "<h2>Measured timeline of the same schedule</h2>\n<p>Each launch on each rank, from the host clock read "
         "after the launch's waits and again when it returned (trace-measured.json). On the cpu backend a "
         "communication launch returns once handed to the communication thread, so its bar is the hand-off and "
         "the transfer shows as the gap before the launch that waits for it.</p>\n" +
         svg::gantt_chart(d.measured_timeline_title, d.measured_timeline);
  s += "<h2>Every schedule</h2>\n" + rows_table(d);
  if (std::any_of(d.rows.begin(), d.rows.end(), [](const ResultRow& r) { return !r.stages.empty(); }))
    s += "<h2>Per unit: predicted and measured</h2>\n<p>Each unit of a schedule's plan (a stage, or an overlap "
         "group): the simulator's time for it and the executor's wall time between synchronisations (median over "
         "rounds, the slowest rank's).</p>\n" +
         stages_table(d);
  s += how_to_read();
  return s + "</body>\n</html>\n";
}

}  // namespace coconet::validation
