// Reading and checking a model description. Three sections (model, training,
// parallel) with the keys listed below; `--set section.key=value` replaces or
// adds a value before the checks, so an override meets the same rules.
#include "step/spec.h"

#include <algorithm>
#include <filesystem>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "model/catalog.h"
#include "model/enum_names.h"
#include "model/error.h"
#include "model/yaml_util.h"

namespace coconet::step {

namespace fs = std::filesystem;

namespace {

constexpr model::EnumName<PipeSchedule> kPipeSchedules[] = {
    {PipeSchedule::gpipe, "gpipe"}, {PipeSchedule::one_f_one_b, "1f1b"}, {PipeSchedule::interleaved, "interleaved"}};
constexpr model::EnumName<Recompute> kRecomputes[] = {
    {Recompute::none, "none"},
    {Recompute::selective, "selective"},
    {Recompute::full, "full"},
    {Recompute::mla_up_proj, "mla_up_proj"},
    {Recompute::moe, "moe"}};
constexpr model::EnumName<FfnType> kFfnTypes[] = {
    {FfnType::gelu, "gelu"}, {FfnType::swiglu, "swiglu"}, {FfnType::squared_relu, "squared_relu"}};
constexpr model::EnumName<Norm> kNorms[] = {{Norm::layernorm, "layernorm"}, {Norm::rmsnorm, "rmsnorm"}};
constexpr model::EnumName<Family> kFamilyNames[] = {
    {Family::gpt, "gpt"}, {Family::llama, "llama"}, {Family::nemotron, "nemotron"}, {Family::mla, "mla"}};
constexpr model::EnumName<AttentionKind> kAttentionKinds[] = {{AttentionKind::mha, "mha"},
                                                              {AttentionKind::mla, "mla"}};
constexpr model::EnumName<CpComm> kCpComms[] = {{CpComm::ring, "ring"}, {CpComm::allgather, "allgather"}};
constexpr model::EnumName<Router> kRouters[] = {{Router::dropless, "dropless"}, {Router::capacity, "capacity"}};
constexpr model::EnumName<Dispatcher> kDispatchers[] = {{Dispatcher::alltoall, "alltoall"},
                                                        {Dispatcher::deepep, "deepep"}};

// The value `s` names in `table`, or a UserError "<what> 's' is not one of <names>".
template <typename E, std::size_t N>
E parse_named(const model::EnumName<E> (&table)[N], const std::string& s, const char* what) {
  if (const auto v = model::value_named(table, s)) return *v;
  throw UserError(fmt::format("{} '{}' is not one of {}", what, s, model::names_of(table)));
}

}  // namespace

std::string to_string(PipeSchedule s) { return std::string(model::name_of(kPipeSchedules, s)); }
std::string to_string(Recompute r) { return std::string(model::name_of(kRecomputes, r)); }
PipeSchedule parse_pipe_schedule(const std::string& s) { return parse_named(kPipeSchedules, s, "pipeline schedule"); }
Recompute parse_recompute(const std::string& s) { return parse_named(kRecomputes, s, "recompute"); }
std::string to_string(FfnType f) { return std::string(model::name_of(kFfnTypes, f)); }
std::string to_string(Norm n) { return std::string(model::name_of(kNorms, n)); }
std::string to_string(Family f) { return std::string(model::name_of(kFamilyNames, f)); }
std::string to_string(AttentionKind a) { return std::string(model::name_of(kAttentionKinds, a)); }
AttentionKind parse_attention_kind(const std::string& s) { return parse_named(kAttentionKinds, s, "attention"); }

namespace {

// The families, one row each: which (ffn_type, norm, attention) triple chooses it and what
// its layer has. Every place that differs by family reads this table.
constexpr FamilyTraits kFamilies[] = {
    // Megatron-LM's GPT (megatron/core/models/gpt: add_bias_linear, hidden
    // and attention dropout, learned_absolute positions).
    {Family::gpt, FfnType::gelu, Norm::layernorm, AttentionKind::mha, "megatron_layer_", true, true, true, false},
    // Llama (Touvron et al. 2023; Llama Team 2024, section 3.1).
    {Family::llama, FfnType::swiglu, Norm::rmsnorm, AttentionKind::mha, "llama_layer_", false, false, false, true},
    // Nemotron-4 (arXiv:2402.16819 section 2; NeMo's NemotronConfig:
    // add_bias_linear False, hidden_dropout and attention_dropout 0, rope).
    {Family::nemotron, FfnType::squared_relu, Norm::layernorm, AttentionKind::mha, "nemotron_layer_", false, false,
     false, true},
    // DeepSeek-V2/V3 (arXiv:2405.04434 section 2.1, arXiv:2412.19437 section
    // 2.1.1; Megatron-core's MLASelfAttention: no biases, no dropout, RoPE on
    // the rotary dimensions).
    {Family::mla, FfnType::swiglu, Norm::rmsnorm, AttentionKind::mla, "mla_layer_", false, false, false, false},
};

}  // namespace

const FamilyTraits& family_traits(Family f) {
  for (const FamilyTraits& t : kFamilies)
    if (t.family == f) return t;
  throw InternalError("family_traits: a family without a row");
}

const FamilyTraits* family_of(FfnType f, Norm n, AttentionKind a) {
  for (const FamilyTraits& t : kFamilies)
    if (t.ffn_type == f && t.norm == n && t.attention == a) return &t;
  return nullptr;
}

Family Transformer::family() const {
  const FamilyTraits* t = family_of(ffn_type, norm, attention);
  return t != nullptr ? t->family : Family::gpt;
}

double Transformer::attention_weights() const {
  const double h = double(hidden);
  if (!latent()) return h * double(attention_width() + 2 * kv_width()) + double(attention_width()) * h;
  const double down = h * double(mla.q_lora_rank) + h * double(mla.kv_lora_rank + mla.qk_rope_head_dim);
  return down + up_projection_weights() + double(context_width()) * h;
}

double Transformer::up_projection_weights() const {
  if (!latent()) return 0;
  const double a = double(heads);
  return double(mla.q_lora_rank) * a * double(head_dim) +
         double(mla.kv_lora_rank) * a * double(mla.qk_nope_head_dim + mla.v_head_dim);
}

double Transformer::latent_norm_parameters() const {
  return latent() ? double(mla.q_lora_rank + mla.kv_lora_rank) : 0.0;
}

FfnType parse_ffn_type(const std::string& s) { return parse_named(kFfnTypes, s, "ffn_type"); }
Norm parse_norm(const std::string& s) { return parse_named(kNorms, s, "norm"); }
std::string to_string(CpComm c) { return std::string(model::name_of(kCpComms, c)); }
CpComm parse_cp_comm(const std::string& s) { return parse_named(kCpComms, s, "cp_comm"); }
std::string to_string(Router r) { return std::string(model::name_of(kRouters, r)); }
Router parse_router(const std::string& s) { return parse_named(kRouters, s, "router"); }
std::string to_string(Dispatcher d) { return std::string(model::name_of(kDispatchers, d)); }
Dispatcher parse_dispatcher(const std::string& s) { return parse_named(kDispatchers, s, "dispatcher"); }

double Moe::hottest_share() const {
  return router == Router::capacity ? std::min(imbalance, capacity_factor) : imbalance;
}

bool is_model_key(const std::string& key) {
  const std::string first = key.substr(0, key.find('.'));
  return first == "model" || first == "training" || first == "parallel" || first == "pipeline" || first == "moe";
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

  // A whole number from 1 to `limit` (`fallback` when the key is absent and
  // it is not negative).
  std::int64_t count(const YAML::Node& n, const char* section, const char* key, std::int64_t fallback = -1,
                     std::int64_t limit = kMaxDim) const {
    const YAML::Node v = n[key];
    if (!v) {
      if (fallback >= 0) return fallback;
      ctx_.fail(n, fmt::format("{} needs the key '{}'", section, key));
    }
    const auto x = ctx_.scalar<std::int64_t>(v, fmt::format("{}.{}", section, key));
    if (x < 1 || x > limit)
      ctx_.fail(v, fmt::format("{}.{} must be a whole number from 1 to {}, got {}", section, key, limit, x));
    return x;
  }

  // A count of GPUs (dp, tp, cp, pp): at most the limit of a cluster, so an int.
  int gpus(const YAML::Node& n, const char* key, std::int64_t fallback) const {
    return int(count(n, "parallel", key, fallback, model::kMaxGpus));
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

// The layer programs' families (spec.h, Family) and what each can express:
// the megatron_layer programs have one K/V head per query head and an
// attention as wide as the hidden size.
// The key's node for a message, or the section's when the key is not written.
YAML::Node key_or_section(const YAML::Node& n, const char* key) { return n[key] ? n[key] : n; }

// The pairs that have programs, for messages: "gelu with layernorm
// (workloads/megatron_layer_*), ...".
std::string family_pairs() {
  std::vector<std::string> out;
  for (const FamilyTraits& t : kFamilies)
    out.push_back(fmt::format("{} with {}{} (workloads/{}*)", to_string(t.ffn_type), to_string(t.norm),
                              t.attention == AttentionKind::mha ? "" : " and attention " + to_string(t.attention),
                              t.programs));
  return fmt::format("{}", fmt::join(out, ", "));
}

// The families' programs that take grouped-query attention, for messages.
std::string grouped_kv_pairs() {
  std::vector<std::string> out;
  for (const FamilyTraits& t : kFamilies)
    if (t.grouped_kv) out.push_back(fmt::format("ffn_type {}, norm {}", to_string(t.ffn_type), to_string(t.norm)));
  return fmt::format("{}", fmt::join(out, " or "));
}

void check_family(const Reader& r, const YAML::Node& n, const Transformer& m) {
  const FamilyTraits* f = family_of(m.ffn_type, m.norm, m.attention);
  if (f == nullptr)
    r.ctx().fail(m.latent() ? n["attention"] : n["norm"] ? n["norm"] : key_or_section(n, "ffn_type"),
                 fmt::format("model.ffn_type {} with model.norm {}{} has no layer programs: coconet step prices {}",
                             to_string(m.ffn_type), to_string(m.norm),
                             m.latent() ? " and attention " + to_string(m.attention) : "", family_pairs()));
  if (f->grouped_kv || m.latent()) return;
  if (m.kv_heads != m.heads)
    r.ctx().fail(key_or_section(n, "kv_heads"),
                 fmt::format("model.kv_heads = {} < heads = {} (grouped-query attention) needs {}: the {}* programs "
                             "have one K/V head per query head",
                             m.kv_heads, m.heads, grouped_kv_pairs(), f->programs));
  if (m.attention_width() != m.hidden)
    r.ctx().fail(key_or_section(n, "head_dim"),
                 fmt::format("model.heads x head_dim = {} x {} is not model.hidden = {}: needs {} (the {}* "
                             "programs' attention is as wide as the hidden size)",
                             m.heads, m.head_dim, m.hidden, grouped_kv_pairs(), f->programs));
}

// The MLA keys (model.attention: mla), as DeepSeek-V3's config.json names them.
constexpr const char* kMlaKeys[] = {"q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim",
                                    "v_head_dim"};

// attention mla: its five sizes, each required; no head_dim or kv_heads (MLA
// has one K and one V per head, of the sizes these give). Without it, none
// of the five.
void read_mla(const Reader& r, const YAML::Node& n, Transformer& m) {
  if (!m.latent()) {
    for (const char* k : kMlaKeys)
      if (n[k]) r.ctx().fail(n[k], fmt::format("model.{} is a size of multi-head latent attention: it needs "
                                               "model.attention: mla", k));
    return;
  }
  for (const char* k : {"head_dim", "kv_heads"})
    if (n[k]) r.ctx().fail(n[k], fmt::format("model.{} does not apply with model.attention: mla (each head's query "
                                             "and key have qk_nope_head_dim + qk_rope_head_dim dimensions, its "
                                             "value v_head_dim, one K and V per head): remove it", k));
  m.mla.q_lora_rank = r.count(n, "model", "q_lora_rank");
  m.mla.kv_lora_rank = r.count(n, "model", "kv_lora_rank");
  m.mla.qk_rope_head_dim = r.count(n, "model", "qk_rope_head_dim");
  m.mla.qk_nope_head_dim = r.count(n, "model", "qk_nope_head_dim");
  m.mla.v_head_dim = r.count(n, "model", "v_head_dim");
  m.head_dim = m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim;
  m.kv_heads = m.heads;
}

Transformer read_model(const Reader& r, const YAML::Node& root) {
  const YAML::Node n =
      r.section(root, "model", {"layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "ffn_type", "norm",
                                "tied_embeddings", "sequence", "vocabulary", "attention", "q_lora_rank",
                                "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "mtp_layers"});
  Transformer m;
  m.layers = r.count(n, "model", "layers", -1, kMaxLayers);
  m.hidden = r.count(n, "model", "hidden");
  m.heads = r.count(n, "model", "heads");
  m.kv_heads = r.count(n, "model", "kv_heads", m.heads);
  m.ffn = r.count(n, "model", "ffn", 4 * m.hidden);
  m.sequence = r.count(n, "model", "sequence");
  m.vocabulary = r.count(n, "model", "vocabulary");
  m.mtp_layers = r.count(n, "model", "mtp_layers", 0, kMaxMtpLayers);
  m.ffn_type = r.parsed(n, "ffn_type", FfnType::gelu, parse_ffn_type);
  m.norm = r.parsed(n, "norm", Norm::layernorm, parse_norm);
  if (n["tied_embeddings"]) m.tied_embeddings = r.ctx().scalar<bool>(n["tied_embeddings"], "model.tied_embeddings");
  m.attention = r.parsed(n, "attention", AttentionKind::mha, parse_attention_kind);
  read_mla(r, n, m);  // MLA's head_dim and kv_heads follow from its sizes
  if (!m.latent() && n["head_dim"]) {
    m.head_dim = r.count(n, "model", "head_dim");
  } else if (!m.latent()) {
    if (m.hidden % m.heads != 0)
      r.ctx().fail(n["heads"], fmt::format("model.heads = {} does not divide model.hidden = {} (or give "
                                           "model.head_dim)", m.heads, m.hidden));
    m.head_dim = m.hidden / m.heads;
  }
  if (m.kv_heads > m.heads || m.heads % m.kv_heads != 0)
    r.ctx().fail(key_or_section(n, "kv_heads"), fmt::format("model.kv_heads = {} does not divide model.heads = {} (each K/V head "
                                            "serves a whole group of query heads)", m.kv_heads, m.heads));
  check_family(r, n, m);
  return m;
}

Training read_training(const Reader& r, const YAML::Node& root) {
  const YAML::Node n = r.section(root, "training",
                                 {"micro_batch", "global_batch", "dtype", "grad_dtype", "grad_reduce_dtype", "attention",
                                  "fused_kernels"});
  Training t;
  t.micro_batch = r.count(n, "training", "micro_batch", 1);
  t.global_batch = r.count(n, "training", "global_batch");
  t.fp8 = n["dtype"] && n["dtype"].IsScalar() && n["dtype"].Scalar() == "fp8";
  t.dtype = t.fp8 ? model::DType::bf16 : r.parsed(n, "dtype", model::DType::bf16, model::parse_dtype);
  // Megatron-LM's main gradients: fp32 under bf16, the values' dtype under f16 (spec.h).
  const model::DType main_grads = t.dtype == model::DType::bf16 ? model::DType::f32 : t.dtype;
  t.grad_dtype = r.parsed(n, "grad_dtype", main_grads, model::parse_dtype);
  t.grad_reduce_dtype = r.parsed(n, "grad_reduce_dtype", t.grad_dtype, model::parse_dtype);
  if (n["attention"]) {
    const std::string a = r.ctx().scalar<std::string>(n["attention"], "training.attention");
    if (a != "flash" && a != "materialised")
      r.ctx().fail(n["attention"], "training.attention must be flash or materialised, got '" + a + "'");
    t.flash_attention = a == "flash";
  }
  if (n["fused_kernels"]) t.fused_kernels = r.ctx().scalar<bool>(n["fused_kernels"], "training.fused_kernels");
  if (t.dtype == model::DType::f32) r.ctx().fail(n["dtype"], "training.dtype must be f16 or bf16 (mixed precision)");
  return t;
}

Parallelism read_parallel(const Reader& r, const YAML::Node& root) {
  const YAML::Node n = r.section(root, "parallel",
                                 {"dp", "tp", "cp", "cp_comm", "pp", "ep", "etp", "schedule", "virtual_stages",
                                  "zero", "recompute", "sequence_parallel", "tp_overlap", "bucket_MB", "dp_overlap"});
  Parallelism p;
  p.dp = n["dp"] ? r.gpus(n, "dp", -1) : 0;
  p.tp = r.gpus(n, "tp", 1);
  p.cp = r.gpus(n, "cp", 1);
  p.cp_comm = r.parsed(n, "cp_comm", CpComm::ring, parse_cp_comm);
  if (n["dp_overlap"]) p.dp_overlap = r.ctx().scalar<bool>(n["dp_overlap"], "parallel.dp_overlap");
  p.pp = r.gpus(n, "pp", 1);
  p.ep = r.gpus(n, "ep", 1);
  p.etp = n["etp"] ? r.gpus(n, "etp", -1) : 0;
  p.schedule = r.parsed(n, "schedule", PipeSchedule::one_f_one_b, parse_pipe_schedule);
  // Each virtual stage is a model chunk of every pipeline stage: more of them than layers leaves chunks empty everywhere.
  p.virtual_stages = int(r.count(n, "parallel", "virtual_stages", 1, kMaxLayers));
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
  return p;
}

// The optional moe section (spec.h Moe) and what it asks of the model and
// the parallel layout that needs no cluster: the experts' programs are
// SwiGLU (the llama family), top_k at most the experts, ep dividing the
// experts, dense_layers below the layers.
constexpr double kMaxFactor = 1e3;  // capacity_factor, imbalance: far past any router (GShard's 2, Switch's 1.25)

double factor(const Reader& r, const YAML::Node& n, const char* key, double lo, double fallback) {
  const YAML::Node v = n[key];
  if (!v) return fallback;
  const auto x = r.ctx().scalar<double>(v, fmt::format("moe.{}", key));
  if (!(x >= lo) || x > kMaxFactor)
    r.ctx().fail(v, fmt::format("moe.{} must be from {} to {}, got {}", key, lo, kMaxFactor, x));
  return x;
}

void read_moe(const Reader& r, const YAML::Node& root, ModelSpec& s) {
  const YAML::Node par = root["parallel"];
  const YAML::Node n = root["moe"];
  if (!n) {
    // ep 1 is every dense model's; any other ep, or an etp, lays out experts there are none of.
    if (s.parallel.ep > 1) r.ctx().fail(par["ep"], "parallel.ep needs a moe section (experts to lay out)");
    if (par["etp"]) r.ctx().fail(par["etp"], "parallel.etp needs a moe section (experts to lay out)");
    if (s.parallel.recompute == Recompute::moe)
      r.ctx().fail(par["recompute"], "parallel.recompute moe runs each MoE layer's MLP again: it needs a moe "
                                     "section (or recompute none, selective or full)");
    return;
  }
  r.ctx().require_map(n, "moe");
  r.ctx().allow_keys(n, {"experts", "top_k", "expert_ffn", "shared_experts", "dense_layers", "router",
                         "capacity_factor", "imbalance", "dispatcher", "max_nodes", "a2a_overlap",
                         "shared_expert_overlap"},
                     "moe");
  Moe& m = s.moe;
  m.experts = r.count(n, "moe", "experts");
  m.top_k = r.count(n, "moe", "top_k");
  m.expert_ffn = r.count(n, "moe", "expert_ffn", s.model.ffn);
  const YAML::Node shared = n["shared_experts"], dense = n["dense_layers"];
  m.shared_experts = shared ? r.ctx().scalar<std::int64_t>(shared, "moe.shared_experts") : 0;
  if (m.shared_experts < 0 || m.shared_experts > m.experts)
    r.ctx().fail(shared, fmt::format("moe.shared_experts must be from 0 to moe.experts = {}, got {}", m.experts,
                                     m.shared_experts));
  m.dense_layers = dense ? r.ctx().scalar<std::int64_t>(dense, "moe.dense_layers") : 0;
  if (m.dense_layers < 0 || m.dense_layers >= s.model.layers)
    r.ctx().fail(dense, fmt::format("moe.dense_layers must be from 0 to model.layers - 1 = {} (a layer at least "
                                    "with experts), got {}", s.model.layers - 1, m.dense_layers));
  m.router = r.parsed(n, "router", Router::dropless, parse_router);
  m.capacity_factor = factor(r, n, "capacity_factor", 1.0 / double(m.experts), 1.0);
  if (n["capacity_factor"] && m.router != Router::capacity)
    r.ctx().fail(n["capacity_factor"], "moe.capacity_factor needs router: capacity (a dropless router keeps every "
                                       "token)");
  m.imbalance = factor(r, n, "imbalance", 1.0, 1.0);
  m.dispatcher = r.parsed(n, "dispatcher", Dispatcher::alltoall, parse_dispatcher);
  m.max_nodes = n["max_nodes"] ? int(r.count(n, "moe", "max_nodes", -1, model::kMaxGpus)) : 0;
  if (m.max_nodes > 0 && m.dispatcher != Dispatcher::deepep)
    r.ctx().fail(n["max_nodes"], "moe.max_nodes needs dispatcher: deepep (node-limited routing bounds the nodes a "
                                 "token is sent to once each)");
  if (n["a2a_overlap"]) m.a2a_overlap = r.ctx().scalar<bool>(n["a2a_overlap"], "moe.a2a_overlap");
  if (m.a2a_overlap && s.parallel.schedule == PipeSchedule::gpipe)
    r.ctx().fail(n["a2a_overlap"], "moe.a2a_overlap needs a 1F1B schedule (parallel.schedule 1f1b or interleaved): "
                                   "GPipe runs every forward before any backward, so no forward has a backward "
                                   "beside it to hide its all-to-alls behind");
  if (n["shared_expert_overlap"])
    m.shared_expert_overlap = r.ctx().scalar<bool>(n["shared_expert_overlap"], "moe.shared_expert_overlap");
  if (m.shared_expert_overlap && m.shared_experts == 0)
    r.ctx().fail(n["shared_expert_overlap"], "moe.shared_expert_overlap needs moe.shared_experts (experts every "
                                             "token passes through, to run beside the all-to-alls)");
  if (m.top_k > m.experts)
    r.ctx().fail(n["top_k"], fmt::format("moe.top_k = {} is more than moe.experts = {}: a token cannot pick more "
                                         "experts than there are", m.top_k, m.experts));
  if (s.model.family() != Family::llama && s.model.family() != Family::mla)
    r.ctx().fail(n, "a moe section needs model.ffn_type swiglu and norm rmsnorm: the experts' programs "
                    "(workloads/moe_layer_*) are SwiGLU, the layer's attention the llama or mla family's");
  const auto& p = s.parallel;
  const YAML::Node at = par["ep"] ? par["ep"] : par;
  if (m.experts % p.ep != 0)
    r.ctx().fail(at, fmt::format("parallel.ep = {} does not divide moe.experts = {}: each expert-parallel rank "
                                 "holds a whole number of experts", p.ep, m.experts));
  if (p.etp > 0 && m.expert_ffn % p.etp != 0)
    r.ctx().fail(par["etp"], fmt::format("parallel.etp = {} does not divide moe.expert_ffn = {}", p.etp,
                                         m.expert_ffn));
}

// The optional pipeline section: layers_per_stage, a list of whole numbers
// (0 allowed: a virtual stage with only the embedding or the output layer).
void read_pipeline(const model::YamlContext& ctx, const YAML::Node& root, ModelSpec& s) {
  const YAML::Node n = root["pipeline"];
  if (!n) return;
  ctx.require_map(n, "pipeline");
  ctx.allow_keys(n, {"layers_per_stage"}, "pipeline");
  const YAML::Node list = n["layers_per_stage"];
  if (!list) return;
  s.where_layers_per_stage = ctx.where(list);
  if (!list.IsSequence() || list.size() == 0)
    ctx.fail(list, "pipeline.layers_per_stage must be a list of layer counts, one per virtual stage");
  std::int64_t sum = 0;
  for (const YAML::Node& v : list) {
    const auto x = ctx.scalar<std::int64_t>(v, "pipeline.layers_per_stage");
    if (x < 0 || x > s.model.layers)
      ctx.fail(v, fmt::format("pipeline.layers_per_stage: {} is not a layer count from 0 to model.layers = {}", x,
                              s.model.layers));
    sum += x;
    s.parallel.layers_per_stage.push_back(int(x));
  }
  const auto& p = s.parallel;
  const std::int64_t chunks =
      std::int64_t(p.pp) * (p.schedule == PipeSchedule::interleaved ? p.virtual_stages : 1);
  if (std::int64_t(list.size()) != chunks)
    ctx.fail(list, fmt::format("pipeline.layers_per_stage has {} entries, not pp x virtual_stages = {}",
                               list.size(), chunks));
  if (sum != s.model.layers)
    ctx.fail(list, fmt::format("pipeline.layers_per_stage sums to {}, not model.layers = {}", sum, s.model.layers));
}

// A name is printed in every report: printable, one line, at most kMaxNameChars.
void check_name(const model::YamlContext& ctx, const YAML::Node& where, const std::string& name) {
  if (name.empty() || name.size() > kMaxNameChars)
    ctx.fail(where, fmt::format("name must have 1 to {} characters, got {}", kMaxNameChars, name.size()));
  for (const char c : name)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      ctx.fail(where, fmt::format("name holds the control character 0x{:02x}: a name is one printable line",
                                  static_cast<unsigned char>(c)));
}

}  // namespace

ModelSpec parse_model(const std::string& yaml_text, const std::string& origin, const Overrides& overrides) {
  const model::YamlContext ctx{origin};
  YAML::Node root = ctx.load(yaml_text);
  ctx.require_map(root, "a model description");
  ctx.allow_keys(root, {"name", "description", "model", "training", "parallel", "pipeline", "moe"},
                 "a model description");
  for (const auto& [k, v] : overrides) apply_override(root, origin, k, v);
  const Reader r(ctx);
  ModelSpec s;
  s.origin = origin;
  s.name = root["name"] ? ctx.scalar<std::string>(root["name"], "name") : fs::path(origin).stem().string();
  check_name(ctx, root["name"] ? root["name"] : root, s.name);
  s.model = read_model(r, root);
  s.training = read_training(r, root);
  s.parallel = read_parallel(r, root);
  s.where_parallel = ctx.where(root["parallel"]);
  s.where_layers_per_stage = s.where_parallel;
  const YAML::Node par = root["parallel"];
  s.where_ep = ctx.where(par["ep"] ? par["ep"] : par["etp"] ? par["etp"] : par);
  if (s.parallel.recompute == Recompute::mla_up_proj && !s.model.latent())
    ctx.fail(par["recompute"], "parallel.recompute mla_up_proj runs multi-head latent attention's up-projections "
                               "again: it needs model.attention: mla (or recompute none, selective or full)");
  read_moe(r, root, s);
  read_pipeline(ctx, root, s);
  s.where_global_batch = ctx.where(root["training"]["global_batch"]);
  return s;
}

bool names_a_model(const std::string& name_or_path) {
  const fs::path root(model::data_root());
  std::error_code ec;
  if (fs::is_regular_file(root / "models" / (name_or_path + ".yaml"), ec)) return true;
  for (const fs::path& p : {fs::path(name_or_path), root / name_or_path}) {
    if (!fs::is_regular_file(p, ec)) continue;
    try {
      const model::YamlContext ctx{p.string()};
      const YAML::Node n = ctx.load(model::read_file(p.string()));
      return n.IsMap() && n["model"] && n["parallel"];
    } catch (const UserError&) {
      return false;  // not a YAML file a model could be: the caller's own reading says why
    }
  }
  return false;
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
  l.cp = p.cp;
  l.pp = p.pp;
  l.virtual_stages = p.schedule == PipeSchedule::interleaved ? p.virtual_stages : 1;
  const std::int64_t tp_pp = std::int64_t(p.tp) * p.cp * p.pp;
  // "tp x pp = 2 x 4", with cp where it is used; dp in front where it is given.
  const auto named = [&](bool with_dp) {
    std::string names = with_dp ? "dp x tp" : "tp", values = with_dp ? fmt::format("{} x {}", p.dp, p.tp)
                                                                     : std::to_string(p.tp);
    if (p.cp > 1) names += " x cp", values += fmt::format(" x {}", p.cp);
    return fmt::format("{} x pp = {} x {}", names, values, p.pp);
  };
  if (tp_pp > l.gpus)
    throw UserError(fmt::format("{}: {} = {} GPUs, more than the cluster's {} ({} nodes x {})", s.where_parallel,
                                named(false), tp_pp, l.gpus, t.nodes, t.node.gpus));
  if (p.dp == 0) {
    if (l.gpus % tp_pp != 0)
      throw UserError(fmt::format("{}: {} = {} does not divide the cluster's {} GPUs; give parallel.dp or "
                                  "another --nodes", s.where_parallel, named(false), tp_pp, l.gpus));
    l.dp = int(l.gpus / tp_pp);
  } else {
    l.dp = p.dp;
    const std::int64_t all = tp_pp * p.dp;
    if (all != l.gpus)
      throw UserError(fmt::format("{}: {} = {} GPUs, {} the cluster's {} ({} nodes x {})", s.where_parallel,
                                  named(true), all, all > l.gpus ? "more than" : "not", l.gpus, t.nodes,
                                  t.node.gpus));
  }
  if (s.moe.on()) {
    // Megatron-core's MoE parallel folding (parallel.h Parallelism::ep).
    l.ep = p.ep;
    l.etp = p.etp > 0 ? p.etp : p.tp;
    const std::int64_t stage_ranks = std::int64_t(p.tp) * p.cp * l.dp, expert_ranks = std::int64_t(l.ep) * l.etp;
    if (stage_ranks % expert_ranks != 0)
      throw UserError(fmt::format("{}: ep x etp = {} x {} = {} does not divide the {} ranks of a pipeline stage (tp x "
                                  "cp x dp = {} x {} x {}) the experts are laid out over (Megatron-core's expert "
                                  "data parallel size, tp x cp x dp / (ep x etp), must be whole)",
                                  s.where_ep, l.ep, l.etp, expert_ranks, stage_ranks, p.tp, p.cp, l.dp));
    l.edp = int(stage_ranks / expert_ranks);
    if (s.moe.expert_ffn % l.etp != 0)
      throw UserError(fmt::format("{}: etp = {} (tp unless parallel.etp says) does not divide moe.expert_ffn = {}",
                                  s.where_ep, l.etp, s.moe.expert_ffn));
  }
  if (p.cp > 1 && m.sequence % (2 * std::int64_t(p.cp)) != 0)
    throw UserError(fmt::format("{}: context parallelism cuts each sequence into 2 x cp = {} chunks (causal load "
                                "balance): it must divide model.sequence = {}",
                                s.where_parallel, 2 * p.cp, m.sequence));
  if (m.heads % p.tp != 0)
    throw UserError(fmt::format("{}: tp = {} does not divide model.heads = {}", s.where_parallel, p.tp, m.heads));
  if (m.kv_heads % p.tp != 0)
    throw UserError(fmt::format("{}: tp = {} does not divide model.kv_heads = {} (Megatron-LM gives each TP rank "
                                "whole K/V groups)", s.where_parallel, p.tp, m.kv_heads));
  if (m.ffn % p.tp != 0)
    throw UserError(fmt::format("{}: tp = {} does not divide model.ffn = {}", s.where_parallel, p.tp, m.ffn));
  if (p.pp > m.layers)
    throw UserError(fmt::format("{}: pp = {} is more than model.layers = {}: a stage without a layer",
                                s.where_parallel, p.pp, m.layers));
  // Megatron-LM splits the layers, and at most the embedding and the loss as
  // one layer each (account_for_embedding_in_pipeline_split,
  // account_for_loss_in_pipeline_split), over pp x virtual stages: more
  // chunks than that leaves one with nothing to run.
  const std::int64_t chunks = std::int64_t(p.pp) * l.virtual_stages;
  if (chunks > m.layers + 2)
    throw UserError(fmt::format("{}: pp x virtual_stages = {} x {} = {} model chunks, more than model.layers + 2 = {} "
                                "(the layers, the embedding and the loss): lower pp or virtual_stages",
                                s.where_parallel, p.pp, l.virtual_stages, chunks, m.layers + 2));
  if (p.layers_per_stage.empty()) {
    l.chunk_layers = balanced_stage_layers(m.layers, l.chunks());
  } else {
    std::int64_t sum = 0;
    for (int x : p.layers_per_stage) sum += x;
    if (std::int64_t(p.layers_per_stage.size()) != l.chunks() || sum != m.layers)
      throw UserError(fmt::format("{}: pipeline.layers_per_stage has {} entries summing to {}, not pp x "
                                  "virtual_stages = {} entries summing to model.layers = {}",
                                  s.where_layers_per_stage, p.layers_per_stage.size(), sum, l.chunks(), m.layers));
    l.chunk_layers = p.layers_per_stage;
  }
  if (s.moe.on()) {
    // The first moe.dense_layers layers (model order) are dense.
    std::int64_t first = 0;
    l.chunk_moe_layers.reserve(l.chunk_layers.size());
    for (const int n : l.chunk_layers) {
      l.chunk_moe_layers.push_back(int(std::max<std::int64_t>(0, first + n - std::max(first, s.moe.dense_layers))));
      first += n;
    }
  }
  if (p.sequence_parallel && (m.sequence / p.cp) % p.tp != 0)
    throw UserError(fmt::format("{}: sequence parallelism needs tp = {} to divide the sequence per context-parallel "
                                "rank, model.sequence / cp = {} / {}",
                                s.where_parallel, p.tp, m.sequence, p.cp));
  const std::int64_t per_step = s.training.micro_batch * l.dp;
  if (s.training.global_batch % per_step != 0)
    throw UserError(fmt::format("{}: training.global_batch = {} is not a whole number of micro_batch x dp = {} x {}",
                                s.where_global_batch, s.training.global_batch, s.training.micro_batch, l.dp));
  l.micro_batches = s.training.global_batch / per_step;
  // micro_batches <= 2^22 and chunks <= 2^16 + 2 first: the product stays far inside 63 bits.
  const std::int64_t ops = l.micro_batches > kMaxPipelineOps ? l.micro_batches
                                                               : 2 * l.micro_batches * std::int64_t(l.chunks());
  if (ops > kMaxPipelineOps)
    throw UserError(fmt::format("{}: training.global_batch = {} makes {} micro-batches per pipeline (global_batch / "
                                "(micro_batch x dp)), {} forward and backward passes over pp x virtual_stages = {} "
                                "model chunks: more than the limit of {} a step lays out; raise "
                                "training.micro_batch or lower the global batch",
                                s.where_global_batch, s.training.global_batch, l.micro_batches, ops, l.chunks(),
                                kMaxPipelineOps));
  if (l.virtual_stages > 1 && l.micro_batches % p.pp != 0)
    throw UserError(fmt::format("{}: the interleaved schedule needs the {} micro-batches to be a multiple of pp = {}",
                                s.where_parallel, l.micro_batches, p.pp));
  return l;
}

std::vector<int> balanced_stage_layers(std::int64_t layers, int chunks) {
  if (chunks < 1) throw InternalError("balanced_stage_layers: no virtual stage");
  const auto base = int(layers / chunks);
  const auto longer = int(layers % chunks);  // stages with base + 1 layers
  std::vector<int> out(std::size_t(chunks), base + 1);
  if (longer == 0) std::fill(out.begin(), out.end(), base);
  // The chunks - longer short ones from both ends inwards: 0, last, 1, last - 1, ...
  for (int i = 0, shorter = longer == 0 ? 0 : chunks - longer; i < shorter; ++i)
    out[std::size_t(i % 2 == 0 ? i / 2 : chunks - 1 - i / 2)] = base;
  return out;
}

int Layout::layers_of_stage(int stage) const {
  int n = 0;
  for (int c = 0; c < virtual_stages; ++c) n += chunk_layers[std::size_t(c * pp + stage)];
  return n;
}

double norm_parameters(const Transformer& m) { return (m.norm == Norm::layernorm ? 2.0 : 1.0) * double(m.hidden); }

double layer_parameters(const Transformer& m) {
  const double h = double(m.hidden), f = double(m.ffn), ad = double(m.attention_width()),
               kvd = double(m.kv_width());
  // QKV h (a + 2 kv) D, projection a D h, the MLP's matrices, two norms; for
  // GPT (a D = h, kv = a: 4h^2 + 2hf + 9h + f) the biases of QKV (3h),
  // projection (h), FC1 (f) and FC2 (h).
  const double weights =
      m.attention_weights() + m.latent_norm_parameters() + double(m.ffn_matrices()) * h * f + 2 * norm_parameters(m);
  const double biases = m.traits().biases ? (ad + 2 * kvd) + h + f + h : 0.0;
  return weights + biases;
}

std::int64_t moe_layers(const ModelSpec& s) { return s.moe.on() ? s.model.layers - s.moe.dense_layers : 0; }

int moe_layers_of_chunk(const ModelSpec& s, const Layout& l, int chunk) {
  if (!s.moe.on() || l.chunk_moe_layers.empty()) return 0;
  return l.chunk_moe_layers[std::size_t(chunk)];
}

int moe_layers_of_stage(const ModelSpec& s, const Layout& l, int stage) {
  int n = 0;
  for (int c = 0; c < l.virtual_stages; ++c) n += moe_layers_of_chunk(s, l, c * l.pp + stage);
  return n;
}

int mtp_layers_of_stage(const ModelSpec& s, const Layout& l, int stage) {
  return stage == l.pp - 1 ? int(s.model.mtp_layers) : 0;
}

int expert_layers_of_stage(const ModelSpec& s, const Layout& l, int stage) {
  return moe_layers_of_stage(s, l, stage) + (s.moe.on() ? mtp_layers_of_stage(s, l, stage) : 0);
}

namespace {
constexpr int kExpertMatrices = 3;  // SwiGLU: gate, up, down
}  // namespace

double expert_parameters(const ModelSpec& s) {
  return double(s.moe.experts) * kExpertMatrices * double(s.model.hidden) * double(s.moe.expert_ffn);
}

double moe_layer_dense_parameters(const ModelSpec& s) {
  const Transformer& m = s.model;
  const double h = double(m.hidden);
  const double attention = m.attention_weights() + m.latent_norm_parameters();
  const double shared = double(s.moe.shared_experts) * kExpertMatrices * h * double(s.moe.expert_ffn);
  return attention + 2 * norm_parameters(m) + h * double(s.moe.experts) + shared;
}

double parameters(const Transformer& m) {
  // Layers, word embedding, the output layer when untied, learned position
  // embeddings (GPT; rotary positions, Llama's and Nemotron's, have none),
  // the final norm.
  const double vh = double(m.vocabulary) * double(m.hidden);
  const double positions = m.traits().learned_positions ? double(m.sequence) * double(m.hidden) : 0.0;
  return double(m.layers) * layer_parameters(m) + vh * (m.tied_embeddings ? 1 : 2) + positions + norm_parameters(m);
}

}  // namespace coconet::step
