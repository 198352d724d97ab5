// coconet show: a workload's program and every enumerated schedule with its
// stages; with --plan NAME, the StepPlan that schedule lowers to on a backend
// (what the simulator prices and the executor runs), its collectives resolved
// on --topology (sim/resolve.h: each call's algorithm, protocol and
// channels, as the simulator prices them). JSON: coconet.show/1
// (every workload named) and coconet.plan/1; CSV: one row per schedule, or per
// op of a plan.
#include <algorithm>
#include <cstdio>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_out.h"
#include "cli/messages.h"
#include "cli/workload_args.h"
#include "model/set_flag.h"
#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/points.h"
#include "plan/step_plan.h"
#include "sim/resolve.h"
#include "sim/tasks.h"
#include "sim/topology.h"

namespace coconet::cli {

namespace {

nlohmann::json schedule_json(const model::Schedule& s) {
  nlohmann::json stages = nlohmann::json::array();
  for (std::size_t i = 0; i < s.stages.size(); ++i) {
    const auto& st = s.stages[i];
    stages.push_back({{"code", st.code(s.program)},
                      {"statements", st.stmts},
                      {"overlap_group", s.overlap_of(static_cast<int>(i))}});
  }
  nlohmann::json history = nlohmann::json::array();
  for (const auto& d : s.history)
    history.push_back({{"op", model::op_of(d)}, {"args", model::args_of(d)}});
  return {{"name", s.name()},
          {"stages", stages},
          {"history", history},
          {"knobs", knobs_json(s.knobs)}};
}

nlohmann::json workload_json(const model::Program& p, const std::vector<model::Schedule>& schedules) {
  nlohmann::json j = {{"workload", p.name}, {"program", model::to_string(p)}};
  j["schedules"] = nlohmann::json::array();
  for (const auto& s : schedules) j["schedules"].push_back(schedule_json(s));
  return j;
}

void add_schedule_rows(Table& t, const model::Program& p, const std::vector<model::Schedule>& schedules) {
  for (const auto& s : schedules)
    t.add({p.name, s.name(), std::int64_t(s.stages.size()), std::int64_t(s.knobs.chunks),
           model::to_string(s.knobs.algo), model::to_string(s.knobs.proto), std::int64_t(s.knobs.channels),
             model::to_string(s.knobs.overlap)});
}

void print_text(const model::Program& p, const std::vector<model::Schedule>& schedules) {
  fmt::print("{}", model::to_string(p));
  fmt::print("  {} schedules:\n", schedules.size());
  for (const auto& s : schedules) fmt::print("{}", model::describe(s));
  fmt::print("\n");
}

// Every named workload in the chosen format: text blocks, one CSV, or one
// coconet.show/1 object whose "workloads" lists them.
void show_all(const std::vector<std::string>& names, const std::vector<std::string>& sets, Format f) {
  Table csv{{"workload", "schedule", "stages", "chunks", "algo", "proto", "channels", "overlap"}};
  nlohmann::json workloads = nlohmann::json::array();
  for (const auto& name : names) {
    const model::Program p = load_workload(name, sets);
    const auto schedules = model::enumerate_schedules(p);
    if (f == Format::table) print_text(p, schedules);
    else if (f == Format::csv) add_schedule_rows(csv, p, schedules);
    else workloads.push_back(workload_json(p, schedules));
  }
  if (f == Format::csv) print(csv, f);
  if (f == Format::json) print_json(tagged("show", {{"workloads", workloads}}));
}

nlohmann::json norms_json(const std::vector<plan::FusedNorm>& norms) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& n : norms) out.push_back({{"statement", n.stmt}, {"input", n.input}, {"across_group", n.across_group}});
  return out;
}

nlohmann::json fused_json(const std::optional<plan::FusedForm>& f) {
  if (!f) return nullptr;
  nlohmann::json passes = nlohmann::json::array();
  for (const auto& pass : f->passes)
    passes.push_back({{"statements", pass.stmts},
                      {"instructions", pass.program.code.size()},
                      {"norms_after", norms_json(pass.norms_after)}});
  return {{"head", f->head},          {"pieces", f->pieces},   {"norms_before", norms_json(f->norms_before)},
          {"passes", passes},         {"gathers", f->gathers}, {"scratch", f->scratch}};
}

