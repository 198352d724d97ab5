// The error channels of coconet (after Halide's Error.h) and the exit codes of
// the `coconet` command, mapped from them in one place (exit_code_for).
// UserError is input the user can fix (it says what is wrong, where, and what
// would be right); RunFailure a run that executed but failed (a wrong result,
// a failed library call); InternalError a broken invariant (a bug in
// coconet). Library code throws; it never calls exit().
#pragma once

#include <exception>
#include <stdexcept>
#include <string>

namespace coconet {

// Exit codes of the `coconet` command (README.md, "Exit codes").
inline constexpr int kExitOk = 0;
inline constexpr int kExitRunFailed = 1;      // a run failed, e.g. a result mismatch
inline constexpr int kExitUserError = 2;      // bad input or usage
inline constexpr int kExitInternal = 3;       // an internal error (a bug)
inline constexpr int kExitInterrupted = 130;  // SIGINT (128 + 2, the shell's convention)

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message) : std::runtime_error(message) {}
};

class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& message)
      : std::logic_error("internal error: " + message) {}
};

// A run that executed but produced a wrong result or could not complete
// (CLI exit code 1).
class RunFailure : public std::runtime_error {
 public:
  explicit RunFailure(const std::string& message) : std::runtime_error(message) {}
};

// The exit code an exception ends the command with: UserError 2, RunFailure
// 1, anything else 3.
[[nodiscard]] int exit_code_for(const std::exception& e);
// The same for a captured exception; kExitOk for none, 3 for one that is not
// a std::exception.
[[nodiscard]] int exit_code_of(const std::exception_ptr& e);

}  // namespace coconet

#define COCONET_ASSERT(cond, msg)                                                        \
  do {                                                                                   \
    if (!(cond))                                                                         \
      throw ::coconet::InternalError(std::string(__FILE__) + ":" + std::to_string(__LINE__) + \
                                     ": " + (msg));                                      \
  } while (0)
