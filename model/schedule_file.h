// Schedule files as `coconet tune --out` writes them: one YAML document per
// point (separated by `---`), each a schedule (model/schedule.h's YAML form)
// with a `point:` mapping that names, as data, where it was chosen: workload,
// sizes, ranks per group, groups, topology, nodes, backend and the predicted
// time. `run` and `simulate` pick the document that matches their point; a
// hand-written file of one document without `point:` matches any point of
// its workload.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "model/schedule.h"
#include "model/types.h"

namespace coconet::model {

struct SchedulePoint {
  std::string workload;
  Bindings sizes;
  int ranks = 0;  // per process group
  int groups = 1;
  std::string topology;
  int nodes = 0;
  std::string backend;
  std::optional<double> predicted_us;

  // "adam N=4096 on 2 ranks (cpu-local, 1 node(s), backend cpu)".
  [[nodiscard]] std::string text() const;
  // The flags that select this point: "--set N=4096 --ranks 2".
  [[nodiscard]] std::string flags() const;
};

// The `point:` line written before a schedule's YAML.
[[nodiscard]] std::string point_yaml(const SchedulePoint& p);

struct ScheduleDocument {
  std::string workload;
  std::optional<SchedulePoint> point;
  YAML::Node root;  // the document; its marks are lines of the whole file
};

// Replays one document already read (by YamlContext::load or load_all) on
// `program`; what schedule_from_yaml does after reading its text.
[[nodiscard]] Schedule schedule_from_node(const Program& program, const YAML::Node& root,
                                          const std::string& origin);

// Every document of a schedule file, read once in linear time under the
// loader's limits (model/yaml_util.h); throws UserError (file:line:col) for
// malformed YAML, a `workload` that is not a name or a `point:` that is not
// well formed.
[[nodiscard]] std::vector<ScheduleDocument> read_schedule_documents(const std::string& path);
// The same for a file's text; `origin` names it in messages.
[[nodiscard]] std::vector<ScheduleDocument> schedule_documents(const std::string& text, const std::string& origin);

// True for a --schedule argument that names a file rather than a schedule.
[[nodiscard]] bool is_schedule_file(const std::string& name_or_path);

// What a command asks of a schedule file: its point, and (to choose among
// documents of the same point) the topology and backend when it knows them.
struct PointQuery {
  Bindings sizes;
  int ranks = 0;  // per process group
  int groups = 1;
  std::string topology;  // empty: any
  std::string backend;   // empty: any
};

struct ChosenSchedule {
  Schedule schedule;                    // with the document's knobs
  std::optional<SchedulePoint> point;   // where tune chose it, when the file says
};

// The schedule in `path` for `program` at `q`. Throws UserError when the file
// has no document for the point, listing the points it has and the flags that
// select each.
[[nodiscard]] ChosenSchedule schedule_for_point(const Program& program, const std::string& path,
                                                const PointQuery& q);
// The same among documents already read from `path` (a file is read once for all its points).
[[nodiscard]] ChosenSchedule schedule_for_point(const Program& program, const std::vector<ScheduleDocument>& docs,
                                                const std::string& path, const PointQuery& q);

// The sizes of the documents for `workload` when they all name the same
// sizes (what `run FILE` uses when no --set gives sizes); nullopt otherwise.
[[nodiscard]] std::optional<Bindings> common_sizes(const std::vector<ScheduleDocument>& docs,
                                                   const std::string& workload);

}  // namespace coconet::model
