#include "exec/runtime.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <set>

#include <fmt/core.h>

#include "exec/executor.h"
#include "exec/step_shares.h"
#include "model/error.h"
#include "model/interpreter.h"
#include "model/points.h"

namespace coconet::exec {
namespace {

constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;
// Host bytes per output element the runtime keeps: the reference's values
// as f32 (Backend::read_f32), once per node where its ranks hold the same
// part (Backend::share_on_node); a schedule's are read a block at a time.
constexpr std::int64_t kHostBytesPerOutputElement = sizeof(float);
// Elements of an output read from the backend at a time while the
// reference is taken: 4 MiB of f32, as verify reads a schedule's.
constexpr std::int64_t kReadBlock = std::int64_t{1} << 20;

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The outputs this rank holds, to be read from the backend in blocks.
OutputSources output_sources(Executor& ex) {
  OutputSources out;
  for (const auto& name : ex.plan().program->outputs) {
    const auto& info = ex.values().at(name);
    if (!info.here) continue;
    out.emplace(name, OutputSource{info, ex.part_count(name),
                                   [&ex, name](std::int64_t first, std::span<float> values) {
                                     ex.read_f32(name, first, values);
                                   },
                                   [&ex, name](std::int64_t first, std::int64_t count) {
                                     return ex.host_f32(name, first, count);
                                   }});
  }
  return out;
}

// What read_part found: whether the part holds exactly the values it was
// compared with, and whether they are all finite.
struct PartRead {
  bool same = true;
  bool finite = true;
};

// Output `name`'s part on this rank read into `values` (count elements), a
// block at a time; or, with `compare`, checked to hold exactly those values.
PartRead read_part(Executor& ex, const std::string& name, std::int64_t count, float* values, bool compare) {
  PartRead r;
  std::vector<float> block;
  for (std::int64_t first = 0; first < count && r.same; first += kReadBlock) {
    const std::int64_t n = std::min(kReadBlock, count - first);
    float* at = values + first;
    if (compare) {
      block.resize(static_cast<std::size_t>(n));
      ex.read_f32(name, first, std::span<float>(block));
      r.same = std::memcmp(block.data(), at, block.size() * sizeof(float)) == 0;
    } else {
      ex.read_f32(name, first, std::span<float>(at, static_cast<std::size_t>(n)));
    }
    r.finite = r.finite && all_finite(at, n);
  }
  return r;
}

// Which values of output k world rank `rank` holds, as a key: ranks of a
// node with equal keys hold the same reference values and share one copy
// (read_outputs), and the memory check counts that copy once
// (reference_bytes_per_rank). A local output's parts are each rank's own.
using PartKey = std::array<std::int64_t, 6>;
PartKey part_key(std::size_t k, const plan::ValueView& v, int rank) {
  return {static_cast<std::int64_t>(k), v.row_begin, v.local_rows, v.col_begin, v.local_cols,
          v.type.layout.is_local() ? rank : -1};
}

// The outputs this rank holds, as f32 on the host (collective). Where ranks
// of a node hold the same part of an output, one of them writes it into a
// region they share (Backend::share_on_node) and each of the others checks
// that its own values are those, bit for bit, before it drops them; a rank
// whose values differ keeps a copy of its own. So every rank verifies
// against its own reference, held once per host.
Outputs read_outputs(Backend& backend, Executor& ex) {
  Outputs out;
  const auto& names = ex.plan().program->outputs;
  for (std::size_t k = 0; k < names.size(); ++k) {
    const auto& info = ex.values().at(names[k]);
    const std::int64_t count = ex.part_count(names[k]);
    const PartKey key = part_key(k, info, backend.world_rank());
    NodeShared region = backend.share_on_node(key, count * kHostBytesPerOutputElement);
    auto* values = reinterpret_cast<float*>(region.data.get());
    PartRead read;
    if (region.writer) read = read_part(ex, names[k], count, values, false);
    backend.barrier();  // the writers' values are in place
    if (!region.writer) read = read_part(ex, names[k], count, values, true);
    if (!read.same) {
      region.data = std::shared_ptr<std::byte>(new std::byte[static_cast<std::size_t>(count) * sizeof(float)],
                                               std::default_delete<std::byte[]>());
      values = reinterpret_cast<float*>(region.data.get());
      read = read_part(ex, names[k], count, values, false);
    }
    if (info.here)
      out.emplace(names[k], OutputPart{info, SharedF32{region.data, values, static_cast<std::size_t>(count)},
                                       read.finite});
  }
  return out;
}

std::int64_t interpreter_elements(const model::Program& p, const model::Bindings& sizes, int world) {
  std::int64_t total = 0;
  auto add = [&](const model::TensorType& t) { total += model::numel(model::eval_shape(t.shape, sizes)); };
  for (const auto& in : p.inputs) add(in.type);
  for (const auto& s : p.stmts) add(s.type);
  return total * world;
}

std::optional<Outputs> interpreter_outputs(Backend& backend, const model::Program& p, const model::Bindings& sizes,
                                           const RunOptions& options, const std::vector<model::InputRange>& ranges) {
  if (interpreter_elements(p, sizes, backend.world_size()) > options.interpreter_limit) return std::nullopt;
  const int ranks = backend.ranks_per_group();
  const auto state = model::interpret(p, ranks, sizes, model::make_inputs(p, ranks, sizes, options.seed, ranges));
  const RankValues values(p, sizes, ranks, backend.group(), backend.position());
  Outputs out;
  for (const auto& name : p.outputs) {
    const auto& info = values.at(name);
    if (!info.here) continue;
    out.emplace(name, OutputPart{info, state.at(name).ranks.at(static_cast<std::size_t>(backend.world_rank()))});
  }
  return out;
}

// A step's time and each unit's share of it (step_shares.h), from this
// rank's unit times and its step start on the backend's clock (collective).
StepShares shares_of_step(Backend& backend, std::vector<double> unit_us, double start_us) {
  const std::size_t n = unit_us.size();
  const bool common = backend.clock_shared();
  std::vector<double> terms = step_share_terms(std::move(unit_us), start_us, common);
  backend.host_allreduce(terms, model::ReduceOp::max);
  return step_shares(terms, n, common);
}

// The plan `schedule` runs as: lowered for the backend, then resolved where
// the options say how.
plan::StepPlan plan_for(const Backend& backend, const model::Schedule& schedule, const model::Bindings& sizes,
                        const RunOptions& options) {
  plan::StepPlan p = lower_for(backend, schedule, sizes);
  if (options.resolve) options.resolve(p);
  return p;
}

}  // namespace

plan::StepPlan lower_for(const Backend& backend, const model::Schedule& schedule, const model::Bindings& sizes) {
  return plan::lower(schedule, sizes, backend.ranks_per_group(), backend.capabilities());
}

References compute_references(Backend& backend, const model::Program& program, const model::Bindings& sizes,
                              const RunOptions& options) {
  References refs;
  refs.inputs = model::choose_inputs(program, sizes, backend.ranks_per_group());
  {
    Executor ex(backend, plan_for(backend, model::initial_schedule(program), sizes, options), options.seed,
                refs.inputs.ranges);
    (void)ex.run_step();
    refs.program = read_outputs(backend, ex);
  }
  refs.interpreter = interpreter_outputs(backend, program, sizes, options, refs.inputs.ranges);
  return refs;
}

RunRow run_schedule(Backend& backend, const model::Schedule& schedule, const model::Bindings& sizes,
                    const References& refs, const RunOptions& options) {
  RunRow row;
  row.workload = schedule.program.name;
  row.sizes = sizes;
  row.schedule = schedule.name();
  row.ranks = backend.world_size();
  Executor ex(backend, plan_for(backend, schedule, sizes, options), options.seed, refs.inputs.ranges);
  const auto names = ex.unit_names();
  std::vector<double> steps;
  std::vector<std::vector<double>> units(names.size());
  for (int it = 0; it < options.warmup + options.iters; ++it) {
    ex.prepare_step();  // the inputs the last step updated in place, refilled untimed
    backend.barrier();
    auto unit_us = ex.run_step();
    const StepShares shares = shares_of_step(backend, std::move(unit_us), ex.step_start_us());
    if (it < options.warmup) continue;
    steps.push_back(shares.step);
    for (std::size_t u = 0; u < names.size(); ++u) units[u].push_back(shares.units.at(u));
  }
  std::array<double, 1> touched{double(ex.bytes_touched())};
  backend.host_allreduce(touched, model::ReduceOp::max);
  row.bytes_touched = static_cast<std::int64_t>(touched[0]);
  row.median_us = median(steps);
  row.step_us = steps;
  row.min_us = steps.empty() ? 0.0 : *std::min_element(steps.begin(), steps.end());
  row.max_us = steps.empty() ? 0.0 : *std::max_element(steps.begin(), steps.end());
  for (std::size_t u = 0; u < names.size(); ++u) row.stages.push_back({names[u], median(units[u])});

  const auto actual = output_sources(ex);
  const auto& outputs = schedule.program.outputs;
  const double tolerance = schedule_tolerance(schedule.program, sizes);
  const Verdict vs_program = verify(backend, outputs, actual, refs.program, tolerance, "unscheduled program");
  Verdict verdict = vs_program;
  row.checked_against = "program";
  if (refs.interpreter) {
    const Verdict vs_interp = verify(backend, outputs, actual, *refs.interpreter, -1.0, "reference interpreter");
    row.checked_against = "program+interpreter";
    verdict.max_abs_error = std::max(verdict.max_abs_error, vs_interp.max_abs_error);
    if (verdict.ok && !vs_interp.ok) {
      verdict.ok = false;
      verdict.first_mismatch = vs_interp.first_mismatch;
    }
  }
  row.verified = verdict.ok;
  row.max_abs_error = verdict.max_abs_error;
  row.mismatch = verdict.first_mismatch;
  return row;
}

namespace {

// Host bytes of the reference outputs (read_outputs) per rank of this node:
// each distinct part that the node's ranks hold, once, shared among them.
std::int64_t reference_bytes_per_rank(const Backend& backend, const model::Program& program,
                                      const model::Bindings& sizes) {
  const std::vector<int> node = backend.node_ranks();
  const int p = backend.ranks_per_group();
  std::set<PartKey> parts;
  std::int64_t bytes = 0;
  for (int r : node) {
    const auto views = plan::rank_views(program, sizes, p, plan::RankId{r / p, r % p});
    for (std::size_t k = 0; k < program.outputs.size(); ++k) {
      const plan::ValueView& v = views.at(program.outputs[k]);
      if (!v.here) continue;
      if (parts.insert(part_key(k, v, r)).second)
        bytes += v.local_numel() * kHostBytesPerOutputElement;
    }
  }
  const auto ranks = static_cast<std::int64_t>(std::max<std::size_t>(node.size(), 1));
  return (bytes + ranks - 1) / ranks;
}

// Bytes a rank needs to run `program` and `schedules` at `sizes`: the largest
// plan's buffers (updates written in place where the backend does,
// exec/update_in_place.h), plus its share of the host's copies of the
// outputs (and the reference interpreter's values where it runs at this size).
double bytes_per_rank(const Backend& backend, const model::Program& program,
                      const std::vector<model::Schedule>& schedules, const model::Bindings& sizes,
                      const RunOptions& options) {
  const int ranks = backend.ranks_per_group();
  const bool in_place = backend.updates_in_place();
  std::int64_t device = Executor::bytes_needed(program, sizes, ranks, in_place);
  for (const auto& s : schedules)
    device = std::max(device, Executor::bytes_needed(s.program, sizes, ranks, in_place));
  std::int64_t host = reference_bytes_per_rank(backend, program, sizes);
  const std::int64_t interp = interpreter_elements(program, sizes, backend.world_size());
  if (interp <= options.interpreter_limit) host += interp * static_cast<std::int64_t>(sizeof(double));
  return static_cast<double>(device) + static_cast<double>(host);
}

// Sizes that fit in `available`: the largest size whose halving saves bytes,
// halved, until the run fits (at most 64 halvings of each size), so that the
// sizes shrink together rather than one to nothing.
// Empty when even sizes of 1 do not fit.
std::optional<model::Bindings> sizes_that_fit(const Backend& backend, const model::Program& program,
                                              const std::vector<model::Schedule>& schedules,
                                              model::Bindings sizes, const RunOptions& options,
                                              double available) {
  for (std::size_t step = 0; step < 64 * sizes.size(); ++step) {
    const double now = bytes_per_rank(backend, program, schedules, sizes, options);
    if (now <= available) return sizes;
    std::optional<std::string> best;  // the size to halve
    for (const auto& [name, value] : sizes) {
      if (value < 2) continue;
      model::Bindings half = sizes;
      half[name] = value / 2;
      double need = 0;
      try {
        need = bytes_per_rank(backend, program, schedules, half, options);
      } catch (const UserError&) {
        continue;  // a size the program does not accept (one that must divide among the ranks)
      }
      if (need < now && (!best || value > sizes.at(*best))) best = name;
    }
    if (!best) return std::nullopt;
    sizes[*best] /= 2;
  }
  return std::nullopt;
}

}  // namespace

void check_memory(Backend& backend, const model::Program& program, const std::vector<model::Schedule>& schedules,
                  const model::Bindings& sizes, const RunOptions& options) {
  std::vector<double> available{static_cast<double>(backend.available_bytes())};
  backend.host_allreduce(available, model::ReduceOp::min);
  const double need = bytes_per_rank(backend, program, schedules, sizes, options);
  if (need <= available[0]) return;
  std::string hint = "pass smaller sizes";
  if (const auto fit = sizes_that_fit(backend, program, schedules, sizes, options, available[0])) {
    std::string changed;
    for (const auto& [name, value] : *fit)
      if (value != sizes.at(name)) changed += fmt::format(" --set {}={}", name, value);
    hint += ", e.g." + changed;
  }
  throw UserError(fmt::format("{} at {} needs {:.1f} GiB per rank on the {} backend but only {:.1f} GiB are "
                              "available; {}",
                              program.name, model::sizes_label(sizes), need / kBytesPerGiB, backend.name(),
                              available[0] / kBytesPerGiB, hint));
}

Spread loaded_spread(const std::vector<RunRow>& rows) {
  Spread s;
  for (const auto& r : rows) {
    if (!(r.min_us > 0) || r.max_us < kLoadedSpread * r.min_us) continue;
    ++s.rows;
    if (s.worst == nullptr || r.max_us / r.min_us > s.worst->max_us / s.worst->min_us) s.worst = &r;
  }
  return s;
}

}  // namespace coconet::exec
