// mpirun relaunch: argv from /proc/self/cmdline, the binary from
// /proc/self/exe, mpirun from $COCONET_MPIRUN or $PATH.
//
// Design notes
// - This process stays as mpirun's parent: mpirun's stderr (the ranks' too)
//   passes through a pipe, byte for byte, and is scanned for Open MPI's line
//   "process rank R with PID P on node H exited on signal S". A rank's last
//   note (exec/rank_status.h) then says what it was running.
// - SIGINT and SIGTERM are forwarded to mpirun (which forwards them to the
//   ranks); mpirun gets kInterruptGraceMs to end before its process group is
//   killed, then this process prints "interrupted" and exits 130. The pipe is
//   polled, never read blocking, so a launcher that ignores the signal and
//   keeps its pipe open does not hold coconet (issue 34: 998 s).
// - mpirun runs in a process group of its own, and this process is a child
//   subreaper: ranks that outlive mpirun become its children, are waited for
//   (kInterruptGraceMs at most) and then killed with their group, so nothing
//   of the job is left when coconet exits.
// - Each rank notes that it started (exec/rank_status.h) once MPI is
//   initialised: a job where no rank does so within kFirstRankTimeoutS is
//   ended, and an mpirun that exits 0 without a rank having started is a
//   failed run ("no rank reported"), not a pass with no rows.
#include "exec/mpirun.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>

#include <fmt/core.h>

#include "exec/mpi_session.h"
#include "exec/rank_status.h"
#include "model/error.h"
#include "model/limits.h"

namespace coconet::exec {
namespace {

// The machine's CPUs online (not this process's affinity: a rank mpirun
// pinned has one, and the ranks ask too); a count the system cannot give
// reads as unlimited (no check, no pinning). Where fewer CPUs are usable
// (a cpuset), pinning overloads cores rather than failing (kPinnedBinding).
long online_cores() {
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  return cores > 0 ? cores : std::numeric_limits<long>::max();
}

// coconet's own environment variables (COCONET_ROOT, COCONET_RANK_STATUS_DIR, ...).
constexpr const char* kCoconetEnvPrefix = "COCONET_";

std::vector<std::string> own_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  std::size_t start = 0;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (all[i] == '\0') {
      args.push_back(all.substr(start, i - start));
      start = i + 1;
    }
  return args;
}

}  // namespace

