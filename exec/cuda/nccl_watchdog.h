// The NCCL watchdog of the cuda backend: waiting for the GPU streams is a
// poll with a deadline, not a blocking call, so a collective whose peer died
// or never arrived ends in ncclCommAbort and a DeviceError (exit 1) instead of
// a hang. The polling loop is plain C++ (testable without a GPU); the backend
// supplies what to poll and what to abort.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace coconet::exec::cuda {

// Default seconds a synchronize() may wait for outstanding GPU work; far above
// any single step of the paper's workloads (the largest, BERT-large Adam at
// 336M parameters, takes milliseconds on one H100). COCONET_NCCL_TIMEOUT_S
// overrides it.
inline constexpr double kDefaultTimeoutSeconds = 300.0;
// Pause between polls: short against a step, long against a cudaStreamQuery.
inline constexpr std::chrono::microseconds kPollInterval{50};

// Seconds from the environment text (nullptr or empty: the default); throws
// UserError naming COCONET_NCCL_TIMEOUT_S when it is not a positive number.
[[nodiscard]] double timeout_from_env(const char* text);

enum class PollState { pending, done, failed };
struct Poll {
  PollState state = PollState::pending;
  std::string error;  // when failed
};

enum class WaitOutcome { done, failed, timed_out };
struct WaitResult {
  WaitOutcome outcome = WaitOutcome::done;
  std::string error;
  double waited_s = 0.0;
};

// Calls `poll` until it reports done or failed, or `timeout_s` seconds pass.
[[nodiscard]] WaitResult wait_with_deadline(const std::function<Poll()>& poll, double timeout_s,
                                            std::chrono::microseconds interval = kPollInterval);

// The message of a timed-out wait: what hung, on which host and rank, that
// the communicators were aborted, and how to raise the limit.
[[nodiscard]] std::string timeout_message(const std::string& what, double timeout_s);

}  // namespace coconet::exec::cuda
