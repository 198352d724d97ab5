// The subcommands of the `coconet` command, one file each (cmd_<name>.cpp).
// Each registers its flags on the app and a callback that does the work by
// calling the libraries; output goes to stdout, messages to stderr. Errors are
// thrown and reported once in main.cpp, with the exit code model/error.h maps
// them to (UserError: 2, RunFailure: 1, anything else: 3).
#pragma once

#include <CLI/CLI.hpp>

namespace coconet::cli {

void register_list(CLI::App& app);
void register_show(CLI::App& app);
void register_collective(CLI::App& app);
void register_predict(CLI::App& app);
void register_tune(CLI::App& app);
void register_simulate(CLI::App& app);
void register_run(CLI::App& app);
void register_validate(CLI::App& app);
void register_calibrate(CLI::App& app);
void register_compare(CLI::App& app);
void register_step(CLI::App& app);

}  // namespace coconet::cli