std::optional<std::string> find_mpirun() {
  if (const char* forced = std::getenv("COCONET_MPIRUN"); forced != nullptr && *forced != '\0') return forced;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/mpirun";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

Binding binding_for(plan::BackendKind backend, int ranks) {
  return backend == plan::BackendKind::cpu && ranks <= online_cores() ? Binding::core : Binding::none;
}

Hosts parse_hosts(const std::string& list, int ranks, const std::string& flag) {
  Hosts hosts;
  std::size_t start = 0;
  for (;;) {
    const auto comma = list.find(',', start);
    const std::string name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (name.empty())
      throw UserError(fmt::format("{} '{}': an empty host name; give names or addresses separated by commas, "
                                  "e.g. {} node1,node2",
                                  flag, list, flag));
    for (const char c : name)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_'))
        throw UserError(fmt::format("{} '{}': host '{}' has '{}', which a host name or IPv4 address cannot hold{}",
                                    flag, list, name, c,
                                    c == ':' ? "; the ranks each host takes come from --ranks, not from ':N'" : ""));
    if (std::find(hosts.names.begin(), hosts.names.end(), name) != hosts.names.end())
      throw UserError(fmt::format("{} '{}': host '{}' is named twice; name each host once (--ranks sets how many "
                                  "ranks they take)",
                                  flag, list, name));
    hosts.names.push_back(name);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  const int n = static_cast<int>(hosts.names.size());
  if (n > ranks)
    throw UserError(fmt::format("{} names {} hosts but --ranks is {}: every host needs a rank; pass --ranks {} "
                                "or more, or fewer hosts",
                                flag, n, ranks, n));
  for (int i = 0; i < n; ++i) hosts.ranks.push_back(ranks / n + (i < ranks % n ? 1 : 0));
  return hosts;
}

int ranks_per_host(const Hosts& hosts, int ranks) {
  return hosts.ranks.empty() ? ranks : *std::max_element(hosts.ranks.begin(), hosts.ranks.end());
}

std::vector<std::string> coconet_environment() {
  std::vector<std::string> names;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    if (entry.rfind(kCoconetEnvPrefix, 0) == 0) names.push_back(entry.substr(0, entry.find('=')));
  }
  return names;
}

std::vector<std::string> mpirun_arguments(const std::string& mpirun, int ranks, Binding binding,
                                          const std::string& self, const std::vector<std::string>& args,
                                          bool as_root, const Hosts& hosts,
                                          const std::vector<std::string>& forwarded) {
  std::vector<std::string> argv{mpirun, "-np", std::to_string(ranks),
                                // More ranks than cores allowed: a laptop, a CI runner (check_cores decides).
                                "--oversubscribe",
                                // Pinned only where the machine allows it, unpinned rather than refused; two
                                // hardware threads of one core may share it (more CPUs than cores).
                                "--bind-to", binding == Binding::core ? kPinnedBinding : "none",
                                // Shared memory between local ranks without ptrace (containers forbid it);
                                // across hosts, TCP too (Open MPI picks shared memory for a peer on the same
                                // host, TCP for the others; btl_tcp_if_include chooses the network).
                                "--mca", "btl", hosts.names.empty() ? "self,vader" : "self,vader,tcp",
                                "--mca", "btl_vader_single_copy_mechanism", "none",
                                // Ranks waiting in MPI yield the core: a small machine runs more threads than cores.
                                "--mca", "mpi_yield_when_idle", "1"};
  if (as_root) argv.emplace_back("--allow-run-as-root");
  if (!hosts.names.empty()) {
    std::string list;
    for (std::size_t i = 0; i < hosts.names.size(); ++i)
      list += (i == 0 ? "" : ",") + hosts.names[i] + ":" + std::to_string(hosts.ranks.at(i));
    // Slots fill in order (Open MPI maps by slot): ranks 0..k-1 on the first host, and so on.
    argv.insert(argv.end(), {"--host", list, "--map-by", "slot"});
    for (const auto& name : forwarded) argv.insert(argv.end(), {"-x", name});
  }
  argv.push_back(self);
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

namespace {

// How long mpirun has to end its ranks after an interruption before its whole
// process group is killed: Ctrl-C ends the job within 5 s (issue 34), whatever
// mpirun (or a wrapper script standing for it) does with the signal and its pipes.
constexpr int kInterruptGraceMs = 3000;
// How long the first rank has to report (a note in the status folder, written
// once MPI is initialised) before the job is ended as a failed run. Open MPI
// starts local ranks in well under a second; a loaded CI machine took 20 s.
// COCONET_LAUNCH_TIMEOUT_S replaces it (a slow cluster, a test).
constexpr double kFirstRankTimeoutS = 120;
constexpr const char* kLaunchTimeoutEnv = "COCONET_LAUNCH_TIMEOUT_S";
// How often the launcher looks at mpirun's pipe, the signal flag and the status folder.
constexpr int kPollMs = 50;

volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_signal = 0;

extern "C" void forward_signal(int sig) {
  g_signal = sig;
  if (g_child > 0) ::kill(static_cast<pid_t>(g_child), sig);
}

// A rank's death as mpirun reports it.
struct Death {
  int rank = -1;
  int signal = 0;
};

// Scans one line of mpirun's output for Open MPI's report of a rank killed by a signal.
std::optional<Death> death_in(const std::string& line) {
  const auto at = line.find("process rank ");
  const auto on = line.find("exited on signal ");
  if (at == std::string::npos || on == std::string::npos) return std::nullopt;
  Death d;
  d.rank = std::atoi(line.c_str() + at + std::strlen("process rank "));
  d.signal = std::atoi(line.c_str() + on + std::strlen("exited on signal "));
  return d.signal > 0 ? std::optional<Death>(d) : std::nullopt;
}

// The first-rank time limit: kFirstRankTimeoutS, or $COCONET_LAUNCH_TIMEOUT_S
// when set (a positive number of seconds, at most model::kMaxTimeoutS).
double first_rank_timeout_s() {
  const char* env = std::getenv(kLaunchTimeoutEnv);
  if (env == nullptr || *env == '\0') return kFirstRankTimeoutS;
  char* end = nullptr;
  const double v = std::strtod(env, &end);
  if (end == env || *end != '\0')
    throw UserError(fmt::format("{}='{}': expected a number of seconds such as 120", kLaunchTimeoutEnv, env));
  model::check_timeout(v, kLaunchTimeoutEnv);
  return v;
}

// Whether any rank left a note in `dir` (exec/rank_status.h: "rank-N").
bool a_rank_reported(const std::string& dir) {
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec))
    if (it->path().filename().string().rfind("rank-", 0) == 0) return true;
  return false;
}

// What watching mpirun found.
struct Watched {
  std::optional<Death> death;  // the first rank death mpirun reported
  bool reported = false;       // a rank noted that it started
  bool timed_out = false;      // no rank reported within the first-rank limit
};

// Copies mpirun's stderr to ours until it closes, without ever blocking on it:
// after an interruption (kInterruptGraceMs) or when no rank reports in time, the
// job's process group is killed and the pipe is left, whoever still holds it.
Watched pass_through(int fd, pid_t group, const std::string& status_dir, double timeout_s) {
  Watched w;
  std::string line;
  char buf[4096];
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  std::optional<clock::time_point> interrupted;
  for (;;) {
    if (g_signal != 0 && !interrupted) interrupted = clock::now();
    if (interrupted && clock::now() - *interrupted >= std::chrono::milliseconds(kInterruptGraceMs)) {
      ::killpg(group, SIGKILL);
      break;
    }
    if (!w.reported) w.reported = a_rank_reported(status_dir);
    if (!w.reported && !interrupted && clock::now() - start >= std::chrono::duration<double>(timeout_s)) {
      w.timed_out = true;
      ::killpg(group, SIGKILL);
      break;
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, kPollMs);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      break;
    }
    (void)!::write(STDERR_FILENO, buf, static_cast<std::size_t>(n));
    for (ssize_t k = 0; k < n; ++k) {
      if (buf[k] != '\n') {
        line.push_back(buf[k]);
        continue;
      }
      if (!w.death) w.death = death_in(line);
      line.clear();
    }
  }
  if (!w.reported) w.reported = a_rank_reported(status_dir);
  return w;
}

