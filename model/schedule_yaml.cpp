// The YAML form of a schedule. Written: the workload's name, the schedule's
// canonical name, its history and knobs, and (for readers) its stages and
// overlap groups. Read: each history entry becomes its typed directive
// (make_directive) and is replayed on the workload's program, so
// a schedule file is checked exactly like a schedule built in code; the
// stages and overlap groups written for readers are not trusted on input:
// when present they must be what the history gives (else the file was edited).
//
//   workload: adam
//   name: fuse(RS-C-AG)+asSlice(m,v)
//   history:
//     - {op: split, args: [g1]}
//     - {op: reorder, args: [g1]}
//   knobs: {chunks: 1, algo: auto, proto: auto, channels: 0}
#include <fmt/core.h>
#include <yaml-cpp/yaml.h>

#include <set>
#include <string>
#include <vector>

#include "model/error.h"
#include "model/limits.h"
#include "model/transforms.h"
#include "model/schedule_file.h"
#include "model/yaml_util.h"

namespace coconet::model {

namespace {

std::string where(const std::string& origin, const YAML::Mark& m) {
  return fmt::format("{}:{}:{}", origin, m.line + 1, m.column + 1);
}

[[noreturn]] void fail(const std::string& origin, const YAML::Node& n, const std::string& msg) {
  throw UserError(fmt::format("{}: {}", where(origin, n.Mark()), msg));
}

void reject_unknown_keys(const std::string& origin, const YAML::Node& map,
                         const std::set<std::string>& known, const std::string& what) {
  if (!map.IsMap()) fail(origin, map, fmt::format("{} must be a mapping", what));
  for (const auto& kv : map) {
    const auto key = kv.first.as<std::string>();
    if (!known.contains(key)) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      fail(origin, kv.first, fmt::format("unknown key '{}' in {}: use {}", key, what, list));
    }
  }
}

std::string scalar(const std::string& origin, const YAML::Node& n, const std::string& what) {
  if (!n.IsScalar()) fail(origin, n, fmt::format("{} must be a single value", what));
  return n.as<std::string>();
}

int integer(const std::string& origin, const YAML::Node& n, const std::string& what, int min, int max) {
  int v = 0;
  try {
    v = n.as<int>();
  } catch (const YAML::Exception&) {
    fail(origin, n, fmt::format("{} must be an integer", what));
  }
  if (v < min) fail(origin, n, fmt::format("{} must be at least {}, got {}", what, min, v));
  if (v > max) fail(origin, n, fmt::format("{} = {} is more than the limit of {} (model/limits.h)", what, v, max));
  return v;
}

// A history entry `{op: OP, args: [ARGS]}` as the typed directive it records.
Directive read_directive(const std::string& origin, const YAML::Node& n) {
  reject_unknown_keys(origin, n, {"op", "args"}, "a history entry");
  if (!n["op"])
    fail(origin, n, "a history entry needs `op` (split, reorder, as_slice, fuse, overlap)");
  const std::string op = scalar(origin, n["op"], "op");
  std::vector<std::string> args;
  if (const auto list = n["args"]) {
    if (!list.IsSequence()) fail(origin, list, "args must be a list of statement names");
    for (const auto& a : list) args.push_back(scalar(origin, a, "an argument"));
  }
  try {
    return make_directive(op, args);
  } catch (const UserError& e) {
    fail(origin, n, e.what());
  }
}

Knobs read_knobs(const std::string& origin, const YAML::Node& n, Knobs k) {
  reject_unknown_keys(origin, n, {"chunks", "algo", "proto", "channels", "overlap"}, "knobs");
  try {
    // Bounded here, where the file's line is known, and not only when lowering:
    // `run` checks a tune file before it starts any rank (issue 34).
    if (n["chunks"]) k.chunks = integer(origin, n["chunks"], "knobs.chunks", 1, kMaxChunks);
    if (n["channels"]) k.channels = integer(origin, n["channels"], "knobs.channels", 0, kMaxChannels);
    if (n["algo"]) k.algo = parse_algo(scalar(origin, n["algo"], "knobs.algo"));
    if (n["proto"]) k.proto = parse_proto(scalar(origin, n["proto"], "knobs.proto"));
    if (n["overlap"]) k.overlap = parse_grain(scalar(origin, n["overlap"], "knobs.overlap"));
  } catch (const UserError& e) {
    const std::string msg = e.what();
    if (msg.starts_with(origin + ":")) throw;
    fail(origin, n, msg);
  }
  return k;
}

Schedule replay(const Program& program, const std::string& origin, const YAML::Node& history) {
  Schedule s = initial_schedule(program);
  if (!history) return s;
  if (!history.IsSequence()) fail(origin, history, "history must be a list of transformations");
  for (const auto& entry : history) {
    const Directive d = read_directive(origin, entry);
    try {
      s = apply(std::move(s), d);
    } catch (const UserError& e) {
      fail(origin, entry, e.what());
    }
  }
  return s;
}

void write_stages(YAML::Emitter& out, const Schedule& s);

// A node as one line whatever its style (flow or block); depth is bounded by
// the loader's kMaxYamlDepth.
std::string canonical(const YAML::Node& n) {
  if (n.IsScalar()) return n.Scalar();
  std::string out = n.IsMap() ? "{" : "[";
  for (const auto& it : n) {
    if (out.size() > 1) out += ", ";
    out += n.IsMap() ? canonical(it.first) + ": " + canonical(it.second) : canonical(it);
  }
  return out + (n.IsMap() ? "}" : "]");
}

// The stages and overlaps a file lists, if it lists them, against the replayed schedule's.
void check_derived(const std::string& origin, const YAML::Node& root, const Schedule& s) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  write_stages(out, s);
  out << YAML::EndMap;
  const YAML::Node expected = YAML::Load(out.c_str());
  for (const char* key : {"stages", "overlaps"}) {
    const YAML::Node given = root[key];
    if (!given) continue;
    const std::string a = canonical(given);
    const std::string b = canonical(expected[key]);
    if (a != b)
      fail(origin, given,
           fmt::format("the file's {} are {} but its history gives {}; {} are written for readers and "
                       "must not be edited (delete them, or write the schedule again)",
                       key, a.size() > 200 ? a.substr(0, 200) + "..." : a, b, key));
  }
}

