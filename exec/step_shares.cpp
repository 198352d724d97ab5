// The two halves of a step's shares around the runtime's max over ranks.
#include "exec/step_shares.h"

#include <numeric>

namespace coconet::exec {

std::vector<double> step_share_terms(std::vector<double> unit_us, double start_us, bool clock_shared) {
  std::partial_sum(unit_us.begin(), unit_us.end(), unit_us.begin());
  const std::size_t n = unit_us.size();
  if (clock_shared)
    for (std::size_t k = 0; k < n; ++k) unit_us.push_back(start_us + unit_us[k]);
  return unit_us;
}

StepShares step_shares(const std::vector<double>& reduced, std::size_t units, bool clock_shared) {
  StepShares s;
  if (units == 0) return s;
  s.step = reduced[units - 1];
  const double* end = clock_shared ? reduced.data() + units : reduced.data();
  for (std::size_t k = 0; k < units; ++k) s.units.push_back(end[k] - (k > 0 ? end[k - 1] : 0.0));
  if (clock_shared) s.units[0] = s.step - (end[units - 1] - end[0]);
  return s;
}

}  // namespace coconet::exec
