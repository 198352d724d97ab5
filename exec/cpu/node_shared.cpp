#include "exec/cpu/node_shared.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "exec/cpu/host_pool.h"
#include "kernels/mpi_check.h"
#include "model/error.h"

namespace coconet::exec::cpu {
namespace {

// A gathered record: the key, the size, then the caller's pid (the object's name).
constexpr std::size_t kSize = kNodeKeyLength;
constexpr std::size_t kPid = kNodeKeyLength + 1;
constexpr std::size_t kRecord = kNodeKeyLength + 2;

NodeShared private_region(std::int64_t bytes) {
  auto block = std::make_shared<HostBlock>(
      HostPool::rounded(static_cast<std::size_t>(std::max<std::int64_t>(bytes, 1))));
  return NodeShared{std::shared_ptr<std::byte>(block, block->data()), true};
}

std::shared_ptr<std::byte> mapping(int fd, std::int64_t bytes) {
  void* p = ::mmap(nullptr, static_cast<std::size_t>(bytes), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) return nullptr;
  return std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [bytes](std::byte* q) {
    ::munmap(q, static_cast<std::size_t>(bytes));
  });
}

// The writer's object: created, its blocks reserved (so that a full tmpfs
// fails here rather than with SIGBUS on a later write), mapped.
std::shared_ptr<std::byte> create(const std::string& name, std::int64_t bytes) {
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return nullptr;
  std::shared_ptr<std::byte> data;
  if (::posix_fallocate(fd, 0, static_cast<off_t>(bytes)) == 0) data = mapping(fd, bytes);
  ::close(fd);
  if (!data) ::shm_unlink(name.c_str());
  return data;
}

std::shared_ptr<std::byte> open_existing(const std::string& name, std::int64_t bytes) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) return nullptr;
  auto data = mapping(fd, bytes);
  ::close(fd);
  return data;
}

}  // namespace

NodeShared share_on_node(MPI_Comm node, std::span<const std::int64_t> key, std::int64_t bytes,
                         std::int64_t serial) {
  COCONET_ASSERT(key.size() <= kNodeKeyLength && bytes >= 0,
                 "share_on_node: a key too long or a negative size");
  int me = 0, ranks = 1;
  COCONET_MPI_CHECK(MPI_Comm_rank(node, &me));
  COCONET_MPI_CHECK(MPI_Comm_size(node, &ranks));
  std::array<std::int64_t, kRecord> mine{};
  std::copy(key.begin(), key.end(), mine.begin());
  mine[kSize] = bytes;
  mine[kPid] = ::getpid();
  std::vector<std::int64_t> all(kRecord * static_cast<std::size_t>(ranks));
  COCONET_MPI_CHECK(
      MPI_Allgather(mine.data(), kRecord, MPI_INT64_T, all.data(), kRecord, MPI_INT64_T, node));
  const auto same_as_mine = [&](int r) {
    return std::equal(mine.begin(), mine.begin() + kPid,
                      all.begin() + static_cast<std::ptrdiff_t>(kRecord) * r);
  };
  int writer = -1, sharing = 0;
  for (int r = 0; r < ranks; ++r)
    if (same_as_mine(r)) {
      if (writer < 0) writer = r;
      ++sharing;
    }
  const bool shared = bytes > 0 && sharing > 1;
  const std::string name = "/coconet-" +
                           std::to_string(all[kRecord * static_cast<std::size_t>(writer) + kPid]) +
                           "-" + std::to_string(serial) + "-" + std::to_string(writer);
  std::shared_ptr<std::byte> data;
  int ok = 1;
  if (shared && me == writer) ok = (data = create(name, bytes)) != nullptr;
  COCONET_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, node));
  if (shared && ok && me != writer) ok = (data = open_existing(name, bytes)) != nullptr;
  COCONET_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, node));
  if (shared && me == writer)
    ::shm_unlink(name.c_str());  // every rank has it mapped, or none keeps it
  if (!shared || !ok) return private_region(bytes);
  return NodeShared{std::move(data), me == writer};
}

}  // namespace coconet::exec::cpu
