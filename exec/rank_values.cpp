#include "exec/rank_values.h"

#include "model/error.h"

namespace coconet::exec {

RankValues::RankValues(const model::Program& p, const model::Bindings& sizes, int ranks_per_group, int group,
                       int position, const std::set<std::string>& unallocated, bool in_place)
    : p_(ranks_per_group), position_(position) {
  auto views = plan::rank_views(p, sizes, ranks_per_group, plan::RankId{group, position});
  if (in_place) in_place_ = in_place_values(p, views, unallocated);
  for (const auto& in : p.inputs) inputs_.insert(in.name);
  for (auto& [name, view] : views) {
    ValueInfo v;
    static_cast<plan::ValueView&>(v) = std::move(view);
    v.allocated = v.here && !unallocated.contains(name);
    if (const auto it = in_place_.find(name); it != in_place_.end() && v.allocated) v.in_place = it->second;
    values_.emplace(name, std::move(v));
  }
}

const ValueInfo& RankValues::at(const std::string& name) const {
  const auto it = values_.find(name);
  COCONET_ASSERT(it != values_.end(), "no value named '" + name + "' on this rank");
  return it->second;
}

std::int64_t RankValues::bytes() const {
  std::int64_t total = 0;
  for (const auto& [name, v] : values_)
    if (v.allocated && !v.in_place) total += v.local_bytes();
  return total;
}

std::set<std::string> RankValues::overwritten_inputs() const {
  std::set<std::string> out;
  for (const auto& [name, where] : in_place_) out.insert(where.target);
  return out;
}

// The state tensors first, then the values written in place as views of them.
void RankValues::allocate(Backend& backend) {
  for (auto& [name, v] : values_)
    if (v.allocated && !v.in_place)
      v.buffer = inputs_.contains(name) ? backend.allocate_to_fill(v.type.dtype, v.local_numel())
                                        : backend.allocate(v.type.dtype, v.local_numel());
  for (auto& [name, v] : values_)
    if (v.allocated && v.in_place) v.buffer = backend.alias(at(v.in_place->target).buffer, v.in_place->offset,
                                                            v.local_numel());
}

View rows_view(const ValueInfo& v, std::int64_t begin, std::int64_t end) {
  return View{v.buffer, (begin - v.row_begin) * v.local_cols, (end - begin) * v.local_cols};
}

View whole(const ValueInfo& v) { return View{v.buffer, 0, v.local_numel()}; }

model::Access access_for(const ValueInfo& t, const ValueInfo& out, std::int64_t row0) {
  if (t.rank() == 0) return {0, 0, 0};
  if (t.rank() == out.rank()) {
    for (int d = 2; d < t.rank(); ++d)
      if (t.global_dims[static_cast<std::size_t>(d)] != out.global_dims[static_cast<std::size_t>(d)])
        throw UserError("operand '" + t.name + "' of '" + out.name +
                        "' broadcasts along an inner dimension, which the executor does not support");
    const bool row_bcast = t.rows == 1 && out.rows > 1;
    const bool col_bcast = t.cols == 1 && out.cols > 1;
    model::Access a;
    a.row_stride = row_bcast ? 0 : t.local_cols;
    a.col_stride = col_bcast ? 0 : 1;
    a.base = (row_bcast ? 0 : (row0 - t.row_begin) * t.local_cols) + (col_bcast ? 0 : out.col_begin - t.col_begin);
    return a;
  }
  if (t.rank() == 1 && out.rank() == 2) {  // a bias [H] on [B*S, H]: indexed by the column
    const bool bcast = t.rows == 1 && out.cols > 1;
    return {bcast ? 0 : out.col_begin - t.row_begin, 0, bcast ? 0 : 1};
  }
  throw UserError("operand '" + t.name + "' of '" + out.name + "' broadcasts from rank " +
                  std::to_string(t.rank()) + " to rank " + std::to_string(out.rank()) +
                  ", which the executor does not support");
}

std::int64_t inner_rows(const ValueInfo& out) {
  return model::numel({out.global_dims.begin() + 1, out.global_dims.end() - 1});
}

model::Access folded_access(const ValueInfo& t, const ValueInfo& out, std::int64_t row0) {
  const std::int64_t last = out.global_dims.back();
  if (t.rank() == 0) return {0, 0, 0};
  const std::int64_t t_last = t.global_dims.back();
  const bool col_bcast = t_last == 1 && last > 1;
  if (t.rank() == 1) return {0, 0, col_bcast ? 0 : 1};  // a bias [last] on every row
  bool addressable = t.rank() == out.rank();
  for (int d = 0; addressable && d + 1 < t.rank(); ++d)
    addressable = t.global_dims[static_cast<std::size_t>(d)] == out.global_dims[static_cast<std::size_t>(d)];
  if (!addressable)
    throw UserError("operand '" + t.name + "' of '" + out.name +
                    "' broadcasts along a dimension before the last, which the executor does not support");
  const std::int64_t inner = inner_rows(out);
  return {(row0 - t.row_begin) * inner * t_last, t_last, col_bcast ? 0 : 1};
}

}  // namespace coconet::exec
