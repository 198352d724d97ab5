// The shapes every `--format json` output shares (README, "Output contract"):
// each printed object names its kind and version in "schema"
// ("coconet.<kind>/1", described by docs/schema/<kind>.schema.json), sizes
// are objects of name to value beside their human label, and knobs are
// objects of chunks, algo, proto and channels.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "model/schedule.h"
#include "model/types.h"

namespace coconet::cli {

// "coconet.<kind>/1".
[[nodiscard]] std::string schema_of(const std::string& kind);

// `body` with "schema" set to schema_of(kind).
[[nodiscard]] nlohmann::json tagged(const std::string& kind, nlohmann::json body);

// {"N": 4096, ...}.
[[nodiscard]] nlohmann::json sizes_json(const model::Bindings& sizes);

// {"chunks": .., "algo": .., "proto": .., "channels": ..}.
[[nodiscard]] nlohmann::json knobs_json(const model::Knobs& k);

// Prints `j` indented, with a newline.
void print_json(const nlohmann::json& j);

}  // namespace coconet::cli
