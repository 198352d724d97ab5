// Where every value of a program lives on this rank: its global and local
// shapes, seen as 2-D [rows, cols] (dimension 0 by the product of the rest; a
// 1-D tensor is [n, 1], a scalar [1, 1]), which rows and columns of the global
// tensor this rank holds, and its buffer once allocated.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "model/program.h"

namespace coconet::exec {

struct ValueInfo {
  std::string name;
  model::TensorType type;
  std::vector<std::int64_t> global_dims;
  std::vector<std::int64_t> local_dims;
  std::int64_t rows = 1, cols = 1;              // global, as 2-D
  std::int64_t local_rows = 1, local_cols = 1;  // this rank's part
  std::int64_t row_begin = 0, col_begin = 0;    // where the part starts in the global tensor
  bool here = false;                            // lives in this rank's process group
  BufferId buffer = -1;

  [[nodiscard]] std::int64_t local_numel() const { return local_rows * local_cols; }
  [[nodiscard]] int rank() const { return static_cast<int>(global_dims.size()); }
};

class Plan {
 public:
  // Types every input and statement of `p` (which must be checked) for
  // position `position` of group `group`, P ranks per group.
  Plan(const model::Program& p, const model::Bindings& sizes, int ranks_per_group, int group, int position);

  [[nodiscard]] const ValueInfo& at(const std::string& name) const;
  [[nodiscard]] ValueInfo& at(const std::string& name);
  [[nodiscard]] const std::map<std::string, ValueInfo>& values() const { return values_; }
  // Bytes this rank allocates for the values of its group.
  [[nodiscard]] std::int64_t bytes() const;
  // Allocates every value of this rank's group.
  void allocate(Backend& backend);
  [[nodiscard]] int ranks_per_group() const { return p_; }
  [[nodiscard]] int position() const { return position_; }

 private:
  std::map<std::string, ValueInfo> values_;
  int p_ = 1;
  int position_ = 0;
};

}  // namespace coconet::exec
