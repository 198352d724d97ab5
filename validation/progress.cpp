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

std::string progress_line(int done, int total, long long elapsed_s, const std::string& what) {
  const int filled = total > 0 ? std::clamp(done, 0, total) * kBarWidth / total : 0;
  const std::string label = what.size() > kMaxLabel ? what.substr(0, kMaxLabel) : what;
  return fmt::format("[{}{}] {}/{}, {} left, {}:{:02} {:<{}}", std::string(filled, '#'),
                     std::string(kBarWidth - filled, '.'), done, total, std::max(0, total - done), elapsed_s / 60,
                     elapsed_s % 60, label, kMaxLabel);
}

void Progress::draw() const {
  if (!enabled_ || total_ <= 0 || finished_) return;
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start_).count();
  fmt::print(stderr, "\r{}", progress_line(done_, total_, static_cast<long long>(s), what_));
  std::fflush(stderr);
}

void Progress::finish() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  fmt::print(stderr, "\r{:<{}}\r", "", kBarWidth + kMaxLabel + 32);
  std::fflush(stderr);
}

}  // namespace coconet::validation
