// The knob flags shared by simulate and run (see knob_args.h).
#include "cli/knob_args.h"

#include <fmt/core.h>

#include "model/error.h"
#include "model/limits.h"

namespace coconet::cli {

void KnobArgs::check() const {
  if (chunks && (*chunks < 1 || *chunks > model::kMaxChunks))
    throw UserError(fmt::format("--chunks {}: needs 1 to {} (model/limits.h)", *chunks, model::kMaxChunks));
  if (channels && (*channels < 0 || *channels > model::kMaxChannels))
    throw UserError(fmt::format("--channels {}: needs 0 (the topology's default) to {} (NCCL's most)", *channels,
                                model::kMaxChannels));
  try {
    if (algo) (void)model::parse_algo(*algo);
  } catch (const UserError& e) {
    throw UserError(fmt::format("--algo {}: {}", *algo, e.what()));
  }
  try {
    if (proto) (void)model::parse_proto(*proto);
  } catch (const UserError& e) {
    throw UserError(fmt::format("--proto {}: {}", *proto, e.what()));
  }
  try {
    if (overlap) (void)model::parse_grain(*overlap);
  } catch (const UserError& e) {
    throw UserError(fmt::format("--overlap {}: {}", *overlap, e.what()));
  }
}

sim::KnobSpace KnobArgs::space(const model::Schedule& s, bool pinned) const {
  const model::Knobs& k = s.knobs;
  sim::KnobSpace out =
      pinned ? sim::KnobSpace{{k.chunks}, {k.algo}, {k.proto}, {k.channels}, {k.overlap}} : sim::predict_space();
  if (chunks) out.chunks = {*chunks};
  if (algo) out.algos = {model::parse_algo(*algo)};
  if (proto) out.protos = {model::parse_proto(*proto)};
  if (channels) out.channels = {*channels};
  if (overlap) out.overlaps = {model::parse_grain(*overlap)};
  return out;
}

model::Knobs KnobArgs::applied(model::Knobs k) const {
  if (chunks) k.chunks = *chunks;
  if (algo) k.algo = model::parse_algo(*algo);
  if (proto) k.proto = model::parse_proto(*proto);
  if (channels) k.channels = *channels;
  if (overlap) k.overlap = model::parse_grain(*overlap);
  return k;
}

void add_knob_flags(CLI::App* cmd, KnobArgs& a) {
  cmd->add_option("--chunks", a.chunks, "Chunks of each overlapped stage (default: as predict chooses)");
  cmd->add_option("--algo", a.algo, "ring|tree|nvls|hierarchical|auto (default: as predict chooses)");
  cmd->add_option("--proto", a.proto, "ll|ll128|simple|auto (default: as predict chooses)");
  cmd->add_option("--channels", a.channels, "NCCL channels, 0: the topology's default (default: as predict chooses)");
  cmd->add_option("--overlap", a.overlap,
                  "chunk|tile: an overlap group's chunks as GEMM calls of their own, or as blocks of one GEMM the "
                  "collective takes as they complete (default: as predict chooses)");
}

}  // namespace coconet::cli
