// What `--set NAME=VALUE` means, decided once for every command: the
// NAME=VALUE syntax, which names go to the topology and which to the workloads,
// and how a value is read.
//
// - Dotted names (gpu.hbm_GBps) and `nodes` are topology values; plain names
//   are a workload's sizes (N, B, ...) or scalars (lr, beta1, ...).
// - A size (and any count, e.g. collective's -b/-e) is an exact positive
//   integer that fits in 64 bits: digits (4096), optionally with a binary
//   suffix K, M or G (x 2^10, 2^20, 2^30, as nccl-tests reads -b/-e: 4K = 4096),
//   or decimal notation that denotes an integer exactly (1e6 = 1000000,
//   2.5e3 = 2500, 1.5K = 1536). Never truncated: 1.5, 1e-3, 0, -4, 1e19, abc
//   are rejected.
// - A scalar is any finite number (0.1, 1e-3).
// - A name no workload has is rejected, listing the sizes and scalars there are.
// Every rejection is a UserError whose message starts with the flag, e.g.
// "--set N=abc: ...".
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "model/error.h"
#include "model/program.h"

namespace coconet::model {

using Assignments = std::vector<std::pair<std::string, std::string>>;

// Parses "NAME=VALUE"; throws UserError on malformed text.
[[nodiscard]] std::pair<std::string, std::string> parse_assignment(const std::string& text);

// The topology's top-level asymmetry keys (last_node_gpus, node_overrides,
// stragglers; sim/topology.h): optional, so `--set` may add them, and plain
// names that are the topology's, not a workload's. The one list: split_sets
// and the topology reader both ask it.
[[nodiscard]] bool is_asymmetry_key(const std::string& key);

// `--set` texts split by what they set.
struct SetArgs {
  Assignments workload;  // sizes and scalars: plain names
  Assignments topology;  // dotted names, `nodes` and the asymmetry keys
};
[[nodiscard]] SetArgs split_sets(const std::vector<std::string>& texts);

// A count by the rules above; `flag` starts the message of a rejection
// ("--set N=abc", "-b 1.5").
[[nodiscard]] std::int64_t parse_count(const std::string& text, const std::string& flag);
// A size or a scalar given as `--set name=text`.
[[nodiscard]] std::int64_t parse_size(const std::string& name, const std::string& text);
[[nodiscard]] double parse_scalar(const std::string& name, const std::string& text);

// The error for `--set name=value` when no program of `programs` has a size or
// scalar `name`: it lists the ones they have.
[[nodiscard]] UserError unknown_name(const std::string& name, const std::string& value,
                                     std::span<const Program> programs);

}  // namespace coconet::model
