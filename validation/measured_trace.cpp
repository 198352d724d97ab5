// Gathering launch records: every rank learns the largest record count, fills
// its own slot of a world-sized table (zeros elsewhere) and a sum over ranks
// gives every rank the whole table: the runtime's one host collective is
// enough, and the table is small (one step's launches).
#include "validation/measured_trace.h"

#include <algorithm>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "exec/executor.h"

namespace coconet::validation {

namespace {

constexpr int kFields = 5;  // op, chunk, stream, start, end

std::string stream_name(plan::Stream s) { return s == plan::Stream::comm ? "comm" : "compute"; }

std::string launch_name(const plan::StepPlan& plan, const exec::LaunchRecord& r) {
  const plan::Op& op = plan.op(r.op);
  const int chunks = plan.units.at(static_cast<std::size_t>(op.unit)).chunks;
  return chunks > 1 ? fmt::format("{} chunk {}/{}", op.code, r.chunk + 1, chunks) : op.code;
}

}  // namespace

std::string measured_trace_json(const plan::StepPlan& plan,
                                const std::vector<std::vector<exec::LaunchRecord>>& per_rank,
                                const std::vector<double>& step_start_us, const std::string& title) {
  nlohmann::json events = nlohmann::json::array();
  double end_us = 0;
  for (std::size_t rank = 0; rank < per_rank.size(); ++rank) {
    const int pid = static_cast<int>(rank);
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", fmt::format("rank {}", rank)}}}});
    bool stream_seen[2] = {false, false};
    const double t0 = rank < step_start_us.size() ? step_start_us[rank] : 0.0;
    for (const auto& r : per_rank[rank]) {
      const int tid = static_cast<int>(r.stream);
      if (!stream_seen[tid]) {
        stream_seen[tid] = true;
        events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid},
                          {"args", {{"name", stream_name(r.stream)}}}});
      }
      events.push_back({{"name", launch_name(plan, r)}, {"cat", "launch"}, {"ph", "X"}, {"ts", r.start_us - t0},
                        {"dur", std::max(0.0, r.end_us - r.start_us)}, {"pid", pid}, {"tid", tid},
                        {"args", {{"op", r.op}, {"chunk", r.chunk}}}});
      end_us = std::max(end_us, r.end_us - t0);
    }
  }
  return nlohmann::json{{"traceEvents", events},
                        {"displayTimeUnit", "ns"},
                        {"otherData", {{"schema", "coconet.trace-measured/1"}, {"title", title}, {"time_us", end_us},
                                       {"clock", "host clock around each launch, after its waits, per rank from "
                                                 "that rank's step start (after a barrier)"}}}}
      .dump(1);
}

std::string record_measured_trace(exec::Backend& backend, const model::Schedule& schedule,
                                  const model::Bindings& sizes, const exec::RunOptions& options,
                                  const std::string& title) {
  exec::Executor ex(backend, exec::lower_for(backend, schedule, sizes), options.seed);
  for (int w = 0; w < std::max(1, options.warmup); ++w) {
    backend.barrier();
    (void)ex.run_step();
  }
  exec::LaunchRecorder recorder;
  ex.set_recorder(&recorder);
  backend.barrier();
  const double t0 = backend.now_us();
  (void)ex.run_step();
  ex.set_recorder(nullptr);

  const int world = backend.world_size(), me = backend.world_rank();
  std::vector<double> count{static_cast<double>(recorder.records().size())};
  backend.host_allreduce(count, model::ReduceOp::max);
  const auto most = static_cast<std::size_t>(count[0]);
  const std::size_t per_rank = 1 + most * kFields;  // the rank's record count, then its records
  std::vector<double> table(per_rank * static_cast<std::size_t>(world) + static_cast<std::size_t>(world), 0.0);
  const std::size_t base = per_rank * static_cast<std::size_t>(me);
  table[base] = static_cast<double>(recorder.records().size());
  for (std::size_t i = 0; i < recorder.records().size(); ++i) {
    const auto& r = recorder.records()[i];
    double* f = &table[base + 1 + i * kFields];
    f[0] = r.op;
    f[1] = r.chunk;
    f[2] = static_cast<double>(r.stream);
    f[3] = r.start_us;
    f[4] = r.end_us;
  }
  table[per_rank * static_cast<std::size_t>(world) + static_cast<std::size_t>(me)] = t0;
  backend.host_allreduce(table, model::ReduceOp::sum);

  std::vector<std::vector<exec::LaunchRecord>> all(static_cast<std::size_t>(world));
  std::vector<double> starts(static_cast<std::size_t>(world));
  for (int rank = 0; rank < world; ++rank) {
    const std::size_t b = per_rank * static_cast<std::size_t>(rank);
    const auto n = static_cast<std::size_t>(table[b]);
    for (std::size_t i = 0; i < n; ++i) {
      const double* f = &table[b + 1 + i * kFields];
      all[static_cast<std::size_t>(rank)].push_back({static_cast<int>(f[0]), static_cast<int>(f[1]),
                                                     static_cast<plan::Stream>(static_cast<int>(f[2])), f[3], f[4]});
    }
    starts[static_cast<std::size_t>(rank)] = table[per_rank * static_cast<std::size_t>(world) + static_cast<std::size_t>(rank)];
  }
  return measured_trace_json(ex.plan(), all, starts, title);
}

}  // namespace coconet::validation
