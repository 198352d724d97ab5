#include "exec/cpu/reduce_ops.h"

#include <algorithm>
#include <cstdint>

#include "kernels/half.h"
#include "kernels/mpi_check.h"

namespace coconet::exec::cpu {
namespace {

template <float (*Widen)(std::uint16_t), std::uint16_t (*Narrow)(float), model::ReduceOp Op>
void combine(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int k = 0; k < *len; ++k) {
    const float x = Widen(a[k]);
    const float y = Widen(b[k]);
    float r = x + y;
    if constexpr (Op == model::ReduceOp::max) r = std::max(x, y);
    if constexpr (Op == model::ReduceOp::min) r = std::min(x, y);
    b[k] = Narrow(r);
  }
}

template <float (*Widen)(std::uint16_t), std::uint16_t (*Narrow)(float)>
void create_ops(MPI_Op (&ops)[3]) {
  COCONET_MPI_CHECK(MPI_Op_create(&combine<Widen, Narrow, model::ReduceOp::sum>, 1, &ops[0]));
  COCONET_MPI_CHECK(MPI_Op_create(&combine<Widen, Narrow, model::ReduceOp::max>, 1, &ops[1]));
  COCONET_MPI_CHECK(MPI_Op_create(&combine<Widen, Narrow, model::ReduceOp::min>, 1, &ops[2]));
}

int index_of(model::ReduceOp op) {
  switch (op) {
    case model::ReduceOp::sum: return 0;
    case model::ReduceOp::max: return 1;
    case model::ReduceOp::min: return 2;
  }
  return 0;
}

}  // namespace

ReduceOps::ReduceOps() {
  create_ops<kernels::f16_to_float, kernels::float_to_f16>(f16_);
  create_ops<kernels::bf16_to_float, kernels::float_to_bf16>(bf16_);
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
    case model::ReduceOp::sum: return MPI_SUM;
    case model::ReduceOp::max: return MPI_MAX;
    case model::ReduceOp::min: return MPI_MIN;
  }
  return MPI_SUM;
}

MPI_Datatype ReduceOps::datatype(model::DType t) {
  return t == model::DType::f32 ? MPI_FLOAT : MPI_UINT16_T;
}

}  // namespace coconet::exec::cpu
