// The JSON shapes every command shares (see json_out.h).
#include "cli/json_out.h"

#include <cstdio>

namespace coconet::cli {

std::string schema_of(const std::string& kind) { return "coconet." + kind + "/1"; }

nlohmann::json tagged(const std::string& kind, nlohmann::json body) {
  body["schema"] = schema_of(kind);
  return body;
}

nlohmann::json sizes_json(const model::Bindings& sizes) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, value] : sizes) j[name] = value;
  return j;
}

nlohmann::json knobs_json(const model::Knobs& k) {
  return {{"chunks", k.chunks},
          {"algo", model::to_string(k.algo)},
          {"proto", model::to_string(k.proto)},
          {"channels", k.channels},
          {"overlap", model::to_string(k.overlap)}};
}

void print_json(const nlohmann::json& j) { std::fputs((j.dump(2) + "\n").c_str(), stdout); }

}  // namespace coconet::cli
