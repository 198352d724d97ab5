// Collecting an experiment's sizes. Collectives are kept by (op, bytes) and
// measured as f16 buffers of that many bytes: every reduction in the workloads
// is of f16 data (docs/validation.md), and a collective that does not reduce
// moves bytes whatever their type. Ops no microbenchmark has (broadcast,
// reduce) and f32 GEMMs (not calibrated) are left out.
#include "validation/experiment_sizes.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/experiment.h"
#include "model/points.h"
#include "plan/step_plan.h"

namespace coconet::validation {

namespace {
constexpr int kF16Bytes = 2;
const std::set<std::string> kMeasurable = {"allreduce", "reducescatter", "allgather", "send"};
}  // namespace

ExtraSizes experiment_sizes(const std::string& experiment, int world, const plan::Capabilities& caps,
                            const model::Assignments& sets) {
  const model::Experiment e = model::load_experiment(model::resolve_experiment(experiment));
  std::set<std::pair<std::string, std::int64_t>> colls;
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t, model::DType>> gemms;
  ExtraSizes out;
  for (const auto& pt : model::expand(e, model::PointOptions{sets, world, std::nullopt, ""}))
    for (const auto& s : model::enumerate_schedules(pt.program)) {
      const plan::StepPlan p = plan::lower(s, pt.sizes, pt.ranks_per_group, caps);
      for (const auto& op : p.ops) {
        const plan::Work& w = op.work;
        if (w.gemm && w.gemm->dtype != model::DType::f32) gemms.insert({w.gemm->m, w.gemm->k, w.gemm->n, w.gemm->dtype});
        if (!w.gemm) out.elementwise_bytes = std::max(out.elementwise_bytes, w.hbm_bytes);
        for (const auto& c : w.collectives) {
          const std::string name = model::to_string(c.op);
          const auto bytes = static_cast<std::int64_t>(std::llround(c.bytes));
          if (kMeasurable.contains(name) && bytes > 0 && bytes % kF16Bytes == 0) colls.insert({name, bytes / kF16Bytes});
        }
      }
    }
  out.collectives.assign(colls.begin(), colls.end());
  for (const auto& [m, k, n, t] : gemms) out.gemms.push_back({m, k, n, t});
  return out;
}

}  // namespace coconet::validation
