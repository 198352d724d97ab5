// coconet tune: placeholder until its issue lands (prints that it is not built yet).
#include "cli/commands.h"
#include "model/error.h"

namespace coconet::cli {

void register_tune(CLI::App& app) {
  auto* cmd = app.add_subcommand("tune", "(not available yet)");
  cmd->allow_extras();
  cmd->callback([] { throw UserError("coconet tune is not available in this build yet"); });
}

}  // namespace coconet::cli
