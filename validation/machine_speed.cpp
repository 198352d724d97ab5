// The reference line: "key=value" pairs after kSpeedComment, ranks first.
#include "validation/machine_speed.h"

#include <algorithm>
#include <cmath>

#include <fmt/core.h>

#include "model/limits.h"
#include "validation/topology_comment.h"

namespace coconet::validation {

namespace {

const SpeedReference* reference_by_key(const std::string& key) {
  for (const auto& r : kSpeedReferences)
    if (key == r.key) return &r;
  return nullptr;
}

const SpeedReference* reference_by_label(const std::string& label) {
  for (const auto& r : kSpeedReferences)
    if (label == r.label) return &r;
  return nullptr;
}

}  // namespace

std::string reference_label(const std::string& key) {
  const SpeedReference* r = reference_by_key(key);
  return r ? r->label : "";
}

std::string speed_comment(const std::vector<MicroSample>& measured, int ranks) {
  std::string pairs;
  for (const auto& s : measured)
    if (const SpeedReference* r = reference_by_label(s.label); r && s.measured_us > 0)
      pairs += fmt::format(" {}={:.6g}", r->key, s.measured_us);
  return pairs.empty() ? "" : fmt::format("{} ranks={}{}\n", kSpeedComment, ranks, pairs);
}

std::optional<CalibratedSpeed> parse_speed(const std::string& text) {
  const auto fields = comment_fields(text, kSpeedComment);
  if (!fields) return std::nullopt;
  CalibratedSpeed c;
  for (const auto& [key, value] : *fields) {
    if (!(value > 0) || !std::isfinite(value)) continue;
    if (key == "ranks") c.ranks = value <= double(model::kMaxRanks) ? static_cast<int>(value) : 0;  // past it: a damaged line
    else if (reference_by_key(key)) c.us[key] = value;
  }
  if (c.ranks < 1 || c.us.empty()) return std::nullopt;
  return c;
}

std::vector<std::string> reference_keys(const CalibratedSpeed& calibrated) {
  std::vector<std::string> keys;
  for (const auto& [key, us] : calibrated.us) keys.push_back(key);
  return keys;
}

std::vector<MicroSample> speed_samples(int world, const std::vector<std::string>& keys) {
  std::vector<MicroSample> samples;
  for (auto& s : microbenchmark_plan(world, MicroOptions{}))
    if (const SpeedReference* r = reference_by_label(s.label);
        r && std::find(keys.begin(), keys.end(), r->key) != keys.end())
      samples.push_back(std::move(s));
  return samples;
}

double reference_in(const std::vector<MicroSample>& samples, const std::string& key) {
  for (const auto& s : samples)
    if (const SpeedReference* r = reference_by_label(s.label); r && key == r->key) return s.measured_us;
  return 0.0;
}

std::map<std::string, double> measure_speed(exec::Backend& backend, std::vector<MicroSample> samples,
                                            Progress& progress) {
  const MicroOptions o;
  progress.grow(static_cast<int>(samples.size()) * microbenchmark_rounds(o));
  run_microbenchmarks(backend, samples, o, progress);
  std::map<std::string, double> out;
  for (const auto& s : samples) out[reference_by_label(s.label)->key] = s.measured_us;
  return out;
}

std::vector<SpeedCheck> speed_checks(const CalibratedSpeed& calibrated, const std::map<std::string, double>& start,
                                     const std::map<std::string, double>& end) {
  std::vector<SpeedCheck> out;
  for (const auto& r : kSpeedReferences) {
    const auto then = calibrated.us.find(r.key);
    const auto a = start.find(r.key);
    const auto b = end.find(r.key);
    if (then == calibrated.us.end() || a == start.end() || b == end.end()) continue;
    out.push_back({r.label, then->second, a->second, b->second});
  }
  return out;
}

std::string speed_warning(const std::vector<SpeedCheck>& checks) {
  std::string moved;
  for (const auto& c : checks)
    if (c.drift() > kSpeedTolerance)
      moved += fmt::format("{}{} {:.1f} us when calibrated, {:.1f} us before the points and {:.1f} us after",
                           moved.empty() ? "" : "; ", c.label, c.calibrated_us, c.start_us, c.end_us);
  if (moved.empty()) return "";
  return fmt::format(
      "the machine does not run at the speed it was calibrated at (more than {:.0f}% off before and after the "
      "points): {}. Predictions carry "
      "that difference; calibrate again on a quiet machine, or validate when the machine is as it was",
      kSpeedTolerance * 100, moved);
}

}  // namespace coconet::validation
