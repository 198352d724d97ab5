// Chrome trace (Perfetto) JSON of a simulated step: one process per
// (representative) rank, one thread per stream, one complete event per task
// (a send also appears as its receive on the peer rank). Times in microseconds.
#pragma once

#include <string>

#include "sim/simulator.h"

namespace coconet::sim {

[[nodiscard]] std::string chrome_trace_json(const SimResult& r, const std::string& title);

}  // namespace coconet::sim
