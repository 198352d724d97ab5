// A transformer training job as `coconet step` sees it (models/*.yaml): the
// model's shape, the batch and dtypes, and the parallel layout DP x TP x PP
// with its pipeline schedule, ZeRO stage, activation recomputation and
// sequence parallelism. Parsing rejects unknown keys and impossible values
// with file:line (model/yaml_util.h); the checks that need the cluster (the
// GPU count) are resolve_layout's, which names the place in the file too.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/types.h"
#include "sim/topology.h"

namespace coconet::step {

enum class PipeSchedule { gpipe, one_f_one_b, interleaved };
enum class Recompute { none, selective, full };

[[nodiscard]] std::string to_string(PipeSchedule s);  // gpipe, 1f1b, interleaved
[[nodiscard]] std::string to_string(Recompute r);     // none, selective, full
[[nodiscard]] PipeSchedule parse_pipe_schedule(const std::string& s);  // throws UserError
[[nodiscard]] Recompute parse_recompute(const std::string& s);         // throws UserError

struct Transformer {
  std::int64_t layers = 0;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t ffn = 0;  // default 4 x hidden
  std::int64_t sequence = 0;
  std::int64_t vocabulary = 0;
};

struct Training {
  std::int64_t micro_batch = 1;
  std::int64_t global_batch = 0;
  model::DType dtype = model::DType::bf16;       // weights, activations, GEMMs
  model::DType grad_dtype = model::DType::bf16;  // gradients as reduced across data parallelism
};

struct Parallelism {
  int dp = 0;  // 0: every GPU left (GPUs / (tp x pp))
  int tp = 1;
  int pp = 1;
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
};

struct ModelSpec {
  std::string name;
  std::string origin;  // the file, for messages
  Transformer model;
  Training training;
  Parallelism parallel;
  // file:line:column of the keys resolve_layout's messages point at.
  std::string where_parallel;
  std::string where_global_batch;
};

// `--set parallel.tp=4` style overrides, applied on the YAML before the checks.
using Overrides = std::vector<std::pair<std::string, std::string>>;

// Whether a `--set` key is the model's (its first part is model, training or parallel).
[[nodiscard]] bool is_model_key(const std::string& key);

[[nodiscard]] ModelSpec parse_model(const std::string& yaml_text, const std::string& origin,
                                    const Overrides& overrides = {});
// A name (models/NAME.yaml) or a path.
[[nodiscard]] ModelSpec load_model(const std::string& name_or_path, const Overrides& overrides = {});

// The layout on a cluster: every count resolved and checked.
struct Layout {
  int gpus = 0;
  int dp = 0;
  int tp = 0;
  int pp = 0;
  int virtual_stages = 1;
  std::int64_t micro_batches = 0;  // per pipeline per step: global / (micro_batch x dp)
};

// Checks the spec against a cluster of `t.total_gpus()` GPUs: dp x tp x pp =
// GPUs, tp divides heads, pp (x virtual stages) divides layers, the global
// batch splits into whole micro-batches. A UserError names file:line.
[[nodiscard]] Layout resolve_layout(const ModelSpec& s, const sim::Topology& t);

// Sequence parallelism and TP overlap act on a tensor-parallel group: asked
// for with tp = 1 they are off. Their effective values, decided here only.
[[nodiscard]] bool on_tp_group(bool asked, int tp);
[[nodiscard]] bool sequence_parallel_on(const Parallelism& p, const Layout& l);
[[nodiscard]] bool tp_overlap_on(const Parallelism& p, const Layout& l);

// Parameters of the whole model (embedding shared with the output layer).
[[nodiscard]] double parameters(const Transformer& m);
// Parameters of one transformer layer (before tensor parallelism).
[[nodiscard]] double layer_parameters(const Transformer& m);

}  // namespace coconet::step
