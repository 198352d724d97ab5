// Reading and checking a model description. Three sections (model, training,
// parallel) with the keys listed below; `--set section.key=value` replaces or
// adds a value before the checks, so an override meets the same rules.
#include "step/spec.h"

#include <filesystem>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "model/catalog.h"
#include "model/error.h"
#include "model/yaml_util.h"

namespace coconet::step {

namespace fs = std::filesystem;

std::string to_string(PipeSchedule s) {
  switch (s) {
    case PipeSchedule::gpipe: return "gpipe";
    case PipeSchedule::one_f_one_b: return "1f1b";
    case PipeSchedule::interleaved: return "interleaved";
  }
  return "1f1b";
}

std::string to_string(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "none";
}

PipeSchedule parse_pipe_schedule(const std::string& s) {
  if (s == "gpipe") return PipeSchedule::gpipe;
  if (s == "1f1b") return PipeSchedule::one_f_one_b;
  if (s == "interleaved") return PipeSchedule::interleaved;
  throw UserError(fmt::format("pipeline schedule '{}' is not one of gpipe, 1f1b, interleaved", s));
}

Recompute parse_recompute(const std::string& s) {
  if (s == "none") return Recompute::none;
  if (s == "selective") return Recompute::selective;
  if (s == "full") return Recompute::full;
  throw UserError(fmt::format("recompute '{}' is not one of none, selective, full", s));
}

bool is_model_key(const std::string& key) {
  const std::string first = key.substr(0, key.find('.'));
  return first == "model" || first == "training" || first == "parallel";
}

namespace {

constexpr std::int64_t kMaxDim = std::int64_t(1) << 40;  // far past any model, short of overflow in products

void apply_override(YAML::Node root, const std::string& origin, const std::string& key, const std::string& value) {
  const auto dot = key.find('.');
  if (dot == std::string::npos || key.find('.', dot + 1) != std::string::npos)
    throw UserError(fmt::format("{}: --set {}={}: a model value is SECTION.KEY (model, training or parallel)",
                                origin, key, value));
  const std::string section = key.substr(0, dot), name = key.substr(dot + 1);
  if (!root.IsMap() || !root[section] || !root[section].IsMap())
    throw UserError(fmt::format("{}: --set {}={}: the file has no section '{}'", origin, key, value, section));
  YAML::Node s = root[section];
  s[name] = value;  // an unknown name is rejected by the section's key check
}

class Reader {
 public:
  explicit Reader(model::YamlContext ctx) : ctx_(std::move(ctx)) {}

  YAML::Node section(const YAML::Node& root, const char* key, std::initializer_list<const char*> keys) const {
    const YAML::Node n = root[key];
    if (!n) ctx_.fail(root, fmt::format("a model description needs the section '{}'", key));
    ctx_.require_map(n, key);
    ctx_.allow_keys(n, keys, key);
    return n;
  }

  std::int64_t count(const YAML::Node& n, const char* section, const char* key, std::int64_t fallback = -1) const {
    const YAML::Node v = n[key];
    if (!v) {
      if (fallback >= 0) return fallback;
      ctx_.fail(n, fmt::format("{} needs the key '{}'", section, key));
    }
    const auto x = ctx_.scalar<std::int64_t>(v, fmt::format("{}.{}", section, key));
    if (x < 1 || x > kMaxDim)
      ctx_.fail(v, fmt::format("{}.{} must be a whole number from 1 to {}, got {}", section, key, kMaxDim, x));
    return x;
  }

  template <typename T, typename F>
  T parsed(const YAML::Node& n, const char* key, T fallback, F parse) const {
    const YAML::Node v = n[key];
    if (!v) return fallback;
    T out = fallback;
    ctx_.wrap(v, [&] { out = parse(ctx_.scalar<std::string>(v, key)); });
    return out;
  }

  [[nodiscard]] const model::YamlContext& ctx() const { return ctx_; }

