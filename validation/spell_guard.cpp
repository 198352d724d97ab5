// The guard's loop: settle (wait out a spell), measure, probe, again.
#include "validation/spell_guard.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/core.h>

namespace coconet::validation {

double guard_baseline_us(const CalibratedSpeed& calibrated, const std::map<std::string, double>& now) {
  const auto then = calibrated.us.find(kGuardReference);
  const auto first = now.find(kGuardReference);
  const double a = then != calibrated.us.end() ? then->second : 0.0;
  const double b = first != now.end() ? first->second : 0.0;
  return a > 0 && b > 0 ? std::min(a, b) : std::max(a, b);
}

bool slow_spell(double probe_us, double baseline_us) {
  return baseline_us > 0 && probe_us > baseline_us * (1.0 + kGuardTolerance);
}

namespace {

// Probes until the machine is out of a slow spell, waiting kGuardPollS
// between probes while the allowance keeps `need_s` for a measurement after
// `spent_s` (which the waits add to); the last probe.
double settle(const SpellActions& a, double baseline_us, double allowance_s, double& spent_s, double need_s) {
  double probe = a.probe();
  while (a.agree(slow_spell(probe, baseline_us)) && a.agree(spent_s + kGuardPollS + need_s <= allowance_s)) {
    a.note(fmt::format("slow spell (the memory reference {:.2f}x its baseline), waiting", probe / baseline_us));
    a.wait(kGuardPollS);
    spent_s += kGuardPollS;
    probe = a.probe();
  }
  return probe;
}

}  // namespace

SpellOutcome guard_measurement(const SpellActions& a, double baseline_us, double allowance_s) {
  SpellOutcome out;
  double before = settle(a, baseline_us, allowance_s, out.spent_s, 0.0);
  for (int again = 0;; ++again) {
    const MeasureSeconds m = a.measure();
    const double worst = std::max({before, a.probe(), m.reference_us});
    out.spent_s += again == 0 ? 0.0 : m.total_s;
    out.probe_ratio = baseline_us > 0 ? worst / baseline_us : 0.0;
    out.measured_again = again;
    if (!a.agree(slow_spell(worst, baseline_us)) || again == kGuardRetries) break;
    before = settle(a, baseline_us, allowance_s, out.spent_s, m.total_s);
    if (a.agree(slow_spell(before, baseline_us)) || !a.agree(out.spent_s + m.total_s <= allowance_s))
      break;  // the spell outlasts the allowance: keep what was measured, flagged
    a.note("measured in a slow spell, again");
  }
  return out;
}

bool rank0_says(exec::Backend& backend, bool yes) {
  std::vector<double> v{backend.world_rank() == 0 && yes ? 1.0 : 0.0};
  backend.host_allreduce(v, model::ReduceOp::max);
  return v[0] > 0;
}

SpellActions spell_actions(exec::Backend& backend, std::vector<MicroSample> probe_samples, Progress& progress,
                           std::string what) {
  SpellActions a;
  a.probe = [&backend, &progress, samples = std::move(probe_samples)] {
    if (samples.empty()) return 0.0;
    const auto m = measure_speed(backend, samples, progress);
    const auto it = m.find(kGuardReference);
    return it != m.end() ? it->second : 0.0;
  };
  a.agree = [&backend](bool yes) { return rank0_says(backend, yes); };
  a.wait = [](double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); };
  a.note = [&progress, what = std::move(what)](const std::string& s) { progress.note(what + ": " + s); };
  return a;
}

}  // namespace coconet::validation
