// coconet simulate: one schedule of a workload (or of each matching workload
// and size of an experiment) through the event simulator: per-stage timeline
// and breakdown, the analytic prediction beside it, and a Chrome trace.
//
// The knobs are the ones `predict` would choose for that schedule (the tuner
// over sim::predict_space() on this one schedule), so both print the same time
// for the same point; --chunks, --algo, --proto and --channels pin theirs (a
// schedule YAML file pins all of its own), and the tuner chooses the rest.
#include <memory>
#include <optional>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/predict_report.h"
#include "cli/format.h"
#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/points.h"
#include "model/safe_write.h"
#include "sim/predict.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace coconet::cli {

namespace {

struct Args {
  PredictArgs predict;
  std::string schedule;
  std::optional<int> chunks;
  std::optional<std::string> algo;
  std::optional<std::string> proto;
  std::optional<int> channels;
  std::string trace;
  Format format = Format::table;
};

bool from_file(const std::string& schedule) {
  return schedule.ends_with(".yaml") || schedule.ends_with(".yml");
}

// The knob settings the tuner may choose from for schedule `s`.
sim::KnobSpace knob_space(const Args& a, const model::Schedule& s) {
  const model::Knobs& k = s.knobs;
  sim::KnobSpace space =
      from_file(a.schedule) ? sim::KnobSpace{{k.chunks}, {k.algo}, {k.proto}, {k.channels}} : sim::predict_space();
  if (a.chunks) space.chunks = {*a.chunks};
  if (a.algo) space.algos = {model::parse_algo(*a.algo)};
  if (a.proto) space.protos = {model::parse_proto(*a.proto)};
  if (a.channels) space.channels = {*a.channels};
  return space;
}

void check_knob_flags(const Args& a) {
  if (a.chunks && *a.chunks < 1) throw UserError(fmt::format("--chunks {}: needs at least 1", *a.chunks));
  if (a.channels && *a.channels < 0)
    throw UserError(fmt::format("--channels {}: needs 0 (the topology's default) or more", *a.channels));
  try {
    if (a.algo) (void)model::parse_algo(*a.algo);
  } catch (const UserError& e) {
    throw UserError(fmt::format("--algo {}: {}", *a.algo, e.what()));
  }
  try {
    if (a.proto) (void)model::parse_proto(*a.proto);
  } catch (const UserError& e) {
    throw UserError(fmt::format("--proto {}: {}", *a.proto, e.what()));
  }
}

// The schedule named by --schedule for each entry of the experiment (none for
// an entry that lacks it, when the experiment has several).
std::vector<std::optional<model::Schedule>> schedules_by_entry(const model::Experiment& e,
                                                               const std::vector<model::Point>& points,
                                                               const std::string& name) {
  std::vector<std::optional<model::Schedule>> out(e.workloads.size());
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

Table stage_table(const sim::SimResult& r) {
  Table t{{"stage", "start_us", "end_us", "alone_us", "bound"}};
  for (const auto& st : r.stages) t.add({st.code, st.start_us, st.end_us, st.alone_us, st.detail});
  return t;
}

std::string knobs_text(const model::Knobs& k) {
  return fmt::format("chunks={} {}/{} channels={}", k.chunks, model::to_string(k.algo), model::to_string(k.proto),
                     k.channels == 0 ? std::string("default") : std::to_string(k.channels));
}

nlohmann::json knobs_json(const model::Knobs& k) {
  return {{"chunks", k.chunks},
          {"algo", model::to_string(k.algo)},
          {"proto", model::to_string(k.proto)},
          {"channels", k.channels}};
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
          {"sizes", s.point.label},
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

std::string title_of(const Simulated& s) {
  return fmt::format("{} {} {} on {} ({} node(s)), {} ranks per group{}", s.point.program.name, s.point.label,
                     s.schedule.name(), s.topology.name, s.topology.nodes, s.point.ranks_per_group,
                     s.point.groups > 1 ? fmt::format(" x {} groups", s.point.groups) : "");
}

void run(const Args& a) {
  check_knob_flags(a);
  if (!a.trace.empty()) model::check_output_file(a.trace, "--trace");  // before any work
  const model::Experiment e = model::experiment_from_argument(a.predict.target);
  const sim::PredictOptions o = a.predict.options();
  const sim::Topology t = sim::experiment_topology(e, o);
  const std::vector<model::Point> points = model::expand(e, sim::point_options(o, t));
  const auto schedules = schedules_by_entry(e, points, a.schedule);
  nlohmann::json out = nlohmann::json::array();
  int simulated = 0;
  for (const auto& pt : points) {
    if (!schedules[pt.entry]) continue;
    model::Schedule s = *schedules[pt.entry];
    const sim::Context ctx{t, pt.ranks_per_group, pt.sizes, sim::backend_option(o)};
    s.knobs = sim::tune({s}, ctx, knob_space(a, s)).ranked.front().knobs;
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
    print(stage_table(done.result), a.format);
  }
  if (simulated == 0) throw UserError(fmt::format("no workload of the experiment has a schedule '{}'", a.schedule));
  if (a.format == Format::json) fmt::print("{}\n", nlohmann::json{{"points", out}}.dump(2));
}

}  // namespace

void register_simulate(CLI::App& app) {
  auto* cmd = app.add_subcommand("simulate", "Run one schedule through the event simulator; write a Chrome trace");
  auto a = std::make_shared<Args>();
  add_predict_flags(cmd, a->predict, /*target_required=*/true);
  cmd->add_option("--schedule,-s", a->schedule, "Schedule name, e.g. 'fuse(RS-C-AG)', or a schedule YAML file")
      ->required();
  cmd->add_option("--chunks", a->chunks, "Chunks of each overlapped stage (default: as predict chooses)");
  cmd->add_option("--algo", a->algo, "ring, tree, nvls, hierarchical or auto (default: as predict chooses)");
  cmd->add_option("--proto", a->proto, "ll, ll128, simple or auto (default: as predict chooses)");
  cmd->add_option("--channels", a->channels, "NCCL channels, 0: the topology's default (default: as predict chooses)");
  cmd->add_option("--trace", a->trace, "Write a Chrome trace (Perfetto) JSON here");
  add_format_option(cmd, a->format);
  cmd->callback([a] { run(*a); });
}

}  // namespace coconet::cli
