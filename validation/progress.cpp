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

Progress::Progress(bool enabled, int total) : enabled_(enabled), total_(total) {}

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

void Progress::draw() const {
  if (!enabled_ || total_ <= 0 || finished_) return;
  const int filled = std::min(done_, total_) * kBarWidth / total_;
  const std::string label = what_.size() > kMaxLabel ? what_.substr(0, kMaxLabel) : what_;
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start_).count();
  fmt::print(stderr, "\r[{}{}] {}/{}, {} left, {}:{:02} {:<{}}", std::string(filled, '#'),
             std::string(kBarWidth - filled, '.'), done_, total_, std::max(0, total_ - done_), s / 60, s % 60, label,
             kMaxLabel);
  std::fflush(stderr);
}

void Progress::finish() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  fmt::print(stderr, "\r{:<{}}\r", "", kBarWidth + kMaxLabel + 32);
  std::fflush(stderr);
}

}  // namespace coconet::validation
