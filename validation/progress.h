// A one-line progress bar on stderr while a sweep runs (steps done and left,
// elapsed time, what runs now), drawn only when stderr
// is a terminal (or, for ranks started by mpirun, when the command that
// started them had one: kProgressEnv), so logs and pipes stay clean.
#pragma once

#include <chrono>
#include <string>

namespace coconet::validation {

// Set to "1" in the environment of ranks whose launcher had a terminal on stderr.
inline constexpr const char* kProgressEnv = "COCONET_PROGRESS_TTY";

// The line drawn (without the leading carriage return): bar, done/total, left,
// elapsed m:ss, and what runs (cut to a fixed width).
[[nodiscard]] std::string progress_line(int done, int total, long long elapsed_s, const std::string& what);

// True when a progress bar should be drawn by this process.
[[nodiscard]] bool progress_wanted();

class Progress {
 public:
  // `enabled` false: every call does nothing.
  Progress(bool enabled, int total);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Adds to the total (when the size of the sweep is learnt step by step).
  void grow(int more);
  // One step done; `what` names the next.
  void step(const std::string& what);
  // Says what is running now, without counting a step.
  void note(const std::string& what);
  // Clears the line.
  void finish();

 private:
  void draw() const;
  bool enabled_;
  int total_;
  int done_ = 0;
  std::string what_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace coconet::validation
