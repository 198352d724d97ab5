#include "exec/cpu/reduce_ops.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu_elementwise.h"
#include "kernels/mpi_check.h"

namespace coconet::exec::cpu {
namespace {

// Elements widened to f32 at a time: two tiles of 1 KiB stay in L1.
constexpr int kTile = 256;

// inout[k] = in[k] (op) inout[k] over 16-bit values, computed in f32: the
// operands widened and the results narrowed a tile at a time by the cpu
// kernels' bulk conversions (F16C where the CPU has it: a 64 KB f16
// reduce-scatter took 151 us with one scalar conversion per value).
template <model::DType T, model::ReduceOp Op>
void combine(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const std::byte*>(in);
  auto* b = static_cast<std::byte*>(inout);
  float x[kTile], y[kTile];
  for (int first = 0; first < *len; first += kTile) {
    const int n = std::min(kTile, *len - first);
    kernels::load_f32(a, T, first, 1, n, x);
    kernels::load_f32(b, T, first, 1, n, y);
    for (int k = 0; k < n; ++k) {
      if constexpr (Op == model::ReduceOp::max) y[k] = std::max(x[k], y[k]);
      else if constexpr (Op == model::ReduceOp::min) y[k] = std::min(x[k], y[k]);
      else y[k] = x[k] + y[k];
    }
    kernels::store_f32(b, T, first, 1, n, y);
  }
}

template <model::DType T>
void create_ops(MPI_Op (&ops)[3]) {
  COCONET_MPI_CHECK(MPI_Op_create(&combine<T, model::ReduceOp::sum>, 1, &ops[0]));
  COCONET_MPI_CHECK(MPI_Op_create(&combine<T, model::ReduceOp::max>, 1, &ops[1]));
  COCONET_MPI_CHECK(MPI_Op_create(&combine<T, model::ReduceOp::min>, 1, &ops[2]));
}

int index_of(model::ReduceOp op) {
  switch (op) {
    case model::ReduceOp::sum:
    case model::ReduceOp::mean: return 0;  // the sum; the backend divides by the group's size after
    case model::ReduceOp::max: return 1;
    case model::ReduceOp::min: return 2;
  }
  return 0;
}

}  // namespace

ReduceOps::ReduceOps() {
  create_ops<model::DType::f16>(f16_);
  create_ops<model::DType::bf16>(bf16_);
}

ReduceOps::~ReduceOps() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (auto* ops : {f16_, bf16_})
    for (int k = 0; k < 3; ++k) MPI_Op_free(&ops[k]);
}

MPI_Op ReduceOps::op(model::DType t, model::ReduceOp op) const {
  switch (t) {
    case model::DType::f16: return f16_[index_of(op)];
    case model::DType::bf16: return bf16_[index_of(op)];
    case model::DType::f32: break;
  }
  switch (op) {
    case model::ReduceOp::sum:
    case model::ReduceOp::mean: return MPI_SUM;
    case model::ReduceOp::max: return MPI_MAX;
    case model::ReduceOp::min: return MPI_MIN;
  }
  return MPI_SUM;
}

MPI_Datatype ReduceOps::datatype(model::DType t) {
  return t == model::DType::f32 ? MPI_FLOAT : MPI_UINT16_T;
}

}  // namespace coconet::exec::cpu