 private:
  model::YamlContext ctx_;
};

Transformer read_model(const Reader& r, const YAML::Node& root) {
  const YAML::Node n =
      r.section(root, "model", {"layers", "hidden", "heads", "ffn", "sequence", "vocabulary"});
  Transformer m;
  m.layers = r.count(n, "model", "layers");
  m.hidden = r.count(n, "model", "hidden");
  m.heads = r.count(n, "model", "heads");
  m.ffn = r.count(n, "model", "ffn", 4 * m.hidden);
  m.sequence = r.count(n, "model", "sequence");
  m.vocabulary = r.count(n, "model", "vocabulary");
  if (m.hidden % m.heads != 0)
    r.ctx().fail(n["heads"], fmt::format("model.heads = {} does not divide model.hidden = {}", m.heads, m.hidden));
  return m;
}

Training read_training(const Reader& r, const YAML::Node& root) {
  const YAML::Node n = r.section(root, "training", {"micro_batch", "global_batch", "dtype", "grad_dtype"});
  Training t;
  t.micro_batch = r.count(n, "training", "micro_batch", 1);
  t.global_batch = r.count(n, "training", "global_batch");
  t.dtype = r.parsed(n, "dtype", model::DType::bf16, model::parse_dtype);
  t.grad_dtype = r.parsed(n, "grad_dtype", t.dtype, model::parse_dtype);
  if (t.dtype == model::DType::f32) r.ctx().fail(n["dtype"], "training.dtype must be f16 or bf16 (mixed precision)");
  return t;
}

Parallelism read_parallel(const Reader& r, const YAML::Node& root) {
  const YAML::Node n = r.section(root, "parallel",
                                 {"dp", "tp", "pp", "schedule", "virtual_stages", "zero", "recompute",
                                  "sequence_parallel", "tp_overlap", "bucket_MB"});
  Parallelism p;
  p.dp = n["dp"] ? int(r.count(n, "parallel", "dp")) : 0;
  p.tp = int(r.count(n, "parallel", "tp", 1));
  p.pp = int(r.count(n, "parallel", "pp", 1));
  p.schedule = r.parsed(n, "schedule", PipeSchedule::one_f_one_b, parse_pipe_schedule);
  p.virtual_stages = int(r.count(n, "parallel", "virtual_stages", 1));
  if (p.virtual_stages > 1 && p.schedule != PipeSchedule::interleaved)
    r.ctx().fail(n["virtual_stages"], "parallel.virtual_stages > 1 needs schedule: interleaved");
  if (n["zero"]) {
    p.zero = r.ctx().scalar<int>(n["zero"], "parallel.zero");
    if (p.zero < 0 || p.zero > 3) r.ctx().fail(n["zero"], fmt::format("parallel.zero must be 0 to 3, got {}", p.zero));
  }
  p.recompute = r.parsed(n, "recompute", Recompute::none, parse_recompute);
  if (n["sequence_parallel"]) p.sequence_parallel = r.ctx().scalar<bool>(n["sequence_parallel"], "sequence_parallel");
  if (n["tp_overlap"]) p.tp_overlap = r.ctx().scalar<bool>(n["tp_overlap"], "parallel.tp_overlap");
  if (n["bucket_MB"]) {
    p.bucket_MB = r.ctx().scalar<double>(n["bucket_MB"], "parallel.bucket_MB");
    if (!(p.bucket_MB > 0) || p.bucket_MB > 1e6)
      r.ctx().fail(n["bucket_MB"], fmt::format("parallel.bucket_MB must be in (0, 1e6], got {}", p.bucket_MB));
  }
  for (const char* k : {"tp", "pp"})
    if (n[k] && r.count(n, "parallel", k) > model::kMaxGpus)
      r.ctx().fail(n[k], fmt::format("parallel.{} is more than the limit of {} GPUs", k, model::kMaxGpus));
  return p;
}

}  // namespace

ModelSpec parse_model(const std::string& yaml_text, const std::string& origin, const Overrides& overrides) {
  const model::YamlContext ctx{origin};
  YAML::Node root = ctx.load(yaml_text);
  ctx.require_map(root, "a model description");
  ctx.allow_keys(root, {"name", "description", "model", "training", "parallel"}, "a model description");
  for (const auto& [k, v] : overrides) apply_override(root, origin, k, v);
  const Reader r(ctx);
  ModelSpec s;
  s.origin = origin;
  s.name = root["name"] ? ctx.scalar<std::string>(root["name"], "name") : fs::path(origin).stem().string();
  s.model = read_model(r, root);
  s.training = read_training(r, root);
  s.parallel = read_parallel(r, root);
  s.where_parallel = ctx.where(root["parallel"]);
  s.where_global_batch = ctx.where(root["training"]["global_batch"]);
  return s;
}

ModelSpec load_model(const std::string& name_or_path, const Overrides& overrides) {
  // A path as given, a path within the repository (models/x.yaml from any
  // folder), or a name in models/.
  const fs::path root(model::data_root());
  for (const fs::path& p : {fs::path(name_or_path), root / name_or_path, root / "models" / (name_or_path + ".yaml")})
    if (fs::is_regular_file(p)) return parse_model(model::read_file(p.string()), p.string(), overrides);
  throw UserError(fmt::format("no model '{}': give a path or a name of models/*.yaml ({})", name_or_path,
                              fmt::join(model::list_names("models"), ", ")));
}

bool on_tp_group(bool asked, int tp) { return asked && tp > 1; }
bool sequence_parallel_on(const Parallelism& p, const Layout& l) { return on_tp_group(p.sequence_parallel, l.tp); }
bool tp_overlap_on(const Parallelism& p, const Layout& l) { return on_tp_group(p.tp_overlap, l.tp); }

Layout resolve_layout(const ModelSpec& s, const sim::Topology& t) {
  const auto& p = s.parallel;
  const auto& m = s.model;
  Layout l;
  l.gpus = t.total_gpus();
  l.tp = p.tp;
  l.pp = p.pp;
  l.virtual_stages = p.schedule == PipeSchedule::interleaved ? p.virtual_stages : 1;
  const std::int64_t tp_pp = std::int64_t(p.tp) * p.pp;
  if (tp_pp > l.gpus)
    throw UserError(fmt::format("{}: tp x pp = {} x {} = {} GPUs, more than the cluster's {} ({} nodes x {})",
                                s.where_parallel, p.tp, p.pp, tp_pp, l.gpus, t.nodes, t.node.gpus));
  if (p.dp == 0) {
    if (l.gpus % tp_pp != 0)
      throw UserError(fmt::format("{}: tp x pp = {} does not divide the cluster's {} GPUs; give parallel.dp or "
                                  "another --nodes", s.where_parallel, tp_pp, l.gpus));
    l.dp = int(l.gpus / tp_pp);
  } else {
    l.dp = p.dp;
    const std::int64_t all = tp_pp * p.dp;
    if (all > l.gpus)
      throw UserError(fmt::format("{}: dp x tp x pp = {} x {} x {} = {} GPUs, more than the cluster's {} ({} nodes "
                                  "x {})", s.where_parallel, p.dp, p.tp, p.pp, all, l.gpus, t.nodes, t.node.gpus));
    if (all != l.gpus)
      throw UserError(fmt::format("{}: dp x tp x pp = {} x {} x {} = {} GPUs, not the cluster's {} ({} nodes x {})",
                                  s.where_parallel, p.dp, p.tp, p.pp, all, l.gpus, t.nodes, t.node.gpus));
  }
  if (m.heads % p.tp != 0)
    throw UserError(fmt::format("{}: tp = {} does not divide model.heads = {}", s.where_parallel, p.tp, m.heads));
  if (m.ffn % p.tp != 0)
    throw UserError(fmt::format("{}: tp = {} does not divide model.ffn = {}", s.where_parallel, p.tp, m.ffn));
  if (m.layers % (std::int64_t(p.pp) * l.virtual_stages) != 0)
    throw UserError(fmt::format("{}: pp x virtual_stages = {} x {} does not divide model.layers = {}",
                                s.where_parallel, p.pp, l.virtual_stages, m.layers));
  if (p.sequence_parallel && m.sequence % p.tp != 0)
    throw UserError(fmt::format("{}: sequence parallelism needs tp = {} to divide model.sequence = {}",
                                s.where_parallel, p.tp, m.sequence));
  const std::int64_t per_step = s.training.micro_batch * l.dp;
  if (s.training.global_batch % per_step != 0)
    throw UserError(fmt::format("{}: training.global_batch = {} is not a whole number of micro_batch x dp = {} x {}",
                                s.where_global_batch, s.training.global_batch, s.training.micro_batch, l.dp));
  l.micro_batches = s.training.global_batch / per_step;
  if (l.virtual_stages > 1 && l.micro_batches % p.pp != 0)
    throw UserError(fmt::format("{}: the interleaved schedule needs the {} micro-batches to be a multiple of pp = {}",
                                s.where_parallel, l.micro_batches, p.pp));
  return l;
}

double layer_parameters(const Transformer& m) {
  const double h = double(m.hidden), f = double(m.ffn);
  // QKV (3h^2 + 3h), output projection (h^2 + h), FC1 (hf + f), FC2 (fh + h), two LayerNorms (4h).
  return 4 * h * h + 2 * h * f + 9 * h + f;
}

double parameters(const Transformer& m) {
  // Layers, word embedding (shared with the output layer), position embedding, final LayerNorm.
  return double(m.layers) * layer_parameters(m) + double(m.vocabulary) * double(m.hidden) +
         double(m.sequence) * double(m.hidden) + 2.0 * double(m.hidden);
}

}  // namespace coconet::step
