// Report writing: every file is there, writing is atomic (a failure leaves the
// previous report untouched and no temporary folder behind), and report.html
// is well-formed and self-contained (no script, no external reference).
#include <array>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/error.h"
#include "validation/report.h"
#include "validation/timeline.h"

namespace coconet::validation {
namespace {

namespace fs = std::filesystem;

ReportData sample() {
  ReportData d;
  d.title = "test <report> & \"quotes\"";
  d.backend = "cpu";
  d.topology = "cpu-test";
  d.ranks = 2;
  d.command = "coconet validate tiny.yaml --backend cpu --ranks 2 --out /tmp/r";
  d.notes = {"a note with <angle> brackets"};
  const char* schedules[] = {"AR-C", "RS-C-AG", "fuse(RS-C-AG)"};
  for (int s = 0; s < 2; ++s)
    for (int k = 0; k < 3; ++k) {
      ResultRow r;
      r.workload = "sgd";
      r.size = "N=" + std::to_string(1024 << (4 * s));
      r.scale = 1024 << (4 * s);
      r.schedule = schedules[k];
      r.baseline = k == 0;
      r.predicted_us = 100.0 * (s + 1) / (k + 1);
      r.measured = {110.0 * (s + 1) / (k + 1), 100.0 * (s + 1) / (k + 1), 130.0 * (s + 1) / (k + 1)};
      r.verified = true;
      d.rows.push_back(r);
    }
  d.trace_json = R"({"traceEvents": [
    {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "rank 0"}},
    {"ph": "M", "name": "thread_name", "pid": 0, "tid": 1, "args": {"name": "comm"}},
    {"ph": "X", "name": "RS chunk 1/2", "pid": 0, "tid": 1, "ts": 0, "dur": 10},
    {"ph": "X", "name": "C", "pid": 0, "tid": 0, "ts": 10, "dur": 5}]})";
  d.timeline = timeline_from_trace(d.trace_json);
  d.timeline_title = "fuse(RS-C-AG) at N=16384";
  d.inputs = {{"experiment.yaml", "name: tiny\n"}, {"topology.yaml", "name: cpu-test\n"}};
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("coconet_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

// A minimal XML well-formedness check: tags balance, attributes are quoted,
// '&' starts an entity. Enough to catch unclosed or crossed elements.
std::string well_formed_error(const std::string& s) {
  std::vector<std::string> stack;
  std::size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '&') {
      const std::size_t semi = s.find(';', i);
      if (semi == std::string::npos || semi - i > 8) return "bare & at " + std::to_string(i);
      i = semi + 1;
      continue;
    }
    if (s[i] != '<') {
      ++i;
      continue;
    }
    if (s.compare(i, 4, "<!--") == 0) {
      i = s.find("-->", i) + 3;
      continue;
    }
    const std::size_t end = s.find('>', i);
    if (end == std::string::npos) return "unterminated tag";
    const std::string tag = s.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.starts_with("!DOCTYPE")) continue;
    if (tag.starts_with("/")) {
      if (stack.empty() || stack.back() != tag.substr(1)) return "unexpected </" + tag.substr(1) + ">";
      stack.pop_back();
      continue;
    }
    const std::string name = tag.substr(0, tag.find_first_of(" \n/"));
    if (!std::regex_match(name, std::regex("[a-zA-Z][a-zA-Z0-9]*"))) return "bad tag name '" + name + "'";
    const std::string attrs = tag.substr(name.size());
    if (!std::regex_match(attrs, std::regex(R"((\s+[a-zA-Z][a-zA-Z0-9:-]*="[^"<]*")*\s*/?)")))
      return "malformed attributes in <" + name + ">";
    if (!tag.ends_with("/")) {
      stack.push_back(name);
      if (name == "style") {  // raw text up to </style>
        const std::size_t close = s.find("</style>", i);
        if (close == std::string::npos) return "unclosed <style>";
        i = close;
      }
    }
  }
  return stack.empty() ? "" : "unclosed <" + stack.back() + ">";
}

