// The sizes an experiment's points will run, for the calibration sweep: every
// schedule of every point lowered (plan::lower, as the cost model sees it),
// and the collectives, GEMMs and element-wise work it asks for collected, so
// that `calibrate EXPERIMENT` measures them and no point of the experiment
// lies outside the calibrated range (validation/calibrated_range.h).
#pragma once

#include <string>

#include "model/set_flag.h"
#include "plan/capabilities.h"
#include "validation/microbench.h"

namespace coconet::validation {

// The experiment (a name in configs/experiments/ or a path) on `world` ranks,
// lowered with `caps`. Throws UserError for a bad experiment (file:line).
[[nodiscard]] ExtraSizes experiment_sizes(const std::string& experiment, int world, const plan::Capabilities& caps,
                                          const model::Assignments& sets = {});

}  // namespace coconet::validation
