// The spell guard (validation/spell_guard.h) against scripted machines: the
// probes it reads are a script, so a spell starts and ends on cue. Each test
// names what the guard must do; removing its wait or its measuring again
// fails them (the quiet and no-baseline cases keep it from measuring too much).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "validation/spell_guard.h"

namespace coconet::validation {
namespace {

constexpr double kBaseline = 100.0;  // us

// A machine whose reference probes read `probes` in turn (the last one from
// then on) and whose measurement takes `total_s`.
struct ScriptedMachine {
  std::vector<double> probes;
  double total_s = 1.0;
  std::vector<double> own_reference;  // the measurement's own time of the reference, in turn (none: 0)
  std::size_t probed = 0;
  int measured = 0;
  double waited_s = 0;
  std::vector<double> waited_at_measure;
  std::vector<std::string> notes;

  SpellActions actions() {
    SpellActions a;
    a.probe = [this] { return probes.at(std::min(probed++, probes.size() - 1)); };
    a.agree = [](bool yes) { return yes; };  // one rank
    a.wait = [this](double s) { waited_s += s; };
    a.measure = [this] {
      const auto i = static_cast<std::size_t>(measured++);
      waited_at_measure.push_back(waited_s);
      return MeasureSeconds{total_s, i < own_reference.size() ? own_reference[i] : 0.0};
    };
    a.note = [this](const std::string& s) { notes.push_back(s); };
    return a;
  }
};

TEST(SpellGuard, QuietMachineMeasuresOnce) {
  ScriptedMachine m{{100.0, 105.0}};
  const SpellOutcome o = guard_measurement(m.actions(), kBaseline, 10.0);
  EXPECT_EQ(m.measured, 1);
  EXPECT_EQ(m.probed, 2u);  // before and after
  EXPECT_DOUBLE_EQ(m.waited_s, 0.0);
  EXPECT_EQ(o.measured_again, 0);
  EXPECT_DOUBLE_EQ(o.probe_ratio, 1.05);
  EXPECT_DOUBLE_EQ(o.spent_s, 0.0);  // the first measurement is not the allowance's
  EXPECT_TRUE(m.notes.empty());
}

TEST(SpellGuard, WaitsOutASpellBeforeMeasuring) {
  ScriptedMachine m{{150.0, 150.0, 150.0, 100.0, 100.0}};
  const SpellOutcome o = guard_measurement(m.actions(), kBaseline, 10.0);
  EXPECT_EQ(m.measured, 1);
  EXPECT_DOUBLE_EQ(m.waited_s, 3 * kGuardPollS);
  ASSERT_EQ(m.waited_at_measure.size(), 1u);
  EXPECT_DOUBLE_EQ(m.waited_at_measure[0], 3 * kGuardPollS);  // waited before measuring
  EXPECT_DOUBLE_EQ(o.probe_ratio, 1.0);
  EXPECT_DOUBLE_EQ(o.spent_s, 3 * kGuardPollS);
  ASSERT_EQ(m.notes.size(), 3u);
  EXPECT_NE(m.notes[0].find("1.50x"), std::string::npos) << m.notes[0];
}

// A spell that starts during the measurement and ends on the next probe: the
// measurement is discarded and taken again, which the allowance pays in full.
TEST(SpellGuard, MeasuresAgainAfterASpellThatEndsOnCue) {
  ScriptedMachine m{{100.0, 140.0, 100.0, 100.0}};
  const SpellOutcome o = guard_measurement(m.actions(), kBaseline, 10.0);
  EXPECT_EQ(m.measured, 2);
  EXPECT_EQ(o.measured_again, 1);
  EXPECT_DOUBLE_EQ(o.probe_ratio, 1.0);  // the kept measurement's probes
  EXPECT_DOUBLE_EQ(o.spent_s, 1.0);
  EXPECT_DOUBLE_EQ(m.waited_s, 0.0);  // the probe after the spell was already quiet
  ASSERT_EQ(m.notes.size(), 1u);
  EXPECT_EQ(m.notes[0], "measured in a slow spell, again");
}

// A spell longer than the allowance: the guard waits while the allowance
// lasts, measures once, keeps it and says how far off it was.
TEST(SpellGuard, KeepsASpellThatOutlastsTheAllowance) {
  ScriptedMachine m{{150.0}};
  const SpellOutcome o = guard_measurement(m.actions(), kBaseline, 2.0);
  EXPECT_EQ(m.measured, 1);
  EXPECT_DOUBLE_EQ(m.waited_s, 2.0);  // four polls; a fifth would pass the allowance
  EXPECT_EQ(o.measured_again, 0);
  EXPECT_DOUBLE_EQ(o.probe_ratio, 1.5);
  EXPECT_DOUBLE_EQ(o.spent_s, 2.0);
  EXPECT_TRUE(slow_spell(o.probe_ratio, 1.0));
}

// A spell in the middle of a measurement that times the reference itself (a
// calibration's sweep), quiet at both probes: measured again.
TEST(SpellGuard, TheMeasurementsOwnReferenceCounts) {
  ScriptedMachine m{{100.0}};
  m.own_reference = {150.0, 104.0};
  const SpellOutcome o = guard_measurement(m.actions(), kBaseline, 10.0);
  EXPECT_EQ(m.measured, 2);
  EXPECT_EQ(o.measured_again, 1);
  EXPECT_DOUBLE_EQ(o.probe_ratio, 1.04);
}

// A spell during every measurement, quiet between them: kGuardRetries more
// measurements, then the last is kept, flagged.
TEST(SpellGuard, StopsAfterItsRetries) {
  ScriptedMachine m{{100.0, 140.0}};
  for (int i = 0; i < kGuardRetries; ++i) m.probes.insert(m.probes.end(), {100.0, 140.0});
  const SpellOutcome o = guard_measurement(m.actions(), kBaseline, 100.0);
  EXPECT_EQ(m.measured, 1 + kGuardRetries);
  EXPECT_EQ(o.measured_again, kGuardRetries);
  EXPECT_DOUBLE_EQ(o.probe_ratio, 1.4);
}

// A measurement again must fit what is left: 1 s of measurement does not
// fit 0.9 s of allowance.
TEST(SpellGuard, DoesNotMeasureAgainPastTheAllowance) {
  ScriptedMachine m{{100.0, 140.0, 100.0, 100.0}};
  const SpellOutcome o = guard_measurement(m.actions(), kBaseline, 0.9);
  EXPECT_EQ(m.measured, 1);
  EXPECT_DOUBLE_EQ(o.probe_ratio, 1.4);
}

// The decisions are rank 0's: a rank whose own probe shows a spell follows
// rank 0, which saw none.
TEST(SpellGuard, FollowsRankZero) {
  ScriptedMachine m{{150.0}};
  SpellActions a = m.actions();
  a.agree = [](bool) { return false; };
  const SpellOutcome o = guard_measurement(a, kBaseline, 10.0);
  EXPECT_EQ(m.measured, 1);
  EXPECT_DOUBLE_EQ(m.waited_s, 0.0);
  EXPECT_DOUBLE_EQ(o.probe_ratio, 1.5);  // its own probe, as measured
}

TEST(SpellGuard, NoBaselineNoGuard) {
  ScriptedMachine m{{0.0}};
  const SpellOutcome o = guard_measurement(m.actions(), 0.0, 10.0);
  EXPECT_EQ(m.measured, 1);
  EXPECT_DOUBLE_EQ(o.probe_ratio, 0.0);
  EXPECT_DOUBLE_EQ(m.waited_s, 0.0);
}

// The point guard's baseline is the faster of the calibration's time and the
// run's first check (a run that starts in a spell keeps the calibration's, one
// calibrated in a spell the run's), and a probe is a spell only past the
// tolerance above it.
TEST(SpellGuard, BaselineAndSpell) {
  CalibratedSpeed c;
  c.ranks = 2;
  c.us = {{"memory", 100.0}, {"arithmetic", 1000.0}};
  EXPECT_DOUBLE_EQ(guard_baseline_us(c, {{"memory", 160.0}}), 100.0);  // the run started in a spell
  EXPECT_DOUBLE_EQ(guard_baseline_us(c, {{"memory", 80.0}}), 80.0);    // calibrated in one
  EXPECT_DOUBLE_EQ(guard_baseline_us(c, {}), 100.0);
  EXPECT_DOUBLE_EQ(guard_baseline_us(CalibratedSpeed{}, {{"memory", 90.0}}), 90.0);
  EXPECT_DOUBLE_EQ(guard_baseline_us(CalibratedSpeed{}, {{"arithmetic", 90.0}}), 0.0);
  const double edge = 100.0 * (1.0 + kGuardTolerance);
  EXPECT_FALSE(slow_spell(edge, 100.0));
  EXPECT_TRUE(slow_spell(edge * 1.01, 100.0));
  EXPECT_FALSE(slow_spell(90.0, 100.0));
  EXPECT_FALSE(slow_spell(1e9, 0.0));  // no baseline: no guard
}

}  // namespace
}  // namespace coconet::validation
