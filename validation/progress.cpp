// The progress bar: "\r[#####.....] 12/40 adam N=65536 fuse(RS-C-AG)".
#include "validation/progress.h"

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

void Progress::draw() const {
  if (!enabled_ || total_ <= 0) return;
  const int filled = done_ * kBarWidth / total_;
  const std::string label = what_.size() > kMaxLabel ? what_.substr(0, kMaxLabel) : what_;
  fmt::print(stderr, "\r[{}{}] {}/{} {:<{}}", std::string(filled, '#'), std::string(kBarWidth - filled, '.'), done_,
             total_, label, kMaxLabel);
  std::fflush(stderr);
}

void Progress::finish() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  fmt::print(stderr, "\r{:<{}}\r", "", kBarWidth + kMaxLabel + 16);
  std::fflush(stderr);
}

}  // namespace coconet::validation
