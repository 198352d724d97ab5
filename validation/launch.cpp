// mpirun relaunch: argv comes from /proc/self/cmdline, the binary from
// /proc/self/exe, mpirun from $COCONET_MPIRUN or $PATH.
#include "validation/launch.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <unistd.h>

#include "model/error.h"
#include "validation/progress.h"

namespace coconet::validation {

namespace {

std::string find_mpirun() {
  if (const char* forced = std::getenv("COCONET_MPIRUN"); forced && *forced) return forced;
  std::stringstream path(std::getenv("PATH") ? std::getenv("PATH") : "");
  for (std::string dir; std::getline(path, dir, ':');) {
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/mpirun";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  throw UserError("--ranks starts the ranks with mpirun, which is not on PATH: install Open MPI "
                  "(apt-get install openmpi-bin) or set COCONET_MPIRUN to its path");
}

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

void run_under_mpirun(int ranks) {
  const std::string mpirun = find_mpirun();
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const auto args = own_arguments();
  if (ec || args.empty()) throw UserError("cannot find this program's own path to start it under mpirun");
  std::vector<std::string> argv = {mpirun, "-np", std::to_string(ranks), "--oversubscribe", "--bind-to", "none",
                                   "--mca", "btl", "self,vader", "--mca", "btl_vader_single_copy_mechanism", "none"};
  if (::geteuid() == 0) argv.emplace_back("--allow-run-as-root");
  argv.push_back(self.string());
  argv.insert(argv.end(), args.begin() + 1, args.end());
  ::setenv(kProgressEnv, ::isatty(STDERR_FILENO) ? "1" : "0", 1);
  std::vector<char*> c;
  for (auto& a : argv) c.push_back(a.data());
  c.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  ::execv(mpirun.c_str(), c.data());
  throw UserError(fmt::format("could not start {}: {}", mpirun, std::strerror(errno)));
}

void run_guarded(exec::Backend& backend, const std::function<void()>& work) {
  if (backend.world_size() == 1) {
    work();
    return;
  }
  constexpr int kExitRunFailed = 1, kExitUserError = 2, kExitInternal = 3;  // as cli/main.cpp
  int code = 0;
  std::string what;
  try {
    work();
    return;
  } catch (const RunFailure& e) {
    code = kExitRunFailed;
    what = e.what();
  } catch (const UserError& e) {
    code = kExitUserError;
    what = e.what();
  } catch (const std::exception& e) {
    code = kExitInternal;
    what = e.what();
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::fflush(stdout);
  fmt::print(stderr, "coconet: rank {} ({}) failed: {}; aborting the job\n", backend.world_rank(), host, what);
  std::fflush(stderr);
  backend.abort_job(code);
}

}  // namespace coconet::validation
