// A transformer training job as `coconet step` sees it (models/*.yaml): the
// model's shape, the batch and dtypes, and the parallel layout DP x TP x PP
// with its pipeline schedule, ZeRO stage, activation recomputation and
// sequence parallelism. Parsing rejects unknown keys and impossible values
// with file:line (model/yaml_util.h); the checks that need the cluster (the
// GPU count) are resolve_layout's, which names the place in the file too.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/types.h"
#include "sim/topology.h"

namespace coconet::step {

enum class PipeSchedule { gpipe, one_f_one_b, interleaved };
// Activation recomputation: none; selective, the attention core again in
// the backward (Korthikanti et al. 2022); full, each layer's forward again;
// mla_up_proj, multi-head latent attention's up-projections again (Megatron-
// core's recompute_modules mla_up_proj: Q, K and V are dropped after the
// attention core's forward and rebuilt from the latents for its backward);
// moe, each MoE layer's MLP again, router, dispatch, experts and combine
// (recompute_modules moe: only its input kept).
enum class Recompute { none, selective, full, mla_up_proj, moe };
// swiglu: gate, up and down matrices (Shazeer 2020); squared_relu: two
// matrices with relu(u)^2 between them (So et al. 2021, "Primer",
// arXiv:2109.08668; Megatron-LM's squared_relu, Nemotron-4's MLP).
enum class FfnType { gelu, swiglu, squared_relu };
enum class Norm { layernorm, rmsnorm };
// The layer as written: its layer programs and what comes with them (one row
// each of family_traits, step/spec.cpp).
// gpt (ffn_type gelu, norm layernorm): Megatron-LM's GPT, biases, dropout,
// learned position embeddings (workloads/megatron_layer_*.yaml); llama
// (swiglu, rmsnorm): no biases, no dropout, rotary positions, grouped-query
// attention (workloads/llama_layer_*.yaml); nemotron (squared_relu,
// layernorm): Nemotron-4's, as llama but LayerNorm and a squared-ReLU MLP
// (workloads/nemotron_layer_*.yaml). Other pairs have no programs: an error.
// mla (swiglu, rmsnorm, attention mla): DeepSeek-V2/V3's, as llama but
// multi-head latent attention (workloads/mla_layer_*.yaml).
enum class Family { gpt, llama, nemotron, mla };
// The attention a layer has (model.attention): mha, multi-head attention with
// kv_heads K/V heads of head_dim each (grouped-query below heads: Ainslie et
// al. 2023); mla, multi-head latent attention (DeepSeek-AI 2024,
// "DeepSeek-V2", arXiv:2405.04434, section 2.1; "DeepSeek-V3 Technical
// Report", arXiv:2412.19437, section 2.1.1): queries, keys and values through
// low-rank latents, per head a query/key of qk_nope_head_dim +
// qk_rope_head_dim dimensions (the rotary part of the key shared by every
// head) and a value of v_head_dim.
enum class AttentionKind { mha, mla };
// What a family's layer has, beyond its (ffn_type, norm, attention) triple.
struct FamilyTraits {
  Family family;
  FfnType ffn_type;
  Norm norm;
  AttentionKind attention;
  const char* programs;    // workloads/<programs>fwd.yaml, <programs>bwd.yaml, <programs>sp_*.yaml
  bool biases;             // the linear layers' biases
  bool dropout;            // dropout after the projection and the MLP and on the attention probabilities
  bool learned_positions;  // s x h position embeddings; false: rotary (Su et al. 2021), no parameters
  bool grouped_kv;         // the programs take kv_heads < heads and heads x head_dim != hidden
};
[[nodiscard]] const FamilyTraits& family_traits(Family f);
// The family of an (ffn_type, norm, attention) triple; nullptr when no programs exist for it.
[[nodiscard]] const FamilyTraits* family_of(FfnType f, Norm n, AttentionKind a = AttentionKind::mha);
// How context parallelism exchanges keys and values (parallel.cp_comm): ring,
// each rank passing its K/V chunk to the next by P2P while it computes
// attention on the chunk it holds (Megatron-LM / Transformer Engine's "p2p",
// their default); allgather, every rank gathering all K/V before attention
// (Llama 3: Dubey et al. 2024, arXiv:2407.21783, section 3.3.2).
enum class CpComm { ring, allgather };
// How a mixture-of-experts router sizes each expert's tokens: dropless, every
// routed token kept (the hottest expert gets tokens x top_k / experts x
// imbalance); capacity, each expert keeps at most tokens x top_k / experts x
// capacity_factor and drops the rest (Lepikhin et al. 2020, GShard; Fedus et
// al. 2022, Switch Transformer, section 2.2).
enum class Router { dropless, capacity };
// How tokens reach their experts' ranks: alltoall, one NCCL all-to-all each
// way (Megatron-core's alltoall dispatcher), every routed copy sent to its
// expert's rank; deepep, DeepEP's (DeepSeek-V3, arXiv:2412.19437 section
// 3.2.2) two hops, a token sent once over InfiniBand to each remote node it
// targets and forwarded over NVLink there.
enum class Dispatcher { alltoall, deepep };

[[nodiscard]] std::string to_string(PipeSchedule s);  // gpipe, 1f1b, interleaved
[[nodiscard]] std::string to_string(Recompute r);     // none, selective, full, mla_up_proj, moe
[[nodiscard]] PipeSchedule parse_pipe_schedule(const std::string& s);  // throws UserError
[[nodiscard]] Recompute parse_recompute(const std::string& s);         // throws UserError
[[nodiscard]] std::string to_string(FfnType f);  // gelu, swiglu, squared_relu
[[nodiscard]] std::string to_string(Norm n);     // layernorm, rmsnorm
[[nodiscard]] std::string to_string(Family f);   // gpt, llama, nemotron, mla
[[nodiscard]] std::string to_string(AttentionKind a);            // mha, mla
[[nodiscard]] AttentionKind parse_attention_kind(const std::string& s);  // throws UserError
[[nodiscard]] FfnType parse_ffn_type(const std::string& s);  // throws UserError
[[nodiscard]] Norm parse_norm(const std::string& s);         // throws UserError
[[nodiscard]] std::string to_string(CpComm c);                // ring, allgather
[[nodiscard]] CpComm parse_cp_comm(const std::string& s);     // throws UserError
[[nodiscard]] std::string to_string(Router r);                // dropless, capacity
[[nodiscard]] Router parse_router(const std::string& s);      // throws UserError
[[nodiscard]] std::string to_string(Dispatcher d);            // alltoall, deepep
[[nodiscard]] Dispatcher parse_dispatcher(const std::string& s);  // throws UserError

// Limits of a model description, each checked (in 64-bit arithmetic) before
// anything is sized or cast from the value it bounds.
// Transformer layers: far past any model (Llama 3 405B has 126, Megatron-LM's
// 1T model 128); keeps every per-stage layer count an int.
inline constexpr std::int64_t kMaxLayers = std::int64_t{1} << 16;
// Multi-token prediction depths: DeepSeek-V3 trains with 1 (section 2.2);
// each depth predicts one token further, so a handful is already far past use.
inline constexpr std::int64_t kMaxMtpLayers = 16;
// Chunk passes of a step's pipeline, forward and backward (2 x micro-batches
// x virtual stages x pp): what its layout (step/pipeline.h) and its trace hold,
// about 50 bytes each. Llama 3 405B on 8192 GPUs lays out 2 x 32 x 128 = 8192;
// 2^22 is 512 times that and about 200 MB of trace.
inline constexpr std::int64_t kMaxPipelineOps = std::int64_t{1} << 22;
// A model's name, printed in every report's first line.
inline constexpr std::size_t kMaxNameChars = 256;

// Multi-head latent attention's sizes (model.attention: mla; the names of
// DeepSeek-V3's Hugging Face config.json): the query latent (q_lora_rank),
// the key/value latent (kv_lora_rank), and per head the query's and key's
// non-rotary and rotary dimensions and the value's.
struct Mla {
  std::int64_t q_lora_rank = 0;
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t v_head_dim = 0;
  auto operator<=>(const Mla&) const = default;  // a key of the layer pricer's cache
};

struct Transformer {
  std::int64_t layers = 0;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;     // query heads
  std::int64_t kv_heads = 0;  // key/value heads (GQA, MQA at 1); default heads; divides heads
  std::int64_t head_dim = 0;  // default hidden / heads; heads x head_dim is the attention's width
  std::int64_t ffn = 0;       // default 4 x hidden
  std::int64_t sequence = 0;
  std::int64_t vocabulary = 0;
  FfnType ffn_type = FfnType::gelu;
  Norm norm = Norm::layernorm;
  bool tied_embeddings = true;  // the output layer shares the word embedding (GPT); false: its own V x h
  AttentionKind attention = AttentionKind::mha;
  // attention mla: its sizes; head_dim is then the query's and key's
  // (qk_nope_head_dim + qk_rope_head_dim) and kv_heads is heads.
  Mla mla;
  // Multi-token prediction depth (DeepSeek-V3, arXiv:2412.19437, section
  // 2.2; Megatron-core's mtp_num_layers): each depth a module on the last
  // pipeline stage of two RMSNorms, a projection of [h ; embedding] (2h) to
  // h, one transformer layer like the model's last (with experts when the
  // model has them) and a pass of the shared output layer and its loss. 0:
  // none.
  std::int64_t mtp_layers = 0;

