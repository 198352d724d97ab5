// A small structural JSON Schema checker for the tests of the output contract:
// the subset of draft 2020-12 that docs/schema/ uses (type, a name or a list
// of names; required; properties; items; enum; const). Annotations ($schema,
// $id, title, description) are ignored, and so is any keyword it does not
// know: the schemas stay within the subset, and this file's test says so.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace coconet::test {

using nlohmann::json;

// Each violation of `schema` by `value`, as "PATH: what"; empty when it conforms.
inline std::vector<std::string> schema_errors(const json& schema, const json& value,
                                              const std::string& path = "$");

namespace detail {

inline bool has_type(const json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "integer") return v.is_number_integer();
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  return false;
}

inline void check_type(const json& schema, const json& v, const std::string& path,
                       std::vector<std::string>& out) {
  if (!schema.contains("type")) return;
  const json& t = schema["type"];
  bool ok = false;
  if (t.is_string()) ok = has_type(v, t);
  for (const auto& name : t.is_array() ? t : json::array()) ok = ok || has_type(v, name);
  if (!ok) out.push_back(path + ": expected type " + t.dump() + ", got " + v.dump());
}

inline void check_values(const json& schema, const json& v, const std::string& path,
                         std::vector<std::string>& out) {
  if (schema.contains("const") && schema["const"] != v)
    out.push_back(path + ": expected " + schema["const"].dump() + ", got " + v.dump());
  if (!schema.contains("enum")) return;
  for (const auto& allowed : schema["enum"])
    if (allowed == v) return;
  out.push_back(path + ": " + v.dump() + " is not one of " + schema["enum"].dump());
}

inline void check_object(const json& schema, const json& v, const std::string& path,
                         std::vector<std::string>& out) {
  if (!v.is_object()) return;
  const json required = schema.value("required", json::array());
  for (const auto& name : required)
    if (!v.contains(name.get<std::string>()))
      out.push_back(path + ": missing \"" + name.get<std::string>() + "\"");
  const json properties = schema.value("properties", json::object());
  for (const auto& [name, sub] : properties.items())
    if (v.contains(name)) {
      auto more = schema_errors(sub, v[name], path + "." + name);
      out.insert(out.end(), more.begin(), more.end());
    }
}

inline void check_items(const json& schema, const json& v, const std::string& path,
                        std::vector<std::string>& out) {
  if (!v.is_array() || !schema.contains("items")) return;
  for (std::size_t i = 0; i < v.size(); ++i) {
    auto more = schema_errors(schema["items"], v[i], path + "[" + std::to_string(i) + "]");
    out.insert(out.end(), more.begin(), more.end());
  }
}

}  // namespace detail

inline std::vector<std::string> schema_errors(const json& schema, const json& value,
                                              const std::string& path) {
  std::vector<std::string> out;
  detail::check_type(schema, value, path, out);
  detail::check_values(schema, value, path, out);
  detail::check_object(schema, value, path, out);
  detail::check_items(schema, value, path, out);
  return out;
}

// The keywords the checker above understands, and annotations it may skip.
inline bool known_keyword(const std::string& k) {
  for (const char* known : {"type", "required", "properties", "items", "enum", "const", "$schema",
                            "$id", "title", "description"})
    if (k == known) return true;
  return false;
}

// Keywords of `schema` (at any depth) outside the subset, as "PATH: keyword".
inline std::vector<std::string> unknown_keywords(const json& schema,
                                                 const std::string& path = "$") {
  std::vector<std::string> out;
  if (!schema.is_object()) return out;
  for (const auto& [k, sub] : schema.items()) {
    if (!known_keyword(k)) out.push_back(path + ": " + k);
    if (k == "items") {
      auto more = unknown_keywords(sub, path + ".items");
      out.insert(out.end(), more.begin(), more.end());
    }
    if (k == "properties")
      for (const auto& [name, p] : sub.items()) {
        auto more = unknown_keywords(p, path + "." + name);
        out.insert(out.end(), more.begin(), more.end());
      }
  }
  return out;
}

}  // namespace coconet::test
