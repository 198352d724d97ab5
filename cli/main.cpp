// The `coconet` command: parses the subcommand and reports errors once.
// Exit codes: 0 success, 1 a run failed (e.g. a result mismatch), 2 bad input or usage.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "cli/commands.h"
#include "model/error.h"
#include "model/safe_write.h"

int main(int argc, char** argv) {
  coconet::model::remove_temporaries_on_interrupt(130);  // SIGINT/SIGTERM: temporaries removed, exit 130
  CLI::App app{"coconet: write a distributed step once, generate its schedules, predict, run, check"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Print help for every subcommand");
  coconet::cli::register_list(app);
  coconet::cli::register_show(app);
  coconet::cli::register_collective(app);
  coconet::cli::register_predict(app);
  coconet::cli::register_tune(app);
  coconet::cli::register_simulate(app);
  coconet::cli::register_run(app);
  coconet::cli::register_validate(app);
  coconet::cli::register_calibrate(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : coconet::kExitUserError;
  } catch (const coconet::UserError& e) {
    std::fflush(stdout);
    fmt::print(stderr, "coconet: error: {}\n", e.what());
    return coconet::kExitUserError;
  } catch (const coconet::RunFailure& e) {
    std::fflush(stdout);
    fmt::print(stderr, "coconet: run failed: {}\n", e.what());
    return coconet::kExitRunFailed;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "coconet: internal error: {}\n", e.what());
    return coconet::kExitInternal;
  }
  return 0;
}