Schedule read_schedule(const Program& program, const std::string& origin, const YAML::Node& root) {
  reject_unknown_keys(origin, root, {"workload", "name", "history", "knobs", "stages", "overlaps", "point"},
                      "a schedule");
  if (!root["workload"]) fail(origin, root, "a schedule needs `workload: NAME`");
  const std::string workload = scalar(origin, root["workload"], "workload");
  if (workload != program.name)
    fail(origin, root["workload"],
         fmt::format("this schedule is for workload '{}', not '{}'", workload, program.name));
  Schedule s = replay(program, origin, root["history"]);
  if (root["knobs"]) s.knobs = read_knobs(origin, root["knobs"], s.knobs);
  check_derived(origin, root, s);
  if (root["name"]) {
    const std::string written = scalar(origin, root["name"], "name");
    if (written != s.name())
      fail(origin, root["name"],
           fmt::format("the file names the schedule '{}' but its history gives '{}'; the "
                       "workload changed since it was written, or the name was edited",
                       written, s.name()));
  }
  return s;
}

void write_stages(YAML::Emitter& out, const Schedule& s) {
  out << YAML::Key << "stages" << YAML::Value << YAML::BeginSeq;
  for (const auto& st : s.stages) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "code" << YAML::Value << st.code(s.program)
        << YAML::Key << "stmts" << YAML::Value << YAML::Flow << st.stmts << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "overlaps" << YAML::Value << YAML::BeginSeq;
  for (const auto& g : s.overlaps) out << YAML::Flow << std::vector<int>{g.first, g.last};
  out << YAML::EndSeq;
}

}  // namespace

std::string to_yaml(const Schedule& s) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "workload" << YAML::Value << s.program.name;
  out << YAML::Key << "name" << YAML::Value << s.name();
  out << YAML::Key << "history" << YAML::Value << YAML::BeginSeq;
  for (const auto& d : s.history)
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "op" << YAML::Value << std::string(op_of(d))
        << YAML::Key << "args" << YAML::Value << YAML::Flow << args_of(d) << YAML::EndMap;
  out << YAML::EndSeq;
  out << YAML::Key << "knobs" << YAML::Value << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "chunks" << YAML::Value << s.knobs.chunks;
  out << YAML::Key << "algo" << YAML::Value << to_string(s.knobs.algo);
  out << YAML::Key << "proto" << YAML::Value << to_string(s.knobs.proto);
  out << YAML::Key << "channels" << YAML::Value << s.knobs.channels;
  out << YAML::Key << "overlap" << YAML::Value << to_string(s.knobs.overlap);
  out << YAML::EndMap;
  write_stages(out, s);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

Schedule schedule_from_yaml(const Program& program, const std::string& text,
                            const std::string& origin) {
  // malformed, duplicate keys, too deep, too large, a second document
  return schedule_from_node(program, YamlContext{origin}.load(text), origin);
}

Schedule schedule_from_node(const Program& program, const YAML::Node& root, const std::string& origin) {
  if (!root.IsMap())
    throw UserError(
        fmt::format("{}: a schedule is a mapping with keys workload, history, knobs", origin));
  try {
    return read_schedule(program, origin, root);
  } catch (const YAML::Exception& e) {
    throw UserError(fmt::format("{}: {}", where(origin, e.mark), e.msg));
  }
}

}  // namespace coconet::model
