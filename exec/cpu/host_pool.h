// Host memory for the cpu backend's buffers: blocks mapped once and reused.
//
// A run allocates every value of a plan, releases them all when the plan is
// done (Backend::release_all), then allocates the next schedule's. Freed to
// the kernel and mapped afresh, every page faulted and was cleared again for
// each schedule: at BERT-large sizes (sgd, N = 335,708,160) most of a run's
// host time. The pool keeps released blocks and hands one back to an
// allocation of the same rounded size, zeroed with memset over pages already
// present. Blocks of 2 MiB and more are aligned to 2 MiB and ask for
// transparent huge pages (madvise MADV_HUGEPAGE: 512 times fewer faults
// where THP is set to `madvise`). A fresh block's pages are faulted in when
// it is mapped (MADV_POPULATE_WRITE), as the zero-filled vectors the buffers
// were before had them: no first touch falls into a timed step.
//
// Bounded: the pool holds no more in all (in use and free) than the most it
// has had in use at once, so it never keeps more than a run without it would
// have mapped at its peak; a failed mapping drops every free block and tries
// once more before reporting std::bad_alloc.
#pragma once

#include <cstddef>
#include <map>

namespace coconet::exec::cpu {

// One mapped region (unmapped when destroyed); empty when capacity is 0.
class HostBlock {
 public:
  HostBlock() = default;
  // Maps `capacity` bytes (already rounded by HostPool), zero and faulted in;
  // throws std::bad_alloc.
  explicit HostBlock(std::size_t capacity);
  HostBlock(HostBlock&& other) noexcept;
  HostBlock& operator=(HostBlock&& other) noexcept;
  HostBlock(const HostBlock&) = delete;
  HostBlock& operator=(const HostBlock&) = delete;
  ~HostBlock();

  [[nodiscard]] std::byte* data() const { return data_; }
  [[nodiscard]] std::size_t capacity() const { return capacity_; }

 private:
  std::byte* data_ = nullptr;
  std::size_t capacity_ = 0;
};

class HostPool {
 public:
  // A zero-filled block of at least `bytes` bytes (with `zeroed` false, a
  // reused block keeps what it held); throws std::bad_alloc.
  [[nodiscard]] HostBlock take(std::size_t bytes, bool zeroed = true);
  // Returns a block taken from this pool, to be handed out again.
  void give_back(HostBlock block);
  // Unmaps every free block.
  void trim();
  // Bytes of the free blocks (memory the pool could hand back to the kernel).
  [[nodiscard]] std::size_t free_bytes() const { return free_bytes_; }

  // The size a request of `bytes` is mapped at: whole pages, whole huge pages
  // from kHugePage on (so that the blocks of one tensor size match).
  [[nodiscard]] static std::size_t rounded(std::size_t bytes);

 private:
  // Unmaps free blocks, largest first, until `limit` bytes or fewer are held in all.
  void shrink_to(std::size_t limit);

  std::multimap<std::size_t, HostBlock> free_;  // by capacity
  std::size_t free_bytes_ = 0;
  std::size_t in_use_ = 0;
  std::size_t peak_in_use_ = 0;
};

}  // namespace coconet::exec::cpu
