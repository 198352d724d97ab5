// Strict YAML reading shared by every front end (workloads, experiments,
// schedules, tune files, topologies, models): errors carry "file:line:column",
// unknown keys are rejected with the list of known ones, and conversion
// failures say what was expected instead of leaking a yaml-cpp exception.
// load()/load_all() are the only way coconet turns text into YAML nodes: a
// file larger than kMaxInputBytes, with more than kMaxYamlNodes values,
// nested deeper than kMaxYamlDepth, with more than kMaxYamlAliases aliases or
// kMaxYamlDocuments documents is refused while yaml-cpp reads it (an event
// pass that stops at the first value past a limit), before any tree is built;
// a key given twice in one map is refused once the tree is built.
#pragma once

#include <initializer_list>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/core.h>
#include <yaml-cpp/yaml.h>

#include "model/error.h"
#include "model/limits.h"

namespace coconet::model {

// A UserError that already names its place; wrap() leaves it as it is.
class LocatedError : public UserError {
 public:
  using UserError::UserError;
};

struct YamlContext {
  std::string origin;  // file name or "<embedded default>"

  [[nodiscard]] std::string where(const YAML::Node& n) const {
    const auto m = n.Mark();
    if (m.is_null()) return origin;
    return fmt::format("{}:{}:{}", origin, m.line + 1, m.column + 1);
  }

  [[noreturn]] void fail(const YAML::Node& n, const std::string& what) const {
    throw LocatedError(fmt::format("{}: {}", where(n), what));
  }

  // The one document of `text` (a null node when it has none). Throws
  // LocatedError when the text passes a limit of model/limits.h (bytes,
  // values, depth, aliases; checked while yaml-cpp reads, before a tree is
  // built), is malformed, has a key twice in one map, or holds a second
  // document (a `---` after the first): such a file is one document.
  [[nodiscard]] YAML::Node load(const std::string& text) const;

  // Every document of `text` (tune files: one per point), read in one pass
  // in time linear in the text, under the same limits for the whole file plus
  // at most kMaxYamlDocuments documents. Marks are lines of the whole file.
  [[nodiscard]] std::vector<YAML::Node> load_all(const std::string& text) const;

  // Without recursion: no map holds a key twice, no node nests past kMaxYamlDepth,
  // at most kMaxYamlNodes values (aliases count each time they are used).
  void check_structure(const YAML::Node& root) const;

  void require_map(const YAML::Node& n, const std::string& what) const {
    if (!n || !n.IsMap()) fail(n, fmt::format("{} must be a map of key: value", what));
  }

  void allow_keys(const YAML::Node& n, std::initializer_list<const char*> keys,
                  const std::string& what) const {
    for (const auto& kv : n) {
      const auto key = kv.first.as<std::string>();
      bool known = false;
      std::string list;
      for (const char* k : keys) {
        known = known || key == k;
        list += (list.empty() ? "" : ", ") + std::string(k);
      }
      if (!known) fail(kv.first, fmt::format("unknown key '{}' in {}; known keys: {}", key, what, list));
    }
  }

  template <typename T>
  [[nodiscard]] T scalar(const YAML::Node& n, const std::string& what) const {
    if (!n.IsScalar()) fail(n, fmt::format("{} must be a single value", what));
    try {
      return n.as<T>();
    } catch (const YAML::Exception&) {
      fail(n, fmt::format("{} '{}' is not a valid {}", what, n.Scalar(), type_name<T>()));
    }
  }

  template <typename T>
  [[nodiscard]] T required(const YAML::Node& n, const char* key, const std::string& what) const {
    const YAML::Node v = n[key];
    if (!v) fail(n, fmt::format("{} needs the key '{}'", what, key));
    return scalar<T>(v, fmt::format("{} {}", what, key));
  }

  template <typename T>
  [[nodiscard]] T optional(const YAML::Node& n, const char* key, T fallback) const {
    const YAML::Node v = n[key];
    return v ? scalar<T>(v, key) : fallback;
  }

  // Runs f; a UserError that does not yet name its place gets n's position.
  template <typename F>
  void wrap(const YAML::Node& n, F&& f) const {
    try {
      f();
    } catch (const LocatedError&) {
      throw;
    } catch (const UserError& e) {
      throw LocatedError(fmt::format("{}: {}", where(n), e.what()));
    }
  }

  // What a value of type T is called in messages ("integer", "number", ...).
  template <typename T>
  static const char* type_name() {
    if constexpr (std::is_same_v<T, bool>) return "boolean (true or false)";
    else if constexpr (std::is_integral_v<T>) return "integer";
    else if constexpr (std::is_floating_point_v<T>) return "number";
    else return "string";
  }
};

}  // namespace coconet::model
