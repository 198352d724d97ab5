// `--set` values: exact counts (with K/M/G = 2^10/2^20/2^30 and exact decimal
// notation), finite scalars, and the split between topology and workload names.
#include "model/set_flag.h"

#include <fmt/core.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <set>

namespace coconet::model {

namespace {

constexpr const char* kCountRule =
    "expected a positive integer such as 4096, 4K (4096), 1M (1048576), 1G or 1e6 "
    "(K, M, G are powers of 1024; decimal notation must give an integer exactly)";
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::size_t kMaxDigits = 19;  // significant digits an int64 can hold
constexpr long kExponentCap = 100000;   // past it the answer (overflow or fraction) is the same

// A count as written: significant digits D, and value = D x 10^exponent x 2^shift.
struct Decimal {
  std::string digits;
  long exponent = 0;
  int shift = 0;
};

bool read_digits(const std::string& t, std::size_t& i, std::string& out) {
  const std::size_t start = i;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) out += t[i++];
  return i > start;
}

long read_exponent(const std::string& t, std::size_t& i, const std::string& flag) {
  const bool negative = i < t.size() && t[i] == '-';
  if (i < t.size() && (t[i] == '-' || t[i] == '+')) ++i;
  std::string digits;
  if (!read_digits(t, i, digits)) throw UserError(fmt::format("{}: {}", flag, kCountRule));
  long e = 0;
  for (const char c : digits) e = std::min(kExponentCap, e * 10 + (c - '0'));
  return negative ? -e : e;
}

int read_suffix(const std::string& t, std::size_t& i) {
  if (i >= t.size()) return 0;
  const char c = static_cast<char>(std::toupper(static_cast<unsigned char>(t[i])));
  const int shift = c == 'K' ? 10 : c == 'M' ? 20 : c == 'G' ? 30 : 0;
  if (shift != 0) ++i;
  return shift;
}

// digits [. digits] [e [+-] digits] [K|M|G], leading and trailing zeros
// folded away.
Decimal read_decimal(const std::string& t, const std::string& flag) {
  Decimal d;
  std::size_t i = 0;
  const bool whole = read_digits(t, i, d.digits);
  bool fraction = false;
  if (i < t.size() && t[i] == '.') {
    ++i;
    const std::size_t before = d.digits.size();
    fraction = read_digits(t, i, d.digits);
    d.exponent -= static_cast<long>(d.digits.size() - before);
  }
  if (!whole && !fraction) throw UserError(fmt::format("{}: {}", flag, kCountRule));
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) d.exponent += read_exponent(t, ++i, flag);
  d.shift = read_suffix(t, i);
  if (i != t.size()) throw UserError(fmt::format("{}: {}", flag, kCountRule));
  d.digits.erase(0, std::min(d.digits.find_first_not_of('0'), d.digits.size()));
  while (!d.digits.empty() && d.digits.back() == '0') {
    d.digits.pop_back();
    ++d.exponent;
  }
  return d;
}

}  // namespace

std::pair<std::string, std::string> parse_assignment(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw UserError(
        fmt::format("--set '{}' is malformed: write NAME=VALUE, e.g. --set N=1048576", text));
  return {text.substr(0, eq), text.substr(eq + 1)};
}

bool is_asymmetry_key(const std::string& key) {
  return key == "last_node_gpus" || key == "node_overrides" || key == "stragglers";
}

SetArgs split_sets(const std::vector<std::string>& texts) {
  SetArgs out;
  for (const auto& text : texts) {
    auto kv = parse_assignment(text);
    // Dotted keys, `nodes` and the topology's asymmetry lists (sim/topology.h) are the topology's.
    const bool topology = kv.first.find('.') != std::string::npos || kv.first == "nodes" || is_asymmetry_key(kv.first);
    (topology ? out.topology : out.workload).push_back(std::move(kv));
  }
  return out;
}

std::int64_t parse_count(const std::string& text, const std::string& flag) {
  const Decimal d = read_decimal(text, flag);
  if (d.digits.empty()) throw UserError(fmt::format("{}: must be positive", flag));
  const auto too_large = [&] {
    return UserError(fmt::format("{}: larger than the largest count, 2^63-1 = {}", flag, kMax));
  };
  const auto fraction = [&] {
    return UserError(fmt::format("{}: not an integer; {}", flag, kCountRule));
  };
  if (d.digits.size() > kMaxDigits) throw d.exponent >= 0 ? too_large() : fraction();
  std::uint64_t v = std::stoull(d.digits);  // < 10^19 < 2^64
  int shift = d.shift;
  for (long e = d.exponent; e < 0; ++e) {  // divide by 10 = 5 x 2, exactly
    if (v % 5 != 0) throw fraction();
    v /= 5;
    if (shift > 0) {
      --shift;
    } else {
      if (v % 2 != 0) throw fraction();
      v /= 2;
    }
  }
  const auto limit = static_cast<std::uint64_t>(kMax);
  for (long e = 0; e < d.exponent; ++e) {
    if (v > limit / 10) throw too_large();
    v *= 10;
  }
  for (int s = 0; s < shift; ++s) {
    if (v > limit / 2) throw too_large();
    v *= 2;
  }
  if (v > limit) throw too_large();
  return static_cast<std::int64_t>(v);
}

std::int64_t parse_size(const std::string& name, const std::string& text) {
  return parse_count(text, fmt::format("--set {}={}", name, text));
}

double parse_scalar(const std::string& name, const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  if (text.empty() || end != begin + text.size() || !std::isfinite(v) ||
      std::isspace(static_cast<unsigned char>(text.front())))
    throw UserError(fmt::format("--set {}={}: a scalar must be a finite number, e.g. 0.001 or 1e-3",
                                name, text));
  return v;
}

UserError unknown_name(const std::string& name, const std::string& value,
                       std::span<const Program> programs) {
  std::set<std::string> sizes, scalars;
  for (const auto& p : programs) {
    for (const auto& [k, v] : p.params) sizes.insert(k);
    for (const auto& [k, v] : p.scalars) scalars.insert(k);
  }
  const auto list = [](const std::set<std::string>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
    return out.empty() ? std::string("none") : out;
  };
  const std::string missing =
      programs.size() == 1
          ? fmt::format("workload '{}' has no size or scalar '{}'", programs[0].name, name)
          : fmt::format("no workload of the experiment has a size or scalar '{}'", name);
  return UserError(fmt::format(
      "--set {}={}: {} (sizes: {}; scalars: {}); topology values are dotted, e.g. gpu.hbm_GBps, "
      "or nodes, last_node_gpus, node_overrides, stragglers",
      name, value, missing, list(sizes), list(scalars)));
}

}  // namespace coconet::model
