// Safe writes of user-named outputs (model/safe_write.h).
#include "model/safe_write.h"

#include <dirent.h>  // struct dirent64: the layout getdents64 fills
#include <fcntl.h>
#include <fmt/core.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <utility>

#include "model/error.h"

namespace coconet::model {

namespace fs = std::filesystem;

namespace {

const char* kind_of(mode_t m) {
  if (S_ISLNK(m)) return "a symbolic link";
  if (S_ISDIR(m)) return "a folder";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

// The folder of `path` ("." for a bare name) and its last component.
std::pair<std::string, std::string> split(const std::string& path) {
  const fs::path p(path);
  const std::string dir = p.parent_path().empty() ? "." : p.parent_path().string();
  return {dir, p.filename().string()};
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  [[nodiscard]] int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// Registered temporaries: fixed storage, so that a signal handler reads them
// without allocating. `claimed` reserves a slot; `live` says its path is complete.
constexpr int kSlots = 8;
constexpr std::size_t kPathMax = 4096;
struct Slot {
  std::atomic<bool> claimed{false};
  std::atomic<bool> live{false};
  char path[kPathMax] = {};
};
std::array<Slot, kSlots> g_slots;

// Removes `path`: a file, or a folder with its entries down to `depth` more
// levels. Async-signal-safe: open, getdents64, unlinkat, rmdir only.
void remove_tree_raw(const char* path, int depth) noexcept {
  if (::unlink(path) == 0 || errno == ENOENT) return;
  const int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  alignas(8) char buf[4096];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      const auto* e = reinterpret_cast<const struct dirent64*>(buf + off);
      off += e->d_reclen;
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      if (::unlinkat(fd, e->d_name, 0) == 0 || depth <= 0) continue;
      char child[kPathMax];
      const std::size_t a = std::strlen(path), b = std::strlen(e->d_name);
      if (a + b + 2 > kPathMax) continue;
      std::memcpy(child, path, a);
      child[a] = '/';
      std::memcpy(child + a + 1, e->d_name, b + 1);
      remove_tree_raw(child, depth - 1);
    }
  }
  ::close(fd);
  ::rmdir(path);
}

}  // namespace

void check_output_file(const std::string& path, const std::string& flag) {
  if (path.empty()) throw UserError(fmt::format("{} is empty: name the file to write", flag));
  if (const auto nul = path.find('\0'); nul != std::string::npos)
    throw UserError(fmt::format("{} '{}': embedded null byte: a path cannot hold one", flag, path.substr(0, nul)));
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      throw UserError(
          fmt::format("{} '{}' is {}, not a regular file: name a regular file or a new name", flag,
                      path, kind_of(st.st_mode)));
    return;
  }
  const auto [dir, base] = split(path);
  struct stat dst {};
  if (base.empty() || base == "." || base == "..")
    throw UserError(fmt::format("{} '{}' names a folder, not a file", flag, path));
  if (::stat(dir.c_str(), &dst) != 0 || !S_ISDIR(dst.st_mode))
    throw UserError(fmt::format("{} '{}': the folder '{}' does not exist", flag, path, dir));
}

std::string random_sibling_name(const std::string& base, const std::string& suffix) {
  static thread_local std::mt19937_64 rng{std::random_device{}() ^
                                          (std::uint64_t(::getpid()) << 32)};
  return fmt::format(".{}.{:016x}.{}", base, rng(), suffix);
}

void write_file_safely(const std::string& path, const std::string& text, const std::string& flag) {
  check_output_file(path, flag);
  const auto [dir, base] = split(path);
  const Fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd.get() < 0)
    throw UserError(fmt::format("cannot write '{}': cannot open its folder '{}': {}", path, dir,
                                std::strerror(errno)));
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    tmp = random_sibling_name(base, "tmp");
    fd = ::openat(dfd.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0)
    throw UserError(
        fmt::format("cannot write '{}': check that its folder exists and is writable ({})", path,
                    std::strerror(errno)));
  Fd file(fd);
  const std::string tmp_path = dir + "/" + tmp;
  const int slot = register_temporary(tmp_path);
  const auto give_up = [&](const std::string& why) {
    ::unlinkat(dfd.get(), tmp.c_str(), 0);
    unregister_temporary(slot);
    throw UserError(why);
  };
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(file.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) give_up(fmt::format("writing '{}' failed: {}", path, std::strerror(errno)));
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(file.get()) != 0 && errno != EINVAL)
    give_up(fmt::format("writing '{}' failed: {}", path, std::strerror(errno)));
  ::close(file.release());
  struct stat st {};
  if (::fstatat(dfd.get(), base.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode))
    give_up(fmt::format("{} '{}' became {} while it was written; nothing was replaced", flag, path,
                        kind_of(st.st_mode)));
  if (::renameat(dfd.get(), tmp.c_str(), dfd.get(), base.c_str()) != 0)
    give_up(fmt::format("cannot move the finished file into place at '{}': {}", path,
                        std::strerror(errno)));
  unregister_temporary(slot);
}

int register_temporary(const std::string& path) {
  if (path.size() >= kPathMax) return -1;
  for (int i = 0; i < kSlots; ++i) {
    bool expected = false;
    Slot& s = g_slots[static_cast<std::size_t>(i)];
    if (!s.claimed.compare_exchange_strong(expected, true)) continue;
    std::memcpy(s.path, path.c_str(), path.size() + 1);
    s.live.store(true);
    return i;
  }
  return -1;
}

void unregister_temporary(int slot) {
  if (slot < 0 || slot >= kSlots) return;
  g_slots[static_cast<std::size_t>(slot)].live.store(false);
  g_slots[static_cast<std::size_t>(slot)].claimed.store(false);
}

namespace {
volatile std::sig_atomic_t g_interrupt_exit = 130;
volatile std::sig_atomic_t g_interrupt_quiet = 0;

extern "C" void on_interrupt(int) {
  remove_registered_temporaries();
  static const char kMessage[] = "coconet: interrupted\n";
  if (g_interrupt_quiet == 0) {
    const ssize_t ignored = ::write(2, kMessage, sizeof kMessage - 1);
    (void)ignored;
  }
  ::_exit(g_interrupt_exit);
}
}  // namespace

void remove_temporaries_on_interrupt(int exit_code) {
  g_interrupt_exit = exit_code;
  // A rank of a job whose supervising coconet says "interrupted" once for all (exec/mpirun.h).
  g_interrupt_quiet = std::getenv("COCONET_RANK_STATUS_DIR") != nullptr ? 1 : 0;
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

void remove_registered_temporaries() noexcept {
  for (auto& s : g_slots)
    if (s.live.load()) remove_tree_raw(s.path, 2);
}

}  // namespace coconet::model
