// coconet simulate: one schedule of a workload (or of each matching workload
// and size of an experiment) through the event simulator: per-stage timeline
// and breakdown, the analytic prediction beside it, and a Chrome trace.
//
// The knobs are the ones `predict` would choose for that schedule (the tuner
// over sim::predict_space() on this one schedule), so both print the same time
// for the same point; --chunks, --algo, --proto and --channels pin theirs (a
// schedule YAML file pins all of its own), and the tuner chooses the rest. A
// file `tune` wrote holds one schedule per point: each point takes its own.
#include <memory>
#include <optional>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/predict_report.h"
#include "cli/format.h"
#include "cli/json_out.h"
#include "cli/knob_args.h"
#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/points.h"
#include "model/schedule_file.h"
#include "model/safe_write.h"
#include "sim/predict.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace coconet::cli {

namespace {

struct Args {
  PredictArgs predict;
  std::string schedule;
  KnobArgs knobs;
  std::string trace;
  Format format = Format::table;
};

// The schedule named by --schedule for each entry of the experiment (none for
// an entry that lacks it, when the experiment has several). A schedule file
// is read per point instead (schedule_at).
std::vector<std::optional<model::Schedule>> schedules_by_entry(const model::Experiment& e,
                                                               const std::vector<model::Point>& points,
                                                               const std::string& name) {
  std::vector<std::optional<model::Schedule>> out(e.workloads.size());
  if (model::is_schedule_file(name)) return out;
  std::vector<bool> looked(e.workloads.size(), false);
  for (const auto& pt : points) {
    if (looked[pt.entry]) continue;
    looked[pt.entry] = true;
    try {
      out[pt.entry] = model::find_schedule(pt.program, name);
    } catch (const UserError&) {
      if (e.workloads.size() == 1) throw;  // an experiment: simulate the workloads that have it
    }
  }
  return out;
}

// The schedule of point `pt`: from the entry's, or the document of a schedule
// file that matches the point (none when the file has nothing for its workload).
std::optional<model::Schedule> schedule_at(const Args& a, const std::vector<std::optional<model::Schedule>>& by_entry,
                                           const model::Point& pt, const sim::Topology& t,
                                           const std::vector<model::ScheduleDocument>& docs, bool single_workload) {
  if (!model::is_schedule_file(a.schedule)) return by_entry[pt.entry];
  bool has_workload = false;
  for (const auto& d : docs) has_workload = has_workload || d.workload == pt.program.name;
  if (!has_workload && !single_workload) return std::nullopt;
  const model::PointQuery q{pt.sizes, pt.ranks_per_group, pt.groups, t.name, a.predict.backend.value_or("")};
  if (!has_workload && docs.size() == 1) return model::find_schedule(pt.program, a.schedule);  // its own message
  return model::schedule_for_point(pt.program, a.schedule, q).schedule;
}

Table stage_table(const sim::SimResult& r) {
  Table t{{"stage", "start_us", "end_us", "alone_us", "bound"}};
  for (const auto& st : r.stages) t.add({st.code, st.start_us, st.end_us, st.alone_us, st.detail});
  return t;
}

std::string knobs_text(const model::Knobs& k) {
  return fmt::format("chunks={} {}/{} channels={}", k.chunks, model::to_string(k.algo), model::to_string(k.proto),
                     k.channels == 0 ? std::string("default") : std::to_string(k.channels));
}

// One simulated point, as it is printed.
struct Simulated {
  const model::Point& point;
  const model::Schedule& schedule;
  const sim::Topology& topology;
  sim::SimResult result;
  double analytic_us = 0;
};

nlohmann::json point_json(const Simulated& s, const std::optional<std::string>& backend) {
  return {{"workload", s.point.program.name},
          {"sizes", sizes_json(s.point.sizes)},
          {"label", s.point.label},
          {"schedule", s.schedule.name()},
          {"topology", s.topology.name},
          {"nodes", s.topology.nodes},
          {"ranks", s.point.ranks_per_group},
          {"groups", s.point.groups},
          {"backend", backend ? nlohmann::json(*backend) : nlohmann::json()},
          {"knobs", knobs_json(s.schedule.knobs)},
          {"time_us", s.result.time_us},
          {"analytic_us", s.analytic_us},
          {"rows", rows_json(stage_table(s.result))}};
}

// The stages of `s` as CSV rows that name their point, so that the points of
// an experiment share one header.
void add_csv_rows(Table& csv, const Simulated& s) {
  for (const auto& st : s.result.stages)
    csv.add({s.point.program.name, s.point.label, s.schedule.name(), st.code, st.start_us, st.end_us, st.alone_us,
             st.detail});
}

std::string title_of(const Simulated& s) {
  return fmt::format("{} {} {} on {} ({} node(s)), {} ranks per group{}", s.point.program.name, s.point.label,
                     s.schedule.name(), s.topology.name, s.topology.nodes, s.point.ranks_per_group,
                     s.point.groups > 1 ? fmt::format(" x {} groups", s.point.groups) : "");
}

void run(const Args& a) {
  a.knobs.check();
  if (!a.trace.empty()) model::check_output_file(a.trace, "--trace");  // before any work
  const model::Experiment e = model::experiment_from_argument(a.predict.target);
  const sim::PredictOptions o = a.predict.options();
  const sim::Topology t = sim::experiment_topology(e, o);
  const std::vector<model::Point> points = model::expand(e, sim::point_options(o, t));
  const auto schedules = schedules_by_entry(e, points, a.schedule);
  const bool file = model::is_schedule_file(a.schedule);
  const auto docs = file ? model::read_schedule_documents(a.schedule) : std::vector<model::ScheduleDocument>{};
  nlohmann::json out = nlohmann::json::array();
  Table csv{{"workload", "sizes", "schedule", "stage", "start_us", "end_us", "alone_us", "bound"}};
  int simulated = 0;
  for (const auto& pt : points) {
    const auto chosen = schedule_at(a, schedules, pt, t, docs, e.workloads.size() == 1);
    if (!chosen) continue;
    model::Schedule s = *chosen;
    const sim::Context ctx{t, pt.ranks_per_group, pt.sizes, sim::backend_option(o)};
    s.knobs = sim::tune({s}, ctx, a.knobs.space(s, file)).ranked.front().knobs;
    const Simulated done{pt, s, t, sim::simulate(s, ctx), sim::predict_analytic(s, ctx).time_us};
    if (!a.trace.empty()) {
      const std::string path = simulated == 0 ? a.trace : fmt::format("{}.{}", a.trace, simulated);
      model::write_file_safely(path, sim::chrome_trace_json(done.result, title_of(done)), "--trace");
      fmt::print(stderr, "wrote trace {}\n", path);
    }
    ++simulated;
    if (a.format == Format::json) {
      out.push_back(point_json(done, o.backend));
      continue;
    }
    if (a.format == Format::table)
      fmt::print("== {}{}: simulated {:.1f} us, analytic {:.1f} us ({})\n", title_of(done),
                 o.backend ? ", backend " + *o.backend : "", done.result.time_us, done.analytic_us,
                 knobs_text(s.knobs));
    if (a.format == Format::csv) add_csv_rows(csv, done);
    else print(stage_table(done.result), a.format);
  }
  if (simulated == 0) throw UserError(fmt::format("no workload of the experiment has a schedule '{}'", a.schedule));
  if (a.format == Format::csv) print(csv, a.format);
  if (a.format == Format::json) print_json(tagged("simulate", {{"points", out}}));
}

}  // namespace

void register_simulate(CLI::App& app) {
  auto* cmd = app.add_subcommand("simulate", "Run one schedule through the event simulator; write a Chrome trace");
  auto a = std::make_shared<Args>();
  add_predict_flags(cmd, a->predict, /*target_required=*/true);
  cmd->add_option("--schedule,-s", a->schedule, "Schedule name, e.g. 'fuse(RS-C-AG)', or a schedule YAML file")
      ->required();
  add_knob_flags(cmd, a->knobs);
  cmd->add_option("--trace", a->trace, "Write a Chrome trace (Perfetto) JSON here");
  add_format_option(cmd, a->format);
  cmd->callback([a] { run(*a); });
}

}  // namespace coconet::cli
