// The one mapping from exceptions to the `coconet` command's exit codes.
#include "model/error.h"

#include <filesystem>

namespace coconet {

int exit_code_for(const std::exception& e) {
  if (dynamic_cast<const UserError*>(&e) != nullptr) return kExitUserError;
  // coconet looks up only paths it was given (targets, models, --out, COCONET_ROOT):
  // one the system refuses (too long, a link loop, no permission) is input to fix.
  if (dynamic_cast<const std::filesystem::filesystem_error*>(&e) != nullptr) return kExitUserError;
  if (dynamic_cast<const RunFailure*>(&e) != nullptr) return kExitRunFailed;
  return kExitInternal;
}

int exit_code_of(const std::exception_ptr& e) {
  if (!e) return kExitOk;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& thrown) {
    return exit_code_for(thrown);
  } catch (...) {
    return kExitInternal;
  }
}

}  // namespace coconet
