// A watchdog for a rank: when no progress is reported for `timeout_s`
// seconds it calls `on_expire` (the runtime aborts the whole job there), so a
// rank stuck in a collective whose peer died never hangs the job.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace coconet::exec {

class Watchdog {
 public:
  Watchdog(double timeout_s, std::function<void()> on_expire);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Reports progress: the deadline moves to now + timeout.
  void kick();

 private:
  void loop();

  std::chrono::duration<double> timeout_;
  std::function<void()> on_expire_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::chrono::steady_clock::time_point deadline_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace coconet::exec
