// What predict, tune and simulate share on the command line: their common
// flags (cli/results.h holds PredictArgs and the JSON they print), and
// printing per-point reports (table, json or csv). Defined in cmd_predict.cpp.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/format.h"
#include "cli/results.h"
#include "sim/predict.h"

namespace coconet::cli {

// Registers the flags of PredictArgs on `cmd`; `target_required` for simulate.
void add_predict_flags(CLI::App* cmd, PredictArgs& a, bool target_required = false);

// Prints the reports in `f`; tune's ("tune") show every knob in the table.
void print_point_reports(const std::vector<sim::PointReport>& reports, Format f, const std::string& kind);

}  // namespace coconet::cli
