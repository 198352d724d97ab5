// A GPU cluster as the cost model sees it: the GPU (SMs, HBM, peak FLOP/s,
// launch overhead), the node fabric (NVLink/NVSwitch, NVLS), the network (NICs)
// and the NCCL model constants. Loaded from configs/topologies/*.yaml, where
// every constant carries its source; unknown keys and impossible values are
// UserErrors naming file:line.
#pragma once

#include <algorithm>

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/ops.h"
#include "model/schedule.h"
#include "model/types.h"

namespace coconet::sim {

// A value per NCCL protocol (LL, LL128, Simple).
struct ProtoTable {
  double ll = 0;
  double ll128 = 0;
  double simple = 0;
  [[nodiscard]] double at(model::Proto p) const;
};

struct GpuSpec {
  std::string model;
  int sms = 0;
  double hbm_GBps = 0;         // peak HBM bandwidth
  double memory_GB = 0;        // HBM capacity (GB, 1e9 bytes); 0: not stated (memory not checked)
  // Optional `reserved_GB`: HBM a training process cannot use for its tensors
  // (CUDA context, NCCL buffers, allocator fragmentation); absent: `coconet
  // step`'s default (step/memory.h, kDefaultReservedGB, with its source).
  std::optional<double> reserved_GB;
  double hbm_efficiency = 0;   // achievable fraction of it
  double tflops_f16 = 0;       // dense tensor-core peak
  double tflops_bf16 = 0;
  double tflops_f32 = 0;       // non-tensor peak (element-wise work)
  // Optional `tflops.f32_gemm`: f32 GEMMs' rate where it is not tflops.f32
  // (the cpu backend: its GEMM kernel against its element-wise engine, which
  // tflops.f32 is fitted on; `coconet calibrate` measures it). Absent: f32.
  std::optional<double> tflops_f32_gemm;
  // Optional `tflops.fp8`: the dense FP8 tensor-core peak (H100/H200 and
  // later), the rate of the GEMMs a step runs in FP8 (sim::GemmShape::fp8,
  // `coconet step` with `dtype: fp8`). Absent: the GPU states no FP8 rate.
  std::optional<double> tflops_fp8;
  double gemm_efficiency = 0;  // achievable fraction of the tensor peak for large GEMMs
  // Optional `attention_efficiency`: the fraction of the tensor peak a flash
  // attention kernel's forward reaches (a published measurement of the GPU
  // generation's kernel, model/kernel_fusion.h). Absent: gemm_efficiency.
  // Optional `attention_bwd_efficiency`: its backward's (five GEMMs with the
  // scores recomputed, dQ accumulated across key blocks: lower than the
  // forward's). Absent: the forward's.
  std::optional<double> attention_efficiency;
  std::optional<double> attention_bwd_efficiency;
  [[nodiscard]] double flash_efficiency() const { return attention_efficiency.value_or(gemm_efficiency); }
  [[nodiscard]] double flash_bwd_efficiency() const { return attention_bwd_efficiency.value_or(flash_efficiency()); }
  // Optional `sustained_share`: the share of the GEMM and attention rates
  // above (measured on an idle GPU, kernel by kernel) that the GPU sustains
  // through a training run (power-limited clocks under hours of tensor-core
  // load, the kernels around each): it scales every GEMM's and flash
  // kernel's time, not memory-bound work. Absent: 1.
  std::optional<double> sustained_share;
  [[nodiscard]] double sustained() const { return sustained_share.value_or(1.0); }
  int gemm_tile_m = 0;
  int gemm_tile_n = 0;
  double launch_us = 0;
  // Optional `gemm_operand_GBps: {f16, bf16, f32}` (device: cpu only): the rate a
  // GEMM call reads its operands and writes its result outside its FLOPs'
  // time. The cpu backend widens 16-bit operands into f32 scratch, packs them
  // for Eigen and rounds the product back (kernels/cpu_matmul.cpp) on every
  // call, so a GEMM split into row chunks re-reads its B operand per chunk.
  // 0 (absent): none, as on a GPU, where cuBLAS reads operands within the
  // arithmetic (bounded below by HBM, sim/compute.h).
  double gemm_operand_GBps_f16 = 0;
  double gemm_operand_GBps_bf16 = 0;
  double gemm_operand_GBps_f32 = 0;
  // Optional `copy: {us, GBps}`: a device-local copy (what a collective on
  // one rank is, sim/collective.h), its fixed cost and its rate over the bytes
  // read and written. Absent: a kernel launch and the achievable HBM bandwidth
  // (a GPU's cudaMemcpyAsync); `coconet calibrate` measures the cpu backend's.
  std::optional<double> copy_us;
  std::optional<double> copy_GBps;
  // Optional `op_flops: {sqrt, rsqrt, exp, log, tanh, pow, dropout, norm}`: what one
  // costly operation (model::CostlyOp) costs an element-wise kernel, in FLOPs
  // at tflops.f32. Absent: model::kDefaultOpFlops. `coconet calibrate`
  // measures the cpu backend's (a library call or a hash per element costs
  // tens of multiply-adds there).
  std::array<std::optional<double>, model::kCostlyOps> op_flops_set{};