  // The triple's family (checked when parsed); gpt for one without programs.
  [[nodiscard]] Family family() const;
  [[nodiscard]] const FamilyTraits& traits() const { return family_traits(family()); }
  [[nodiscard]] bool latent() const { return attention == AttentionKind::mla; }
  [[nodiscard]] std::int64_t attention_width() const { return heads * head_dim; }  // a D
  [[nodiscard]] std::int64_t kv_width() const { return kv_heads * head_dim; }      // kv D
  // A value head's dimensions: head_dim, or MLA's v_head_dim.
  [[nodiscard]] std::int64_t v_head_dim() const { return latent() ? mla.v_head_dim : head_dim; }
  // The attention context's width, the output projection's input: a x v_head_dim.
  [[nodiscard]] std::int64_t context_width() const { return heads * v_head_dim(); }
  // Q, K and V as the attention core reads them, per token: (a + 2 kv) D;
  // MLA a (2 (nope + rope) + v).
  [[nodiscard]] std::int64_t qkv_width() const {
    return latent() ? heads * (2 * head_dim + mla.v_head_dim) : attention_width() + 2 * kv_width();
  }
  // The attention core's scores and context per query, summed over the
  // heads: Q K^T's inner dimensions and P V's, a D + a v_head_dim.
  [[nodiscard]] std::int64_t score_context_width() const { return attention_width() + context_width(); }
  // The attention's linear layers' weights (each one multiply-add per token
  // forward): QKV h (a + 2 kv) D and projection a D h; MLA the q and kv
  // down-projections h q_lora_rank and h (kv_lora_rank + rope), their
  // up-projections q_lora_rank a D and kv_lora_rank a (nope + v), the
  // projection a v h.
  [[nodiscard]] double attention_weights() const;
  // MLA's up-projections' weights, q_lora_rank a D + kv_lora_rank a (nope +
  // v) (0 without MLA): what recompute mla_up_proj runs again.
  [[nodiscard]] double up_projection_weights() const;
  // The MLA latents' RMSNorm gammas (q_lora_rank + kv_lora_rank; 0 without).
  [[nodiscard]] double latent_norm_parameters() const;
  [[nodiscard]] int ffn_matrices() const { return ffn_type == FfnType::swiglu ? 3 : 2; }
};

// The `moe` section: a mixture of experts in place of the dense MLP in every
// layer but the first `dense_layers` (DeepSeek-V3's 3). Each token's router
// picks `top_k` of `experts` routed experts of `expert_ffn` columns (SwiGLU:
// gate, up and down), plus `shared_experts` experts every token passes
// through. `experts` 0: a dense model (no section).
struct Moe {
  std::int64_t experts = 0;
  std::int64_t top_k = 0;
  std::int64_t expert_ffn = 0;      // default model.ffn
  std::int64_t shared_experts = 0;
  std::int64_t dense_layers = 0;    // the first layers keep the dense MLP of model.ffn
  Router router = Router::dropless;
  double capacity_factor = 1.0;     // capacity router: an expert's slots over the mean tokens per expert
  // The hottest expert's tokens over the mean (>= 1): with dropless routing
  // it sets the expert GEMMs' and the all-to-all's time (the slowest rank
  // waits for it).
  double imbalance = 1.0;
  Dispatcher dispatcher = Dispatcher::alltoall;
  // Node-limited routing (DeepSeek-V3, arXiv:2412.19437, section 2.1.2): each
  // token's experts on at most `max_nodes` nodes (needs the deepep
  // dispatcher, whose traffic it bounds). 0: no limit.
  int max_nodes = 0;
  // Megatron-core's 1F1B all-to-all overlap (--overlap-moe-expert-parallel-comm,
  // the Megatron-MoE-ModelZoo's "1F1B A2A overlap"): the forward of one
  // micro-batch and the backward of another run as one merged schedule on two
  // streams, each pass's all-to-alls beside the other pass's compute.
  bool a2a_overlap = false;
  // Megatron-core's moe_shared_expert_overlap: the shared experts run on a
  // stream of their own beside the dispatch and combine all-to-alls (their
  // forward beside the forward's, their backward beside the backward's).
  // Needs shared_experts; with a2a_overlap the merged schedule pairs them
  // instead (this then changes nothing).
  bool shared_expert_overlap = false;

