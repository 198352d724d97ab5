// Deadline-bounded waits for the cuda backend (see nccl_watchdog.h).
#include "exec/cuda/nccl_watchdog.h"

#include <cerrno>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "kernels/cuda/check.h"
#include "model/error.h"

namespace coconet::exec::cuda {

double timeout_from_env(const char* text) {
  if (text == nullptr || *text == '\0') return kDefaultTimeoutSeconds;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !(v > 0.0))
    throw UserError(fmt::format(
        "COCONET_NCCL_TIMEOUT_S='{}' is not a positive number of seconds; unset it for the "
        "default ({} s) or give e.g. COCONET_NCCL_TIMEOUT_S=600",
        text, kDefaultTimeoutSeconds));
  return v;
}

WaitResult wait_with_deadline(const std::function<Poll()>& poll, double timeout_s,
                              std::chrono::microseconds interval) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto limit = std::chrono::duration<double>(timeout_s);
  for (;;) {
    const Poll p = poll();
    const double waited = std::chrono::duration<double>(clock::now() - start).count();
    if (p.state == PollState::done) return {WaitOutcome::done, "", waited};
    if (p.state == PollState::failed) return {WaitOutcome::failed, p.error, waited};
    if (clock::now() - start >= limit) return {WaitOutcome::timed_out, "", waited};
    std::this_thread::sleep_for(interval);
  }
}

std::string timeout_message(const std::string& what, double timeout_s) {
  const kernels::CallSite site{"watchdog", __FILE__, __LINE__};
  return kernels::failure_message(
      "NCCL watchdog",
      fmt::format("{} did not finish within {} s; the NCCL communicators were aborted "
                  "(ncclCommAbort). A peer rank may have failed; raise the limit with "
                  "COCONET_NCCL_TIMEOUT_S if the step is just slow",
                  what, timeout_s),
      site);
}

}  // namespace coconet::exec::cuda
