// Element types, symbolic dimensions, layouts and slicing.
#include "model/types.h"

#include <cctype>
#include <charconv>

#include <fmt/core.h>

#include "model/enum_names.h"
#include "model/error.h"
#include "model/limits.h"

namespace coconet::model {

namespace {
constexpr EnumName<DType> kDTypes[] = {{DType::f16, "f16"}, {DType::bf16, "bf16"}, {DType::f32, "f32"}};
}  // namespace

std::string to_string(DType t) { return std::string(name_of(kDTypes, t)); }

DType parse_dtype(const std::string& s) {
  if (const auto t = value_named(kDTypes, s)) return *t;
  throw UserError(fmt::format("unknown dtype '{}': use {}", s, names_or(kDTypes)));
}

int bytes_of(DType t) { return t == DType::f32 ? 4 : 2; }

DType promote(DType a, DType b) {
  if (a == b) return a;
  return DType::f32;  // f16 with bf16, or anything with f32, computes in f32
}

std::int64_t Dim::eval(const Bindings& b) const {
  std::int64_t v = constant;
  for (const auto& s : symbols) {
    const auto it = b.find(s);
    if (it == b.end())
      throw UserError(fmt::format("size '{}' has no value: give it in params or with --set {}=VALUE",
                                  s, s));
    // The message is formatted only for a product that overflows (checked_mul then throws):
    // the lowering evaluates dimensions in its inner loops.
    std::int64_t next = 0;
    if (v < 0 || it->second < 0 || __builtin_mul_overflow(v, it->second, &next))
      next = checked_mul(v, it->second, fmt::format("dimension {}", str()));
    v = next;
  }
  return v;
}

std::string Dim::str() const {
  std::string out;
  if (constant != 1 || symbols.empty()) out = std::to_string(constant);
  for (const auto& s : symbols) {
    if (!out.empty()) out += "*";
    out += s;
  }
  return out;
}

namespace {
bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}
}  // namespace

Dim parse_dim(const std::string& text) {
  Dim d;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto star = text.find('*', start);
    const std::string factor = trim(text.substr(start, star == std::string::npos ? std::string::npos
                                                                                   : star - start));
    if (factor.empty())
      throw UserError(fmt::format("dimension '{}' is malformed: write a product of sizes and "
                                  "positive integers such as B*S or 4*H",
                                  text));
    if (std::isdigit(static_cast<unsigned char>(factor[0]))) {
      std::int64_t v = 0;
      const auto [p, ec] = std::from_chars(factor.data(), factor.data() + factor.size(), v);
      if (ec != std::errc() || p != factor.data() + factor.size() || v <= 0)
        throw UserError(fmt::format("dimension '{}': '{}' is not a positive integer", text, factor));
      d.constant = checked_mul(d.constant, v, fmt::format("dimension '{}'", text));
    } else if (is_identifier(factor)) {
      d.symbols.push_back(factor);
    } else {
      throw UserError(fmt::format("dimension '{}': '{}' is neither a size name nor a positive "
                                  "integer (write e.g. B*S or 4*H)",
                                  text, factor));
    }
    if (star == std::string::npos) break;
    start = star + 1;
  }
  return d;
}

std::string to_string(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + s[i].str();
  return out + "]";
}

std::vector<std::int64_t> eval_shape(const Shape& s, const Bindings& b) {
  std::vector<std::int64_t> out;
  out.reserve(s.size());
  for (const auto& d : s) out.push_back(d.eval(b));
  return out;
}

std::int64_t numel(const std::vector<std::int64_t>& dims) {
  std::int64_t n = 1;
  for (auto d : dims) n = checked_mul(n, d, "tensor elements");
  return n;
}

std::string to_string(const Layout& l) {
  switch (l.kind) {
    case LayoutKind::replicated: return "replicated";
    case LayoutKind::local: return "local";
    case LayoutKind::sliced: return fmt::format("sliced({})", l.dim);
  }
  return "?";
}

Layout parse_layout(const std::string& s) {
  if (s == "replicated") return Layout::replicated();
  if (s == "local") return Layout::local();
  if (s.rfind("sliced(", 0) == 0 && s.back() == ')') {
    const std::string inner = s.substr(7, s.size() - 8);
    int d = -1;
    const auto [p, ec] = std::from_chars(inner.data(), inner.data() + inner.size(), d);
    if (ec == std::errc() && p == inner.data() + inner.size() && d >= 0) return Layout::sliced(d);
  }
  throw UserError(fmt::format("unknown layout '{}': use replicated, local or sliced(D) with D a "
                              "dimension index such as sliced(0)",
                              s));
}

Extent slice_extent(std::int64_t n, int p, int r) {
  COCONET_ASSERT(p > 0 && r >= 0 && r < p, "slice_extent: bad rank");
  const std::int64_t base = n / p;
  const std::int64_t extra = n % p;
  const std::int64_t size = base + (r < extra ? 1 : 0);
  const std::int64_t begin = r * base + std::min<std::int64_t>(r, extra);
  return {begin, size};
}

std::vector<std::int64_t> local_dims(const std::vector<std::int64_t>& global, const Layout& l,
                                     int p, int r) {
  if (!l.is_sliced()) return global;
  COCONET_ASSERT(l.dim < static_cast<int>(global.size()), "local_dims: sliced dim out of range");
  auto out = global;
  out[static_cast<std::size_t>(l.dim)] = slice_extent(global[static_cast<std::size_t>(l.dim)], p, r).size;
  return out;
}

}  // namespace coconet::model
