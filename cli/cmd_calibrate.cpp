// coconet calibrate: placeholder until its issue lands (prints that it is not built yet).
#include "cli/commands.h"
#include "model/error.h"

namespace coconet::cli {

void register_calibrate(CLI::App& app) {
  auto* cmd = app.add_subcommand("calibrate", "(not available yet)");
  cmd->allow_extras();
  cmd->callback([] { throw UserError("coconet calibrate is not available in this build yet"); });
}

}  // namespace coconet::cli
