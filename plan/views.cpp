// Per-rank views from types, sizes and the rank's position.
#include "plan/views.h"

#include "model/error.h"

namespace coconet::plan {
namespace {

ValueView view_of(const std::string& name, const model::TensorType& t, const model::Bindings& sizes, int p,
                  RankId who) {
  ValueView v;
  v.name = name;
  v.type = t;
  v.here = t.group == who.group;
  v.global_dims = model::eval_shape(t.shape, sizes);
  v.local_dims = model::local_dims(v.global_dims, t.layout, p, who.position);
  const auto& g = v.global_dims;
  if (!g.empty()) {
    v.rows = g[0];
    v.cols = 1;
    for (std::size_t d = 1; d < g.size(); ++d) v.cols *= g[d];
  }
  v.local_rows = v.rows;
  v.local_cols = v.cols;
  if (!t.layout.is_sliced()) return v;
  const int d = t.layout.dim;
  if (d == 0) {
    const auto e = model::slice_extent(v.rows, p, who.position);
    v.row_begin = e.begin;
    v.local_rows = e.size;
  } else if (d == 1 && g.size() == 2) {
    const auto e = model::slice_extent(v.cols, p, who.position);
    v.col_begin = e.begin;
    v.local_cols = e.size;
  } else {
    throw UserError("tensor '" + name + "' is sliced along dimension " + std::to_string(d) + " of " +
                    std::to_string(g.size()) +
                    "; the runtime supports slicing along dimension 0, or 1 of a 2-D tensor");
  }
  COCONET_ASSERT(model::numel(v.local_dims) == v.local_numel(), "local shape of '" + name + "' disagrees");
  return v;
}

}  // namespace

std::map<std::string, ValueView> rank_views(const model::Program& p, const model::Bindings& sizes,
                                            int ranks_per_group, RankId who) {
  std::map<std::string, ValueView> out;
  for (const auto& in : p.inputs) out.emplace(in.name, view_of(in.name, in.type, sizes, ranks_per_group, who));
  for (const auto& s : p.stmts) out.emplace(s.name, view_of(s.name, s.type, sizes, ranks_per_group, who));
  return out;
}

}  // namespace coconet::plan
