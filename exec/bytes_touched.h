// Bytes of the program's values that a rank's backend calls read and write,
// counted call by call from the views and operands the executor hands over
// (what each call touches, not what a formula assumes). Scratch that a fused
// op keeps per piece is named and left out: it is the state a fused op does
// not touch. bench/ reports it per element beside the time.
#pragma once

#include <cstdint>
#include <set>
#include <span>

#include "exec/backend.h"

namespace coconet::exec {

class BytesTouched {
 public:
  explicit BytesTouched(const Backend& b) : b_(b) {}

  void add_scratch(BufferId id) { scratch_.insert(id); }
  void reset() { bytes_ = 0; }
  [[nodiscard]] std::int64_t bytes() const { return bytes_; }

  // A view read or written once.
  void view(View v);
  // An element-wise operand over a block: each distinct element once (a
  // broadcast operand's row or column once).
  void operand(const Operand& o, const model::Block& block);
  void elementwise(std::span<const Operand> inputs, std::span<const Operand> outputs, const model::Block& block);
  // An allgather: its input read, every part but an in-place input's written.
  void allgather(View in, std::span<const View> parts);
  void fused(const FusedCall& call);

 private:
  const Backend& b_;
  std::set<BufferId> scratch_;
  std::int64_t bytes_ = 0;
};

}  // namespace coconet::exec
