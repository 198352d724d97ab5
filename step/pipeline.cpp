// Pipeline schedules and their layout (see pipeline.h). Megatron-LM's 1F1B
// runs pp - stage - 1 forwards before its first backward; the interleaved
// schedule (pp - stage - 1) x 2 + (v - 1) x pp, taking micro-batches pp at a
// time through each chunk in turn (forwards in chunk order, backwards in the
// reverse).
#include "step/pipeline.h"

#include <algorithm>
#include <optional>

#include "model/error.h"

namespace coconet::step {

namespace {

// The k-th forward (or backward) of a stage under the interleaved schedule.
PipeOp interleaved_op(int k, Pass pass, int pp, int v) {
  int chunk = (k % (pp * v)) / pp;
  if (pass == Pass::backward) chunk = v - 1 - chunk;
  return {pass, (k / (pp * v)) * pp + k % pp, chunk};
}

std::vector<PipeOp> one_f_one_b(int warmup, int total, int pp, int v) {
  std::vector<PipeOp> out;
  for (int k = 0; k < warmup; ++k) out.push_back(interleaved_op(k, Pass::forward, pp, v));
  for (int i = 0; i < total - warmup; ++i) {
    out.push_back(interleaved_op(warmup + i, Pass::forward, pp, v));
    out.push_back(interleaved_op(i, Pass::backward, pp, v));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(interleaved_op(k, Pass::backward, pp, v));
  return out;
}

struct OpIndex {
  int pp, v, m;
  [[nodiscard]] std::size_t operator()(Pass p, int stage, int mb, int chunk) const {
    return ((std::size_t(p == Pass::backward) * std::size_t(pp) + std::size_t(stage)) * std::size_t(v) +
            std::size_t(chunk)) * std::size_t(m) + std::size_t(mb);
  }
};

struct Input {
  PipeOp op;
  int stage = 0;
};

// The op whose output `op` on `stage` needs (none for the first forward).
std::optional<Input> input_of(const PipeOp& op, int stage, int pp, int v) {
  if (op.pass == Pass::forward) {
    if (stage > 0) return Input{op, stage - 1};
    if (op.chunk > 0) return Input{{Pass::forward, op.micro_batch, op.chunk - 1}, pp - 1};
    return std::nullopt;
  }
  if (stage < pp - 1) return Input{op, stage + 1};
  if (op.chunk < v - 1) return Input{{Pass::backward, op.micro_batch, op.chunk + 1}, 0};
  return Input{{Pass::forward, op.micro_batch, op.chunk}, stage};  // the last virtual stage's own forward
}


int warmup_chunks(PipeSchedule s, int pp, int v, int m, int stage) {
  switch (s) {
    case PipeSchedule::gpipe: return m;  // every forward is warm-up
    case PipeSchedule::one_f_one_b: return std::min(pp - stage - 1, m);
    case PipeSchedule::interleaved: return std::min((pp - stage - 1) * 2 + (v - 1) * pp, m * v);
  }
  return m;
}

// Places every op, calling `place` with each in the order it is placed.
template <typename F>
void place_ops(const std::vector<std::vector<PipeOp>>& orders, int virtual_stages, int micro_batches,
               const std::vector<double>& fwd_us, const std::vector<double>& bwd_us, F&& place) {
  const int pp = int(orders.size());
  if (fwd_us.size() != std::size_t(pp) * std::size_t(virtual_stages) || bwd_us.size() != fwd_us.size())
    throw InternalError("lay_out: one forward and one backward time per virtual stage");
  const OpIndex index{pp, virtual_stages, micro_batches};
  std::vector<double> done(index(Pass::backward, pp - 1, micro_batches - 1, virtual_stages - 1) + 1, -1.0);
  std::vector<std::size_t> next(orders.size(), 0);
  std::vector<double> free(orders.size(), 0.0);
  std::size_t left = 0;
  for (const auto& o : orders) left += o.size();
  while (left > 0) {
    bool progressed = false;
    for (int s = 0; s < pp; ++s) {
      const auto& order = orders[std::size_t(s)];
      for (std::size_t& i = next[std::size_t(s)]; i < order.size(); ++i) {
        const PipeOp& op = order[i];
        double ready = 0;
        if (const auto in = input_of(op, s, pp, virtual_stages)) {
          ready = done[index(in->op.pass, in->stage, in->op.micro_batch, in->op.chunk)];
          if (ready < 0) break;  // its input is not there yet
        }
        const std::size_t k = std::size_t(op.chunk) * std::size_t(pp) + std::size_t(s);
        const double start = std::max(free[std::size_t(s)], ready);
        const double end = start + (op.pass == Pass::forward ? fwd_us[k] : bwd_us[k]);
        done[index(op.pass, s, op.micro_batch, op.chunk)] = end;
        free[std::size_t(s)] = end;
        place(PlacedOp{op, s, start, end});
        --left;
        progressed = true;
      }
    }
    if (!progressed) throw InternalError("pipeline schedule deadlocks: an op waits for one that never runs");
  }
}

}  // namespace

int chunks_in_flight(PipeSchedule s, int pp, int virtual_stages, int micro_batches, int stage) {
  const int v = s == PipeSchedule::interleaved ? virtual_stages : 1;
  return std::min(warmup_chunks(s, pp, v, micro_batches, stage) + 1, micro_batches * v);
}

std::vector<std::vector<PipeOp>> stage_orders(PipeSchedule s, int pp, int virtual_stages, int micro_batches) {
  const int v = s == PipeSchedule::interleaved ? virtual_stages : 1;
  const int m = micro_batches;
  std::vector<std::vector<PipeOp>> out;
  for (int stage = 0; stage < pp; ++stage) out.push_back(one_f_one_b(warmup_chunks(s, pp, v, m, stage), m * v, pp, v));
  return out;
}

std::vector<PlacedOp> lay_out(const std::vector<std::vector<PipeOp>>& orders, int virtual_stages, int micro_batches,
                              const std::vector<double>& fwd_us, const std::vector<double>& bwd_us) {
  std::vector<PlacedOp> out;
  place_ops(orders, virtual_stages, micro_batches, fwd_us, bwd_us, [&](const PlacedOp& p) { out.push_back(p); });
  std::stable_sort(out.begin(), out.end(), [](const PlacedOp& a, const PlacedOp& b) {
    return a.stage != b.stage ? a.stage < b.stage : a.start_us < b.start_us;
  });
  return out;
}

std::vector<PlacedOp> lay_out(const std::vector<std::vector<PipeOp>>& orders, int virtual_stages, int micro_batches,
                              double fwd_us, double bwd_us) {
  const std::size_t n = orders.size() * std::size_t(virtual_stages);
  return lay_out(orders, virtual_stages, micro_batches, std::vector<double>(n, fwd_us), std::vector<double>(n, bwd_us));
}

double span_us(const std::vector<std::vector<PipeOp>>& orders, int virtual_stages, int micro_batches,
               const std::vector<double>& fwd_us, const std::vector<double>& bwd_us) {
  double end = 0;
  place_ops(orders, virtual_stages, micro_batches, fwd_us, bwd_us,
            [&](const PlacedOp& p) { end = std::max(end, p.end_us); });
  return end;
}

double span_lower_bound_us(int pp, int virtual_stages, int micro_batches, const std::vector<double>& fwd_us,
                           const std::vector<double>& bwd_us) {
  if (fwd_us.size() != std::size_t(pp) * std::size_t(virtual_stages) || bwd_us.size() != fwd_us.size())
    throw InternalError("span_lower_bound_us: one forward and one backward time per virtual stage");
  double best = 0, before = 0;  // before: micro-batch 0's forward and backward through stages 0 .. s - 1, chunk 0
  for (int s = 0; s < pp; ++s) {
    double own = 0;
    for (int c = 0; c < virtual_stages; ++c)
      own += fwd_us[std::size_t(c * pp + s)] + bwd_us[std::size_t(c * pp + s)];
    best = std::max(best, before + double(micro_batches) * own);
    before += fwd_us[std::size_t(s)] + bwd_us[std::size_t(s)];
  }
  return best;
}

}  // namespace coconet::step
