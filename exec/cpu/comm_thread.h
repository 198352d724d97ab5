// The cpu backend's communication stream: a thread that runs queued tasks
// (blocking MPI calls) one after another, so communication really proceeds
// while the caller computes. Open MPI progresses non-blocking collectives only
// inside MPI calls, so a compute loop would stall them; a thread does not.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace coconet::exec::cpu {

class CommThread {
 public:
  CommThread();
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Queues a task; returns its sequence number (1, 2, ...).
  std::int64_t enqueue(std::function<void()> task);
  // The sequence number of the last task queued (0: none).
  [[nodiscard]] std::int64_t last_queued() const;
  // Blocks until task `seq` (and every task before it) has run; rethrows the
  // first exception a task threw.
  void wait_for(std::int64_t seq);
  void drain() { wait_for(last_queued()); }
  // Whether every task queued so far has run.
  [[nodiscard]] bool idle() const;
  // Whether the caller is blocked in wait_for: the rank computes nothing
  // meanwhile, so a task may hold the core (spin) instead of yielding it.
  [[nodiscard]] bool awaited() const { return waiting_.load(std::memory_order_relaxed) > 0; }

 private:
  void loop();

  mutable std::mutex mutex_;
  std::condition_variable queued_;
  std::condition_variable done_;
  std::deque<std::function<void()>> tasks_;
  std::int64_t enqueued_ = 0;
  std::int64_t completed_ = 0;
  std::exception_ptr error_;
  bool stop_ = false;
  std::atomic<int> waiting_{0};
  std::thread worker_;
};

}  // namespace coconet::exec::cpu
