// The one mapping from exceptions to the `coconet` command's exit codes.
#include "model/error.h"

namespace coconet {

int exit_code_for(const std::exception& e) {
  if (dynamic_cast<const UserError*>(&e) != nullptr) return kExitUserError;
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
