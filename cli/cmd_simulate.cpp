// coconet simulate: one schedule of a workload (or of each matching workload
// and size of an experiment) through the event simulator: per-stage timeline
// and breakdown, the analytic prediction beside it, and a Chrome trace.
//
// The knobs are the ones `predict` would choose for that schedule (the tuner
// over sim::predict_space() on this one schedule), so both print the same time
// for the same point; --chunks, --algo, --proto and --channels pin theirs (a
// schedule YAML file pins all of its own), and the tuner chooses the rest. A
// file `tune` wrote holds one schedule per point: each point takes its own.
// The simulation and its JSON are results.h's (simulate_points); this file
// adds the flags, the traces and the table and CSV printing.
#include <fmt/core.h>

#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_out.h"
#include "cli/knob_args.h"
#include "cli/predict_report.h"
#include "cli/results.h"
#include "model/safe_write.h"
#include "sim/trace.h"

namespace coconet::cli {

namespace {

struct Args {
  SimulateArgs simulate;
  std::string trace;
  std::string trace_ranks = "classes";
  Format format = Format::table;
};

std::string knobs_text(const model::Knobs& k) {
  return fmt::format("chunks={}{} {}/{} channels={}", k.chunks, k.overlap == model::Grain::tile ? " tile" : "",
                     model::to_string(k.algo),
                     model::to_string(k.proto),
                     k.channels == 0 ? std::string("default") : std::to_string(k.channels));
}

// The stages of `s` as CSV rows that name their point, so that the points of
// an experiment share one header.
void add_csv_rows(Table& csv, const SimulatedPoint& s) {
  for (const auto& st : s.result.stages)
    csv.add({s.point.program.name, s.point.label, s.schedule.name(), st.code, st.start_us, st.end_us, st.alone_us,
             s.result.rank_names.at(std::size_t(st.alone_class)), st.detail});
}

std::string title_of(const SimulatedPoint& s, const sim::Topology& t) {
  return fmt::format("{} {} {} on {} ({} node(s)), {} ranks per group{}", s.point.program.name,
                     s.point.label, s.schedule.name(), t.name, t.nodes, s.point.ranks_per_group,
                     s.point.groups > 1 ? fmt::format(" x {} groups", s.point.groups) : "");
}

void write_traces(const Simulation& sim, const std::string& trace, sim::TraceRanks ranks) {
  for (std::size_t i = 0; i < sim.points.size(); ++i) {
    const SimulatedPoint& p = sim.points[i];
    const std::string path = i == 0 ? trace : fmt::format("{}.{}", trace, i);
    model::write_file_safely(path, sim::chrome_trace_json(p.result, title_of(p, sim.topology), ranks),
                             "--trace");
    fmt::print(stderr, "wrote trace {}\n", path);
  }
}

void run(const Args& a) {
  a.simulate.knobs.check();
  if (!a.trace.empty()) model::check_output_file(a.trace, "--trace");  // before any work
  const sim::TraceRanks ranks = sim::parse_trace_ranks(a.trace_ranks);
  const Simulation sim = simulate_points(a.simulate);
  if (!a.trace.empty()) write_traces(sim, a.trace, ranks);
  if (a.format == Format::json) {
    print_json(simulation_json(sim));
    return;
  }
  Table csv{{"workload", "sizes", "schedule", "stage", "start_us", "end_us", "alone_us", "alone_ranks", "bound"}};
  for (const auto& p : sim.points) {
    if (a.format == Format::csv) {
      add_csv_rows(csv, p);
      continue;
    }
    fmt::print("== {}{}: simulated {:.1f} us, analytic {:.1f} us ({})\n", title_of(p, sim.topology),
               sim.backend_asked ? ", backend " + sim.backend : "", p.result.time_us, p.analytic_us,
               knobs_text(p.schedule.knobs));
    print(stage_table(p.result), a.format);
    if (p.result.rank_names.size() > 1)
      fmt::print("alone_us: a stage's tasks alone, one after another, on its slowest ranks (alone_ranks); the "
                 "classes of ranks run side by side, so the span is bounded by the slowest class, not by a sum\n");
  }
  if (a.format == Format::csv) print(csv, a.format);
}

}  // namespace

void register_simulate(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "simulate", "Run one schedule through the event simulator; write a Chrome trace");
  auto a = std::make_shared<Args>();
  add_predict_flags(cmd, a->simulate.predict, /*target_required=*/true);
  cmd->add_option("--schedule,-s", a->simulate.schedule,
                  "Schedule name, e.g. 'fuse(RS-C-AG)', or a schedule YAML file")
      ->required();
  add_knob_flags(cmd, a->simulate.knobs);
  cmd->add_option("--trace", a->trace, "Write a Chrome trace (Perfetto) JSON here");
  cmd->add_option("--trace-ranks", a->trace_ranks,
                  "The trace's processes: classes (one per class of identical ranks, default) or all (one per rank)");
  add_format_option(cmd, a->format);
  cmd->callback([a] { run(*a); });
}

}  // namespace coconet::cli
