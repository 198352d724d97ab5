// One file per rank, rewritten in place (pwrite + ftruncate on a descriptor
// opened once): cheap enough to note every unit of every step.
#include "exec/rank_status.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace coconet::exec {
namespace {

std::string status_path(const std::string& dir, int rank) { return dir + "/rank-" + std::to_string(rank); }

// This rank's file, opened on first use; -1 outside a supervised job.
int status_fd() {
  static const int fd = [] {
    const char* dir = std::getenv(kRankStatusEnv);
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");  // Open MPI's world rank of this process
    if (rank == nullptr) rank = std::getenv("PMIX_RANK");   // a PMIx launcher's
    if (dir == nullptr || rank == nullptr) return -1;
    return ::open(status_path(dir, std::atoi(rank)).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  }();
  return fd;
}

}  // namespace

void note_rank_status(std::initializer_list<std::string_view> parts) {
  const int fd = status_fd();
  if (fd < 0) return;
  std::string what;
  for (const auto p : parts) what += p;
  if (::pwrite(fd, what.data(), what.size(), 0) == static_cast<ssize_t>(what.size()))
    (void)::ftruncate(fd, static_cast<off_t>(what.size()));
}

std::string read_rank_status(const std::string& dir, int rank) {
  std::ifstream in(status_path(dir, rank));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace coconet::exec
