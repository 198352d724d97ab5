// The two-regime collective model: the fit (validation/fit_regimes.h) on
// synthetic samples, the MPI library's limit (validation/mpi_limits.h), the
// topology's optional `mpi.large_messages` and `mpi.per_op` keys
// (sim/topology.h) with their errors, the per-operation fit
// (validation/fit_per_op.h), and the property that a prediction never falls
// as the size grows.
#include <gtest/gtest.h>

#include <sstream>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "model/catalog.h"
#include "model/error.h"
#include "sim/collective.h"
#include "sim/topology.h"
#include "validation/calibrate.h"
#include "validation/fit_regimes.h"
#include "validation/mpi_limits.h"
#include "tests/paths.h"

namespace coconet::validation {
namespace {

const char* const kOps[] = {"allreduce", "reducescatter", "allgather", "send"};
constexpr int kRanks = 2;

// Every op at sizes 1 KiB .. 1 MiB (x2), timed by `f`, each time x (1 + noise_i).
std::vector<CollectiveSample> samples_of(const CollectiveRegimes& f, double noise = 0.0) {
  std::vector<CollectiveSample> s;
  int i = 0;
  for (const char* op : kOps)
    for (double bytes = 1024; bytes <= 1 << 20; bytes *= 2, ++i) {
      // A fixed pattern of +-noise (no random generator: the test is the same every run).
      const double wobble = noise * ((i * 7) % 5 - 2) / 2.0;
      s.push_back({op, bytes, kRanks, regimes_model_us(f, op, bytes, kRanks) * (1.0 + wobble)});
    }
  return s;
}

// A shared-memory MPI as measured: cheap small messages, an expensive step
// and a slow reduction from 32 KiB on.
CollectiveRegimes truth() {
  CollectiveRegimes t;
  t.small = {14.0, 1.0, 20.0, 2.0};
  t.large = CollectiveFit{150.0, 5.0, 10.0, 0.2};
  t.threshold_bytes = 32768;
  return t;
}

void expect_fit(const CollectiveFit& got, const CollectiveFit& want) {
  EXPECT_NEAR(got.base_us, want.base_us, 1e-6 * want.base_us + 1e-9);
  EXPECT_NEAR(got.hop_us, want.hop_us, 1e-6 * want.hop_us + 1e-9);
  EXPECT_NEAR(got.GBps, want.GBps, 1e-6 * want.GBps);
  EXPECT_NEAR(got.reduce_GBps, want.reduce_GBps, 1e-6 * want.reduce_GBps);
}

TEST(ValidationRegimes, RecoversBothRegimesAndTheThreshold) {
  const std::vector<CollectiveSample> s = samples_of(truth());
  const CollectiveRegimes f = fit_collective_regimes(s);
  ASSERT_TRUE(f.large.has_value());
  EXPECT_DOUBLE_EQ(f.threshold_bytes, 32768);
  EXPECT_EQ(f.threshold_source.rfind("fit", 0), 0u) << f.threshold_source;
  expect_fit(f.small, truth().small);
  expect_fit(*f.large, *truth().large);
  EXPECT_LT(f.residual, 1e-12);
  CollectiveRegimes one;
  one.small = fit_collectives(s);
  EXPECT_GT(regimes_residual(one, s), 1.0);  // one regime cannot follow the step
}

TEST(ValidationRegimes, TakesTheLibrarysThresholdWhenItFits) {
  const CollectiveRegimes f = fit_collective_regimes(samples_of(truth()), 32768.0, "ompi_info: btl_sm_max_send_size");
  ASSERT_TRUE(f.large.has_value());
  EXPECT_EQ(f.threshold_source, "ompi_info: btl_sm_max_send_size");
  EXPECT_DOUBLE_EQ(f.fitted_threshold_bytes, 32768);
  // A library limit far from the step explains the samples worse than the fitted split.
  const CollectiveRegimes off = fit_collective_regimes(samples_of(truth()), 4096.0, "elsewhere");
  EXPECT_GT(off.residual, f.residual);
}

TEST(ValidationRegimes, OneRegimeDataGetsNoThreshold) {
  CollectiveRegimes one;
  one.small = truth().small;
  for (double noise : {0.0, 0.05}) {
    const CollectiveRegimes f = fit_collective_regimes(samples_of(one, noise));
    EXPECT_FALSE(f.large.has_value()) << "noise " << noise << ": split at " << f.threshold_bytes;
    EXPECT_DOUBLE_EQ(f.threshold_bytes, 0.0);
  }
  // Not even a library limit adds a regime the samples do not show.
  EXPECT_FALSE(fit_collective_regimes(samples_of(one, 0.05), 32768.0, "ompi_info").large.has_value());
}

TEST(ValidationRegimes, ModelStepsUpNeverDown) {
  CollectiveRegimes f = truth();
  f.large = CollectiveFit{0.0, 0.0, 1000.0, 1000.0};  // a large regime faster than the small one at its threshold
  const double below = regimes_model_us(f, "allreduce", 32767, kRanks);
  EXPECT_GE(regimes_model_us(f, "allreduce", 32768, kRanks), below);
  EXPECT_DOUBLE_EQ(regimes_model_us(f, "allreduce", 32768, kRanks),
                   collective_model_us(f.small, "allreduce", 32768, kRanks));
}

TEST(ValidationRegimes, ReadsTheSharedMemoryLimitFromOmpiInfo) {
  const auto v4 = parse_ompi_info(
      "mca:btl:vader:param:btl_vader_eager_limit:value:4096\n"
      "mca:btl:vader:param:btl_vader_max_send_size:value:32768\n");
  ASSERT_TRUE(v4.has_value());
  EXPECT_DOUBLE_EQ(v4->bytes, 32769);  // a message of one whole fragment is still sent in one
  EXPECT_NE(v4->source.find("btl_vader_max_send_size"), std::string::npos) << v4->source;
  EXPECT_NE(v4->source.find(kOmpiInfoCommand), std::string::npos) << v4->source;
  const auto v5 = parse_ompi_info("mca:btl:sm:param:btl_sm_max_send_size:value:65536\n");
  ASSERT_TRUE(v5.has_value());
  EXPECT_DOUBLE_EQ(v5->bytes, 65537);
  EXPECT_FALSE(parse_ompi_info("mca:btl:vader:param:btl_vader_eager_limit:value:4096\n").has_value());
  EXPECT_FALSE(parse_ompi_info("mca:btl:vader:param:btl_vader_max_send_size:value:lots\n").has_value());
  EXPECT_FALSE(parse_ompi_info("mca:btl:vader:param:btl_vader_max_send_size:value:0\n").has_value());
  EXPECT_FALSE(parse_ompi_info("").has_value());
}

// --- per-operation constants -------------------------------------------------

// Open MPI as measured on a 2-core machine: past 32 KiB each op its own cost
// (reduce-scatter dearer than allreduce, allgather and send without a step).
CollectiveRegimes per_op_truth() {
  CollectiveRegimes t = truth();
  t.per_op.ranks = kRanks;
  t.per_op.ops["allreduce"] = {OpFit{15.0, 4.0}, OpFit{200.0, 0.5}};
  t.per_op.ops["reducescatter"] = {OpFit{14.0, 3.0}, OpFit{260.0, 0.25}};
  t.per_op.ops["allgather"] = {OpFit{13.0, 8.0}, OpFit{13.5, 9.0}};
  t.per_op.ops["send"] = {OpFit{12.0, 10.0}, OpFit{13.5, 12.0}};
  return t;
}

void expect_op(const std::optional<OpFit>& got, const OpFit& want, const std::string& what) {
  ASSERT_TRUE(got.has_value()) << what;
  EXPECT_NEAR(got->base_us, want.base_us, 1e-6 * want.base_us) << what;
  EXPECT_NEAR(got->GBps, want.GBps, 1e-6 * want.GBps) << what;
}

TEST(ValidationRegimes, RecoversEachOpsOwnConstants) {
  const CollectiveRegimes want = per_op_truth();
  const std::vector<CollectiveSample> s = samples_of(want);
  const CollectiveRegimes f = fit_collective_regimes(s, 32768.0, "ompi_info");
  ASSERT_TRUE(f.large.has_value());
  EXPECT_EQ(f.per_op.ranks, kRanks);
  for (const char* op : kOps) {
    expect_op(f.per_op.ops.at(op).small, *want.per_op.ops.at(op).small, std::string(op) + " small");
    expect_op(f.per_op.ops.at(op).large, *want.per_op.ops.at(op).large, std::string(op) + " large");
  }
  EXPECT_LT(f.residual, 1e-12);
  CollectiveRegimes shared = f;
  shared.per_op = {};
  EXPECT_GT(regimes_residual(shared, s), 1e-3);  // the shared constants cannot follow every op
  // Past the threshold the fitted model prices reduce-scatter above allreduce, as the truth does.
  EXPECT_GT(regimes_model_us(f, "reducescatter", 32768, kRanks), regimes_model_us(f, "allreduce", 32768, kRanks));
}

TEST(ValidationRegimes, AnOpWithTooFewSamplesTakesTheSharedConstants) {
  std::vector<CollectiveSample> s = samples_of(per_op_truth());
  // send: one size below the threshold only, none above.
  std::erase_if(s, [](const CollectiveSample& c) { return c.op == "send" && c.bytes != 1024; });
  const CollectiveRegimes f = fit_collective_regimes(s, 32768.0, "ompi_info");
  ASSERT_TRUE(f.large.has_value());
  EXPECT_FALSE(f.per_op.ops.at("send").small.has_value());
  EXPECT_FALSE(f.per_op.ops.at("send").large.has_value());
  EXPECT_TRUE(f.per_op.ops.at("allreduce").small.has_value());
  EXPECT_DOUBLE_EQ(regimes_model_us(f, "send", 4096, kRanks), collective_model_us(f.small, "send", 4096, kRanks));
  // Another rank count than the fitted one: shared constants for every op.
  EXPECT_DOUBLE_EQ(regimes_model_us(f, "allreduce", 4096, 4), collective_model_us(f.small, "allreduce", 4096, 4));
  EXPECT_EQ(fit_op({{"send", 1024, kRanks, 10.0}, {"send", 1024, kRanks, 11.0}}), std::nullopt);
}

// --- the topology's keys ---------------------------------------------------

// `text` without the block of `  KEY:` (its line and the lines indented under it).
std::string without_block(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string out;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("  " + key + ":", 0) == 0) {
      inside = true;
      continue;
    }
    if (inside && line.rfind("    ", 0) == 0) continue;
    inside = false;
    out += line + "\n";
  }
  return out;
}

