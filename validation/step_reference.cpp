// Published steps against the model (see reference.h).
#include "validation/step_reference.h"

#include <fmt/core.h>

#include "model/error.h"
#include "model/yaml_util.h"
#include "step/search.h"

namespace coconet::validation {

using step::ModelSpec;
using step::SearchOptions;
using step::SearchResult;

std::vector<PublishedStep> parse_published_steps(const std::string& yaml_text, const std::string& origin) {
  const model::YamlContext ctx{origin};
  const YAML::Node root = ctx.load(yaml_text);
  std::vector<PublishedStep> out;
  if (!root.IsMap() || !root["training_steps"]) return out;
  for (const auto& n : root["training_steps"]) {
    ctx.require_map(n, "a training step");
    ctx.allow_keys(n, {"model", "topology", "nodes", "tflops_per_gpu", "search", "source"}, "a training step");
    PublishedStep p;
    p.model = ctx.required<std::string>(n, "model", "a training step");
    p.topology = ctx.required<std::string>(n, "topology", "a training step");
    p.nodes = ctx.required<int>(n, "nodes", "a training step");
    p.tflops_per_gpu = ctx.required<double>(n, "tflops_per_gpu", "a training step");
    p.source = ctx.required<std::string>(n, "source", "a training step");
    if (p.nodes < 1 || !(p.tflops_per_gpu > 0)) ctx.fail(n, "nodes and tflops_per_gpu must be positive");
    if (n["search"]) {
      for (const auto& s : n["search"]) {
        const auto what = ctx.scalar<std::string>(s, "search");
        if (what == "micro_batch") p.search_micro_batch = true;
        else if (what == "schedule") p.search_schedule = true;
        else ctx.fail(s, fmt::format("search '{}' is not one of micro_batch, schedule", what));
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

StepComparison compare_published(const PublishedStep& p) {
  const ModelSpec spec = step::load_model(p.model);
  const sim::Topology t = sim::load_topology(p.topology, {{"nodes", std::to_string(p.nodes)}});
  SearchOptions o;
  o.keep = 1;
  // The table fixes these (its runs used no ZeRO).
  o.vary_tp = o.vary_cp = o.vary_pp = o.vary_recompute = o.vary_sequence_parallel = o.vary_zero = false;
  o.vary_schedule = p.search_schedule;
  o.vary_micro_batch = p.search_micro_batch;
  StepComparison c{p, {}};
  const SearchResult r = step::search_layouts(spec, t, o);
  if (r.best.empty())
    throw UserError(fmt::format("{} on {} x {} nodes: no searched layout fits in memory", p.model, p.topology, p.nodes));
  c.predicted = r.best.front();
  return c;
}

}  // namespace coconet::validation