nlohmann::json choice_json(const plan::CollectiveChoice& c) {
  if (c.local) return {{"algo", nullptr}, {"proto", nullptr}, {"channels", 0}, {"local", true}};
  return {{"algo", model::to_string(c.algo)}, {"proto", model::to_string(c.proto)}, {"channels", c.channels},
          {"local", false}};
}

// A collective's resolved choice: its first chunk's, and every chunk's
// (by_chunk) where they differ; null fields before resolution.
nlohmann::json choice_json(const plan::Collective& c) {
  if (c.chosen.empty()) return {{"algo", nullptr}, {"proto", nullptr}, {"channels", nullptr}};
  nlohmann::json out = choice_json(c.chosen.front());
  if (std::any_of(c.chosen.begin(), c.chosen.end(), [&](const auto& x) { return !(x == c.chosen.front()); })) {
    nlohmann::json by_chunk = nlohmann::json::array();
    for (const auto& x : c.chosen) by_chunk.push_back(choice_json(x));
    out["by_chunk"] = by_chunk;
  }
  return out;
}

nlohmann::json plan_json(const plan::StepPlan& p) {
  nlohmann::json units = nlohmann::json::array();
  for (const auto& u : p.units) {
    nlohmann::json ops = nlohmann::json::array();
    for (int id : u.ops) {
      const plan::Op& op = p.op(id);
      nlohmann::json collectives = nlohmann::json::array();
      for (const auto& c : op.work.collectives) {
        nlohmann::json one = {{"op", model::to_string(c.op)}, {"statement", c.stmt}, {"bytes", c.bytes}};
        one.update(choice_json(c));
        collectives.push_back(std::move(one));
      }
      ops.push_back({{"id", op.id}, {"code", op.code}, {"class", plan::to_string(op.cls)},
                     {"statements", op.stmts}, {"group", op.group}, {"dest_group", op.dest_group},
                     {"stream", plan::to_string(op.stream)}, {"lag", op.lag}, {"producers", op.producers},
                     {"hbm_bytes", op.work.hbm_bytes}, {"flops", op.work.flops}, {"collectives", collectives},
                     {"fused", fused_json(op.fused)}});
    }
    units.push_back({{"name", u.name}, {"chunks", u.chunks}, {"slice_mode", u.slice_mode}, {"as_parts", u.as_parts},
                     {"tile", u.tile}, {"untiled", u.untiled}, {"ops", ops}});
  }
  return tagged("plan", {{"schedule", p.schedule}, {"backend", plan::to_string(p.caps.backend)},
                         {"resolved_on", p.resolved_on}, {"knobs", knobs_json(p.knobs)},
                         {"ranks_per_group", p.ranks_per_group}, {"groups", p.groups},
                         {"sizes", sizes_json(p.sizes)}, {"label", model::sizes_label(p.sizes)}, {"units", units}});
}

Table plan_table(const plan::StepPlan& p) {
  Table t{{"unit", "op", "code", "class", "stream", "group", "hbm_bytes", "flops", "collectives"}};
  for (const auto& u : p.units)
    for (int id : u.ops) {
      const plan::Op& op = p.op(id);
      std::string chosen;  // each collective's choice of its first chunk
      for (const auto& c : op.work.collectives)
        chosen += (chosen.empty() ? "" : "; ") + model::to_string(c.op) + " " +
                  (c.chosen.empty() ? "unresolved" : plan::to_string(c.chosen.front()));
      t.add({u.name, std::int64_t(op.id), op.code, plan::to_string(op.cls), plan::to_string(op.stream),
             std::int64_t(op.group), double(op.work.hbm_bytes), double(op.work.flops), chosen});
    }
  return t;
}