int wait_for(pid_t child) {
  int status = 0;
  for (int waited_ms = 0;; waited_ms += 10) {
    const pid_t r = ::waitpid(child, &status, g_signal != 0 ? WNOHANG : 0);
    if (r == child) return status;
    if (r < 0 && errno != EINTR) return status;
    if (g_signal != 0 && waited_ms >= kInterruptGraceMs) ::killpg(child, SIGKILL);
    if (g_signal != 0) ::usleep(10000);
  }
}

// Waits for what is left of the job (ranks that outlived mpirun, now our
// children); kills its process group when it does not end in time.
void reap_descendants(pid_t group) {
  for (int waited_ms = 0;; waited_ms += 10) {
    const pid_t r = ::waitpid(-1, nullptr, WNOHANG);
    if (r < 0 && errno == ECHILD) return;
    if (r > 0) continue;
    if (waited_ms >= kInterruptGraceMs) {
      ::killpg(group, SIGKILL);
      while (::waitpid(-1, nullptr, 0) > 0 || errno == EINTR) {
      }
      return;
    }
    ::usleep(10000);
  }
}

void remove_folder(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace

bool launched_by_mpirun() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(var) != nullptr) return true;
  return false;
}

void check_rank_limit(int ranks) {
  if (ranks > model::kMaxLocalRanks)
    throw UserError(fmt::format("--ranks {} is more than the limit of {} ranks that mpirun starts on one machine",
                                ranks, model::kMaxLocalRanks));
}

void check_cores(int ranks, bool oversubscribe, bool warn) {
  check_rank_limit(ranks);
  const long cores = online_cores();
  if (ranks <= cores) return;
  if (!oversubscribe)
    throw UserError(fmt::format("--ranks {}: this machine has {} cores, and ranks that take turns on a core time "
                                "the scheduler, not the schedule; pass --ranks {} or fewer, or add --oversubscribe "
                                "to run anyway",
                                ranks, cores, cores));
  if (warn)
    fmt::print(stderr, "coconet: warning: {} ranks on {} cores (--oversubscribe): times include time slicing\n",
               ranks, cores);
}

void check_cores(int ranks, const Hosts& hosts, bool oversubscribe, bool warn) {
  if (hosts.names.empty()) return check_cores(ranks, oversubscribe, warn);
  const int per_host = ranks_per_host(hosts, ranks);
  check_rank_limit(per_host);
  const long cores = online_cores();
  if (per_host <= cores) return;
  if (!oversubscribe)
    throw UserError(fmt::format("--ranks {} over --hosts ({} hosts) puts up to {} ranks on a host, and this machine "
                                "has {} cores (the hosts are taken to be alike); pass --ranks {} or fewer, or add "
                                "--oversubscribe to run anyway",
                                ranks, hosts.names.size(), per_host, cores,
                                cores * static_cast<long>(hosts.names.size())));
  if (warn)
    fmt::print(stderr,
               "coconet: warning: up to {} ranks per host on {} cores (--oversubscribe): times include time slicing\n",
               per_host, cores);
}

