// What every fuzz target shares: the input as text, and the one outcome that
// is allowed for bad input (a UserError). Any other exception escapes and
// libFuzzer reports it as a crash (an uncaught exception aborts).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "model/error.h"

namespace coconet::fuzz {

inline std::string text_of(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

template <typename F>
int accept_user_errors(F&& f) {
  try {
    f();
  } catch (const UserError&) {
  }
  return 0;
}

}  // namespace coconet::fuzz
