// Chrome trace format: "X" (complete) events with ts/dur in microseconds and
// "M" (metadata) events naming processes and threads.
#include "sim/trace.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "model/error.h"

namespace coconet::sim {

namespace {

nlohmann::json complete_event(const SimEvent& e, int pid, const std::string& name) {
  return {{"name", name},
          {"cat", "stage"},
          {"ph", "X"},
          {"ts", e.start_us},
          {"dur", e.end_us - e.start_us},
          {"pid", pid},
          {"tid", e.stream},
          {"args", {{"stage", e.stage}, {"detail", e.detail}, {"alone_us", e.alone_us}}}};
}

nlohmann::json name_event(const char* what, int pid, int tid, const std::string& name) {
  nlohmann::json m = {{"name", what}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}};
  if (tid >= 0) m["tid"] = tid;
  return m;
}

// Every class an event ran on (and, for a send, received on), with the name it has there.
template <typename F>
void for_each_place(const SimEvent& e, F&& f) {
  f(e.rank, e.name);
  for (int c : e.also) f(c, e.name);
  if (e.peer >= 0 && e.peer != e.rank) f(e.peer, "recv " + e.name);
  for (int c : e.also_peers) f(c, "recv " + e.name);
}

// The processes of the trace: one per class, or one per rank of every class.
std::vector<std::vector<std::pair<int, std::string>>> processes(const SimResult& r, TraceRanks mode) {
  std::vector<std::vector<std::pair<int, std::string>>> out(r.rank_names.size());
  for (std::size_t c = 0; c < r.rank_names.size(); ++c) {
    if (mode == TraceRanks::classes || c >= r.classes.size()) {
      out[c].emplace_back(int(c), r.rank_names[c]);
      continue;
    }
    for (const auto& [first, last] : r.classes[c].ranges)
      for (int k = first; k <= last; ++k)
        out[c].emplace_back(k, fmt::format("rank {} (group {})", k, r.classes[c].group));
  }
  return out;
}

}  // namespace

TraceRanks parse_trace_ranks(const std::string& s) {
  if (s == "classes") return TraceRanks::classes;
  if (s == "all") return TraceRanks::all;
  throw UserError(fmt::format("--trace-ranks: '{}' is not a choice; write classes (one process per class of "
                              "identical ranks) or all (one per rank)", s));
}

std::string chrome_trace_json(const SimResult& r, const std::string& title, TraceRanks mode) {
  nlohmann::json events = nlohmann::json::array();
  std::set<std::pair<int, int>> threads;
  const auto procs = processes(r, mode);
  for (const auto& per_class : procs)
    for (const auto& [pid, name] : per_class) events.push_back(name_event("process_name", pid, -1, name));
  for (const SimEvent& e : r.events)
    for_each_place(e, [&](int c, const std::string& name) {
      for (const auto& proc : procs.at(std::size_t(c))) {
        events.push_back(complete_event(e, proc.first, name));
        threads.insert({proc.first, e.stream});
      }
    });
  for (const auto& [pid, tid] : threads) events.push_back(name_event("thread_name", pid, tid, stream_name(tid)));
  return nlohmann::json{{"traceEvents", events},
                        {"displayTimeUnit", "ns"},
                        {"otherData", {{"title", title},
                                       {"time_us", r.time_us},
                                       {"ranks", mode == TraceRanks::all ? "all" : "classes"}}}}
      .dump(1);
}

}  // namespace coconet::sim
