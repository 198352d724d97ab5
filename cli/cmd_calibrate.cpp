// coconet calibrate: microbenchmarks on the machine at hand, a least-squares fit
// of the cost model's constants, and a topology YAML that predict and validate
// accept (validation/calibrate.h). Outside mpirun, --ranks N starts N ranks.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>

#include <fmt/core.h>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_out.h"
#include "cli/messages.h"
#include "model/error.h"

#ifdef COCONET_VALIDATION_HAVE_RUN
#include "exec/backend.h"
#include "exec/mpi_session.h"
#include "model/catalog.h"
#include "model/safe_write.h"
#include "validation/calibrate.h"
#include "validation/experiment_sizes.h"
#include "plan/capabilities.h"
#include "exec/mpirun.h"
#include "validation/mpirun.h"
#endif

namespace coconet::cli {

namespace {

struct CalibrateArgs {
  std::string experiment = "cpu-local";
  bool experiment_given = false;  // named on the command line (else the default)
  std::string backend = "cpu";
  int ranks = 0;
  bool oversubscribe = false;
  std::string out;
  std::string name;
  bool quick = false;
  int iters = validation::MicroOptions{}.iters;
  int wait_s = static_cast<int>(validation::kCalibrateWaitS);
  Format format = Format::table;
};

#ifdef COCONET_VALIDATION_HAVE_RUN
std::string command_line(const CalibrateArgs& a) {
  return fmt::format("coconet calibrate {} --backend {}{} --out {}{}{}", a.experiment, a.backend,
                     a.ranks > 0 ? fmt::format(" --ranks {}", a.ranks) : "", a.out, a.quick ? " --quick" : "",
                     a.wait_s != static_cast<int>(validation::kCalibrateWaitS) ? fmt::format(" --wait-s {}", a.wait_s)
                                                                               : "");
}

Table constants_table(const validation::Calibration& c) {
  Table t;
  t.precision = 3;
  t.columns = {"constant", "value", "unit", "from"};
  const auto& f = c.fit;
  // A rate as the file holds it: one the samples did not bound is the file's cap, and says so.
  const auto rate = [&](const std::string& name, double value, const std::string& unit, const std::string& from) {
    const double written = validation::bounded(value);
    t.add({name, written, unit, written == value ? from : from + " (no cost seen: the file's cap, no limit)"});
  };
  t.add({std::string("launch_us"), f.elementwise.launch_us, std::string("us"), std::string("element-wise fit, intercept")});
  rate("memory bandwidth", f.elementwise.GBps, "GB/s", "element-wise fit");
  rate("element-wise rate", f.elementwise.GFLOPs, "GFLOP/s", "element-wise fit");
  for (const auto& [name, g] : {std::pair{"f16", f.gemm_f16}, std::pair{"bf16", f.gemm_bf16}}) {
    t.add({fmt::format("GEMM {}", name), g.GFLOPs, std::string("GFLOP/s"), std::string("GEMM fit")});
    if (std::isfinite(g.operand_GBps))  // else the samples show no cost of the operands, and the file has no key
      t.add({fmt::format("GEMM {} operands", name), g.operand_GBps, std::string("GB/s"),
             std::string("GEMM fit, besides the FLOPs")});
  }
  const auto regime = [&](const validation::CollectiveFit& r, const std::string& from) {
    t.add({std::string("collective base"), r.base_us, std::string("us"), from});
    t.add({std::string("ring step"), r.hop_us, std::string("us"), from});
    rate("link bus bandwidth", r.GBps, "GB/s", from);
    rate("reduction rate", r.reduce_GBps, "GB/s", from + " (reducing collectives)");
  };
  const auto& cr = f.collectives;
  if (cr.large) {
    const std::string below = fmt::format("collective fit, below {:.0f} bytes", cr.threshold_bytes);
    regime(cr.small, below);
    t.add({std::string("large-message threshold"), cr.threshold_bytes, std::string("bytes"), cr.threshold_source});
    regime(*cr.large, fmt::format("collective fit, from {:.0f} bytes", cr.threshold_bytes));
  } else {
    regime(cr.small, "collective fit");
  }
  t.add({std::string("compute held by a collective"), f.sms_per_channel, std::string("units"),
         std::string("overlap fit, through the simulator")});
  return t;
}

// The sizes of the experiment that joins the sweep, as the backend lowers it:
// one named must fit the ranks (a UserError says why not); the default is left
// out where it cannot run (one rank: its pipeline needs two), with a note when
// `say`. No experiment: none.
validation::ExtraSizes sweep_sizes(const CalibrateArgs& a, int world, bool say) {
  if (a.experiment.empty()) return {};
  try {
    return validation::experiment_sizes(a.experiment, world, plan::capabilities_of(plan::parse_backend(a.backend)));
  } catch (const UserError& e) {
    if (a.experiment_given) throw;
    if (say)
      fmt::print(stderr, "note: the default experiment {} does not run on {} rank(s) ({}); calibrating the sweep alone\n",
                 a.experiment, world, e.what());
    return {};
  }
}

// The reference times of the calibration at `out`, if it is one: what the
// machine ran when last calibrated (spell_guard.h). An unreadable or
// hand-written file has none.
std::optional<validation::CalibratedSpeed> previous_speed(const std::string& out) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(out, ec)) return std::nullopt;
  try {
    return validation::parse_speed(model::read_file(out));
  } catch (const UserError&) {
    return std::nullopt;
  }
}

