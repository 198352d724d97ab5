// Published figures against the model. A figure names a system in words; the
// table below says which topology (and how many GPUs and nodes) stands for it.
#include "validation/reference.h"

#include <filesystem>
#include <regex>

#include <fmt/core.h>
#include <yaml-cpp/yaml.h>

#include "model/set_flag.h"
#include "model/catalog.h"
#include "model/yaml_util.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/parse.h"
#include "sim/collective.h"
#include "sim/topology.h"
#include "sim/units.h"
#include "sim/tuner.h"
#include "validation/step_reference.h"

namespace coconet::validation {

namespace fs = std::filesystem;

namespace {

// "At large messages": nccl-tests' bus bandwidth plateaus well before 4 GiB.
constexpr double kLargeMessageBytes = 4.0 * 1024 * 1024 * 1024;
using sim::kBytesPerGBpsUs;

struct SystemMap {
  const char* keyword;  // found in the figure's "system"
  const char* topology;
  int ranks;
  int nodes;
  int per_node;
  const char* note;
};

// Which topology stands for a published system.
constexpr SystemMap kSystems[] = {
    {"8x H100", "dgx-h100", 8, 1, 8, ""},
    {"8x A100", "dgx-a100", 8, 1, 8, ""},
    {"4x H800", "dgx-h100", 4, 1, 4, "H800 modelled as H100 (same GPU, NVLink cut to 400 GB/s)"},
    {"2x A100", "dgx-a100", 2, 1, 2, "A100 over NVLink3 links modelled as DGX A100 (one NVLink hop either way)"},
    {"InfiniBand NDR", "dgx-h100", 2, 2, 1, "one GPU on each of 2 DGX H100 nodes: the ring crosses one NDR NIC"},
};

const SystemMap* find_system(const std::string& system) {
  for (const auto& s : kSystems)
    if (system.find(s.keyword) != std::string::npos) return &s;
  return nullptr;
}

std::string text(const YAML::Node& n, const char* key) { return n[key] ? n[key].as<std::string>() : ""; }

sim::Topology topology_for(const SystemMap& s) {
  return sim::load_topology(s.topology, {{"nodes", std::to_string(s.nodes)}});
}

double model_time_us(const SystemMap& s, const std::string& op, const std::string& algo, double bytes) {
  const sim::Topology t = topology_for(s);
  sim::CollectiveRequest r;
  r.op = sim::parse_coll_op(op);
  r.bytes = bytes;
  r.where = sim::Placement{s.ranks, s.nodes, s.per_node, s.nodes > 1};
  r.algo = model::parse_algo(algo.empty() ? "auto" : algo);
  return sim::predict_collective(t, r).time_us();
}

ResultRow figure_row(const std::string& workload, const std::string& size, const std::string& schedule,
                     double predicted, double published, const std::string& source) {
  ResultRow r;
  r.workload = workload;
  r.size = size;
  r.schedule = schedule;
  r.baseline = true;  // one row per point: it is its own baseline
  r.predicted_us = predicted;
  r.measured = {published, published, published};
  r.verified = true;
  r.source = source;
  return r;
}

void add_collectives(const YAML::Node& list, ReferenceValidation& v) {
  for (const auto& f : list) {
    const std::string system = text(f, "system"), op = text(f, "op"), algo = text(f, "algo");
    const SystemMap* s = find_system(system);
    const double busbw = f["busbw_GBps"] ? f["busbw_GBps"].as<double>()
                         : f["busbw_GBps_per_nic"] ? f["busbw_GBps_per_nic"].as<double>() : 0.0;
    if (!s || busbw <= 0) {
      v.skipped.push_back(fmt::format("{} {} on '{}': no topology stands for it", op, algo, system));
      continue;
    }
    const double factor = sim::bus_factor(sim::parse_coll_op(op), s->ranks);
    const double published_us = kLargeMessageBytes * factor / (busbw * kBytesPerGBpsUs);
    const double predicted_us = model_time_us(*s, op, algo, kLargeMessageBytes);
    std::string source = text(f, "source");
    if (*s->note) source += fmt::format(" [model: {}]", s->note);
    v.report.rows.push_back(figure_row(fmt::format("nccl-tests {} busbw", op),
                                       fmt::format("{} ({} ranks, 4 GiB)", system, s->ranks), algo.empty() ? "auto" : algo,
                                       predicted_us, published_us, source));
  }
}

// A small-message time: its collective (op, bytes, algo or auto) on the
// system's topology, next to the published time.
void add_latencies(const YAML::Node& list, ReferenceValidation& v) {
  for (const auto& f : list) {
    const std::string system = text(f, "system"), op = text(f, "op"), algo = text(f, "algo");
    const SystemMap* s = find_system(system);
    if (!s || op.empty() || !f["bytes"] || !f["time_us"]) {
      v.skipped.push_back(fmt::format("latency on '{}': no topology, op, bytes or time_us", system));
      continue;
    }
    const double bytes = f["bytes"].as<double>();
    const double predicted = model_time_us(*s, op, algo, bytes);
    std::string source = text(f, "source");
    if (*s->note) source += fmt::format(" [model: {}]", s->note);
    v.report.rows.push_back(figure_row(fmt::format("{} latency", op), fmt::format("{} ({} B)", system, bytes),
                                       algo.empty() ? "auto" : algo, predicted, f["time_us"].as<double>(), source));
  }
}

struct SpeedupCase {
  const char* key;       // under paper.speedups
  const char* workload;
  const char* sizes;     // --set style
  const char* topology;
  int nodes;
  int ranks;             // per process group
  const char* note;
};

constexpr SpeedupCase kSpeedups[] = {
    {"bert_training_adam_vs_pytorch_ddp", "adam", "N=335708160", "dgx2-v100", 16, 256,
     "the paper's figure is a whole training step; the model sees the optimizer step only"},
    {"megatron_layers_vs_megatron_lm", "megatron_mlp", "B=8", "dgx2-v100", 1, 16,
     "the paper's figure is a whole layer; the model sees the MLP block output only"},
};

void add_speedups(const YAML::Node& speedups, ReferenceValidation& v) {
  static const std::regex kRange(R"(([0-9.]+)x\s*-\s*([0-9.]+)x)");
  for (const auto& c : kSpeedups) {
    const std::string range = speedups[c.key] ? speedups[c.key].as<std::string>() : "";
    std::smatch m;
    if (!std::regex_search(range, m, kRange)) {
      v.skipped.push_back(fmt::format("paper speed-up '{}': not found or not a range", c.key));
      continue;
    }
    const double lo = std::stod(m[1]), hi = std::stod(m[2]);
    model::Program p = model::load_program(model::resolve_workload(c.workload));
    const auto [k, val] = model::parse_assignment(c.sizes);
    model::override_value(p, k, val);
    const auto t = sim::load_topology(c.topology, {{"nodes", std::to_string(c.nodes)}});
    const auto schedules = model::enumerate_schedules(p);
    const sim::TuneResult r = sim::tune(schedules, sim::Context{t, c.ranks, p.bind()}, sim::predict_space());
    const std::string base = model::baseline(p).name();
    double base_us = 0;
    for (const auto& cand : r.ranked)
      if (cand.name == base) base_us = cand.time_us;
    const auto& best = r.ranked.front();
    ResultRow row = figure_row(fmt::format("paper speed-up: {}", c.workload),
                               fmt::format("{} on {} x {} nodes", c.sizes, c.topology, c.nodes), best.name,
                               best.time_us, base_us / ((lo + hi) / 2), fmt::format("CoCoNet paper {} ({}); {}", range,
                                                                                     "secondary summaries, see published.yaml", c.note));
    row.baseline = false;
    row.measured.min_us = base_us / hi;
    row.measured.max_us = base_us / lo;
    v.report.rows.push_back(row);
  }
}

// Whole training steps (validation/step_reference.h): a published TFLOP/s per GPU
// becomes the step time it implies (Megatron-LM eq. 3 FLOPs over it), next to
// the predicted step of the best layout searched.
void add_training_steps(const std::string& yaml, const std::string& origin, ReferenceValidation& v) {
  for (const auto& p : parse_published_steps(yaml, origin)) {
    const StepComparison c = compare_published(p);
    const auto& r = c.predicted;
    const double published_us = r.eq3_flops / (p.tflops_per_gpu * 1e12 * r.layout.gpus) * 1e6;
    v.report.rows.push_back(figure_row(
        fmt::format("training step: {}", p.model),
        fmt::format("{} x {} nodes, micro-batch {}", p.topology, p.nodes, r.spec.training.micro_batch),
        fmt::format("dp{} tp{} pp{} {} v{}", r.layout.dp, r.layout.tp, r.layout.pp,
                    step::to_string(r.spec.parallel.schedule), r.layout.virtual_stages),
        r.step_us, published_us,
        fmt::format("{}; predicted {:.1f} TFLOP/s per GPU against {:.0f}", p.source, r.eq3_tflops_per_gpu,
                    p.tflops_per_gpu)));
  }
}

}  // namespace

std::string reference_dir() { return (fs::path(model::data_root()) / "validation" / "reference").string(); }

ReferenceValidation validate_reference(const std::string& dir, const std::string& command) {
  ReferenceValidation v;
  ReportData& d = v.report;
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  if (files.empty()) throw UserError(fmt::format("no published figures (*.yaml) in '{}'", dir));
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    const std::string yaml = model::read_file(f.string());
    const YAML::Node root = model::YamlContext{f.string()}.load(yaml);
    if (root["collectives"]) add_collectives(root["collectives"], v);
    if (root["latency"]) add_latencies(root["latency"], v);
    if (root["paper"] && root["paper"]["speedups"]) add_speedups(root["paper"]["speedups"], v);
    if (root["training_steps"]) add_training_steps(yaml, f.string(), v);
    d.inputs[f.filename().string()] = yaml;
  }
  v.metrics = compute_metrics(d.rows);
  d.title = "the cost model against published figures";
  d.backend = "reference";
  d.topology = "per figure";
  d.ranks = 0;
  d.command = command;
  d.notes.push_back("each row is one published figure; 'measured' is the published value, 'predicted' the model's");
  d.notes.push_back("bus bandwidths become times at a 4 GiB message; a speed-up range becomes the baseline's "
                    "predicted time divided by it, so the error is the model's speed-up against the paper's");
  for (const auto& s : v.skipped) d.notes.push_back("skipped: " + s);
  return v;
}

}  // namespace coconet::validation