// The shipped cpu-local.yaml with one regime shared by every op (its
// large_messages and per_op blocks, which calibrate writes when they fit
// better, taken out), so that each test adds the keys it is about.
std::string cpu_local_text() {
  const std::string shipped = model::read_file(coconet::test::source_root() + "/configs/topologies/cpu-local.yaml");
  return without_block(without_block(shipped, "large_messages"), "per_op");
}

// cpu-local.yaml with a large-message block (its `mpi:` section is the file's last).
std::string with_large(const std::string& block) {
  std::string text = cpu_local_text();
  const auto comments = text.find("\n# Residuals");
  return text.substr(0, comments + 1) + block + text.substr(comments + 1);
}

const char* const kLarge =
    "  large_messages:\n    from_bytes: 32768\n    base_latency_us: 150\n    hop_latency_us: 5\n"
    "    link_GBps: 10\n    reduce_GBps: 0.2\n";

// Each op's own constants: allreduce and reduce-scatter in both regimes, allgather
// only past the threshold (and faster there than its shared small regime), send none.
const char* const kPerOp =
    "  per_op:\n    ranks: 2\n"
    "    allreduce:\n      small: {base_latency_us: 15, link_GBps: 4}\n      large: {base_latency_us: 200, link_GBps: 0.5}\n"
    "    reducescatter:\n      small: {base_latency_us: 14, link_GBps: 3}\n      large: {base_latency_us: 260, link_GBps: 0.25}\n"
    "    allgather:\n      large: {base_latency_us: 1, link_GBps: 1000}\n";

