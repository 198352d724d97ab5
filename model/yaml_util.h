// Strict YAML reading shared by every front end (workloads, experiments,
// schedules, topologies): errors carry "file:line:column", unknown keys are
// rejected with the list of known ones, and conversion failures say what was
// expected instead of leaking a yaml-cpp exception. A document larger than
// kMaxInputBytes, nested deeper than kMaxYamlDepth, or with a key given twice
// in one map is rejected when it is loaded.
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

  [[nodiscard]] YAML::Node load(const std::string& text) const {
    if (text.size() > kMaxInputBytes)
      throw LocatedError(fmt::format("{}: the file has {} bytes, more than the limit of {} bytes", origin,
                                     text.size(), kMaxInputBytes));
    if (const std::int64_t bad = first_invalid_utf8(text); bad >= 0)
      throw LocatedError(fmt::format("{}: the file is not valid UTF-8 (byte {} is 0x{:02x}); YAML files are UTF-8 text",
                                     origin, bad, static_cast<unsigned char>(text[static_cast<std::size_t>(bad)])));
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      throw LocatedError(fmt::format("{}:{}:{}: malformed YAML: {}", origin, e.mark.line + 1,
                                     e.mark.column + 1, e.msg));
    }
    check_structure(root);
    return root;
  }

  // Without recursion: no map holds a key twice, no node nests past kMaxYamlDepth,
  // at most kMaxYamlNodes values (aliases count each time they are used).
  void check_structure(const YAML::Node& root) const {
    std::vector<std::pair<YAML::Node, int>> todo{{root, 0}};
    std::size_t visited = 0;
    while (!todo.empty()) {
      if (++visited > kMaxYamlNodes)
        throw LocatedError(fmt::format("{}: the document (its aliases expanded) has more than the limit of {} "
                                       "values",
                                       origin, kMaxYamlNodes));
      const auto [n, depth] = todo.back();
      todo.pop_back();
      if (depth > kMaxYamlDepth)
        fail(n, fmt::format("the document nests deeper than the limit of {} levels", kMaxYamlDepth));
      if (n.IsMap()) {
        std::set<std::string> keys;
        for (const auto& kv : n) {
          if (!kv.first.IsScalar()) fail(kv.first, "a key must be a plain value, not empty, a list or a map");
          if (!keys.insert(kv.first.Scalar()).second)
            fail(kv.first, fmt::format("the key '{}' is given twice in the same map; give each key once",
                                       kv.first.Scalar()));
          todo.emplace_back(kv.second, depth + 1);
        }
      } else if (n.IsSequence()) {
        for (const auto& item : n) todo.emplace_back(item, depth + 1);
      }
    }
  }

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
