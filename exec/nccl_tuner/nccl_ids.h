// NCCL's numbering of its functions, algorithms and protocols (its tuner
// interface's ncclFunc_t, NCCL_ALGO_*, NCCL_PROTO_*), from the program's
// and the plan's names: what a call's resolved choice is told to the tuner
// plugin in (exec/nccl_tuner/tuner_plugin.h).
#pragma once

#include "model/program.h"
#include "model/schedule.h"

namespace coconet::exec::nccl_tuner {

// NCCL's numbering (its tuner interface's ncclFunc_t, NCCL_ALGO_*,
// NCCL_PROTO_*); -1 for what has none (a send, alltoall, hierarchical, auto).
[[nodiscard]] inline int coll_id(model::OpKind op) {
  switch (op) {
    case model::OpKind::broadcast:
      return 0;
    case model::OpKind::reduce:
      return 1;
    case model::OpKind::allgather:
      return 2;
    case model::OpKind::reducescatter:
      return 3;
    case model::OpKind::allreduce:
      return 4;
    default:
      return -1;
  }
}
[[nodiscard]] inline int algo_id(model::Algo a) {
  switch (a) {
    case model::Algo::tree:
      return 0;
    case model::Algo::ring:
      return 1;
    case model::Algo::nvls:
      return 4;
    default:
      return -1;
  }
}
[[nodiscard]] inline int proto_id(model::Proto p) {
  switch (p) {
    case model::Proto::ll:
      return 0;
    case model::Proto::ll128:
      return 1;
    case model::Proto::simple:
      return 2;
    default:
      return -1;
  }
}

}  // namespace coconet::exec::nccl_tuner