struct PlanArgs {
  std::string schedule;
  int ranks = 8;
  std::string backend = "cuda";
  int chunks = 1;
  std::string topology;  // empty: the embedded default experiment's
  std::string algo = "auto", proto = "auto";
  int channels = 0;
  std::string overlap = "chunk";
};

// `sets`: the workload's sizes and scalars and, dotted (model::split_sets),
// values of the topology.
void show_plan(const std::string& workload, const std::vector<std::string>& all_sets, const PlanArgs& a, Format f) {
  const model::SetArgs split = model::split_sets(all_sets);
  std::vector<std::string> sets;
  for (const auto& [k, v] : split.workload) sets.push_back(k + "=" + v);
  const sim::Overrides topology_sets(split.topology.begin(), split.topology.end());
  const model::Program p = load_workload(workload, sets);
  model::Schedule s = model::find_schedule(p, a.schedule);
  s.knobs = model::Knobs{a.chunks, model::parse_algo(a.algo), model::parse_proto(a.proto), a.channels,
                         model::parse_grain(a.overlap)};
  const sim::Topology t = sim::load_topology(a.topology.empty() ? model::default_experiment().topology : a.topology,
                                             topology_sets);
  const sim::Context ctx{t, a.ranks, p.bind(), plan::parse_backend(a.backend)};
  const plan::StepPlan plan = sim::lower_for(s, ctx);  // plan::lower, then sim::resolve_collectives
  if (f == Format::json) print_json(plan_json(plan));
  else if (f == Format::csv) print(plan_table(plan), f);
  else fmt::print("{}", plan::describe(plan));
}

}  // namespace

void register_show(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "show", "Print a workload's program and every schedule coconet enumerates for it");
  struct Args {
    std::vector<std::string> workloads;
    std::vector<std::string> sets;
    Format format = Format::table;
  };
  auto args = std::make_shared<Args>();
  auto plan = std::make_shared<PlanArgs>();
  cmd->add_option("workload", args->workloads,
                  "Workload names or YAML files (default: every workload in workloads/)");
  cmd->add_option("--set", args->sets,
                  "Override a size or scalar: NAME=VALUE (repeatable); with --plan also a value of the --topology "
                  "(dotted, e.g. nccl.channels=8)");
  cmd->add_option("--plan", plan->schedule,
                  "Print the StepPlan of this schedule (a name or a schedule YAML) instead: units, ops, "
                  "streams, chunks, work");
  cmd->add_option("--ranks", plan->ranks, "With --plan: ranks per process group")
      ->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--backend", plan->backend, "With --plan: the backend whose capabilities lower it (cuda or cpu)")
      ->capture_default_str();
  cmd->add_option("--chunks", plan->chunks, "With --plan: chunks of each overlap group")
      ->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--topology", plan->topology,
                  "With --plan: the topology (name or YAML) its collectives' algorithm, protocol and channels are "
                  "resolved on; default: the embedded default experiment's");
  cmd->add_option("--algo", plan->algo, "With --plan: pin the collectives' algorithm (ring, tree, nvls, "
                                        "hierarchical; auto: resolved per unit)")
      ->capture_default_str();
  cmd->add_option("--proto", plan->proto, "With --plan: pin the protocol (ll, ll128, simple; auto: resolved per unit)")
      ->capture_default_str();
  cmd->add_option("--channels", plan->channels, "With --plan: pin the channels (0: resolved per unit)")
      ->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--overlap", plan->overlap,
                  "With --plan: the overlap grain (chunk: a GEMM call per chunk; tile: one GEMM whose blocks the "
                  "collective takes as they complete)")
      ->capture_default_str();
  add_format_option(cmd, args->format);
  cmd->callback([args, plan] {
    if (!plan->schedule.empty()) {
      if (args->workloads.size() != 1)
        throw UserError("--plan shows one schedule: name exactly one workload, e.g. coconet show adam --plan AR-C");
      show_plan(args->workloads.front(), args->sets, *plan, args->format);
      return;
    }
    show_all(args->workloads.empty() ? model::list_names("workloads") : args->workloads, args->sets, args->format);
  });
}

}  // namespace coconet::cli