void relaunch_under_mpirun(int ranks, Binding binding, const Hosts& hosts) {
  check_rank_limit(ranks_per_host(hosts, ranks));
  const auto mpirun = find_mpirun();
  if (!mpirun)
    throw UserError("--ranks " + std::to_string(ranks) +
                    " starts the ranks with mpirun, which is not on PATH; install Open MPI "
                    "(e.g. apt-get install openmpi-bin) or set COCONET_MPIRUN to its path");
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const auto args = own_arguments();
  if (ec || args.empty()) throw UserError("cannot find this program's own path to start it under mpirun");
  const double timeout_s = first_rank_timeout_s();

  const auto tmp = std::filesystem::temp_directory_path(ec);
  if (ec) {
    const char* env = std::getenv("TMPDIR");
    throw UserError(fmt::format("cannot make a folder for the ranks' status: TMPDIR '{}' is not a usable folder ({}); "
                                "set TMPDIR to a writable folder",
                                env != nullptr ? env : "", ec.message()));
  }
  std::string status_dir = (tmp / "coconet-ranks-XXXXXX").string();
  if (::mkdtemp(status_dir.data()) == nullptr)
    throw UserError(fmt::format("cannot make a folder for the ranks' status under '{}': {}; set TMPDIR to a "
                                "writable folder",
                                tmp.string(), std::strerror(errno)));
  ::setenv(kRankStatusEnv, status_dir.c_str(), 1);
  auto argv = mpirun_arguments(*mpirun, ranks, binding, self.string(), {args.begin() + 1, args.end()},
                               ::geteuid() == 0, hosts, coconet_environment());
  std::vector<char*> c;
  for (auto& a : argv) c.push_back(a.data());
  c.push_back(nullptr);
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) throw UserError(std::string("cannot start mpirun: pipe: ") + std::strerror(errno));
  std::fflush(stdout);
  std::fflush(stderr);
  struct sigaction sa {};
  sa.sa_handler = forward_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  (void)::prctl(PR_SET_CHILD_SUBREAPER, 1);
  const pid_t child = ::fork();
  if (child < 0) throw UserError(std::string("cannot start mpirun: fork: ") + std::strerror(errno));
  if (child == 0) {
    ::setpgid(0, 0);
    // Not the terminal's foreground group: mpirun must not read the terminal (no rank reads stdin).
    if (const int null = ::open("/dev/null", O_RDONLY); null >= 0) ::dup2(null, STDIN_FILENO);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    ::execv(mpirun->c_str(), c.data());
    const std::string why = "coconet: could not start " + *mpirun + ": " + std::strerror(errno) + "\n";
    (void)!::write(STDERR_FILENO, why.data(), why.size());
    ::_exit(kExitUserError);
  }
  ::setpgid(child, child);
  g_child = child;
  ::close(pipe_fds[1]);
  const Watched watched = pass_through(pipe_fds[0], child, status_dir, timeout_s);
  const auto& death = watched.death;
  ::close(pipe_fds[0]);
  const int status = wait_for(child);
  reap_descendants(child);
  const std::string doing = death ? read_rank_status(status_dir, death->rank) : std::string();
  remove_folder(status_dir);
  std::fflush(stdout);
  if (g_signal != 0) {
    fmt::print(stderr, "coconet: interrupted\n");
    std::fflush(stderr);
    ::_exit(kExitInterrupted);
  }
  if (watched.timed_out) {
    fmt::print(stderr,
               "coconet: no rank reported within {} s of starting {} ({} sets this limit); the job was ended\n",
               timeout_s, *mpirun, kLaunchTimeoutEnv);
    std::fflush(stderr);
    ::_exit(kExitRunFailed);
  }
  if (death) {
    fmt::print(stderr, "coconet: rank {} died of signal {} ({}){}; the job was ended\n", death->rank, death->signal,
               ::strsignal(death->signal), doing.empty() ? "" : " while running " + doing);
    std::fflush(stderr);
    ::_exit(kExitRunFailed);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && !watched.reported) {
    fmt::print(stderr, "coconet: no rank reported: {} exited 0 without starting a rank of this job\n", *mpirun);
    std::fflush(stderr);
    ::_exit(kExitRunFailed);
  }
  std::fflush(stderr);
  if (WIFEXITED(status)) ::_exit(WEXITSTATUS(status));
  ::_exit(WIFSIGNALED(status) ? 128 + WTERMSIG(status) : kExitRunFailed);
}

}  // namespace coconet::exec
