// The results of predict, tune, simulate and collective as JSON (see results.h).
#include "cli/results.h"

#include <fmt/core.h>

#include "cli/json_out.h"
#include "model/set_flag.h"
#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/limits.h"
#include "model/schedule_file.h"
#include "sim/tuner.h"

namespace coconet::cli {

// ---- predict and tune ------------------------------------------------------

sim::PredictOptions PredictArgs::options() const {
  sim::PredictOptions o;
  o.topology = topology;
  o.nodes = nodes;
  o.ranks = ranks;
  model::SetArgs split = model::split_sets(sets);
  o.sets = std::move(split.topology);
  o.values = std::move(split.workload);
  o.backend = backend;
  return o;
}

std::vector<sim::PointReport> predict_points(const PredictArgs& a, bool tune) {
  const model::Experiment e = model::experiment_from_argument(a.target);
  sim::PredictOptions o = a.options();
  o.tune_space = tune;
  return sim::predict_experiment(e, o);
}

std::string dominant_text(const sim::Candidate& c) {
  double total = 0;
  const sim::StageTiming* top = nullptr;
  for (const auto& st : c.stages) {
    total += st.alone_us;
    if (!top || st.alone_us > top->alone_us) top = &st;
  }
  return top && total > 0 ? fmt::format("{} {:.0f}%", top->code, 100 * top->alone_us / total) : "-";
}

namespace {

nlohmann::json ranked_rows_json(const sim::PointReport& r) {
  nlohmann::json rows = nlohmann::json::array();
  std::int64_t rank = 1;
  for (const auto& c : r.result.ranked)
    rows.push_back({{"rank", rank++},
                    {"schedule", c.name},
                    {"time_us", c.time_us},
                    {"speedup", r.baseline_us / c.time_us},
                    {"analytic_us", c.analytic_us},
                    {"knobs", knobs_json(c.knobs)},
                    {"dominant", dominant_text(c)}});
  return rows;
}

nlohmann::json report_json(const sim::PointReport& r) {
  return {{"workload", r.workload},
          {"sizes", sizes_json(r.bindings)},
          {"label", r.sizes},
          {"topology", r.topology},
          {"nodes", r.nodes},
          {"ranks", r.ranks},
          {"groups", r.groups},
          {"backend", r.backend},
          {"best", r.best().name},
          {"baseline", r.baseline},
          {"baseline_us", r.baseline_us},
          {"speedup", r.speedup},
          {"reason", r.reason},
          {"evaluated", r.result.evaluated},
          {"rows", ranked_rows_json(r)}};
}

}  // namespace

nlohmann::json point_reports_json(const std::vector<sim::PointReport>& reports,
                                  const std::string& kind) {
  nlohmann::json points = nlohmann::json::array();
  for (const auto& r : reports) points.push_back(report_json(r));
  return tagged(kind, {{"points", points}});
}

std::string best_schedules_yaml(const std::vector<sim::PointReport>& reports) {
  std::string out;
  for (const auto& r : reports) {
    if (!out.empty()) out += "---\n";
    out += fmt::format(
        "# best for {} {} on {} ({} node(s), {} ranks per group): {:.1f} us predicted, {:.2f}x "
        "over {}\n",
        r.workload, r.sizes, r.topology, r.nodes, r.ranks, r.best().time_us, r.speedup, r.baseline);
    out +=
        model::point_yaml(model::SchedulePoint{r.workload, r.bindings, r.ranks, r.groups,
                                               r.topology, r.nodes, r.backend, r.best().time_us});
    out += model::to_yaml(r.best_schedule());
    if (!out.ends_with('\n')) out += '\n';
  }
  return out;
}

// ---- simulate --------------------------------------------------------------

namespace {

// The schedule named by `name` for each entry of the experiment (none for an
// entry that lacks it, when the experiment has several). A schedule file is
// read per point instead (schedule_at).
std::vector<std::optional<model::Schedule>> schedules_by_entry(
    const model::Experiment& e, const std::vector<model::Point>& points, const std::string& name) {
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
std::optional<model::Schedule> schedule_at(
    const SimulateArgs& a, const std::vector<std::optional<model::Schedule>>& by_entry,
    const model::Point& pt, const sim::Topology& t,
    const std::vector<model::ScheduleDocument>& docs, bool single_workload) {
  if (!model::is_schedule_file(a.schedule)) return by_entry[pt.entry];
  bool has_workload = false;
  for (const auto& d : docs) has_workload = has_workload || d.workload == pt.program.name;
  if (!has_workload && !single_workload) return std::nullopt;
  const model::PointQuery q{pt.sizes, pt.ranks_per_group, pt.groups, t.name,
                            a.predict.backend.value_or("")};
  if (!has_workload && docs.size() == 1)
    return model::find_schedule(pt.program, a.schedule);  // its own message
  return model::schedule_for_point(pt.program, docs, a.schedule, q).schedule;
}

nlohmann::json simulated_json(const SimulatedPoint& s, const Simulation& all) {
  return {{"workload", s.point.program.name},
          {"sizes", sizes_json(s.point.sizes)},
          {"label", s.point.label},
          {"schedule", s.schedule.name()},
          {"topology", all.topology.name},
          {"nodes", all.topology.nodes},
          {"ranks", s.point.ranks_per_group},
          {"groups", s.point.groups},
          {"backend", all.backend},
          {"knobs", knobs_json(s.schedule.knobs)},
          {"time_us", s.result.time_us},
          {"analytic_us", s.analytic_us},
          {"rows", rows_json(stage_table(s.result))}};
}

}  // namespace

Simulation simulate_points(const SimulateArgs& a) {
  a.knobs.check();
  const model::Experiment e = model::experiment_from_argument(a.predict.target);
  const sim::PredictOptions o = a.predict.options();
  Simulation out{sim::experiment_topology(e, o), "", o.backend.has_value(), {}};
  const sim::Topology& t = out.topology;
  out.backend = plan::to_string(sim::backend_option(o).value_or(sim::default_backend(t)));
  const std::vector<model::Point> points = model::expand(e, sim::point_options(o, t));
  const auto schedules = schedules_by_entry(e, points, a.schedule);
  const bool file = model::is_schedule_file(a.schedule);
  const auto docs =
      file ? model::read_schedule_documents(a.schedule) : std::vector<model::ScheduleDocument>{};
  for (const auto& pt : points) {
    const auto chosen = schedule_at(a, schedules, pt, t, docs, e.workloads.size() == 1);
    if (!chosen) continue;
    model::Schedule s = *chosen;
    const sim::Context ctx{t, pt.ranks_per_group, pt.sizes, sim::backend_option(o)};
    s.knobs = sim::tune({s}, ctx, a.knobs.space(s, file)).ranked.front().knobs;
    sim::SimResult result = sim::simulate(s, ctx);
    const double analytic_us = sim::predict_analytic(s, ctx).time_us;
    out.points.push_back(SimulatedPoint{pt, std::move(s), std::move(result), analytic_us});
  }
  if (out.points.empty())
    throw UserError(fmt::format("no workload of the experiment has a schedule '{}'", a.schedule));
  return out;
}

Table stage_table(const sim::SimResult& r) {
  // Ranks simulated apart (a straggler, a slower node): a stage's tasks alone
  // are its slowest class's, and alone_ranks names that class.
  const bool apart = r.rank_names.size() > 1;
  Table t{{"stage", "start_us", "end_us", "alone_us", "bound"}};
  if (apart) t.columns.insert(t.columns.begin() + 4, "alone_ranks");
  for (const auto& st : r.stages) {
    std::vector<Cell> row{st.code, st.start_us, st.end_us, st.alone_us, st.detail};
    if (apart) row.insert(row.begin() + 4, r.rank_names.at(std::size_t(st.alone_class)));
    t.add(std::move(row));
  }
  return t;
}

nlohmann::json simulation_json(const Simulation& s) {
  nlohmann::json points = nlohmann::json::array();
  for (const auto& p : s.points) points.push_back(simulated_json(p, s));
  return tagged("simulate", {{"points", points}});
}

// ---- collective ------------------------------------------------------------

namespace {

sim::Placement placement(const sim::Topology& t, const CollectiveArgs& a) {
  const int per_node = a.gpus.value_or(t.node.gpus);
  if (per_node < 1 || per_node > t.node.gpus)
    throw UserError(
        fmt::format("--gpus {}: a {} node has 1 to {} GPUs", per_node, t.name, t.node.gpus));
  sim::Placement p;
  p.nodes = t.nodes;
  p.per_node = per_node;
  p.ranks = t.nodes * per_node;
  p.send_crosses_nodes = t.nodes > 1;
  return p;
}

}  // namespace

CollectiveSweep collective_sweep(const CollectiveArgs& a) {
  sim::Overrides sets;
  for (const auto& s : a.sets) sets.push_back(model::parse_assignment(s));
  if (a.nodes) sets.emplace_back("nodes", std::to_string(*a.nodes));
  const sim::Topology t = sim::load_topology(a.topology, sets);
  const sim::Placement where = placement(t, a);
  const std::int64_t b = model::parse_count(a.begin, "-b " + a.begin);
  const std::int64_t e = model::parse_count(a.end, "-e " + a.end);
  if (b < 1 || e < b)
    throw UserError(fmt::format("-b {} -e {}: need 1 <= begin <= end", a.begin, a.end));
  if (a.factor < 2)
    throw UserError(fmt::format("-f {}: the size factor must be at least 2", a.factor));
  model::check_range(a.channels, 0, model::kMaxChannels, "--channels");
  sim::CollectiveRequest r{sim::parse_coll_op(a.op),    0,         where, model::parse_algo(a.algo),
                           model::parse_proto(a.proto), a.channels};
  CollectiveSweep out{a.op, t.name, where,
                      Table{{"bytes", "time_us", "algbw_GBps", "busbw_GBps", "algo", "proto"}}};
  for (std::int64_t bytes = b;;
       bytes *= a.factor) {  // b <= e; stops before bytes x factor passes e (or 64 bits)
    r.bytes = double(bytes);
    const sim::CollectiveCost c = sim::predict_collective(t, r);
    const double alg = sim::algbw_GBps(r.bytes, c.time_us());
    out.table.add({bytes, c.time_us(), alg, alg * sim::bus_factor(r.op, where.ranks),
                   model::to_string(c.algo), model::to_string(c.proto)});
    if (bytes > e / a.factor) break;
  }
  return out;
}

nlohmann::json collective_json(const CollectiveSweep& s) {
  return tagged("collective", {{"op", s.op},
                               {"topology", s.topology},
                               {"ranks", s.where.ranks},
                               {"rows", rows_json(s.table)}});
}

}  // namespace coconet::cli
