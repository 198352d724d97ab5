// The step's trace (see trace.h). Every virtual stage is drawn with its own
// times (StepReport::chunks), laid out as the composition lays them out.
// Within a chunk step the kernels are one event, the TP collectives one event
// after them and the exposed K/V exchange of context parallelism another (in
// the layer they alternate; their sum is what the composition prices), the
// exposed all-to-alls of the MoE layers (dispatch and combine) another, and
// the stage's send to its neighbour follows; the exposed data-parallel
// reduction and the optimizer follow the stage's last backward.
#include "step/trace.h"

#include "model/error.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/error.h"
#include "step/pipeline.h"

namespace coconet::step {

namespace {

// Appends `e` if it lasts, and returns its end.
double add(std::vector<TraceEvent>& out, TraceEvent e) {
  const double end = e.start_us + e.dur_us;
  if (e.dur_us > 0) out.push_back(std::move(e));
  return end;
}

void add_op(std::vector<TraceEvent>& out, const PlacedOp& p, const ChunkTimes& c, double send, int pp, int v) {
  const int mb = p.op.micro_batch, ch = p.op.chunk;
  const std::string what = fmt::format("mb {}{}", mb, v > 1 ? fmt::format(" chunk {}", ch) : "");
  auto event = [&](std::string name, const char* cat, TraceThread th, double start, double dur) {
    return TraceEvent{std::move(name), cat, p.stage, th, start, dur, mb, ch};
  };
  double t = p.start_us;
  bool sends = false;
  if (p.op.pass == Pass::forward) {
    t = add(out, event("forward " + what, "forward", TraceThread::compute, t, c.fwd_compute_us));
    t = add(out, event("TP forward " + what, "tp", TraceThread::communication, t, c.fwd_tp_us));
    t = add(out, event("K/V exchange forward " + what, "cp", TraceThread::communication, t, c.fwd_cp_us));
    t = add(out, event("all-to-all forward " + what, "ep", TraceThread::communication, t, c.fwd_a2a_us));
    sends = !(p.stage == pp - 1 && ch == v - 1);
  } else {
    t = add(out, event("recompute " + what, "recompute", TraceThread::compute, t, c.recompute_us));
    t = add(out, event("TP recompute " + what, "tp", TraceThread::communication, t, c.recompute_tp_us));
    t = add(out, event("K/V exchange recompute " + what, "cp", TraceThread::communication, t, c.recompute_cp_us));
    t = add(out, event("all-to-all recompute " + what, "ep", TraceThread::communication, t, c.recompute_a2a_us));
    t = add(out, event("backward " + what, "backward", TraceThread::compute, t, c.bwd_compute_us));
    t = add(out, event("TP backward " + what, "tp", TraceThread::communication, t, c.bwd_tp_us));
    t = add(out, event("K/V exchange backward " + what, "cp", TraceThread::communication, t, c.bwd_cp_us));
    t = add(out, event("all-to-all backward " + what, "ep", TraceThread::communication, t, c.bwd_a2a_us));
    sends = !(p.stage == 0 && ch == 0);
  }
  // The send's slot is on every chunk step (the composition's count); the
  // first and last virtual stages have no neighbour to send to and wait it out.
  if (sends) {
    const bool fwd = p.op.pass == Pass::forward;
    add(out, event(fmt::format("send {} {} to stage {}", fwd ? "activations" : "gradients", what,
                               fwd ? (p.stage + 1) % pp : (p.stage + pp - 1) % pp),
                   "pp_send", TraceThread::communication, t, send));
  }
}

}  // namespace

std::vector<TraceEvent> step_trace_events(const StepReport& r) {
  const Layout& l = r.layout;
  const std::int64_t passes = 2 * l.micro_batches * l.chunks();  // resolve_layout bounds it by kMaxPipelineOps
  if (passes > kMaxTraceOps)
    throw UserError(fmt::format("{}: a trace of {} forward and backward passes ({} micro-batches over {} model "
                                "chunks) is more than the limit of {} a trace holds; trace a smaller "
                                "training.global_batch or a larger training.micro_batch",
                                r.spec.where_global_batch, passes, l.micro_batches, l.chunks(), kMaxTraceOps));
  const auto orders = stage_orders(r.spec.parallel.schedule, l.pp, l.virtual_stages, int(l.micro_batches));
  const ChunkSteps steps = chunk_steps(r);
  const std::vector<PlacedOp> ops = lay_out(orders, l.virtual_stages, int(l.micro_batches), steps.fwd, steps.bwd);
  std::vector<TraceEvent> out;
  std::vector<double> end(std::size_t(l.pp), 0.0);
  for (const PlacedOp& p : ops) {
    const ChunkTimes& c = r.chunks[std::size_t(p.op.chunk * l.pp + p.stage)];
    add_op(out, p, c, r.send_us, l.pp, l.virtual_stages);
    end[std::size_t(p.stage)] = std::max(end[std::size_t(p.stage)], p.end_us);
  }
  const std::string dp = r.dp_schedule.empty() ? std::string("DP reduction (exposed)")
                                               : fmt::format("DP reduction + Adam, {} (exposed)", r.dp_schedule);
  for (int s = 0; s < l.pp; ++s) {
    double t = end[std::size_t(s)];
    t = add(out, {dp, "dp", s, TraceThread::communication, t, r.breakdown.dp_comm_us});
    add(out, {"optimizer (Adam)", "optimizer", s, TraceThread::compute, t, r.breakdown.optimizer_us});
  }
  return out;
}

namespace {

// A JSON string literal of `s` (the names are ours, but the model's comes from its file).
std::string quoted(const std::string& s) { return nlohmann::json(s).dump(); }

void name_event(fmt::memory_buffer& out, const char* what, int pid, int tid, const std::string& name) {
  fmt::format_to(std::back_inserter(out), R"({{"name":"{}","ph":"M","pid":{},{}"args":{{"name":{}}}}})", what,
                 pid, tid >= 0 ? fmt::format(R"("tid":{},)", tid) : std::string(), quoted(name));
}

std::string stage_name(const StepReport& r, int s) {
  const Layout& l = r.layout;
  std::string layers;
  for (int c = 0; c < l.virtual_stages; ++c) {
    const int k = c * l.pp + s;
    int first = 0;
    for (int j = 0; j < k; ++j) first += l.chunk_layers[std::size_t(j)];
    const int n = l.chunk_layers[std::size_t(k)];
    std::string part = n > 0 ? fmt::format("{}-{}", first, first + n - 1) : std::string("none");
    if (k == 0) part = "embedding + " + part;
    if (k == l.chunks() - 1) part += " + output layer";
    layers += fmt::format("{}{}", c > 0 ? ", " : "", part);
  }
  return fmt::format("pipeline stage {} (layers {})", s, layers);
}

}  // namespace

// Written with fmt rather than built as a JSON tree: a step of a large
// pipeline has hundreds of thousands of events.
std::string step_trace_json(const StepReport& r) {
  fmt::memory_buffer out;
  fmt::format_to(std::back_inserter(out), R"({{"traceEvents":[)");
  for (int s = 0; s < r.layout.pp; ++s) {
    if (s > 0) out.push_back(',');
    name_event(out, "process_name", s, -1, stage_name(r, s));
    out.push_back(',');
    name_event(out, "thread_name", s, int(TraceThread::compute), "compute");
    out.push_back(',');
    name_event(out, "thread_name", s, int(TraceThread::communication), "communication");
  }
  for (const TraceEvent& e : step_trace_events(r)) {
    const std::string mb =
        e.micro_batch >= 0 ? fmt::format(R"(,"micro_batch":{},"chunk":{})", e.micro_batch, e.chunk) : std::string();
    fmt::format_to(std::back_inserter(out),
                   R"(,{{"name":{},"cat":"{}","ph":"X","ts":{},"dur":{},"pid":{},"tid":{},"args":{{"category":"{}"{}}}}})",
                   quoted(e.name), e.category, e.start_us, e.dur_us, e.stage, int(e.thread), e.category, mb);
  }
  const Breakdown& b = r.breakdown;
  const nlohmann::json other = {
      {"title", fmt::format("{} on {}: dp {} x tp {} x pp {}, {}", r.spec.name, r.topology, r.layout.dp, r.layout.tp,
                            r.layout.pp, to_string(r.spec.parallel.schedule))},
      {"time_us", r.step_us},
      {"compute_us", b.compute_us},
      {"tp_comm_us", b.tp_comm_us},
      {"cp_comm_us", b.cp_comm_us},
      {"ep_comm_us", b.ep_comm_us},
      {"pp_bubble_us", b.pp_bubble_us},
      {"pp_p2p_us", b.pp_p2p_us},
      {"dp_comm_us", b.dp_comm_us},
      {"optimizer_us", b.optimizer_us},
      {"dp_schedule", r.dp_schedule}};
  fmt::format_to(std::back_inserter(out), R"(],"displayTimeUnit":"ms","otherData":{}}})", other.dump());
  return fmt::to_string(out);
}

}  // namespace coconet::step