void calibrate_command(const CalibrateArgs& a) {
  model::check_output_file(a.out, "--out");  // before any rank starts
  // Outside mpirun the sizes are computed here, once: a bad experiment is said
  // before any rank starts, and one rank (this process) uses them as they are.
  std::optional<validation::ExtraSizes> sizes;
  if (!exec::launched_by_mpirun()) {
    sizes = sweep_sizes(a, std::max(a.ranks, 1), a.ranks <= 1);
    if (a.ranks > 1) {
      exec::check_cores(a.ranks, a.oversubscribe, true);
      validation::run_under_mpirun(a.ranks, plan::parse_backend(a.backend));
    }
  }
  auto backend = exec::make_backend(a.backend);
  validation::run_guarded(*backend, [&] {
    if (a.ranks > 0 && a.ranks != backend->world_size())
      throw UserError(fmt::format("--ranks {} but the job has {} ranks; drop --ranks inside mpirun", a.ranks,
                                  backend->world_size()));
    validation::CalibrateOptions o;
    o.name = a.name.empty() ? std::filesystem::path(a.out).stem().string() : a.name;
    o.command = command_line(a);
    // The sizes go in as they are (o.experiment stays empty: calibrate would lower the experiment again).
    o.micro.extra = sizes ? *sizes : sweep_sizes(a, backend->world_size(), backend->world_rank() == 0);
    o.micro.iters = a.iters;
    o.micro.quick = a.quick;
    o.previous = previous_speed(a.out);
    o.wait_s = a.wait_s;
    const bool lead = backend->world_rank() == 0;
    validation::Progress progress(lead ? validation::progress_style() : validation::ProgressStyle::off, 0);
    const auto c = validation::calibrate(*backend, o, progress);
    progress.finish();
    if (!lead) return;
    model::write_file_atomic(a.out, c.yaml);
    if (!c.note.empty()) fmt::print(stderr, "note: {}\n", c.note);
    if (!c.warning.empty()) fmt::print(stderr, "warning: {}\n", c.warning);  // the file has it too
    if (a.format == Format::table)
      fmt::print("calibrated {} on {} ranks ({} microbenchmarks); wrote {}\n", a.backend, backend->world_size(),
                 c.samples.size(), a.out);
    print(constants_table(c), a.format, tagged("calibrate", {{"topology", a.out}}));
  });
  backend.reset();
}
#endif

}  // namespace

void register_calibrate(CLI::App& app) {
  auto args = std::make_shared<CalibrateArgs>();
  auto* cmd = app.add_subcommand(
      "calibrate", "Fit the cost model's constants to microbenchmarks on this machine; write a topology YAML");
  auto* experiment = cmd->add_option("experiment", args->experiment,
                  "Experiment whose sizes join the sweep (a name in configs/experiments/ or a YAML path; \"\": none)")
      ->capture_default_str();
  cmd->add_option("--backend", args->backend, "Backend to measure: cpu (MPI) or cuda")->capture_default_str()
      ->check(one_of({"cpu", "cuda"}))
      ->type_name("cpu|cuda");
  cmd->add_option("--ranks", args->ranks, "Ranks to start with mpirun (outside mpirun); default: mpirun's, or 1")
      ->check(at_least(1));
  cmd->add_flag("--oversubscribe", args->oversubscribe,
                "Allow more --ranks than this machine has cores (the fit then includes time slicing)");
  cmd->add_option("--out", args->out, "Topology YAML to write, e.g. configs/topologies/cpu-local.yaml")->required();
  cmd->add_option("--name", args->name, "The topology's name (default: the file's stem)");
  cmd->add_option("--wait-s", args->wait_s,
                  fmt::format("Seconds to wait out slow spells of a shared machine and sweep again: a spell is the "
                              "memory reference {:.0f}% over the faster of its time in the --out file it replaces "
                              "and at the start (0: measure once, warn)",
                              validation::kGuardTolerance * 100))
      ->capture_default_str()
      ->check(at_least(0));
  cmd->add_flag("--quick", args->quick, "Fewer sizes per microbenchmark (what validate uses on the spot)");
  cmd->add_option("--iters", args->iters, "Timed steps per microbenchmark")->capture_default_str()->check(at_least(1));
  add_format_option(cmd, args->format);
#ifdef COCONET_VALIDATION_HAVE_RUN
  cmd->callback([args, experiment] {
    args->experiment_given = experiment->count() > 0;
    calibrate_command(*args);
  });
#else
  cmd->callback([] { throw UserError("coconet calibrate needs the simulator and the executor, absent from this build"); });
#endif
}

}  // namespace coconet::cli
