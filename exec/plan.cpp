#include "exec/plan.h"

#include "model/error.h"

namespace coconet::exec {
namespace {

ValueInfo describe_value(const std::string& name, const model::TensorType& t, const model::Bindings& sizes,
                         int p, int group, int position) {
  ValueInfo v;
  v.name = name;
  v.type = t;
  v.here = t.group == group;
  v.global_dims = model::eval_shape(t.shape, sizes);
  v.local_dims = model::local_dims(v.global_dims, t.layout, p, position);
  const auto& g = v.global_dims;
  if (!g.empty()) {
    v.rows = g[0];
    v.cols = 1;
    for (std::size_t d = 1; d < g.size(); ++d) v.cols *= g[d];
  }
  v.local_rows = v.rows;
  v.local_cols = v.cols;
  if (t.layout.is_sliced()) {
    const int d = t.layout.dim;
    if (d == 0) {
      const auto e = model::slice_extent(v.rows, p, position);
      v.row_begin = e.begin;
      v.local_rows = e.size;
    } else if (d == 1 && g.size() == 2) {
      const auto e = model::slice_extent(v.cols, p, position);
      v.col_begin = e.begin;
      v.local_cols = e.size;
    } else {
      throw UserError("tensor '" + name + "' is sliced along dimension " + std::to_string(d) + " of " +
                      std::to_string(g.size()) +
                      "; the executor supports slicing along dimension 0, or 1 of a 2-D tensor");
    }
  }
  COCONET_ASSERT(model::numel(v.local_dims) == v.local_numel(), "local shape of '" + name + "' disagrees");
  return v;
}

}  // namespace

Plan::Plan(const model::Program& p, const model::Bindings& sizes, int ranks_per_group, int group, int position)
    : p_(ranks_per_group), position_(position) {
  for (const auto& in : p.inputs)
    values_.emplace(in.name, describe_value(in.name, in.type, sizes, ranks_per_group, group, position));
  for (const auto& s : p.stmts)
    values_.emplace(s.name, describe_value(s.name, s.type, sizes, ranks_per_group, group, position));
}

const ValueInfo& Plan::at(const std::string& name) const {
  const auto it = values_.find(name);
  COCONET_ASSERT(it != values_.end(), "no value named '" + name + "' in the plan");
  return it->second;
}

ValueInfo& Plan::at(const std::string& name) {
  const auto it = values_.find(name);
  COCONET_ASSERT(it != values_.end(), "no value named '" + name + "' in the plan");
  return it->second;
}

std::int64_t Plan::bytes() const {
  std::int64_t total = 0;
  for (const auto& [name, v] : values_)
    if (v.here) total += v.local_numel() * model::bytes_of(v.type.dtype);
  return total;
}

void Plan::allocate(Backend& backend) {
  for (auto& [name, v] : values_)
    if (v.here) v.buffer = backend.allocate(v.type.dtype, v.local_numel());
}

}  // namespace coconet::exec
