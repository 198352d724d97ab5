// coconet simulate: one schedule of a workload (or of each matching workload
// and size of an experiment) through the event simulator: per-stage timeline
// and breakdown, the analytic prediction beside it, and a Chrome trace.
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
#include "model/parse.h"
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

void apply_knobs(const Args& a, model::Knobs& k) {
  if (a.chunks) {
    if (*a.chunks < 1) throw UserError(fmt::format("--chunks {}: needs at least 1", *a.chunks));
    k.chunks = *a.chunks;
  }
  if (a.algo) k.algo = model::parse_algo(*a.algo);
  if (a.proto) k.proto = model::parse_proto(*a.proto);
  if (a.channels) k.channels = *a.channels;
}

Table stage_table(const sim::SimResult& r) {
  Table t{{"stage", "start_us", "end_us", "alone_us", "bound"}};
  for (const auto& st : r.stages) t.add({st.code, st.start_us, st.end_us, st.alone_us, st.detail});
  return t;
}

void run(const Args& a) {
  const model::Experiment e = sim::experiment_from_argument(a.predict.target);
  const sim::PredictOptions o = a.predict.options();
  const sim::Topology t = sim::experiment_topology(e, o);
  nlohmann::json points = nlohmann::json::array();
  int simulated = 0;
  for (const auto& run : e.workloads) {
    const model::Program p = model::load_program(model::resolve_workload(run.workload));
    std::optional<model::Schedule> s;
    try {
      s = model::find_schedule(p, a.schedule);
    } catch (const UserError&) {
      if (e.workloads.size() == 1) throw;
      continue;  // an experiment: simulate the workloads that have this schedule
    }
    apply_knobs(a, s->knobs);
    const int ranks = sim::group_size(e, run, t, p, a.predict.ranks);
    model::WorkloadRun sized = run;
    for (const auto& [k, v] : o.sizes)
      if (p.params.contains(k)) sized.sizes[k] = {std::stoll(v)};
    for (const auto& b : model::size_points(sized, p)) {
      const sim::Context ctx{t, ranks, b};
      const sim::SimResult r = sim::simulate(*s, ctx);
      const double analytic = sim::predict_analytic(*s, ctx).time_us;
      const std::string title = fmt::format("{} {} on {} ({} nodes, {} ranks per group)", p.name, s->name(), t.name,
                                            t.nodes, ranks);
      if (!a.trace.empty()) {
        const std::string path = simulated == 0 ? a.trace : fmt::format("{}.{}", a.trace, simulated);
        model::write_file_atomic(path, sim::chrome_trace_json(r, title));
        fmt::print(stderr, "wrote trace {}\n", path);
      }
      ++simulated;
      if (a.format == Format::json) {
        points.push_back({{"workload", p.name}, {"schedule", s->name()}, {"topology", t.name}, {"ranks", ranks},
                          {"time_us", r.time_us}, {"analytic_us", analytic},
                          {"rows", rows_json(stage_table(r))}});
        continue;
      }
      if (a.format == Format::table)
        fmt::print("== {}: simulated {:.1f} us, analytic {:.1f} us (chunks={}, {}/{})\n", title, r.time_us, analytic,
                   s->knobs.chunks, model::to_string(s->knobs.algo), model::to_string(s->knobs.proto));
      print(stage_table(r), a.format);
    }
  }
  if (simulated == 0) throw UserError(fmt::format("no workload of the experiment has a schedule '{}'", a.schedule));
  if (a.format == Format::json) fmt::print("{}\n", nlohmann::json{{"points", points}}.dump(2));
}

}  // namespace

void register_simulate(CLI::App& app) {
  auto* cmd = app.add_subcommand("simulate", "Run one schedule through the event simulator; write a Chrome trace");
  auto a = std::make_shared<Args>();
  add_predict_flags(cmd, a->predict, /*target_required=*/true);
  cmd->add_option("--schedule,-s", a->schedule, "Schedule name, e.g. 'fuse(RS-C-AG)', or a schedule YAML file")
      ->required();
  cmd->add_option("--chunks", a->chunks, "Chunks of each overlapped stage");
  cmd->add_option("--algo", a->algo, "ring, tree, nvls, hierarchical or auto");
  cmd->add_option("--proto", a->proto, "ll, ll128, simple or auto");
  cmd->add_option("--channels", a->channels, "NCCL channels (0: the topology's default)");
  cmd->add_option("--trace", a->trace, "Write a Chrome trace (Perfetto) JSON here");
  add_format_option(cmd, a->format);
  cmd->callback([a] { run(*a); });
}

}  // namespace coconet::cli
