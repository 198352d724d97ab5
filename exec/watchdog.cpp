#include "exec/watchdog.h"

namespace coconet::exec {

Watchdog::Watchdog(double timeout_s, std::function<void()> on_expire)
    : timeout_(timeout_s),
      on_expire_(std::move(on_expire)),
      deadline_(std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout_)),
      thread_([this] { loop(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void Watchdog::kick() {
  std::lock_guard lock(mutex_);
  deadline_ = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout_);
}

void Watchdog::loop() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    if (changed_.wait_until(lock, deadline_) == std::cv_status::timeout && !stop_ &&
        std::chrono::steady_clock::now() >= deadline_) {
      lock.unlock();
      on_expire_();
      return;
    }
  }
}

}  // namespace coconet::exec
