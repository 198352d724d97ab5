// The `coconet` command: parses the subcommand and reports errors once, with
// the exit code model/error.h maps them to (0 success, 1 a run failed, 2 bad
// input or usage, 3 internal error, 130 interrupted).
//
// Design notes
// - SIGINT and SIGTERM end the process with exit code 130 from the handler
//   itself (model/safe_write.h): it removes the temporaries a write left,
//   writes one line with write(2) and calls _exit(2), all async-signal-safe.
//   Destructors and MPI_Finalize are skipped on purpose: a rank interrupted
//   inside a collective would wait forever in them. Exiting (rather than
//   re-raising SIGINT) makes 130 the exit status every caller sees (a shell,
//   a Python subprocess, mpirun's report), as the exit-code table says.
// - A `--ranks N` relaunch execs mpirun, which resets the handler: mpirun
//   handles SIGINT for the job and reports its own status.

#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "cli/commands.h"
#include "cli/messages.h"
#include "model/error.h"
#include "model/safe_write.h"

namespace {

// "error", "run failed" or "internal error": what an exit code says happened.
const char* meaning_of(int code) {
  if (code == coconet::kExitUserError) return "error";
  if (code == coconet::kExitRunFailed) return "run failed";
  return "internal error";
}

int report(const std::exception& e) {
  const int code = coconet::exit_code_for(e);
  std::fflush(stdout);
  fmt::print(stderr, "coconet: {}: {}\n", meaning_of(code), e.what());
  return code;
}

void register_commands(CLI::App& app) {
  coconet::cli::register_list(app);
  coconet::cli::register_show(app);
  coconet::cli::register_collective(app);
  coconet::cli::register_predict(app);
  coconet::cli::register_tune(app);
  coconet::cli::register_simulate(app);
  coconet::cli::register_run(app);
  coconet::cli::register_validate(app);
  coconet::cli::register_calibrate(app);
  coconet::cli::register_compare(app);
  coconet::cli::register_step(app);
}

}  // namespace

int main(int argc, char** argv) {
  coconet::model::remove_temporaries_on_interrupt(coconet::kExitInterrupted);
  CLI::App app{"coconet: write a distributed step once, generate its schedules, predict, run, check"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Print help for every subcommand");
  register_commands(app);
  coconet::cli::configure_messages(app, argc, argv);  // our wording for parse errors; --version
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help is a ParseError that CLI11 answers with 0; every other one is bad usage.
    return app.exit(e) == 0 ? coconet::kExitOk : coconet::kExitUserError;
  } catch (const std::exception& e) {
    return report(e);
  } catch (...) {
    std::fflush(stdout);
    fmt::print(stderr, "coconet: internal error: an exception that is not a std::exception\n");
    return coconet::kExitInternal;
  }
  return coconet::kExitOk;
}
