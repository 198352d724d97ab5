// Order-statistic interval of the median: with n samples sorted, the number
// below the true median is Binomial(n, 1/2); [x(k), x(n-1-k)] (0-based) covers
// the median with probability 1 - 2 P(B <= k). The largest k whose tail is
// within (1 - confidence) / 2 gives the narrowest interval that reaches it.
#include "validation/stats.h"

#include <algorithm>
#include <cmath>

#include "model/error.h"

namespace coconet::validation {

namespace {

// P(B <= k) for B ~ Binomial(n, 1/2), in log space so large n does not underflow.
double binomial_half_cdf(int n, int k) {
  double sum = 0;
  const double log_half_n = n * std::log(0.5);
  for (int i = 0; i <= k; ++i)
    sum += std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0) + log_half_n);
  return std::min(sum, 1.0);
}

double median_sorted(const std::vector<double>& v) {
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

}  // namespace

double MedianEstimate::relative_width() const { return median > 0 ? (ci.hi - ci.lo) / median : 0.0; }

MedianEstimate median_interval(std::span<const double> samples, double confidence) {
  COCONET_ASSERT(!samples.empty(), "median_interval of no samples");
  COCONET_ASSERT(confidence > 0 && confidence < 1, "median_interval: confidence must be in (0, 1)");
  std::vector<double> v(samples.begin(), samples.end());
  std::sort(v.begin(), v.end());
  const int n = static_cast<int>(v.size());
  const double tail = (1.0 - confidence) / 2.0;
  int k = 0;  // [min, max] when even k = 0 misses the confidence
  while (k + 1 < n - 1 - (k + 1) && binomial_half_cdf(n, k + 1) <= tail) ++k;
  MedianEstimate e;
  e.median = median_sorted(v);
  e.ci = {v[static_cast<std::size_t>(k)], v[static_cast<std::size_t>(n - 1 - k)]};
  e.coverage = n == 1 ? 0.0 : 1.0 - 2.0 * binomial_half_cdf(n, k);
  e.samples = n;
  return e;
}

bool indistinguishable(const MedianEstimate& a, const MedianEstimate& b) { return a.ci.overlaps(b.ci); }

std::vector<std::size_t> measured_best_set(std::span<const MedianEstimate> estimates) {
  if (estimates.empty()) return {};
  std::size_t best = 0;
  for (std::size_t i = 1; i < estimates.size(); ++i)
    if (estimates[i].median < estimates[best].median) best = i;
  std::vector<std::size_t> set{best};
  for (std::size_t i = 0; i < estimates.size(); ++i)
    if (i != best && indistinguishable(estimates[i], estimates[best])) set.push_back(i);
  return set;
}

bool decided(std::span<const MedianEstimate> estimates, std::size_t pick, double max_relative_width) {
  if (pick >= estimates.size() || estimates[pick].relative_width() > max_relative_width) return false;
  for (const std::size_t i : measured_best_set(estimates))
    if (estimates[i].relative_width() > max_relative_width) return false;
  return true;
}

}  // namespace coconet::validation