  // A GEMM's peak rate for operands of `t`.
  [[nodiscard]] double gemm_tflops(model::DType t) const;
  [[nodiscard]] double op_flops(model::CostlyOp op) const {
    const auto k = static_cast<std::size_t>(op);
    return op_flops_set[k].value_or(model::kDefaultOpFlops[k]);
  }
  [[nodiscard]] double local_copy_us() const { return copy_us.value_or(launch_us); }
  [[nodiscard]] double local_copy_GBps() const { return copy_GBps.value_or(hbm_effective_GBps()); }
  // gemm_operand_GBps of `t`'s operands; 0: no such cost.
  [[nodiscard]] double gemm_operand_GBps(model::DType t) const;
  [[nodiscard]] double hbm_effective_GBps() const { return hbm_GBps * hbm_efficiency; }
};

struct NodeSpec {
  int gpus = 0;
  int nvlink_links = 0;
  double nvlink_link_GBps = 0;  // line rate per link per direction
  double nccl_link_GBps = 0;    // achievable per link (NCCL's model)
  bool nvls = false;
  double nvls_efficiency = 0;
  ProtoTable hop_latency_us;       // per ring step over NVLink
  ProtoTable tree_hop_latency_us;  // per tree step over NVLink (absent in a file: the ring's)

  // Achievable NVLink bandwidth per GPU per direction.
  [[nodiscard]] double nvlink_GBps() const;
};

struct NetworkSpec {
  int nics = 0;
  double nic_Gbps = 0;
  double nic_efficiency = 0;
  ProtoTable hop_latency_us;       // per ring step across nodes
  ProtoTable tree_hop_latency_us;  // per tree level across nodes (absent in a file: the ring's)
  // Optional `pod_gpus` and `oversubscription` (given together): the network
  // has full bisection inside pods of pod_gpus GPUs (whole nodes), and above
  // them its uplinks carry 1/oversubscription of what the pod's NICs inject
  // (Llama 3's RoCE cluster: pods of 3072, 1:7). 0 and 1 (absent): one flat
  // full-bisection network. How a collective that spans pods is priced:
  // sim/collective.h, pod_network_share.
  int pod_gpus = 0;
  double oversubscription = 1;

