// NCCL's numbering of its functions, algorithms and protocols (its tuner
// interface's ncclFunc_t, NCCL_ALGO_*, NCCL_PROTO_*) and its environment's
// names for them, from the program's and the plan's names: what a call's
// resolved choice is told to the tuner plugin in
// (exec/nccl_tuner/tuner_plugin.h), and what `run` exports for a job.
#pragma once

#include <cstddef>

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
// NCCL's number (NCCL_ALGO_*, NCCL_PROTO_*) and environment name (its
// NCCL_ALGO and NCCL_PROTO values) of each algorithm and protocol it has:
// one table each, read by the tuner plugin and by `run`'s job-wide
// environment alike. Hierarchical (three NCCL calls) and auto have neither.
template <typename E>
struct NcclName {
  E value;
  int id;
  const char* env;
};
inline constexpr NcclName<model::Algo> kNcclAlgos[] = {
    {model::Algo::tree, 0, "Tree"}, {model::Algo::ring, 1, "Ring"}, {model::Algo::nvls, 4, "NVLS"}};
inline constexpr NcclName<model::Proto> kNcclProtos[] = {
    {model::Proto::ll, 0, "LL"}, {model::Proto::ll128, 1, "LL128"}, {model::Proto::simple, 2, "Simple"}};

template <typename E, std::size_t N>
[[nodiscard]] constexpr const NcclName<E>* nccl_entry(const NcclName<E> (&table)[N], E v) {
  for (const auto& e : table)
    if (e.value == v) return &e;
  return nullptr;
}

// -1 / nullptr for what NCCL has no number or name for.
[[nodiscard]] inline int algo_id(model::Algo a) {
  const auto* e = nccl_entry(kNcclAlgos, a);
  return e != nullptr ? e->id : -1;
}
[[nodiscard]] inline int proto_id(model::Proto p) {
  const auto* e = nccl_entry(kNcclProtos, p);
  return e != nullptr ? e->id : -1;
}
[[nodiscard]] inline const char* nccl_env_name(model::Algo a) {
  const auto* e = nccl_entry(kNcclAlgos, a);
  return e != nullptr ? e->env : nullptr;
}
[[nodiscard]] inline const char* nccl_env_name(model::Proto p) {
  const auto* e = nccl_entry(kNcclProtos, p);
  return e != nullptr ? e->env : nullptr;
}

}  // namespace coconet::exec::nccl_tuner
