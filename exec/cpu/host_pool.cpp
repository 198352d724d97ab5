#include "exec/cpu/host_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <new>
#include <utility>

namespace coconet::exec::cpu {
namespace {

// x86-64's base page and its transparent huge page (one PMD entry): the
// sizes mmap and khugepaged work in (Linux Documentation/admin-guide/mm/transhuge.rst).
constexpr std::size_t kPage = std::size_t{4} << 10;
constexpr std::size_t kHugePage = std::size_t{2} << 20;

std::size_t round_up(std::size_t bytes, std::size_t unit) {
  return (bytes + unit - 1) / unit * unit;
}

void* map_anonymous(std::size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return p;
}

// `capacity` bytes (a multiple of kHugePage) starting on a huge page
// boundary: a huge page more is mapped and the unaligned ends unmapped.
std::byte* map_huge_aligned(std::size_t capacity) {
  auto* raw = static_cast<std::byte*>(map_anonymous(capacity + kHugePage));
  const auto address = reinterpret_cast<std::uintptr_t>(raw);
  const std::size_t head = round_up(address, kHugePage) - address;
  if (head > 0) ::munmap(raw, head);
  const std::size_t tail = kHugePage - head;
  if (tail > 0) ::munmap(raw + head + capacity, tail);
  std::byte* block = raw + head;
  // Advice only: where THP is off the block still works, in base pages.
  (void)::madvise(block, capacity, MADV_HUGEPAGE);
  return block;
}

// Faults every page of a fresh block in now, as the zero-filled vectors the
// buffers were before did: a plan's timed steps never take its first-touch
// faults, and memory that is not there is reported here (std::bad_alloc) rather
// than by the kernel's OOM killer midway. One call (MADV_POPULATE_WRITE,
// Linux 5.14) where the kernel has it, else a write to every page.
void populate(std::byte* block, std::size_t capacity) {
  if (::madvise(block, capacity, MADV_POPULATE_WRITE) == 0) return;
  if (errno == ENOMEM || errno == EFAULT) {
    ::munmap(block, capacity);
    throw std::bad_alloc();
  }
  for (std::size_t at = 0; at < capacity; at += kPage) block[at] = std::byte{0};
}

}  // namespace

HostBlock::HostBlock(std::size_t capacity) : capacity_(capacity) {
  if (capacity == 0) return;
  std::byte* block = capacity >= kHugePage ? map_huge_aligned(capacity)
                                           : static_cast<std::byte*>(map_anonymous(capacity));
  populate(block, capacity);
  data_ = block;
}

HostBlock::HostBlock(HostBlock&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), capacity_(std::exchange(other.capacity_, 0)) {}

HostBlock& HostBlock::operator=(HostBlock&& other) noexcept {
  if (this != &other) {
    HostBlock old(std::move(*this));
    data_ = std::exchange(other.data_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

HostBlock::~HostBlock() {
  if (data_ != nullptr) ::munmap(data_, capacity_);
}

std::size_t HostPool::rounded(std::size_t bytes) {
  return bytes >= kHugePage ? round_up(bytes, kHugePage) : round_up(bytes, kPage);
}

HostBlock HostPool::take(std::size_t bytes, bool zeroed) {
  const std::size_t capacity = rounded(bytes);
  if (capacity == 0) return {};
  HostBlock block;
  if (const auto it = free_.find(capacity); it != free_.end()) {
    block = std::move(it->second);
    free_.erase(it);
    free_bytes_ -= capacity;
    if (zeroed) std::memset(block.data(), 0, bytes);  // a fresh mapping is zero already; a reused one is not
  } else {
    shrink_to(std::max(peak_in_use_, in_use_ + capacity) - capacity);
    try {
      block = HostBlock(capacity);
    } catch (const std::bad_alloc&) {
      trim();
      block = HostBlock(capacity);
    }
  }
  in_use_ += capacity;
  peak_in_use_ = std::max(peak_in_use_, in_use_);
  return block;
}

void HostPool::give_back(HostBlock block) {
  const std::size_t capacity = block.capacity();
  if (capacity == 0) return;
  in_use_ -= std::min(in_use_, capacity);
  free_bytes_ += capacity;
  free_.emplace(capacity, std::move(block));
}

void HostPool::trim() {
  free_.clear();
  free_bytes_ = 0;
}

void HostPool::shrink_to(std::size_t limit) {
  while (!free_.empty() && in_use_ + free_bytes_ > limit) {
    const auto largest = std::prev(free_.end());
    free_bytes_ -= largest->first;
    free_.erase(largest);
  }
}

}  // namespace coconet::exec::cpu