TEST(ValidationReport, WritesEveryFile) {
  const fs::path dir = fresh_dir("every");
  const ReportData d = sample();
  write_report(d, compute_metrics(d.rows), dir.string());
  for (const char* f : {"report.html", "report.md", "results.csv", "results.json", "trace.json",
                        "inputs/experiment.yaml", "inputs/topology.yaml"})
    EXPECT_TRUE(fs::is_regular_file(dir / f)) << f;
  const auto j = nlohmann::json::parse(slurp(dir / "results.json"));
  for (const char* k : {"mape_pct", "max_error_pct", "spearman", "top1_agreement", "regret_pct"})
    EXPECT_TRUE(j["metrics"].contains(k)) << k;
  ASSERT_EQ(j["rows"].size(), 6u);
  EXPECT_EQ(j["rows"][0]["schedule"], "AR-C");
  EXPECT_DOUBLE_EQ(j["rows"][0]["measured_us"]["median"].get<double>(), 110.0);
  EXPECT_TRUE(j["rows"][0]["verified"].get<bool>());
  const std::string csv = slurp(dir / "results.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 7);
  EXPECT_NE(csv.find("fuse(RS-C-AG)"), std::string::npos);
  fs::remove_all(dir);
}

TEST(ValidationReport, FailedWriteLeavesThePreviousReport) {
  const fs::path dir = fresh_dir("atomic");
  ReportData d = sample();
  write_report(d, compute_metrics(d.rows), dir.string());
  const std::string before = slurp(dir / "results.json");
  d.title = "second run";
  int written = 0;
  EXPECT_THROW(write_report(d, compute_metrics(d.rows), dir.string(),
                            [&](const std::string&) {
                              if (++written == 3) throw UserError("simulated failure mid-report");
                            }),
               UserError);
  EXPECT_EQ(slurp(dir / "results.json"), before);
  for (const auto& e : fs::directory_iterator(dir.parent_path()))
    EXPECT_EQ(e.path().filename().string().find("." + dir.filename().string()), std::string::npos)
        << "left behind: " << e.path();
  fs::remove_all(dir);
}

TEST(ValidationReport, FailedFirstWriteLeavesNothing) {
  const fs::path dir = fresh_dir("nothing");
  const ReportData d = sample();
  EXPECT_THROW(write_report(d, compute_metrics(d.rows), dir.string(),
                            [](const std::string&) { throw UserError("fail at once"); }),
               UserError);
  EXPECT_FALSE(fs::exists(dir));
}

TEST(ValidationReport, RefusesToReplaceAFolderThatIsNotAReport) {
  const fs::path dir = fresh_dir("foreign");
  fs::create_directories(dir);
  std::ofstream(dir / "precious.txt") << "keep me";
  const ReportData d = sample();
  EXPECT_THROW(write_report(d, compute_metrics(d.rows), dir.string()), UserError);
  EXPECT_TRUE(fs::exists(dir / "precious.txt"));
  fs::remove_all(dir);
}

// The first reference to something outside the page (a URL, a script, a
// linked file), with its context; empty when the page stands alone.
std::string external_reference(const std::string& html) {
  for (const char* banned : {"://", "<script", "src=", "href=", "url(", "@import", "<link", "<iframe"}) {
    const auto at = html.find(banned);
    if (at != std::string::npos) return std::string(banned) + " in: " + html.substr(at < 60 ? 0 : at - 60, 120);
  }
  return "";
}

TEST(ValidationReport, HtmlIsWellFormedAndSelfContained) {
  const ReportData d = sample();
  const std::string html = render_html(d, compute_metrics(d.rows));
  EXPECT_EQ(well_formed_error(html), "");
  EXPECT_EQ(external_reference(html), "");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("test &lt;report&gt; &amp; &quot;quotes&quot;"), std::string::npos);
  EXPECT_NE(html.find("RS chunk 1/2"), std::string::npos);  // the Gantt chart
}

// One of the two points kept from a slow spell: every form of the report
// gives the metrics of the other beside those of both; with none, none do.
TEST(ValidationReport, MetricsOutsideSpellsInEveryForm) {
  ReportData d = sample();
  const auto has = [](const ReportData& data) {
    const Metrics m = compute_metrics(data.rows);
    const std::string phrase = "the 1 of 2 points outside slow spells";
    return std::array<bool, 3>{render_markdown(data, m).find(phrase) != std::string::npos,
                               render_html(data, m).find(phrase) != std::string::npos,
                               render_results_json(data, m).find("metrics_outside_spells") != std::string::npos};
  };
  EXPECT_EQ(has(d), (std::array<bool, 3>{false, false, false}));
  for (auto& r : d.rows) r.in_spell = r.size == "N=16384";
  EXPECT_EQ(has(d), (std::array<bool, 3>{true, true, true}));
  const Metrics m = compute_metrics(d.rows);
  EXPECT_EQ(well_formed_error(render_html(d, m)), "");
}

// Rows without a size axis (published figures) and a single point still make a page.
TEST(ValidationReport, DegenerateAxesStillRender) {
  ReportData d = sample();
  for (auto& r : d.rows) r.scale = 0;
  d.rows.resize(1);
  const std::string html = render_html(d, compute_metrics(d.rows));
  EXPECT_EQ(well_formed_error(html), "");
}

// The checker itself must be able to fail.
TEST(ValidationReport, WellFormedCheckCatchesBrokenMarkup) {
  EXPECT_NE(well_formed_error("<html><body></html>"), "");
  EXPECT_NE(well_formed_error("<p>a & b</p>"), "");
  EXPECT_NE(well_formed_error("<rect x=1/>"), "");
  EXPECT_EQ(well_formed_error("<p>a &amp; b<br/></p>"), "");
  EXPECT_NE(external_reference("<p><img src=\"x.png\"/></p>"), "");
  EXPECT_NE(external_reference("<style>body { background: url(x.png) }</style>"), "");
  EXPECT_EQ(external_reference("<p>no links</p>"), "");
}

TEST(ValidationReport, TimelineFromTrace) {
  const auto bars = timeline_from_trace(sample().trace_json);
  ASSERT_EQ(bars.size(), 2u);
  EXPECT_EQ(bars[0].lane, "rank 0 / comm");
  EXPECT_EQ(bars[1].lane, "rank 0 / tid 0");
  EXPECT_DOUBLE_EQ(bars[0].duration_us, 10);
  EXPECT_THROW((void)timeline_from_trace("{\"nope\": 1}"), UserError);
  EXPECT_THROW((void)timeline_from_trace("not json"), UserError);
}

}  // namespace
}  // namespace coconet::validation
