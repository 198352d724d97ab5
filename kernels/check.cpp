// Failure reports shared by the check macros: the rank, the host, the message.
#include "kernels/check.h"

#include <unistd.h>

#include <array>
#include <atomic>

#include <fmt/format.h>

namespace coconet::kernels {
namespace {

std::atomic<int> g_error_rank{-1};

// POSIX HOST_NAME_MAX is 255 bytes on Linux (limits.h); one more for the NUL.
constexpr std::size_t kHostNameBytes = 256;

std::string host_name() {
  std::array<char, kHostNameBytes> buf{};
  if (gethostname(buf.data(), buf.size() - 1) != 0) return "?";
  return std::string(buf.data());
}

}  // namespace

void set_error_rank(int rank) { g_error_rank.store(rank); }
int error_rank() { return g_error_rank.load(); }

std::string failure_message(std::string_view library, std::string_view error,
                            const CallSite& site) {
  const int rank = error_rank();
  const std::string rank_text = rank < 0 ? std::string("?") : std::to_string(rank);
  return fmt::format("{} error on host {} rank {} at {}:{}: {}: {}", library, host_name(),
                     rank_text, site.file, site.line, site.call, error);
}

}  // namespace coconet::kernels
