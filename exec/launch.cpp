// mpirun relaunch: argv from /proc/self/cmdline, the binary from
// /proc/self/exe, mpirun from $COCONET_MPIRUN or $PATH.
#include "exec/launch.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include <fmt/core.h>

#include "model/error.h"
#include "model/limits.h"

namespace coconet::exec {
namespace {

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

std::vector<std::string> mpirun_arguments(const std::string& mpirun, int ranks, const std::string& self,
                                          const std::vector<std::string>& args, bool as_root) {
  std::vector<std::string> argv{mpirun, "-np", std::to_string(ranks),
                                // More ranks than cores, and no pinning: a laptop, a CI runner.
                                "--oversubscribe", "--bind-to", "none",
                                // Shared memory between local ranks without ptrace (containers forbid it).
                                "--mca", "btl", "self,vader", "--mca", "btl_vader_single_copy_mechanism", "none",
                                // Ranks waiting in MPI yield the core: a small machine runs more threads than cores.
                                "--mca", "mpi_yield_when_idle", "1"};
  if (as_root) argv.emplace_back("--allow-run-as-root");
  argv.push_back(self);
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

void relaunch_under_mpirun(int ranks) {
  if (ranks > model::kMaxLocalRanks)
    throw UserError(fmt::format("--ranks {} is more than the limit of {} ranks that mpirun starts on one machine",
                                ranks, model::kMaxLocalRanks));
  const auto mpirun = find_mpirun();
  if (!mpirun)
    throw UserError("--ranks " + std::to_string(ranks) +
                    " starts the ranks with mpirun, which is not on PATH; install Open MPI "
                    "(e.g. apt-get install openmpi-bin) or set COCONET_MPIRUN to its path");
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const auto args = own_arguments();
  if (ec || args.empty()) throw UserError("cannot find this program's own path to start it under mpirun");
  auto argv = mpirun_arguments(*mpirun, ranks, self.string(), {args.begin() + 1, args.end()}, ::geteuid() == 0);
  std::vector<char*> c;
  for (auto& a : argv) c.push_back(a.data());
  c.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  ::execv(mpirun->c_str(), c.data());
  throw UserError("could not start " + *mpirun + ": " + std::string(std::strerror(errno)));
}

}  // namespace coconet::exec
