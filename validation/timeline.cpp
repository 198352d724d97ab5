// Chrome trace parsing with nlohmann::json; only what the Gantt chart needs.
#include "validation/timeline.h"

#include <map>
#include <utility>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "model/error.h"

namespace coconet::validation {

namespace {

using Json = nlohmann::json;

const Json& events_of(const Json& doc) {
  if (doc.is_array()) return doc;
  if (doc.is_object() && doc.contains("traceEvents") && doc["traceEvents"].is_array()) return doc["traceEvents"];
  throw UserError("a Chrome trace is a JSON array of events or an object with a \"traceEvents\" array");
}

std::string id_text(const Json& e, const char* key) {
  if (!e.contains(key)) return "0";
  return e[key].is_string() ? e[key].get<std::string>() : e[key].dump();
}

}  // namespace

std::vector<TimelineBar> timeline_from_trace(const std::string& trace_json) {
  Json doc;
  try {
    doc = Json::parse(trace_json);
  } catch (const Json::parse_error& e) {
    throw UserError(fmt::format("the trace is not valid JSON: {}", e.what()));
  }
  const Json& events = events_of(doc);
  std::map<std::string, std::string> process, thread;
  for (const auto& e : events) {
    if (!e.is_object() || e.value("ph", "") != "M" || !e.contains("args")) continue;
    const std::string name = e["args"].value("name", "");
    if (e.value("name", "") == "process_name") process[id_text(e, "pid")] = name;
    if (e.value("name", "") == "thread_name") thread[id_text(e, "pid") + "/" + id_text(e, "tid")] = name;
  }
  std::vector<TimelineBar> bars;
  for (const auto& e : events) {
    if (!e.is_object() || e.value("ph", "") != "X") continue;
    const std::string pid = id_text(e, "pid"), tid = id_text(e, "tid");
    const std::string p = process.contains(pid) ? process[pid] : "pid " + pid;
    const std::string t = thread.contains(pid + "/" + tid) ? thread[pid + "/" + tid] : "tid " + tid;
    bars.push_back({p + " / " + t, e.value("name", ""), e.value("ts", 0.0), e.value("dur", 0.0)});
  }
  return bars;
}

}  // namespace coconet::validation
