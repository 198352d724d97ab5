// coconet validate: placeholder until its issue lands (prints that it is not built yet).
#include "cli/commands.h"
#include "model/error.h"

namespace coconet::cli {

void register_validate(CLI::App& app) {
  auto* cmd = app.add_subcommand("validate", "(not available yet)");
  cmd->allow_extras();
  cmd->callback([] { throw UserError("coconet validate is not available in this build yet"); });
}

}  // namespace coconet::cli
