// An optional recorder of when each launch ran on this rank: the host clock
// (Backend::now_us) read after the launch's waits were issued and again after
// the launch returned. On the cpu backend a launch runs (or, on the comm
// stream, is handed to the communication thread) before it returns; on a
// device backend the interval is the host's issue time, not the kernel's.
// The executor fills it when one is attached (Executor::set_recorder); the
// validation report draws it as the measured timeline (trace-measured.json).
#pragma once

#include <vector>

#include "plan/step_plan.h"

namespace coconet::exec {

struct LaunchRecord {
  int op = 0;     // the plan's op id
  int chunk = 0;
  plan::Stream stream = plan::Stream::compute;
  double start_us = 0;  // Backend::now_us()
  double end_us = 0;
};

class LaunchRecorder {
 public:
  void add(const LaunchRecord& r) { records_.push_back(r); }
  void clear() { records_.clear(); }
  [[nodiscard]] const std::vector<LaunchRecord>& records() const { return records_; }

 private:
  std::vector<LaunchRecord> records_;
};

}  // namespace coconet::exec
