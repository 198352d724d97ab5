// The bounds of model/limits.h and the checked arithmetic they rely on.
#include "model/limits.h"

#include <fmt/core.h>

#include <cmath>
#include <limits>

#include "model/program.h"
#include "model/schedule.h"

namespace coconet::model {

namespace {
constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

std::string human_bytes(std::int64_t b) {
  if (b >= (std::int64_t{1} << 40)) return fmt::format("{} TiB", b >> 40);
  if (b >= (std::int64_t{1} << 30)) return fmt::format("{} GiB", b >> 30);
  return fmt::format("{} B", b);
}
}  // namespace

std::int64_t checked_mul(std::int64_t a, std::int64_t b, const std::string& what) {
  std::int64_t out = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &out))
    throw UserError(
        fmt::format("{}: {} x {} does not fit in 64 bits (limit {})", what, a, b, kInt64Max));
  return out;
}

std::int64_t checked_add(std::int64_t a, std::int64_t b, const std::string& what) {
  std::int64_t out = 0;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &out))
    throw UserError(
        fmt::format("{}: {} + {} does not fit in 64 bits (limit {})", what, a, b, kInt64Max));
  return out;
}

void check_range(std::int64_t v, std::int64_t lo, std::int64_t hi, const std::string& what) {
  if (v < lo || v > hi)
    throw UserError(fmt::format("{} = {} is out of range: it must be between {} and {} (the limit)",
                                what, v, lo, hi));
}

void check_finite(double v, const std::string& what, bool positive) {
  if (!std::isfinite(v)) throw UserError(fmt::format("{} = {} must be a finite number", what, v));
  if (positive && !(v > 0)) throw UserError(fmt::format("{} = {} must be positive", what, v));
}

std::int64_t first_invalid_utf8(const std::string& text) {
  const auto* b = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned char c = b[i];
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (c < 0x80)
      len = 1, cp = c;
    else if ((c & 0xE0) == 0xC0)
      len = 2, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0)
      len = 3, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0)
      len = 4, cp = c & 0x07;
    else
      return static_cast<std::int64_t>(i);
    if (i + len > n) return static_cast<std::int64_t>(i);
    for (std::size_t k = 1; k < len; ++k) {
      if ((b[i + k] & 0xC0) != 0x80) return static_cast<std::int64_t>(i);
      cp = (cp << 6) | (b[i + k] & 0x3F);
    }
    const bool overlong =
        (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return static_cast<std::int64_t>(i);
    i += len;
  }
  return -1;
}

void check_timeout(double seconds, const std::string& what) {
  check_finite(seconds, what, true);
  if (seconds > kMaxTimeoutS)
    throw UserError(fmt::format("{} = {} s is more than the limit of {} s (one week)", what,
                                seconds, kMaxTimeoutS));
}

void check_tensor_sizes(const Program& p, const std::string& sizes_label, const Bindings& sizes) {
  // Called at every lowering (a tuner lowers thousands): the tensor's
  // description is formatted only for a message.
  const auto check = [&](const std::string& name, const TensorType& t) {
    const auto what = [&] { return fmt::format("tensor '{}' {} of {} at {}", name, to_string(t.shape), p.name, sizes_label); };
    std::int64_t elems = 1;
    for (const auto& d : t.shape) {
      std::int64_t v = 0;
      try {
        v = d.eval(sizes);
      } catch (const UserError& e) {
        throw UserError(fmt::format("{}: {}", what(), e.what()));
      }
      std::int64_t next = 0;
      if (v < 0 || __builtin_mul_overflow(elems, v, &next)) (void)checked_mul(elems, v, what() + ", elements");  // throws
      elems = next;
    }
    std::int64_t bytes = 0;
    if (__builtin_mul_overflow(elems, std::int64_t(bytes_of(t.dtype)), &bytes))
      (void)checked_mul(elems, bytes_of(t.dtype), what() + ", bytes");  // throws
    if (bytes > kMaxTensorBytes)
      throw UserError(fmt::format(
          "{} has {} elements = {} bytes, more than the limit of {} bytes ({}) per tensor", what(),
          elems, bytes, kMaxTensorBytes, human_bytes(kMaxTensorBytes)));
  };
  for (const auto& t : p.inputs) check(t.name, t.type);
  for (const auto& s : p.stmts) check(s.name, s.type);
}

void check_schedule_bounds(const Schedule& s, std::int64_t ranks_per_group) {
  check_range(ranks_per_group, 1, kMaxRanks, "ranks per process group");
  check_range(s.knobs.chunks, 1, kMaxChunks, "chunks");
  check_range(s.knobs.channels, 0, kMaxChannels, "channels");
  for (const auto& st : s.program.stmts)
    if ((st.op == OpKind::broadcast || st.op == OpKind::reduce) && st.root >= ranks_per_group)
      throw UserError(
          fmt::format("in program '{}', statement '{}': root {} is not a rank of a group of {} "
                      "ranks; the root must be below the group size (0..{})",
                      s.program.name, st.source.empty() ? st.name : st.source, st.root,
                      ranks_per_group, ranks_per_group - 1));
}

}  // namespace coconet::model
