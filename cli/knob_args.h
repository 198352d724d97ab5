// The knob flags `simulate` and `run` share: --chunks, --algo, --proto,
// --channels and --overlap pin a knob; the rest are chosen as predict chooses them (or
// come from a schedule file, which pins all of its own).
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "model/schedule.h"
#include "sim/tuner.h"

namespace coconet::cli {

struct KnobArgs {
  std::optional<int> chunks;
  std::optional<std::string> algo;
  std::optional<std::string> proto;
  std::optional<int> channels;
  std::optional<std::string> overlap;  // chunk|tile (model::Grain)

  // Throws UserError naming the flag for a value out of range.
  void check() const;
  // The knob settings the tuner may choose from for `s`: `pinned` (a schedule
  // file's) keeps s.knobs, else predict's space; the flags pin theirs.
  [[nodiscard]] sim::KnobSpace space(const model::Schedule& s, bool pinned) const;
  // `k` with the flags applied.
  [[nodiscard]] model::Knobs applied(model::Knobs k) const;
  [[nodiscard]] bool any() const { return chunks || algo || proto || channels || overlap; }
};

void add_knob_flags(CLI::App* cmd, KnobArgs& a);

}  // namespace coconet::cli
