// Chrome trace (Perfetto) JSON of a simulated step: one process per class of
// identical ranks (named for the ranks it stands for) or, with
// TraceRanks::all, one per rank (each rank of a class shows its class's
// events); one thread per stream, one complete event per task on every rank
// it runs on (a send also appears as its receive on the peer). Times in
// microseconds.
#pragma once

#include <string>

#include "sim/simulator.h"

namespace coconet::sim {

enum class TraceRanks { classes, all };
// "classes" or "all"; anything else is a UserError naming --trace-ranks.
[[nodiscard]] TraceRanks parse_trace_ranks(const std::string& s);

[[nodiscard]] std::string chrome_trace_json(const SimResult& r, const std::string& title,
                                            TraceRanks ranks = TraceRanks::classes);

}  // namespace coconet::sim
