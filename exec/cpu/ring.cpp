#include "exec/cpu/ring.h"

#include <algorithm>
#include <cstring>

#include "kernels/mpi_check.h"
#include "model/error.h"

namespace coconet::exec::cpu {
namespace {

bool overlaps(const std::byte* a, std::size_t a_bytes, const std::byte* b, std::size_t b_bytes) {
  return a_bytes > 0 && b_bytes > 0 && a < b + b_bytes && b < a + a_bytes;
}

// Where the result lands and what scratch the ring needs for it.
enum class Landing {
  direct,    // received into `out`, my input added there: `out` overlaps no part
  in_place,  // `out` is my own part: received into scratch, added into `out`
  staged,    // `out` overlaps another part: reduced in scratch, copied to `out` at the end
};

Landing landing_of(const RingReduceScatter& c, std::size_t out_bytes) {
  if (c.out == c.parts[static_cast<std::size_t>(c.position)]) return Landing::in_place;
  for (std::size_t r = 0; r < c.parts.size(); ++r)
    if (overlaps(c.out, out_bytes, c.parts[r], static_cast<std::size_t>(c.counts[r]) * c.width))
      return Landing::staged;
  return Landing::direct;
}

std::size_t largest_part_bytes(const RingReduceScatter& c) {
  return static_cast<std::size_t>(*std::max_element(c.counts.begin(), c.counts.end())) * c.width;
}

}  // namespace

std::size_t ring_scratch_bytes(const RingReduceScatter& c) {
  const std::size_t p = c.parts.size();
  if (p < 2) return 0;
  const auto own = static_cast<std::size_t>(c.position);
  const Landing landing = landing_of(c, static_cast<std::size_t>(c.counts[own]) * c.width);
  const std::size_t slots = p > 2 ? 2 : (landing == Landing::direct ? 0 : 1);
  return slots * largest_part_bytes(c);
}

void ring_reduce_scatter(const RingReduceScatter& c, std::span<std::byte> scratch, const WaitRequest& wait) {
  const int p = static_cast<int>(c.parts.size());
  COCONET_ASSERT(p >= 2 && c.counts.size() == c.parts.size() && c.position >= 0 && c.position < p,
                 "ring_reduce_scatter: one part and count per position, two positions at least");
  COCONET_ASSERT(scratch.size() >= ring_scratch_bytes(c), "ring_reduce_scatter: scratch smaller than it needs");
  const auto part_of = [p](int k) { return static_cast<std::size_t>(((k % p) + p) % p); };
  const auto own = static_cast<std::size_t>(c.position);
  const std::size_t out_bytes = static_cast<std::size_t>(c.counts[own]) * c.width;
  const Landing landing = landing_of(c, out_bytes);
  // Two slots of the largest part: the partial sum received at step s is
  // sent at step s+1 while step s+1 receives into the other one.
  const std::size_t slot = largest_part_bytes(c);
  const auto slot_at = [&](int s) { return scratch.data() + static_cast<std::size_t>(s % 2) * slot; };

  const int next = (c.position + 1) % p;
  const int prev = (c.position + p - 1) % p;
  for (int s = 0; s < p - 1; ++s) {
    const std::size_t send_part = part_of(c.position - s - 1);
    const std::size_t recv_part = part_of(c.position - s - 2);
    const bool last = s == p - 2;  // recv_part is my own
    const std::byte* send = s == 0 ? c.parts[send_part] : slot_at(s - 1);
    std::byte* recv = last && landing == Landing::direct ? c.out : slot_at(s);
    MPI_Request received = MPI_REQUEST_NULL;
    MPI_Request sent = MPI_REQUEST_NULL;
    COCONET_MPI_CHECK(MPI_Irecv(recv, c.counts[recv_part], c.type, prev, c.tag, c.comm, &received));
    COCONET_MPI_CHECK(MPI_Isend(send, c.counts[send_part], c.type, next, c.tag, c.comm, &sent));
    wait(received);
    wait(sent);
    if (last && landing == Landing::in_place) {
      COCONET_MPI_CHECK(MPI_Reduce_local(recv, c.out, c.counts[own], c.type, c.op));
    } else {
      COCONET_MPI_CHECK(MPI_Reduce_local(c.parts[recv_part], recv, c.counts[recv_part], c.type, c.op));
    }
  }
  if (landing == Landing::staged) std::memcpy(c.out, slot_at(p - 2), out_bytes);
}

}  // namespace coconet::exec::cpu
