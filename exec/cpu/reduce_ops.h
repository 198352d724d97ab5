// MPI reduction operators for the 16-bit float types, which MPI lacks.
// Choice: a user-defined, commutative MPI_Op over MPI_UINT16_T that widens both
// operands to f32, combines them, and rounds the result back (RNE). Data stays
// 16-bit on the wire (as NCCL does for f16), at the price of one rounding per
// combining step; integer-valued inputs below 2048 in magnitude sum exactly.
#pragma once

#include <mpi.h>

#include "model/program.h"
#include "model/types.h"

namespace coconet::exec::cpu {

class ReduceOps {
 public:
  ReduceOps();
  ~ReduceOps();
  ReduceOps(const ReduceOps&) = delete;
  ReduceOps& operator=(const ReduceOps&) = delete;

  // mean: the sum's operator; the caller divides the result by the group's size.
  [[nodiscard]] MPI_Op op(model::DType t, model::ReduceOp op) const;
  [[nodiscard]] static MPI_Datatype datatype(model::DType t);

 private:
  MPI_Op f16_[3]{};
  MPI_Op bf16_[3]{};
};

}  // namespace coconet::exec::cpu
