// The progress bar: "\r[#####.....] 12/40, 28 left, 1:05 adam N=65536 (6 schedules)".
#include "validation/progress.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/core.h>
#include <unistd.h>

namespace coconet::validation {

namespace {
constexpr int kBarWidth = 30;
constexpr std::size_t kMaxLabel = 48;
}  // namespace

bool progress_wanted() {
  if (const char* env = std::getenv(kProgressEnv); env && std::strcmp(env, "1") == 0) return true;
  return ::isatty(STDERR_FILENO) == 1;
}

ProgressStyle progress_style() { return progress_wanted() ? ProgressStyle::bar : ProgressStyle::lines; }

Progress::Progress(bool enabled, int total) : Progress(enabled ? ProgressStyle::bar : ProgressStyle::off, total) {}

Progress::Progress(ProgressStyle style, int total, double line_period_s)
    : style_(style), total_(total), line_period_s_(line_period_s) {}

Progress::~Progress() { finish(); }

void Progress::grow(int more) { total_ += more; }

void Progress::step(const std::string& what) {
  ++done_;
  what_ = what;
  draw();
}

void Progress::note(const std::string& what) {
  what_ = what;
  draw();
}

std::string progress_line(int done, int total, long long elapsed_s, const std::string& what) {
  const int filled = total > 0 ? std::clamp(done, 0, total) * kBarWidth / total : 0;
  const std::string label = what.size() > kMaxLabel ? what.substr(0, kMaxLabel) : what;
  return fmt::format("[{}{}] {}/{}, {} left, {}:{:02} {:<{}}", std::string(filled, '#'),
                     std::string(kBarWidth - filled, '.'), done, total, std::max(0, total - done), elapsed_s / 60,
                     elapsed_s % 60, label, kMaxLabel);
}

std::string progress_text_line(int done, int total, long long elapsed_s, const std::string& what) {
  return fmt::format("coconet: {}/{} done, {} left, {}:{:02} elapsed{}{}", done, total, std::max(0, total - done),
                     elapsed_s / 60, elapsed_s % 60, what.empty() ? "" : ": ", what);
}

double Progress::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::draw() {
  if (style_ == ProgressStyle::off || total_ <= 0 || finished_) return;
  const double s = elapsed_s();
  if (style_ == ProgressStyle::lines) {
    if (s < last_line_s_ + line_period_s_) return;
    last_line_s_ = s;
    ++lines_;
    fmt::print(stderr, "{}\n", progress_text_line(done_, total_, static_cast<long long>(s), what_));
  } else {
    fmt::print(stderr, "\r{}", progress_line(done_, total_, static_cast<long long>(s), what_));
  }
  std::fflush(stderr);
}

void Progress::finish() {
  if (style_ == ProgressStyle::off || finished_) return;
  finished_ = true;
  if (style_ == ProgressStyle::lines) {
    // A log that was told the work goes on is told it ended.
    if (lines_ > 0)
      fmt::print(stderr, "{}\n", progress_text_line(done_, total_, static_cast<long long>(elapsed_s()), "finished"));
  } else {
    fmt::print(stderr, "\r{:<{}}\r", "", kBarWidth + kMaxLabel + 32);
  }
  std::fflush(stderr);
}

}  // namespace coconet::validation
