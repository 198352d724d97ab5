// The reference line: "key=value" pairs after kSpeedComment, ranks first.
#include "validation/machine_speed.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <fmt/core.h>

#include "model/limits.h"

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

std::string speed_comment(const std::vector<MicroSample>& measured, int ranks) {
  std::string pairs;
  for (const auto& s : measured)
    if (const SpeedReference* r = reference_by_label(s.label); r && s.measured_us > 0)
      pairs += fmt::format(" {}={:.6g}", r->key, s.measured_us);
  return pairs.empty() ? "" : fmt::format("{} ranks={}{}\n", kSpeedComment, ranks, pairs);
}

std::optional<CalibratedSpeed> parse_speed(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(kSpeedComment, 0) != 0) continue;
    CalibratedSpeed c;
    std::istringstream fields(line.substr(std::string(kSpeedComment).size()));
    std::string field;
    while (fields >> field) {
      const auto eq = field.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = field.substr(0, eq);
      double value = 0;
      try {
        value = std::stod(field.substr(eq + 1));
      } catch (const std::exception&) {
        continue;
      }
      if (!(value > 0) || !std::isfinite(value)) continue;
      if (key == "ranks") c.ranks = value <= double(model::kMaxRanks) ? static_cast<int>(value) : 0;  // past it: a damaged line
      else if (reference_by_key(key)) c.us[key] = value;
    }
    if (c.ranks < 1 || c.us.empty()) return std::nullopt;
    return c;
  }
  return std::nullopt;
}

std::map<std::string, double> measure_speed(exec::Backend& backend, const CalibratedSpeed& calibrated,
                                            Progress& progress) {
  const MicroOptions o;
  std::vector<MicroSample> samples;
  for (auto& s : microbenchmark_plan(backend.world_size(), o))
    if (const SpeedReference* r = reference_by_label(s.label); r && calibrated.us.contains(r->key))
      samples.push_back(std::move(s));
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
