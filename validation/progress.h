// Progress on stderr while a sweep runs (steps done and left, elapsed time,
// what runs now): a one-line bar redrawn in place when stderr is a terminal
// (or, for ranks started by mpirun, when the command that started them had
// one: kProgressEnv); elsewhere (a CI log, a pipe) whole lines at a bounded
// rate, at most one per kProgressLinePeriodS and none in a command shorter
// than that, so that a log shows minutes of work going on without filling up.
#pragma once

#include <chrono>
#include <string>

namespace coconet::validation {

// Set to "1" in the environment of ranks whose launcher had a terminal on stderr.
inline constexpr const char* kProgressEnv = "COCONET_PROGRESS_TTY";

// The line drawn (without the leading carriage return): bar, done/total, left,
// elapsed m:ss, and what runs (cut to a fixed width).
[[nodiscard]] std::string progress_line(int done, int total, long long elapsed_s, const std::string& what);

// Seconds between progress lines where there is no terminal: a few lines a
// minute tell a CI log that a long validate (minutes) is alive, and a
// command of seconds prints none.
inline constexpr double kProgressLinePeriodS = 15.0;

// True when a progress bar should be drawn by this process.
[[nodiscard]] bool progress_wanted();

enum class ProgressStyle { off, bar, lines };

// bar where progress_wanted(), else lines.
[[nodiscard]] ProgressStyle progress_style();

// "coconet: 12/40 done, 28 left, 1:05 elapsed: adam N=65536 AR-C": a progress line without a terminal.
[[nodiscard]] std::string progress_text_line(int done, int total, long long elapsed_s, const std::string& what);

class Progress {
 public:
  // `enabled` false: every call does nothing; true: the bar.
  Progress(bool enabled, int total);
  // lines: one line at most every `line_period_s` seconds, the first after that long.
  Progress(ProgressStyle style, int total, double line_period_s = kProgressLinePeriodS);
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
  void draw();
  [[nodiscard]] double elapsed_s() const;
  ProgressStyle style_;
  int total_;
  double line_period_s_ = kProgressLinePeriodS;
  double last_line_s_ = 0;  // when the last line was printed (lines), from the start
  int lines_ = 0;           // lines printed (lines)
  int done_ = 0;
  std::string what_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace coconet::validation
