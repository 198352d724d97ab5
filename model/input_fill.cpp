// The host's input fill (see input_fill.h).
#include "model/input_fill.h"

#include <algorithm>

namespace coconet::model {
namespace {

// h % span for a span of at most kSmallSpan, exactly, in operations a
// host's vector units have for 64-bit lanes (the 64-bit remainder they have
// not). With h = hi 2^32 + lo and c = 2^32 % span, h = hi c + lo = x (mod
// span), and x < 2^48 + 2^32 is exact in a double. Its quotient q + f/span
// (0 <= f < span) from the double product with 1 / span is within
// (q + 1) 2^-52 < 2^-3 / span of the true one: never as high as q + 1, at
// worst just under q when f is 0 (span 49: x = 49 gives 0.99999...), so the
// truncated quotient is q or q - 1 and the remainder x - quotient x span is
// f or f + span, which one correction undoes.
constexpr std::uint64_t kSmallSpan = std::uint64_t{1} << 16;

// What a run of one row needs besides where it starts.
struct Draw {
  std::uint64_t key = 0;
  std::uint64_t rank_salt = 0;  // local tensors: mixed in after the index
  std::int64_t lo = 0;
  std::int64_t span = 1;
  std::uint64_t wrap = 0;       // 2^32 % span
  double inverse_span = 1;
  double scale = 1;
};

// The elements of one row of the block, from global index `index` on:
// input_element's values, by a loop with nothing in it that stops the
// compiler from computing several elements at once (the Draw's fields are
// read into locals: `out` could alias it).
template <bool kLocal, typename T>
inline __attribute__((always_inline)) void draw_run(const Draw& d, std::int64_t index, T* __restrict out,
                                                     std::int64_t n) {
  const std::uint64_t key = d.key, salt = d.rank_salt, wrap = d.wrap;
  const std::int64_t lo = d.lo, span = d.span;
  const double inverse = d.inverse_span, scale = d.scale;
  for (std::int64_t k = 0; k < n; ++k) {
    std::uint64_t h = mix64(key ^ static_cast<std::uint64_t>(index + k));
    if constexpr (kLocal) h = mix64(h ^ salt);
    const auto x = static_cast<std::int64_t>((h >> 32) * wrap + (h & 0xffffffffu));
    std::int64_t r = x - static_cast<std::int64_t>(static_cast<double>(x) * inverse) * span;
    r = r >= span ? r - span : r;
    out[k] = static_cast<T>(static_cast<double>(lo + r) * scale);
  }
}

// A span too wide for draw_run: input_element itself, one element at a time.
template <typename T>
void draw_wide(const InputPattern& p, std::int64_t index, T* out, std::int64_t n) {
  for (std::int64_t k = 0; k < n; ++k)
    out[k] = static_cast<T>(input_element(p.key, p.local, p.rank, index + k, p.range));
}

// The float runs, the cpu backend's, built for the host's widest vector
// units: AVX-512 (x86-64-v4) multiplies and converts 64-bit lanes, which the
// hash and the remainder are made of; AVX2 and the baseline cannot and run
// about 3 times slower (coconet_bench_fill). The function is picked once,
// when the program loads (GCC's target_clones); other compilers (the
// sanitizer build's clang) build the baseline only.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define COCONET_HOST_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define COCONET_HOST_CLONES
#endif

COCONET_HOST_CLONES void draw_local(const Draw& d, std::int64_t index, float* out, std::int64_t n) {
  draw_run<true>(d, index, out, n);
}
COCONET_HOST_CLONES void draw_replicated(const Draw& d, std::int64_t index, float* out, std::int64_t n) {
  draw_run<false>(d, index, out, n);
}
void draw_local(const Draw& d, std::int64_t index, double* out, std::int64_t n) { draw_run<true>(d, index, out, n); }
void draw_replicated(const Draw& d, std::int64_t index, double* out, std::int64_t n) {
  draw_run<false>(d, index, out, n);
}

template <typename T>
void fill(const InputPattern& p, std::int64_t first, std::span<T> out) {
  const auto span = static_cast<std::uint64_t>(p.range.hi - p.range.lo + 1);
  // Dividing by 2^shift and multiplying by 2^-shift round the same exact
  // product: the same double.
  const Draw d{p.key,
               static_cast<std::uint64_t>(p.rank + 1),
               p.range.lo,
               static_cast<std::int64_t>(span),
               (std::uint64_t{1} << 32) % span,
               1.0 / static_cast<double>(span),
               1.0 / static_cast<double>(std::int64_t{1} << p.range.shift)};
  const auto draw = [&](std::int64_t index, T* at, std::int64_t count) {
    if (span > kSmallSpan)
      draw_wide(p, index, at, count);
    else if (p.local)
      draw_local(d, index, at, count);
    else
      draw_replicated(d, index, at, count);
  };
  const std::int64_t n = static_cast<std::int64_t>(out.size());
  if (p.col_begin == 0 && p.local_cols == p.cols) {
    // Whole rows (a vector is a column of one-element rows): the block's
    // elements are consecutive in the tensor, one run.
    draw(p.row_begin * p.cols + first, out.data(), n);
    return;
  }
  std::int64_t row = first / p.local_cols;
  std::int64_t col = first - row * p.local_cols;
  for (std::int64_t k = 0; k < n; ++row, col = 0) {
    const std::int64_t index = (p.row_begin + row) * p.cols + p.col_begin + col;
    const std::int64_t run = std::min(n - k, p.local_cols - col);
    draw(index, out.data() + k, run);
    k += run;
  }
}

}  // namespace

void fill_input_values(const InputPattern& p, std::int64_t first, std::span<float> out) { fill(p, first, out); }
void fill_input_values(const InputPattern& p, std::int64_t first, std::span<double> out) { fill(p, first, out); }

}  // namespace coconet::model