  [[nodiscard]] bool on() const { return experts > 0; }
  // The tokens the hottest expert computes per routed token of the mean:
  // imbalance (dropless) or min(imbalance, capacity_factor) (capacity).
  [[nodiscard]] double hottest_share() const;
};

struct Training {
  std::int64_t micro_batch = 1;
  std::int64_t global_batch = 0;
  model::DType dtype = model::DType::bf16;       // weights, activations, GEMMs
  // The main gradients as accumulated and held (memory): Megatron-LM keeps
  // them in fp32 under bf16 (accumulate_allreduce_grads_in_fp32, set with
  // --bf16 in megatron/training/arguments.py), in the values' dtype under f16.
  model::DType grad_dtype = model::DType::bf16;
  // The gradients as reduced across data parallelism (time): the buffer as
  // held unless asked otherwise (Megatron-core's grad_reduce_in_fp32, NeMo's
  // default for bf16; --grad-reduce-in-bf16 to halve it).
  model::DType grad_reduce_dtype = model::DType::bf16;
  // `dtype: fp8`: the linear layers' GEMMs in FP8 (Transformer Engine), the
  // values in bf16. A GEMM precision, not a model::DType: no value of the
  // programs is stored in FP8 (docs/step.md).
  bool fp8 = false;
  // The kernels the layer may run (the tuner picks among those allowed):
  // `attention: flash|materialised` (flash attention, Dao et al. 2022, did not
  // exist for Megatron-LM's SC'21 runs) and `fused_kernels` (one kernel per
  // compute stage: Megatron-LM's fused norms, softmax, bias-GeLU).
  bool flash_attention = true;
  bool fused_kernels = true;
};

struct Parallelism {
  int dp = 0;  // 0: every GPU left (GPUs / (tp x pp))
  int tp = 1;
  int cp = 1;  // context parallelism: each sequence split over cp ranks (2 cp chunks, causal balance)
  CpComm cp_comm = CpComm::ring;
  int pp = 1;
  // Expert parallelism (the moe section's layers): experts over `ep` ranks,
  // each expert's matrices over `etp` ranks (0: tp, Megatron-core's default);
  // expert data parallelism is what is left, tp x cp x dp / (ep x etp)
  // (Megatron-core's MoE parallel folding: initialize_model_parallel in
  // megatron/core/parallel_state.py builds the expert groups over the same
  // tp x cp x dp ranks of each pipeline stage, expert_data_parallel_size =
  // world / (etp x ep x pp), an error when it does not divide).
  int ep = 1;
  int etp = 0;
  PipeSchedule schedule = PipeSchedule::one_f_one_b;
  int virtual_stages = 1;  // interleaved only: model chunks per GPU
  int zero = 0;            // 0-3
  Recompute recompute = Recompute::none;
  bool sequence_parallel = false;
  // Whether a layer's TP collectives may overlap or fuse with its computation
  // (the tuner's overlapped and collective-fused schedules of the layer
  // programs); Megatron-LM SC'21 does not overlap them.
  bool tp_overlap = false;
  double bucket_MB = 25;  // data-parallel gradient buckets (PyTorch DDP's default)
  // Whether the data-parallel reduction runs beside the backward (and the
  // distributed optimizer's parameter all-gather beside the next forward), as
  // PyTorch DDP and Megatron-LM's overlap_grad_reduce / overlap_param_gather
  // do, or after it.
  bool dp_overlap = true;
  // pipeline.layers_per_stage: transformer layers of each virtual stage in
  // model order (pp x virtual_stages entries, summing to model.layers); empty:
  // balanced_stage_layers.
  std::vector<int> layers_per_stage;
};

struct ModelSpec {
  std::string name;
  std::string origin;  // the file, for messages
  Transformer model;
  Training training;
  Parallelism parallel;
  Moe moe;
  // file:line:column of the keys resolve_layout's messages point at.
  std::string where_parallel;
  std::string where_global_batch;
  std::string where_layers_per_stage;  // the pipeline section's list, or the parallel section
  std::string where_ep;                // parallel.ep (or etp), or the parallel section
};

// `--set parallel.tp=4` style overrides, applied on the YAML before the checks.
using Overrides = std::vector<std::pair<std::string, std::string>>;

// Whether a `--set` key is the model's (its first part is model, training or parallel).
[[nodiscard]] bool is_model_key(const std::string& key);

[[nodiscard]] ModelSpec parse_model(const std::string& yaml_text, const std::string& origin,
                                    const Overrides& overrides = {});
// A name (models/NAME.yaml) or a path.
[[nodiscard]] ModelSpec load_model(const std::string& name_or_path, const Overrides& overrides = {});

// Whether `name_or_path` names a model description as load_model finds it:
// models/NAME.yaml, or a file whose top level has the model and parallel
// sections (what `coconet compare` asks to tell a model from an experiment).
[[nodiscard]] bool names_a_model(const std::string& name_or_path);

// The layout on a cluster: every count resolved and checked.
struct Layout {
  int gpus = 0;
  int dp = 0;
  int tp = 0;
  int cp = 1;
  int pp = 0;
  int virtual_stages = 1;
  int ep = 1;   // expert parallel (1 without experts)
  int etp = 1;  // expert tensor parallel
  int edp = 1;  // expert data parallel: tp x cp x dp / (ep x etp)
  std::int64_t micro_batches = 0;  // per pipeline per step: global / (micro_batch x dp)
  // Transformer layers of each virtual stage, model order: virtual stage
  // k = chunk x pp + stage (pp x virtual_stages entries).
  std::vector<int> chunk_layers;
  // Of each virtual stage's layers, those with experts (empty for a dense model).
  std::vector<int> chunk_moe_layers;
  [[nodiscard]] int chunks() const { return pp * virtual_stages; }
  [[nodiscard]] int layers_of_stage(int stage) const;  // over its virtual stages
};

// `layers` over `chunks` virtual stages as evenly as they go; the ones with a
// layer fewer are the first and the last, then the second and the one before
// the last, and so on: Llama 3 405B's 126 layers over 16 stages are 7, 14 x 8,
// 7, the first and last stages one layer short as Meta ran them (Dubey et al.
// 2024, section 3.3.2), and over 16 x 8 virtual stages the first holds only
// the embedding and the last only the output layer and the loss.
[[nodiscard]] std::vector<int> balanced_stage_layers(std::int64_t layers, int chunks);

// Checks the spec against a cluster of `t.total_gpus()` GPUs: ep x etp
// divides tp x cp x dp (the ranks of a pipeline stage the expert layout folds
// over), etp divides the expert ffn; dp x tp x cp x
// pp = GPUs, tp divides heads and kv_heads (Megatron-LM gives each TP rank whole
// K/V groups: megatron/core/transformer/attention.py divides
// num_query_groups by the TP size), 2 cp divides the sequence, pp is at most
// the layers and an explicit pipeline.layers_per_stage has pp x virtual
// stages entries summing to the layers, the global batch splits into whole
// micro-batches. A UserError names file:line.
[[nodiscard]] Layout resolve_layout(const ModelSpec& s, const sim::Topology& t);

// Sequence parallelism and TP overlap act on a tensor-parallel group: asked
// for with tp = 1 they are off. Their effective values, decided here only.
[[nodiscard]] bool on_tp_group(bool asked, int tp);
[[nodiscard]] bool sequence_parallel_on(const Parallelism& p, const Layout& l);
[[nodiscard]] bool tp_overlap_on(const Parallelism& p, const Layout& l);

// Parameters of the whole model: layers, word embedding, the output layer's
// own matrix when untied, learned position embeddings (gpt), final norm.
[[nodiscard]] double parameters(const Transformer& m);
// Parameters of one transformer layer (before tensor parallelism): QKV
// h (a + 2 kv) D, projection a D h, the MLP's 2 or 3 h f, the two norms
// (gamma and beta of a LayerNorm, gamma of an RMSNorm), the biases of a
// family that has them (gpt).
[[nodiscard]] double layer_parameters(const Transformer& m);
// Parameters of the routed experts of one MoE layer (experts x 3 h expert_ffn)
// and the rest of it (the attention, norms, router h x experts and shared
// experts' 3 h expert_ffn each); a dense model has no routed ones.
[[nodiscard]] double expert_parameters(const ModelSpec& s);
[[nodiscard]] double moe_layer_dense_parameters(const ModelSpec& s);
// The layers with experts (layers less dense_layers; 0 for a dense model).
[[nodiscard]] std::int64_t moe_layers(const ModelSpec& s);
// Of virtual stage `chunk`'s layers (model order: the first dense_layers are
// dense), those with experts; and over a pipeline stage's virtual stages.
[[nodiscard]] int moe_layers_of_chunk(const ModelSpec& s, const Layout& l, int chunk);
[[nodiscard]] int moe_layers_of_stage(const ModelSpec& s, const Layout& l, int stage);
// The multi-token prediction layers stage `stage` holds (model.mtp_layers on
// the last stage, Megatron-core's post-process stage; 0 elsewhere).
[[nodiscard]] int mtp_layers_of_stage(const ModelSpec& s, const Layout& l, int stage);
// The layers with experts stage `stage` holds: its MoE layers, and its
// multi-token prediction layers when the model has experts (each is a layer
// like the model's last).
[[nodiscard]] int expert_layers_of_stage(const ModelSpec& s, const Layout& l, int stage);
// One norm's parameters: 2h (LayerNorm gamma and beta) or h (RMSNorm gamma).
[[nodiscard]] double norm_parameters(const Transformer& m);

}  // namespace coconet::step
