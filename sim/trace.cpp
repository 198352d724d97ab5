// Chrome trace format: "X" (complete) events with ts/dur in microseconds and
// "M" (metadata) events naming processes and threads.
#include "sim/trace.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

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

}  // namespace

std::string chrome_trace_json(const SimResult& r, const std::string& title) {
  nlohmann::json events = nlohmann::json::array();
  std::set<std::pair<int, int>> threads;
  for (std::size_t p = 0; p < r.rank_names.size(); ++p)
    events.push_back(name_event("process_name", int(p), -1, r.rank_names[p]));
  for (const SimEvent& e : r.events) {
    events.push_back(complete_event(e, e.rank, e.name));
    threads.insert({e.rank, e.stream});
    if (e.peer >= 0 && e.peer != e.rank) {
      events.push_back(complete_event(e, e.peer, "recv " + e.name));
      threads.insert({e.peer, e.stream});
    }
  }
  for (const auto& [pid, tid] : threads) events.push_back(name_event("thread_name", pid, tid, stream_name(tid)));
  return nlohmann::json{{"traceEvents", events},
                        {"displayTimeUnit", "ns"},
                        {"otherData", {{"title", title}, {"time_us", r.time_us}}}}
      .dump(1);
}

}  // namespace coconet::sim
