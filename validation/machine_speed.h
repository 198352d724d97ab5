// Whether the machine runs as fast now as when its topology was calibrated.
// A calibration's constants hold only for the machine as it was then: on a
// shared host a slow spell (measured here: every element-wise microbenchmark
// of one calibration 35-50% slower than in the calibrations before and after
// it) skews every prediction made with its constants by as much, and nothing
// in a report said so. `calibrate` records the medians of a few reference
// microbenchmarks as one comment line of the topology YAML; `validate`
// measures the same microbenchmarks before and after its points and reports
// the ratios, with a warning where one strays past kSpeedTolerance.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "validation/microbench.h"
#include "validation/progress.h"
#include "validation/results.h"

namespace coconet::validation {

// The comment's prefix in a topology YAML.
inline constexpr const char* kSpeedComment = "# coconet-reference-us:";

// A drift (SpeedCheck::drift) past this is warned about. Measured here (2
// cores, 2 ranks): five back-to-back calibrations put each reference within
// 12% of the others (add f32 N=65536: 96.5-109.0 us), and six validations
// after one calibration drifted 0-16% (one end alone moved up to 41% in a
// short spell); the slow spell it is for made a whole calibration 35-50% slower.
inline constexpr double kSpeedTolerance = 0.25;

// The reference microbenchmarks, by key: memory-bound and arithmetic-bound
// element-wise kernels and (with more than one rank) a collective; each a
// label of the calibration sweep (validation/microbench.h).
struct SpeedReference {
  const char* key;
  const char* label;
};
inline constexpr SpeedReference kSpeedReferences[] = {{"memory", "add f32 N=65536"},
                                                      {"arithmetic", "8 fma f32 N=65536"},
                                                      {"collective", "allreduce f16 N=65536"}};

// What a calibration recorded: its ranks and each reference's median (us).
struct CalibratedSpeed {
  int ranks = 0;
  std::map<std::string, double> us;  // key -> median
};

// The label of reference `key` (its microbenchmark); "" for none.
[[nodiscard]] std::string reference_label(const std::string& key);

// The comment line (with its newline) for the references among `measured`
// (a calibration's samples, run on `ranks` ranks); "" when none is there.
[[nodiscard]] std::string speed_comment(const std::vector<MicroSample>& measured, int ranks);

// The line in a topology YAML's text; empty when it has none (a hand-written
// topology, or one calibrated before the line existed). A damaged value is
// left out, not an error.
[[nodiscard]] std::optional<CalibratedSpeed> parse_speed(const std::string& topology_text);

// The references' keys that `calibrated` holds.
[[nodiscard]] std::vector<std::string> reference_keys(const CalibratedSpeed& calibrated);

// The microbenchmarks of the references named by `keys`, for `world` ranks
// (built once per run: the sweep they are taken from takes about 9 ms to build).
[[nodiscard]] std::vector<MicroSample> speed_samples(int world, const std::vector<std::string>& keys);

// Reference `key`'s time among a sweep's `samples` (us); 0 when it is not there.
[[nodiscard]] double reference_in(const std::vector<MicroSample>& samples, const std::string& key);

// Runs `samples` (speed_samples) on `backend` (every rank calls it), with the
// calibration's protocol (rounds, steps); key -> median us.
[[nodiscard]] std::map<std::string, double> measure_speed(exec::Backend& backend, std::vector<MicroSample> samples,
                                                          Progress& progress);

// The checks of the references measured both times.
[[nodiscard]] std::vector<SpeedCheck> speed_checks(const CalibratedSpeed& calibrated,
                                                   const std::map<std::string, double>& start,
                                                   const std::map<std::string, double>& end);

// The report's warning when some check drifts past kSpeedTolerance; "" when none does.
[[nodiscard]] std::string speed_warning(const std::vector<SpeedCheck>& checks);

}  // namespace coconet::validation