  [[nodiscard]] double nic_GBps() const;  // achievable per NIC per direction
  // One GPU's share of its node's NICs when `gpus_sharing` GPUs use them (one NIC per GPU at most).
  [[nodiscard]] double share_GBps(int gpus_sharing) const {
    return std::min(nics, gpus_sharing) * nic_GBps() / gpus_sharing;
  }
};

// MPI's large-message regime (optional `nccl.large_messages`, device: cpu):
// MPI's transport changes protocol at a message size, and a collective's cost
// jumps there. From `from_bytes` on (the nccl-tests size, sim/collective.h) a
// collective takes these constants, every algorithm and protocol alike, in
// place of the base latencies, node hop latencies, link rates and reduction
// rate; never priced below the first regime at the threshold (a step up).
struct LargeMessages {
  double from_bytes = 0;
  double base_latency_us = 0;
  double hop_latency_us = 0;
  double link_GBps = 0;  // as node.nvlink_link_GBps and nccl_link_GBps
  double reduce_GBps = 0;
};

// One collective's own constants in one regime (optional `nccl.per_op`,
// device: cpu): Open MPI's `coll tuned` picks an algorithm per operation and
// size, so each op has its own cost. At the calibrated rank count the ring's
// step count is fixed per op, so base and hops, link and reduction rates are
// not separable: the cost is base + bytes x bus factor / link_GBps (the base
// holds the steps' latency, the rate the reduction's cost).
struct OpConstants {
  double base_latency_us = 0;
  double link_GBps = 0;
};
struct OpRegimes {
  std::optional<OpConstants> small;  // below nccl.large_messages.from_bytes (every size with one regime)
  std::optional<OpConstants> large;  // from it on (needs nccl.large_messages)
  // The op's own nccl.sms_per_channel: how much of the rank's compute its
  // progress takes beside a kernel (MPI progresses each op's algorithm its
  // own way: calibrate measures each op overlapped with a GEMM).
  std::optional<double> sms_per_channel;
};
// `nccl.per_op`: the ops that have their own constants, at `ranks` ranks on one
// node; any other op, rank count or regime absent here: the shared constants.
struct PerOp {
  int ranks = 0;
  std::vector<std::pair<model::OpKind, OpRegimes>> ops;
  [[nodiscard]] const OpRegimes* find(model::OpKind op) const {
    for (const auto& [k, v] : ops)
      if (k == op) return &v;
    return nullptr;
  }
};

struct NcclSpec {
  // The NCCL table (configs/nccl/<version>.yaml, sim/nccl_table.h) whose
  // software constants the fields below hold where the topology does not
  // state them, and the rows it takes: the GPU generation and the host CPU.
  // Empty: the topology states every constant (a calibrated cpu topology).
  std::string version;
  std::string gpu_arch;
  std::string host_cpu;
  int channels = 0;
  double channel_GBps = 0;
  // NCCL's LL bandwidth ceiling: one node, two nodes, three or more
  // (`two_nodes` absent in a file: the `multi_node` value).
  double ll_max_one_node_GBps = 0;
  double ll_max_two_nodes_GBps = 0;
  double ll_max_multi_node_GBps = 0;
  double ll_efficiency = 0;     // ring LL: bus bandwidth factor
  double ll128_efficiency = 0;  // ring LL128: bus bandwidth factor
  double tree_efficiency = 0;   // tree allreduce: bus bandwidth factor, every protocol
  // Tree's own protocol factors (absent in a file: the ring's): LL, and LL128
  // on one node / across nodes.
  double tree_ll_efficiency = 0;
  double tree_ll128_one_node_efficiency = 0;
  double tree_ll128_multi_node_efficiency = 0;
  // The LL bandwidth ceiling for a collective spanning `nodes` nodes.
  [[nodiscard]] double ll_max_GBps(int nodes) const {
    return nodes <= 1 ? ll_max_one_node_GBps : nodes == 2 ? ll_max_two_nodes_GBps : ll_max_multi_node_GBps;
  }
  ProtoTable ring_base_us;
  ProtoTable tree_base_us;
  ProtoTable nvls_base_us;
  double hbm_bytes_per_link_byte = 0;
  // Rate at which a rank combines the data a reducing collective receives
  // (allreduce, reduce-scatter, reduce): (n-1)/n of the buffer is reduced, at
  // this rate, on top of the transfer. GPUs: HBM speed; CPUs: arithmetic.
  double reduce_GBps = 0;
  // Compute units (gpu.sms) one channel of a collective occupies while it runs:
  // a GEMM or kernel beside it gets the units left, and with less than one unit
  // left runs at that fraction of its speed (1 on a GPU: one CTA per channel).
  double sms_per_channel = 0;
  std::optional<LargeMessages> large_messages;  // absent: one regime for every size
  std::optional<PerOp> per_op;                  // absent: every op takes the shared constants
  // A published small-message time (nccl-tests, one node): it sets the level
  // of every collective's latency (sim/collective.h); absent, the tuning table's.
  struct MeasuredLatency {
    model::OpKind op = model::OpKind::allreduce;
    model::Algo algo = model::Algo::ring;
    model::Proto proto = model::Proto::ll;
    int ranks = 2;
    double bytes = 0;
    double time_us = 0;
  };
  std::optional<MeasuredLatency> measured_latency;
  // Derived, not read from the file: latency_correction_us() of the topology
  // (sim/collective.h), set where a topology is made (parse_topology,
  // Topology::scaled) so that pricing a collective reads it. 0 without a measurement.
  double latency_correction_us = 0;
  // Extra slowdown of a kernel while a collective works beside it on its GPU,
  // and of the collective beside a working kernel, beyond the SMs the channels
  // hold and the HBM both share (L2, memory-controller arbitration): each runs
  // at 1 / (1 + interference) of its rate. 0 (absent in a file): none.
  double interference = 0;
  // NCCL's all-to-all against the rates this model prices a link at: each
  // rank's bytes to its node's peers over NVLink and to other nodes over its
  // NIC share (sim/alltoall.h) move at these shares of node.nvlink_GBps()
  // and network.share_GBps(). A measured ratio (absent in a file: 1): NCCL
  // sends all-to-all parts as point-to-point operations, not as the rings
  // and trees its other collectives run at the links' rates.
  struct AlltoallEfficiency {
    double nvlink = 1;
    double network = 1;
  };
  AlltoallEfficiency alltoall_efficiency;
  // Optional `handoff_us` (device: cpu's calibration): the part of every
  // collective's fixed cost that hands its completion to the thread waiting
  // for it (the cpu backend: its communication thread waking the compute
  // thread, and the wake that started it). A task that calls several
  // collectives in one go (a fused op, piece after piece) hands off once, not
  // once per call. 0 (absent): every call is priced whole.
  double handoff_us = 0;
  // Optional `step_sync_us` (device: cpu's calibration): what the first
  // collective or send of a step pays beyond the later ones: its ranks
  // arrive out of step and its thread wakes from sleep; a later one finds
  // them in step and awake (the cpu backend: an all-gather alone 13.5 us, the
  // same right after a reduce-scatter 6.9). 0 (absent): every call alike.
  double step_sync_us = 0;
};

// How one GPU differs from the topology's: each rate multiplied by its scale.
struct RankScales {
  double compute = 1;  // every tensor-core and f32 peak (gpu.tflops)
  double hbm = 1;      // gpu.hbm_GBps
  double nvlink = 1;   // NVLink bandwidth (node.nvlink_link_GBps, nccl_link_GBps)
  double network = 1;  // the NICs' bandwidth (network.nic_Gbps)
  friend bool operator==(const RankScales&, const RankScales&) = default;
  friend auto operator<=>(const RankScales&, const RankScales&) = default;
  [[nodiscard]] RankScales times(const RankScales& o) const {
    return {compute * o.compute, hbm * o.hbm, nvlink * o.nvlink, network * o.network};
  }
  // The slower of two in every rate (a bulk-synchronous collective goes at its slowest member's).
  [[nodiscard]] RankScales slowest(const RankScales& o) const;
};

// A node whose GPUs differ (`node_overrides` in a topology file).
struct NodeOverride {
  int node = 0;
  RankScales scales;
};
// One GPU that differs (`stragglers`), on top of its node's scales.
struct Straggler {
  int rank = 0;
  RankScales scales;
};

// What makes ranks differ. Empty (every key absent): a symmetric cluster.
struct Asymmetry {
  int last_node_gpus = 0;  // GPUs in the last node; 0: as many as the others
  std::vector<NodeOverride> nodes;
  std::vector<Straggler> stragglers;
  [[nodiscard]] bool any() const { return last_node_gpus > 0 || !nodes.empty() || !stragglers.empty(); }
};

// The processor a rank runs on: a GPU, or a CPU core (a calibrated cpu-backend topology).
enum class Device { gpu, cpu };

struct Topology {
  std::string name;
  std::string description;
  std::string origin;  // file it came from
  Device device = Device::gpu;
  int nodes = 0;
  GpuSpec gpu;
  NodeSpec node;
  NetworkSpec network;
  NcclSpec nccl;
  Asymmetry asymmetry;