// The message of the UserError parsing `text` throws ("" when none).
std::string error_of(const std::string& text) {
  try {
    (void)sim::parse_topology(text, "calibrated.yaml");
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

int line_of(const std::string& text, const std::string& needle) {
  const auto at = text.find(needle);
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
}

TEST(ValidationRegimes, TopologyKeysAreOptional) {
  EXPECT_FALSE(sim::parse_topology(cpu_local_text(), "cpu-local").nccl.large_messages.has_value());
  for (const char* gpu : {"dgx-a100", "dgx-h100", "dgx-h200", "dgx2-v100"})
    EXPECT_FALSE(sim::load_topology(coconet::test::source_root() + "/configs/topologies/" + gpu + ".yaml")
                     .nccl.large_messages.has_value());
  const sim::Topology t = sim::parse_topology(with_large(kLarge), "calibrated.yaml");
  ASSERT_TRUE(t.nccl.large_messages.has_value());
  EXPECT_DOUBLE_EQ(t.nccl.large_messages->from_bytes, 32768);
  EXPECT_DOUBLE_EQ(t.nccl.large_messages->reduce_GBps, 0.2);
}

TEST(ValidationRegimes, TopologyKeyErrorsNameFileAndLine) {
  std::string text = with_large(
      "  large_messages:\n    from_bytes: 0\n    base_latency_us: 150\n    hop_latency_us: 5\n"
      "    link_GBps: 10\n    reduce_GBps: 0.2\n");
  std::string e = error_of(text);
  EXPECT_NE(e.find(fmt::format("calibrated.yaml:{}", line_of(text, "from_bytes: 0"))), std::string::npos) << e;
  EXPECT_NE(e.find("mpi.large_messages.from_bytes"), std::string::npos) << e;
  EXPECT_NE(e.find("positive"), std::string::npos) << e;

  text = with_large(
      "  large_messages:\n    from_bytes: 32768\n    base_latency_us: 150\n    hop_latency_us: 5\n"
      "    link_GBps: 10\n");
  e = error_of(text);
  EXPECT_NE(e.find("needs the key 'reduce_GBps'"), std::string::npos) << e;
  EXPECT_NE(e.find(fmt::format("calibrated.yaml:{}", line_of(text, "large_messages:") + 1)), std::string::npos) << e;

  text = with_large(std::string(kLarge) + "    eager: 1\n");
  EXPECT_NE(error_of(text).find("eager"), std::string::npos) << error_of(text);

  const std::string gpu = with_large(kLarge);
  const auto at = gpu.find("device: cpu");
  text = gpu.substr(0, at) + "device: gpu" + gpu.substr(at + std::string("device: cpu").size());
  EXPECT_NE(error_of(text).find("needs `device: cpu`"), std::string::npos) << error_of(text);
}

// --- the property ----------------------------------------------------------

double predicted_us(const sim::Topology& t, model::OpKind op, double bytes) {
  sim::CollectiveRequest r;
  r.op = op;
  r.bytes = bytes;
  r.where = sim::place(t, kRanks);
  return sim::predict_collective(t, r).time_us();
}

TEST(ValidationRegimes, PredictionNeverFallsAsTheSizeGrows) {
  // As calibrated (a step up), and with a large regime faster than the small one at the threshold.
  // And with each op's own constants (mpi.per_op), one of them faster past the threshold.
  const std::string with_own = std::string(kLarge) + kPerOp;
  for (const std::string& block : {std::string(kLarge), with_own,
                                  std::string("  large_messages:\n    from_bytes: 32768\n    base_latency_us: 0\n"
                                              "    hop_latency_us: 0\n    link_GBps: 1000\n    reduce_GBps: 1000\n")}) {
    const sim::Topology t = sim::parse_topology(with_large(block), "calibrated.yaml");
    for (model::OpKind op : {model::OpKind::allreduce, model::OpKind::reducescatter, model::OpKind::allgather,
                             model::OpKind::send}) {
      double last = 0;
      for (double bytes = 64; bytes <= (1 << 22); bytes = std::ceil(bytes * 1.07)) {
        const double now = predicted_us(t, op, bytes);
        EXPECT_GE(now, last) << model::to_string(op) << " at " << bytes << " bytes";
        last = now;
      }
    }
  }
}

TEST(ValidationRegimes, PerOpKeysPriceEachOp) {
  const sim::Topology shared = sim::parse_topology(with_large(kLarge), "calibrated.yaml");
  const sim::Topology own = sim::parse_topology(with_large(std::string(kLarge) + kPerOp), "calibrated.yaml");
  ASSERT_TRUE(own.nccl.per_op.has_value());
  EXPECT_EQ(own.nccl.per_op->ranks, 2);
  EXPECT_FALSE(shared.nccl.per_op.has_value());
  // allreduce below: 15 us + 8 KiB x 1 (bus factor at 2 ranks) / 4 GB/s; from the threshold: 200 + 32 KiB / 0.5 GB/s.
  EXPECT_NEAR(predicted_us(own, model::OpKind::allreduce, 8192), 15.0 + 8192 / 4e3, 1e-9);
  EXPECT_NEAR(predicted_us(own, model::OpKind::allreduce, 32768), 200.0 + 32768 / 0.5e3, 1e-9);
  EXPECT_NEAR(predicted_us(own, model::OpKind::reducescatter, 32768), 260.0 + 32768 * 0.5 / 0.25e3, 1e-9);
  // allgather has no small constants, send none at all: the shared ones.
  for (double bytes : {1024.0, 8192.0})
    EXPECT_DOUBLE_EQ(predicted_us(own, model::OpKind::allgather, bytes), predicted_us(shared, model::OpKind::allgather, bytes));
  for (double bytes : {1024.0, 65536.0})
    EXPECT_DOUBLE_EQ(predicted_us(own, model::OpKind::send, bytes), predicted_us(shared, model::OpKind::send, bytes));
  // Its large regime, cheaper than its shared small regime at the threshold: the step floor holds.
  const sim::Topology one = sim::parse_topology(cpu_local_text(), "cpu-local");
  EXPECT_DOUBLE_EQ(predicted_us(own, model::OpKind::allgather, 65536), predicted_us(one, model::OpKind::allgather, 32768));
  // Another rank count: the shared constants.
  sim::CollectiveRequest r;
  r.op = model::OpKind::allreduce;
  r.bytes = 8192;
  r.where = sim::place(own, 3);
  EXPECT_DOUBLE_EQ(sim::predict_collective(own, r).time_us(), sim::predict_collective(shared, r).time_us());
}

TEST(ValidationRegimes, PerOpKeyErrorsNameFileAndLine) {
  std::string text = with_large(std::string(kLarge) + "  per_op:\n    ranks: 2\n    allreduce:\n      small: {base_latency_us: 15, link_GBps: 0}\n");
  std::string e = error_of(text);
  EXPECT_NE(e.find(fmt::format("calibrated.yaml:{}", line_of(text, "link_GBps: 0"))), std::string::npos) << e;
  EXPECT_NE(e.find("mpi.per_op.allreduce.small.link_GBps"), std::string::npos) << e;
  EXPECT_NE(e.find("positive"), std::string::npos) << e;

  text = with_large(std::string(kLarge) + "  per_op:\n    ranks: 2\n    allreduce:\n      small: {base_latency_us: -1, link_GBps: 3}\n");
  EXPECT_NE(error_of(text).find("base_latency_us: must be zero or more"), std::string::npos) << error_of(text);

  text = with_large(std::string(kLarge) + "  per_op:\n    ranks: 2\n    broadcast:\n      small: {base_latency_us: 1, link_GBps: 3}\n");
  EXPECT_NE(error_of(text).find("broadcast"), std::string::npos) << error_of(text);

  text = with_large(std::string(kLarge) + "  per_op:\n    allreduce:\n      small: {base_latency_us: 1, link_GBps: 3}\n");
  EXPECT_NE(error_of(text).find("needs the key 'ranks'"), std::string::npos) << error_of(text);

  text = with_large(std::string(kLarge) + "  per_op:\n    ranks: 2\n    allreduce:\n      medium: {base_latency_us: 1, link_GBps: 3}\n");
  EXPECT_NE(error_of(text).find("medium"), std::string::npos) << error_of(text);

  text = with_large(std::string(kLarge) + "  per_op:\n    ranks: 2\n    reducescatter:\n      progress_share: 0\n");
  e = error_of(text);
  EXPECT_NE(e.find("mpi.per_op.reducescatter.progress_share"), std::string::npos) << e;
  EXPECT_NE(e.find(fmt::format("calibrated.yaml:{}", line_of(text, "      progress_share: 0\n"))), std::string::npos) << e;
  EXPECT_EQ(error_of(with_large(std::string(kLarge) + "  per_op:\n    ranks: 2\n    reducescatter:\n      progress_share: 0.8\n")), "");

  // A large regime without mpi.large_messages.
  text = with_large("  per_op:\n    ranks: 2\n    allreduce:\n      large: {base_latency_us: 1, link_GBps: 3}\n");
  e = error_of(text);
  EXPECT_NE(e.find("needs mpi.large_messages"), std::string::npos) << e;
  EXPECT_NE(e.find(fmt::format("calibrated.yaml:{}", line_of(text, "large: {"))), std::string::npos) << e;

  const std::string gpu = with_large(kPerOp);
  const auto at = gpu.find("device: cpu");
  text = gpu.substr(0, at) + "device: gpu" + gpu.substr(at + std::string("device: cpu").size());
  EXPECT_NE(error_of(text).find("needs `device: cpu`"), std::string::npos) << error_of(text);
}

// calibrate's YAML prices each op as the fit does: the per-op constants written,
// read back and simulated give the fit's own times (to the 4 digits written).
TEST(ValidationRegimes, CalibratedPerOpKeysPriceAsTheFit) {
  Fitted f;
  f.elementwise = {5.0, 8.0, 4.0, 1};
  f.gemm_f16.GFLOPs = f.gemm_bf16.GFLOPs = 20;
  std::vector<CollectiveSample> s = samples_of(per_op_truth());
  std::erase_if(s, [](const CollectiveSample& c) { return c.op == "send" && c.bytes >= 32768; });  // send: shared, large
  f.collectives = fit_collective_regimes(s, 32768.0, "ompi_info");
  const std::string yaml = topology_yaml(f, CalibrateOptions{}, "cpu", kRanks);
  EXPECT_NE(yaml.find("  per_op:"), std::string::npos) << yaml;
  const sim::Topology t = sim::parse_topology(yaml, "<calibrated>");
  ASSERT_TRUE(t.nccl.per_op.has_value());
  const sim::OpRegimes* send = t.nccl.per_op->find(model::OpKind::send);
  ASSERT_NE(send, nullptr);
  EXPECT_TRUE(send->small.has_value());
  EXPECT_FALSE(send->large.has_value());
  for (model::OpKind op : {model::OpKind::allreduce, model::OpKind::reducescatter, model::OpKind::allgather,
                           model::OpKind::send})
    for (double bytes = 1024; bytes <= 1 << 20; bytes *= 2) {
      const double want = regimes_model_us(f.collectives, model::to_string(op), bytes, kRanks);
      EXPECT_NEAR(predicted_us(t, op, bytes), want, 1e-3 * want) << model::to_string(op) << " " << bytes;
    }
}

TEST(ValidationRegimes, SmallMessagesPricedAsWithoutTheKeys) {
  const sim::Topology one = sim::parse_topology(cpu_local_text(), "cpu-local");
  const sim::Topology two = sim::parse_topology(with_large(kLarge), "calibrated.yaml");
  for (double bytes : {1024.0, 8192.0, 32767.0})
    EXPECT_DOUBLE_EQ(predicted_us(one, model::OpKind::allreduce, bytes), predicted_us(two, model::OpKind::allreduce, bytes));
  // From the threshold on, the second regime: 150 us of base alone.
  EXPECT_GT(predicted_us(two, model::OpKind::allreduce, 32768), 150.0);
  EXPECT_LT(predicted_us(one, model::OpKind::allreduce, 32768), 150.0);
}

}  // namespace
}  // namespace coconet::validation
