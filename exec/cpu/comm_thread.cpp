#include "exec/cpu/comm_thread.h"

#include <sys/prctl.h>

namespace coconet::exec::cpu {

CommThread::CommThread() : worker_([this] { loop(); }) {}

CommThread::~CommThread() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  queued_.notify_all();
  worker_.join();
}

std::int64_t CommThread::enqueue(std::function<void()> task) {
  std::lock_guard lock(mutex_);
  tasks_.push_back(std::move(task));
  queued_.notify_one();
  return ++enqueued_;
}

std::int64_t CommThread::last_queued() const {
  std::lock_guard lock(mutex_);
  return enqueued_;
}

bool CommThread::idle() const {
  std::lock_guard lock(mutex_);
  return completed_ == enqueued_;
}

void CommThread::wait_for(std::int64_t seq) {
  std::unique_lock lock(mutex_);
  waiting_.fetch_add(1, std::memory_order_relaxed);
  done_.wait(lock, [&] { return completed_ >= seq || error_; });
  waiting_.fetch_sub(1, std::memory_order_relaxed);
  if (error_) std::rethrow_exception(error_);
}

void CommThread::loop() {
  // The thread sleeps between MPI progress calls (cpu_backend.cpp,
  // wait_politely): with Linux's default timer slack of 50 us a 20 us sleep
  // lasts about 70 us, and every round of a collective that needs both ranks
  // to progress pays it. 1 ns: sleeps last what they ask (prctl(2), PR_SET_TIMERSLACK).
  constexpr unsigned long kTimerSlackNs = 1;
  (void)prctl(PR_SET_TIMERSLACK, kTimerSlackNs, 0, 0, 0);
  for (;;) {
    std::function<void()> task;
    bool skip = false;
    {
      std::unique_lock lock(mutex_);
      queued_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
      skip = static_cast<bool>(error_);
    }
    std::exception_ptr error;
    if (!skip) {
      try {
        task();
      } catch (...) {
        error = std::current_exception();
      }
    }
    {
      std::lock_guard lock(mutex_);
      if (error && !error_) error_ = error;
      ++completed_;
    }
    done_.notify_all();
  }
}

}  // namespace coconet::exec::cpu