  [[nodiscard]] int total_gpus() const {
    return nodes * node.gpus - (asymmetry.last_node_gpus > 0 ? node.gpus - asymmetry.last_node_gpus : 0);
  }
  [[nodiscard]] int node_of(int rank) const { return rank / node.gpus; }
  [[nodiscard]] int gpus_on_node(int n) const {
    return n == nodes - 1 && asymmetry.last_node_gpus > 0 ? asymmetry.last_node_gpus : node.gpus;
  }
  // A rank's scales: its node's override times its own straggler entry (1 where none).
  [[nodiscard]] RankScales scales_of(int rank) const;
  // This topology with every rate multiplied by `s` (what a rank with those scales sees).
  [[nodiscard]] Topology scaled(const RankScales& s) const;
};

// `--set key=value` overrides, applied on the YAML before it is checked.
using Overrides = std::vector<std::pair<std::string, std::string>>;

// Parses and checks a topology; `origin` names it in messages.
[[nodiscard]] Topology parse_topology(const std::string& yaml_text, const std::string& origin,
                                      const Overrides& overrides = {});
// A topology's text with the values of the NCCL table it names read in at
// the keys it leaves to the table (sim/nccl_table.h): the document
// parse_topology reads. The text as it is when it names no table.
[[nodiscard]] std::string with_nccl_table(const std::string& yaml_text, const std::string& origin);
// Resolves a name (configs/topologies/NAME.yaml) or a path, then parses it.
[[nodiscard]] Topology load_topology(const std::string& name_or_path,
                                     const Overrides& overrides = {});
// Human-readable summary (what `coconet show` and the docs print).
[[nodiscard]] std::string describe(const Topology& t);

}  // namespace coconet::sim
