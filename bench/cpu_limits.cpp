// The limits of bench/cpu_limits.h. Built with -march=native (bench/kernels.cmake)
// so that the triad and Eigen use every instruction this CPU has; Eigen's
// namespace is renamed here so that none of its instantiations can be
// shared with the kernels library's, which are built for other levels.
#define Eigen coconet_bench_eigen_native
#include "bench/cpu_limits.h"

#include <Eigen/Core>
#include <ctime>
#include <map>
#include <tuple>
#include <vector>

namespace coconet::bench {
namespace {

// STREAM's scalar (its default, 3.0).
constexpr float kTriadScalar = 3.0f;

template <typename Work>
double seconds_of(Work&& work) {
  const double start = thread_seconds();
  work();
  return thread_seconds() - start;
}

struct TriadArrays {
  std::vector<float> a, b, c;
};

struct GemmArrays {
  std::vector<float> a, b, c;
};

}  // namespace

double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

void triad(float* a, const float* b, const float* c, float q, std::int64_t elements) {
  for (std::int64_t i = 0; i < elements; ++i) a[i] = b[i] + q * c[i];
}

double triad_pass_seconds(std::int64_t elements) {
  static std::map<std::int64_t, TriadArrays> arrays;
  auto [it, made] = arrays.try_emplace(elements);
  TriadArrays& t = it->second;
  if (made) {  // STREAM's initial values, which also touch every page
    const auto n = static_cast<std::size_t>(elements);
    t = {std::vector<float>(n, 0.0f), std::vector<float>(n, 1.0f), std::vector<float>(n, 2.0f)};
    triad(t.a.data(), t.b.data(), t.c.data(), kTriadScalar, elements);
  }
  return seconds_of([&] { triad(t.a.data(), t.b.data(), t.c.data(), kTriadScalar, elements); });
}

void reference_gemm(const float* a, const float* b, float* c, std::int64_t m, std::int64_t n, std::int64_t k) {
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<RowMajor>(c, m, n).noalias() = Eigen::Map<const RowMajor>(a, m, k) * Eigen::Map<const RowMajor>(b, k, n);
}

double reference_gemm_seconds(std::int64_t m, std::int64_t n, std::int64_t k) {
  static std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, GemmArrays> arrays;
  auto [it, made] = arrays.try_emplace(std::make_tuple(m, n, k));
  GemmArrays& g = it->second;
  if (made) {
    g = {std::vector<float>(static_cast<std::size_t>(m * k), 1.0f), std::vector<float>(static_cast<std::size_t>(k * n), 1.0f),
         std::vector<float>(static_cast<std::size_t>(m * n))};
    reference_gemm(g.a.data(), g.b.data(), g.c.data(), m, n, k);
  }
  return seconds_of([&] { reference_gemm(g.a.data(), g.b.data(), g.c.data(), m, n, k); });
}

const char* reference_build() {
#ifdef COCONET_BENCH_NATIVE
  return "-march=native";
#else
  return "baseline (no -march=native)";
#endif
}

}  // namespace coconet::bench
