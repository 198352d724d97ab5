// split: an allreduce becomes a reducescatter followed by an allgather, which
// computes the same value (both reduce in rank order) and exposes the sliced
// intermediate that reorder and fuse work on.
#include <fmt/core.h>

#include "model/error.h"
#include "model/transforms.h"

namespace coconet::model {

namespace {

// Suffix of the reducescatter's value: `y.rs` for `y = allreduce(op, x)`.
constexpr const char* kReduceScatterSuffix = ".rs";

const Stmt& allreduce_to_split(const Schedule& s, const std::string& ar) {
  if (s.has_stage_transforms())
    throw UserError(
        fmt::format("split {}: fuse or overlap was already applied; apply split, "
                    "reorder and as_slice before fuse and overlap",
                    ar));
  const Stmt* st = s.program.find_stmt(ar);
  if (st == nullptr)
    throw UserError(
        fmt::format("split {}: no statement defines '{}'; name the value of an "
                    "allreduce, e.g. g1 in `g1 = allreduce(sum, g)`",
                    ar, ar));
  if (st->op != OpKind::allreduce)
    throw UserError(
        fmt::format("split {}: '{}' is not an allreduce (it is a {} statement); split applies to "
                    "`y = allreduce(op, x)` only",
                    ar, ar, to_string(st->op)));
  if (st->type.shape.empty())
    throw UserError(
        fmt::format("split {}: '{}' is a scalar and has no rows to scatter; split "
                    "applies to allreduces of tensors",
                    ar, ar));
  if (s.program.find_stmt(ar + kReduceScatterSuffix) ||
      s.program.find_input(ar + kReduceScatterSuffix))
    throw UserError(fmt::format("split {}: the name '{}{}' is already taken; rename that value", ar,
                                ar, kReduceScatterSuffix));
  return *st;
}

}  // namespace

Schedule split(Schedule s, const std::string& ar) {
  const Stmt& original = allreduce_to_split(s, ar);
  Stmt rs = original;
  rs.name = ar + kReduceScatterSuffix;
  rs.op = OpKind::reducescatter;
  rs.source =
      fmt::format("{} = reducescatter({}, {})", rs.name, to_string(rs.reduce), rs.operands.front());
  Stmt ag;
  ag.name = ar;
  ag.op = OpKind::allgather;
  ag.operands = {rs.name};
  ag.source = fmt::format("{} = allgather({})", ar, rs.name);

  const int at = s.program.stmt_index(ar);
  auto& stmts = s.program.stmts;
  stmts[static_cast<std::size_t>(at)] = std::move(ag);
  stmts.insert(stmts.begin() + at, std::move(rs));

  s.program = remove_dead_code(std::move(s.program));
  check(s.program);
  s.stages = default_stages(s.program);
  s.history.push_back(Split{ar});
  return s;
}

}  // namespace coconet::model
