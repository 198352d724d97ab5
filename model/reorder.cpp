// reorder: the computations after `y = allgather(x)` that can run on slices
// move before it and run on x's slices (the paper's reorder of an allgather
// with the computation after it).
//
// Design notes
// - What moves is the closure of slice-runnable statements (element-wise,
//   norms, row reductions of tensors of rank 2 and more, sends) that read y or a value already moved, whose other operands
//   are available before the allgather and not local.
// - A moved statement `c` becomes `c.s` (sliced); `c = allgather(c.s)` is
//   inserted where c is still needed whole, so no reader outside the closure and
//   no output changes name. A moved norm keeps its name: the norm of a sliced
//   value is the same replicated scalar (partial sums reduced across ranks).
// - Statements after the allgather that do not depend on it but that a moved
//   statement reads (LAMB's norm of w) are hoisted in front of the closure.
// - Elements keep their global indices, so dropout masks do not change.
#include <fmt/core.h>

#include <set>

#include "model/error.h"
#include "model/transforms.h"

namespace coconet::model {

namespace {

// Suffix of a moved statement's sliced value: `m1.s` for `m1`.
constexpr const char* kSliceSuffix = ".s";

bool runs_on_slices(OpKind k) {
  return k == OpKind::compute || k == OpKind::update || k == OpKind::norm || k == OpKind::rowreduce ||
         k == OpKind::send;
}

struct Plan {
  int ag = -1;                    // index of the allgather
  std::string gathered;           // y
  std::string slices;             // x
  std::set<std::string> depends;  // y and every value computed from it
  std::set<std::string> moved;    // statements moved onto slices
  std::set<std::string> hoisted;  // independent statements the moved ones read
};

bool is_norm(const Program& p, const std::string& n) {
  const Stmt* st = p.find_stmt(n);
  return st != nullptr && st->op == OpKind::norm;
}

// A value that a moved statement reads sliced: y itself or a moved non-norm.
bool reads_as_slice(const Program& p, const Plan& plan, const std::string& n) {
  return n == plan.gathered || (plan.moved.contains(n) && !is_norm(p, n));
}

bool can_move(const Program& p, const Plan& plan, const Stmt& st) {
  if (!runs_on_slices(st.op)) return false;
  // A row reduction runs on row slices (dimension 0) unless that is the dimension it reduces.
  if (st.op == OpKind::rowreduce && p.type_of(st.operands.front()).shape.size() < 2) return false;
  bool reads_slices = false;
  for (const auto& r : Program::reads(st)) {
    if (reads_as_slice(p, plan, r)) {
      reads_slices = true;
    } else if (!plan.moved.contains(r) &&
               (plan.depends.contains(r) || p.type_of(r).layout.is_local())) {
      return false;  // needs the whole gathered value, or mixes a local operand with slices
    }
  }
  return reads_slices;
}

void find_dependents(const Program& p, Plan& plan) {
  plan.depends.insert(plan.gathered);
  for (std::size_t i = static_cast<std::size_t>(plan.ag) + 1; i < p.stmts.size(); ++i)
    for (const auto& r : Program::reads(p.stmts[i]))
      if (plan.depends.contains(r)) {
        plan.depends.insert(p.stmts[i].name);
        break;
      }
}

void find_hoisted(const Program& p, Plan& plan) {
  for (std::size_t i = p.stmts.size(); i-- > static_cast<std::size_t>(plan.ag) + 1;) {
    const Stmt& st = p.stmts[i];
    if (!plan.moved.contains(st.name) && !plan.hoisted.contains(st.name)) continue;
    for (const auto& r : Program::reads(st))
      if (p.stmt_index(r) > plan.ag && !plan.depends.contains(r)) plan.hoisted.insert(r);
  }
}

Plan make_plan(const Schedule& s, const std::string& ag) {
  if (s.has_stage_transforms())
    throw UserError(
        fmt::format("reorder {}: fuse or overlap was already applied; apply split, "
                    "reorder and as_slice before fuse and overlap",
                    ag));
  const Program& p = s.program;
  Plan plan;
  plan.ag = p.stmt_index(ag);
  if (plan.ag < 0 || p.stmts[static_cast<std::size_t>(plan.ag)].op != OpKind::allgather)
    throw UserError(
        fmt::format("reorder {}: '{}' is not the value of an allgather; reorder "
                    "applies to `y = allgather(x)` (split an allreduce first)",
                    ag, ag));
  plan.gathered = ag;
  plan.slices = p.stmts[static_cast<std::size_t>(plan.ag)].operands.front();
  find_dependents(p, plan);
  for (std::size_t i = static_cast<std::size_t>(plan.ag) + 1; i < p.stmts.size(); ++i)
    if (can_move(p, plan, p.stmts[i])) plan.moved.insert(p.stmts[i].name);
  if (plan.moved.empty())
    throw UserError(fmt::format(
        "reorder {}: no statement reading '{}' can run on its slices (element-wise statements, "
        "norms, row reductions and sends can, when their other operands are not local and not computed from {})",
        ag, ag, ag));
  find_hoisted(p, plan);
  return plan;
}

std::string sliced_name(const Program& p, const std::string& n) {
  return is_norm(p, n) ? n : n + kSliceSuffix;
}

Stmt moved_stmt(const Program& p, const Plan& plan, const Stmt& st) {
  auto rename = [&](const std::string& n) {
    if (n == plan.gathered) return plan.slices;
    return plan.moved.contains(n) ? sliced_name(p, n) : n;
  };
  Stmt out = st;
  out.name = sliced_name(p, st.name);
  for (auto& o : out.operands) o = rename(o);
  if (out.expr) out.expr = rename_tensors(out.expr, rename);
  out.source.clear();
  if (out.name != st.name && (p.find_stmt(out.name) || p.find_input(out.name)))
    throw UserError(fmt::format("reorder {}: the name '{}' is already taken; rename that value",
                                plan.gathered, out.name));
  return out;
}

bool needed_whole(const Program& p, const Plan& plan, const std::string& n) {
  for (const auto& o : p.outputs)
    if (o == n) return true;
  for (int u : p.users(n))
    if (!plan.moved.contains(p.stmts[static_cast<std::size_t>(u)].name)) return true;
  return false;
}

std::vector<Stmt> reordered(const Program& p, const Plan& plan) {
  const auto ag = static_cast<std::size_t>(plan.ag);
  std::vector<Stmt> out(p.stmts.begin(), p.stmts.begin() + plan.ag);
  for (std::size_t i = ag + 1; i < p.stmts.size(); ++i)
    if (plan.hoisted.contains(p.stmts[i].name)) out.push_back(p.stmts[i]);
  for (std::size_t i = ag + 1; i < p.stmts.size(); ++i)
    if (plan.moved.contains(p.stmts[i].name)) out.push_back(moved_stmt(p, plan, p.stmts[i]));
  out.push_back(p.stmts[ag]);
  for (std::size_t i = ag + 1; i < p.stmts.size(); ++i) {
    const std::string& n = p.stmts[i].name;
    if (!plan.moved.contains(n) || is_norm(p, n) || !needed_whole(p, plan, n)) continue;
    Stmt gather;
    gather.name = n;
    gather.op = OpKind::allgather;
    gather.operands = {sliced_name(p, n)};
    gather.source = fmt::format("{} = allgather({})", n, gather.operands.front());
    out.push_back(std::move(gather));
  }
  for (std::size_t i = ag + 1; i < p.stmts.size(); ++i) {
    const std::string& n = p.stmts[i].name;
    if (!plan.moved.contains(n) && !plan.hoisted.contains(n)) out.push_back(p.stmts[i]);
  }
  return out;
}

}  // namespace

Schedule reorder(Schedule s, const std::string& ag) {
  const Plan plan = make_plan(s, ag);
  s.program.stmts = reordered(s.program, plan);
  s.program = remove_dead_code(std::move(s.program));
  try {
    check(s.program);
  } catch (const UserError& e) {
    throw UserError(
        fmt::format("reorder {}: the statements after it cannot run on slices: {}", ag, e.what()));
  }
  s.stages = default_stages(s.program);
  s.history.push_back(Reorder{ag});
  return s;
}

}  // namespace coconet::model
