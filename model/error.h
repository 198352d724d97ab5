// The two error channels of coconet (after Halide's Error.h): UserError for
// input the user can fix (it says what is wrong, where, and what would be
// right; the CLI turns it into exit code 2) and InternalError for a broken
// invariant (a bug in coconet). Library code throws; it never calls exit().
#pragma once

#include <stdexcept>
#include <string>

namespace coconet {

// Exit codes of the `coconet` command: a run failed (e.g. a result mismatch),
// bad input or usage, an internal error.
inline constexpr int kExitRunFailed = 1;
inline constexpr int kExitUserError = 2;
inline constexpr int kExitInternal = 3;

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message) : std::runtime_error(message) {}
};

class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& message)
      : std::logic_error("internal error: " + message) {}
};

// A run that executed but produced a wrong result (CLI exit code 1).
class RunFailure : public std::runtime_error {
 public:
  explicit RunFailure(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace coconet

#define COCONET_ASSERT(cond, msg)                                                        \
  do {                                                                                   \
    if (!(cond))                                                                         \
      throw ::coconet::InternalError(std::string(__FILE__) + ":" + std::to_string(__LINE__) + \
                                     ": " + (msg));                                      \
  } while (0)
