// Value types of the program model: element types, symbolic shapes, the three
// layouts of the paper (replicated, sliced(d), local), and how a dimension is
// cut into per-rank slices (ragged sizes allowed: slices differ by at most one).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace coconet::model {

enum class DType { f16, bf16, f32 };

[[nodiscard]] std::string to_string(DType t);
[[nodiscard]] DType parse_dtype(const std::string& s);  // throws UserError
[[nodiscard]] int bytes_of(DType t);
// The type an element-wise combination of a and b computes in (f32 wins).
[[nodiscard]] DType promote(DType a, DType b);

// Values of the symbolic sizes (N, B, S, H, ...).
using Bindings = std::map<std::string, std::int64_t>;

// One dimension of a global shape: a product of integer constants and
// symbolic sizes, e.g. `N`, `B*S`, `4*H`.
struct Dim {
  std::int64_t constant = 1;
  std::vector<std::string> symbols;

  [[nodiscard]] std::int64_t eval(const Bindings& b) const;  // throws UserError on unbound
  [[nodiscard]] std::string str() const;
  friend bool operator==(const Dim&, const Dim&) = default;
};
[[nodiscard]] Dim parse_dim(const std::string& text);  // throws UserError

using Shape = std::vector<Dim>;  // rank-0 (empty) is a scalar
[[nodiscard]] std::string to_string(const Shape& s);
[[nodiscard]] std::vector<std::int64_t> eval_shape(const Shape& s, const Bindings& b);
[[nodiscard]] std::int64_t numel(const std::vector<std::int64_t>& dims);

enum class LayoutKind { replicated, sliced, local };

struct Layout {
  LayoutKind kind = LayoutKind::replicated;
  int dim = 0;  // sliced only: the dimension cut across ranks

  static Layout replicated() { return {LayoutKind::replicated, 0}; }
  static Layout sliced(int d) { return {LayoutKind::sliced, d}; }
  static Layout local() { return {LayoutKind::local, 0}; }
  [[nodiscard]] bool is_replicated() const { return kind == LayoutKind::replicated; }
  [[nodiscard]] bool is_sliced() const { return kind == LayoutKind::sliced; }
  [[nodiscard]] bool is_local() const { return kind == LayoutKind::local; }
  friend bool operator==(const Layout&, const Layout&) = default;
};
[[nodiscard]] std::string to_string(const Layout& l);
[[nodiscard]] Layout parse_layout(const std::string& s);  // "replicated", "local", "sliced(0)"

// The full type of a tensor value: element type, global shape, layout, and the
// process group (pipeline stage) it lives on.
struct TensorType {
  DType dtype = DType::f32;
  Shape shape;
  Layout layout;
  int group = 0;
  friend bool operator==(const TensorType&, const TensorType&) = default;
};

// Rank r's part [begin, begin+size) of a dimension of n elements cut into p
// slices: the first n % p ranks hold one element more.
struct Extent {
  std::int64_t begin = 0;
  std::int64_t size = 0;
};
[[nodiscard]] Extent slice_extent(std::int64_t n, int p, int r);

// Rank r's local shape of a tensor with global dims `global` and layout `l`
// among p ranks (local and replicated: the global shape).
[[nodiscard]] std::vector<std::int64_t> local_dims(const std::vector<std::int64_t>& global,
                                                   const Layout& l, int p, int r);

}  // namespace coconet::model
