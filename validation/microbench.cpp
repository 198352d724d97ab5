// The microbenchmark programs. Sizes start small enough that the fixed costs
// (call overhead, collective latency) dominate and end large enough that bytes
// and FLOPs do, so both ends of every formula are pinned. Element-wise kernels
// span 1 to 16 FLOPs per element and f32 and f16 operands, as the workloads'
// optimizer and epilogue kernels do.
#include "validation/microbench.h"
#include "validation/stats.h"

#include <algorithm>
#include <cmath>

#include <fmt/core.h>

#include "exec/runtime.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/parse.h"
#include "model/points.h"
#include "model/schedule.h"
#include "model/transforms.h"
#include "plan/step_plan.h"
#include "sim/compute.h"

namespace coconet::validation {

namespace {

struct ProgramSpec {
  MicroKind kind;
  std::string label;
  std::string yaml;
};

// One element-wise statement over N elements.
std::string elementwise_yaml(const std::string& name, const std::string& tensors, const std::string& stmt) {
  return fmt::format("name: {}\nparams: {{N: 1}}\ntensors:\n{}program:\n  - {}\noutputs: [z]\n", name, tensors, stmt);
}

// Two f32 operands of N elements, x and y.
constexpr const char* kF32Operands =
    "  x: {dtype: f32, shape: [N], layout: local}\n  y: {dtype: f32, shape: [N], layout: local}\n";

std::vector<ProgramSpec> elementwise_specs() {
  const std::string f32 = kF32Operands;
  const std::string mixed = "  x: {dtype: f16, shape: [N], layout: local}\n  y: {dtype: f32, shape: [N], layout: local}\n";
  // Eight multiply-adds: 16 FLOPs per element on the same 12 bytes.
  const std::string heavy = "z = ((((((((x*0.5 + y)*0.5 + y)*0.5 + y)*0.5 + y)*0.5 + y)*0.5 + y)*0.5 + y)*0.5 + y)";
  return {{MicroKind::elementwise, "add f32", elementwise_yaml("cal_add_f32", f32, "z = x + y")},
          {MicroKind::elementwise, "axpy f16+f32", elementwise_yaml("cal_axpy_mixed", mixed, "z = y - 0.001*x")},
          {MicroKind::elementwise, "8 fma f32", elementwise_yaml("cal_fma_f32", f32, heavy)},
          {MicroKind::elementwise, "8 fma f16+f32", elementwise_yaml("cal_fma_mixed", mixed, heavy)}};
}

// One kernel per costly operation (model::CostlyOp), `z = op(x) + y` over
// f32 (operands kept where the operation is defined): what it costs beside
// the arithmetic the FLOP rate already prices (gpu.op_flops); a norm's
// element, `z = norm(x)`, what the whole reduction costs per element.
std::vector<std::pair<model::CostlyOp, std::string>> costly_specs() {
  using C = model::CostlyOp;
  return {{C::sqrt, "z = sqrt(abs(x)) + y"},      {C::rsqrt, "z = rsqrt(abs(x) + 1) + y"},
          {C::exp, "z = exp(x * 0.001) + y"},     {C::log, "z = log(abs(x) + 1) + y"},
          {C::tanh, "z = tanh(x) + y"},           {C::pow, "z = pow(abs(x) + 1, 0.001 * y)"},
          {C::dropout_hash, "z = dropout(x, 0.1) + y"}, {C::norm_element, "z = norm(x)"}};
}

// The operands a costly operation's kernel reads: x and y, or x alone for a norm.
std::string costly_operands(model::CostlyOp op) {
  return op == model::CostlyOp::norm_element ? "  x: {dtype: f32, shape: [N], layout: local}\n" : kF32Operands;
}

std::string gemm_yaml(const char* dtype) {
  return fmt::format(
      "name: cal_gemm_{0}\nparams: {{M: 1, K: 1, N: 1}}\ntensors:\n"
      "  a: {{dtype: {0}, shape: [M, K], layout: local}}\n  b: {{dtype: {0}, shape: [K, N], layout: replicated}}\n"
      "program:\n  - z = matmul(a, b)\noutputs: [z]\n",
      dtype);
}

std::string collective_yaml(const std::string& op, const char* dtype) {
  const char* layout = op == "allgather" ? "sliced(0)" : op == "send" ? "replicated" : "local";
  const std::string stmt = op == "send" ? "z = send(x, next)" : op == "allgather" ? "z = allgather(x)"
                                                                                   : fmt::format("z = {}(sum, x)", op);
  return fmt::format("name: cal_{0}_{1}\nparams: {{N: 1}}\ntensors:\n  x: {{dtype: {1}, shape: [N], layout: {2}}}\n"
                     "program:\n  - {3}\noutputs: [z]\n",
                     op, dtype, layout, stmt);
}

// A GEMM whose partial products are allreduced or reduce-scattered
// (Megatron's row-parallel layer, without or with sequence parallelism). Run
// overlapped, chunk by chunk, it measures how much of a rank's compute a
// collective's progress takes while both run: the one constant that the
// one-stage microbenchmarks cannot show (nccl.sms_per_channel), per op
// (MPI progresses each op's algorithm differently).
std::string overlap_yaml(const std::string& op) {
  return fmt::format("name: cal_overlap_{0}\nparams: {{M: 1, K: 1, N: 1}}\ntensors:\n"
                     "  a: {{dtype: f16, shape: [M, K], layout: sliced(1)}}\n"
                     "  b: {{dtype: f16, shape: [K, N], layout: sliced(0)}}\n"
                     "program:\n  - y = matmul(a, b)\n  - z = {0}(sum, y)\noutputs: [z]\n",
                     op);
}

std::vector<std::int64_t> sweep(std::int64_t from, std::int64_t to, int factor, bool quick) {
  std::vector<std::int64_t> v;
  for (std::int64_t n = from; n <= to; n *= quick ? factor * factor : factor) v.push_back(n);
  if (v.back() != to) v.push_back(to);
  return v;
}

// Element counts: 2^10 .. 2^16 (256 KiB per f32 operand at the top). Past that,
// on a small machine with more ranks than cores, a kernel outlasts the
// scheduler's time slice and its operands the last-level cache, and times
// jump by 5-15x per 4x of data: a cliff a one-level roofline cannot
// describe, so calibration covers the sizes below it (docs/validation.md).
constexpr std::int64_t kSmallElems = 1 << 10;
constexpr std::int64_t kLargeElems = 1 << 16;
constexpr int kElemFactor = 4;
// GEMM edge lengths 32 .. 256, square: 65 KFLOP to 34 MFLOP (the largest
// GEMMs of cpu-local.yaml are 8 MFLOP: the sweep brackets them).
constexpr std::int64_t kSmallEdge = 32;
constexpr std::int64_t kLargeEdge = 256;
constexpr int kEdgeFactor = 2;
// Wide GEMMs: few rows against a large right operand, [8 x E] x [E x E] for
// E 256 .. 1024, where widening and packing the operands (per call: the
// cpu backend widens 16-bit operands to f32 each call) outweighs the
// arithmetic; a square GEMM's operands grow as E^2 beside its E^3 FLOPs
// and never show that cost (gpu.gemm_operand_GBps). A chunked matmul calls
// the GEMM per chunk with the whole weight each time: this is its price.
constexpr std::int64_t kWideRows = 8;
constexpr std::int64_t kSmallWideEdge = 256;
constexpr std::int64_t kLargeWideEdge = 1024;
// The overlapped pair: local GEMMs [M x 128] x [128 x 128] per rank (K = 128
// per rank of the sliced dimension) and an f16 allreduce of M x 128, in
// the overlap transform's default chunks; M spans cpu-local's B x S.
constexpr std::int64_t kOverlapLocalK = 128;
constexpr std::int64_t kOverlapN = 128;
constexpr std::int64_t kOverlapRows[] = {64, 256};
// The collectives a GEMM overlaps in the workloads (Megatron's allreduce, or its reduce-scatter half).
const std::string kOverlapOps[] = {"allreduce", "reducescatter"};

void fill_work(MicroSample& s) {
  if (s.kind == MicroKind::overlap || s.kind == MicroKind::fused || s.kind == MicroKind::paired)
    return;  // several stages: fitted through the simulator only
  const plan::StepPlan p =
      plan::lower(model::initial_schedule(s.program), s.sizes, s.ranks, plan::cpu_capabilities());
  if (p.ops.size() != 1) throw InternalError("a microbenchmark must be one op: " + s.label);
  const plan::Work& w = p.ops.front().work;
  s.bytes = w.hbm_bytes;
  s.flops = w.flops;
  s.costly = w.costly;
  if (w.gemm) {
    const sim::GemmShape shape{w.gemm->m, w.gemm->n, w.gemm->k, w.gemm->dtype};
    s.flops = shape.flops();
    s.bytes = shape.bytes();  // the operands the call widens and packs (gpu.gemm_operand_GBps)
    s.dtype = w.gemm->dtype;
  }
  if (!w.collectives.empty()) {
    s.bytes = w.collectives.front().bytes;
    s.op = model::to_string(w.collectives.front().op);
  }
}

MicroSample make_sample(MicroKind kind, const std::string& label, const std::string& yaml, model::Bindings sizes,
                        int world) {
  MicroSample s;
  s.kind = kind;
  s.program = model::parse_program(yaml, "<calibration " + label + ">");
  s.sizes = s.program.bind(sizes);
  s.ranks = world / s.program.groups();
  s.label = fmt::format("{} {}", label, model::sizes_label(sizes));
  s.schedule = model::initial_schedule(s.program);
  fill_work(s);
  return s;
}

}  // namespace

std::string overlap_label(const std::string& op) {
  return fmt::format("ol(MM,{})", op == "allreduce" ? "AR" : op == "reducescatter" ? "RS" : op);
}

namespace {

MicroSample overlap_sample(const std::string& op, std::int64_t rows, int world) {
  const std::int64_t k = kOverlapLocalK * world;
  MicroSample s = make_sample(MicroKind::overlap, overlap_label(op) + " f16", overlap_yaml(op),
                              {{"M", rows}, {"K", k}, {"N", kOverlapN}}, world);
  s.schedule = model::overlap(model::initial_schedule(s.program), "y", "z");
  s.op = op;
  return s;
}

// SGD's allreduce and update, run as one fused op (`fuse(RS-C-AG)`: reduce-
// scatter, update, all-gather piece by piece in one call): against its parts'
// microbenchmarks it shows what a call hands off that a fused op's calls
// after the first do not (nccl.handoff_us).
std::string fused_yaml() {
  return "name: cal_fused\nparams: {N: 1}\ntensors:\n"
         "  g: {dtype: f16, shape: [N], layout: local}\n  w: {dtype: f32, shape: [N], layout: replicated}\n"
         "program:\n  - g1 = allreduce(sum, g)\n  - w1 = update(w, w - 0.001*g1)\noutputs: [w1]\n";
}
// Its sizes: fixed costs first, then bytes (cpu-local's sgd sizes).
constexpr std::int64_t kFusedElems[] = {4096, 65536};

MicroSample fused_sample(std::int64_t n, int world) {
  MicroSample s = make_sample(MicroKind::fused, "fuse(RS-C-AG) sgd", fused_yaml(), {{"N", n}}, world);
  s.schedule = model::find_schedule(s.program, "fuse(RS-C-AG)");
  s.op = "fused";
  return s;
}

// An allreduce on groups of one rank, every rank its own group (a tensor
// of the last group, never read, makes `world` groups): nothing crosses
// ranks, the call is a local copy (sim/collective.h, one rank), and its fixed
// cost and rate are what gpu.copy holds.
std::string one_rank_yaml(int world) {
  return fmt::format("name: cal_one_rank\nparams: {{N: 1}}\ntensors:\n"
                     "  x: {{dtype: f16, shape: [N], layout: local}}\n"
                     "  idle: {{dtype: f16, shape: [1], layout: local, group: {}}}\n"
                     "program:\n  - z = allreduce(sum, x)\noutputs: [z]\n",
                     world - 1);
}

// A reduce-scatter and the all-gather of its result in one step: against the
// two measured alone (a step each), what a step's first collective pays that
// a later one does not (nccl.step_sync_us).
std::string paired_yaml() {
  return "name: cal_rs_ag\nparams: {N: 1}\ntensors:\n  x: {dtype: f16, shape: [N], layout: local}\n"
         "program:\n  - y = reducescatter(sum, x)\n  - z = allgather(y)\noutputs: [z]\n";
}

// Bytes per element of the `add f32` kernel: two f32 operands read, one written.
constexpr double kAddBytesPerElem = 12.0;

bool has(const std::vector<MicroSample>& out, const std::string& label) {
  return std::any_of(out.begin(), out.end(), [&](const MicroSample& s) { return s.label == label; });
}

// The experiment's sizes the sweep lacks: its GEMMs, its collectives (f16
// buffers of the same bytes) and, past the sweep's largest, its largest
// element-wise op (as `add f32` of as many bytes).
void add_extra(std::vector<MicroSample>& out, int world, const ExtraSizes& x) {
  const auto add = [&](MicroKind kind, const std::string& label, const std::string& yaml, model::Bindings sizes) {
    MicroSample s = make_sample(kind, label, yaml, std::move(sizes), world);
    if (!has(out, s.label)) out.push_back(std::move(s));
  };
  const double swept = kLargeElems * kAddBytesPerElem;
  if (x.elementwise_bytes > swept) {
    const auto n = static_cast<std::int64_t>(std::ceil(x.elementwise_bytes / kAddBytesPerElem));
    add(MicroKind::elementwise, "add f32", elementwise_specs().front().yaml, {{"N", n}});
  }
  for (const auto& g : x.gemms) {
    const std::string dtype = model::to_string(g.dtype);
    add(MicroKind::gemm, "gemm " + dtype, gemm_yaml(dtype.c_str()), {{"M", g.m}, {"K", g.k}, {"N", g.n}});
  }
  if (world < 2) return;
  for (const auto& [op, n] : x.collectives) {
    if (op == "send" && world % 2 != 0) continue;
    if (op == "allgather" && n % world != 0) continue;  // the sliced operand needs equal parts
    add(MicroKind::collective, fmt::format("{} f16", op), collective_yaml(op, "f16"), {{"N", n}});
  }
}

}  // namespace

std::vector<MicroSample> microbenchmark_plan(int world, const MicroOptions& o) {
  std::vector<MicroSample> out;
  for (const auto& spec : elementwise_specs())
    for (auto n : sweep(kSmallElems, kLargeElems, kElemFactor, o.quick))
      out.push_back(make_sample(spec.kind, spec.label, spec.yaml, {{"N", n}}, world));
  for (const char* dtype : {"f16", "bf16", "f32"}) {
    for (auto e : sweep(kSmallEdge, kLargeEdge, kEdgeFactor, o.quick))
      out.push_back(make_sample(MicroKind::gemm, fmt::format("gemm {}", dtype), gemm_yaml(dtype),
                                {{"M", e}, {"K", e}, {"N", e}}, world));
    for (auto e : sweep(kSmallWideEdge, kLargeWideEdge, kEdgeFactor, o.quick))
      out.push_back(make_sample(MicroKind::gemm, fmt::format("gemm {}", dtype), gemm_yaml(dtype),
                                {{"M", kWideRows}, {"K", e}, {"N", e}}, world));
  }
  if (world >= 2) {  // one rank: no collective to measure
    const std::vector<std::pair<std::string, const char*>> colls = {
        {"allreduce", "f16"}, {"reducescatter", "f16"}, {"allgather", "f32"}, {"allgather", "f16"}, {"send", "f16"}};
    for (const auto& [op, dtype] : colls) {
      if (op == "send" && world % 2 != 0) continue;
      for (auto n : sweep(kSmallElems, kLargeElems, kElemFactor, o.quick))
        out.push_back(make_sample(MicroKind::collective, fmt::format("{} {}", op, dtype), collective_yaml(op, dtype),
                                  {{"N", n}}, world));
    }
    for (const auto& op : kOverlapOps)
      for (auto rows : kOverlapRows) out.push_back(overlap_sample(op, rows, world));
    for (auto n : kFusedElems) out.push_back(fused_sample(n, world));
    for (auto n : sweep(kSmallElems, kLargeElems, kElemFactor, o.quick))
      out.push_back(make_sample(MicroKind::copy, "allreduce f16 one rank", one_rank_yaml(world), {{"N", n}}, world));
    for (auto n : sweep(kSmallElems, kLargeElems, kElemFactor, o.quick))
      if (n % world == 0)  // the all-gathered slices are equal
        out.push_back(make_sample(MicroKind::paired, "reducescatter+allgather f16", paired_yaml(), {{"N", n}}, world));
  }
  for (const auto& [op, stmt] : costly_specs())
    for (auto n : sweep(kSmallElems, kLargeElems, kElemFactor, o.quick)) {
      const std::string name = model::to_string(op);
      MicroSample s = make_sample(MicroKind::costly, name + " f32",
                                  elementwise_yaml("cal_" + name, costly_operands(op), stmt), {{"N", n}}, world);
      s.op = name;
      out.push_back(std::move(s));
    }
  add_extra(out, world, o.extra);
  return out;
}

// The microbenchmarks' steps are spread over rounds that visit every one in
// turn (as validate's schedules are): a slow spell of the shared machine (a
// memory-bound kernel measured 2x its usual time for a whole calibration when
// each microbenchmark ran its steps back to back) then touches a few steps of
// every microbenchmark instead of all steps of a few, and each median keeps
// clear of it.
constexpr int kMicroRounds = 4;

int microbenchmark_rounds(const MicroOptions& o) { return std::clamp(o.iters, 1, kMicroRounds); }

void run_microbenchmarks(exec::Backend& backend, std::vector<MicroSample>& samples, const MicroOptions& o,
                         Progress& progress) {
  exec::RunOptions ro;
  ro.warmup = o.warmup;
  ro.interpreter_limit = 0;  // the schedule is the program itself: nothing to check it against but the backend
  const int rounds = microbenchmark_rounds(o);
  std::vector<exec::References> refs;
  for (const auto& s : samples) {
    backend.set_groups(s.program.groups());
    refs.push_back(exec::compute_references(backend, s.program, s.sizes, ro));
  }
  std::vector<std::vector<double>> steps(samples.size());
  for (int round = 0; round < rounds; ++round) {
    ro.iters = o.iters / rounds + (round < o.iters % rounds ? 1 : 0);
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const MicroSample& s = samples[i];
      backend.set_groups(s.program.groups());
      const auto row = exec::run_schedule(backend, s.schedule, s.sizes, refs[i], ro);
      if (!row.verified)
        throw RunFailure(fmt::format("calibration run {} gave a wrong result: {}", s.label, row.mismatch));
      steps[i].insert(steps[i].end(), row.step_us.begin(), row.step_us.end());
      progress.step(s.label);
    }
  }
  for (std::size_t i = 0; i < samples.size(); ++i) samples[i].measured_us = median_interval(steps[i]).median;
}

}  // namespace coconet::validation
