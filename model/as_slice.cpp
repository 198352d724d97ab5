// as_slice: a shardable replicated state (an optimizer moment) stays sliced
// for good, ZeRO-style: its input is declared sliced(0), its update is stored
// sliced, and the allgather of the new value disappears. The sliced update
// takes the gathered value's name, so the program's outputs keep their names.
#include <fmt/core.h>

#include "model/error.h"
#include "model/transforms.h"

namespace coconet::model {

namespace {

// The statements as_slice rewrites: the state's update and the allgather of it.
struct Target {
  int decl = -1;
  std::string update;  // `m1.s = update(m, ...)`, sliced
  std::string gather;  // `m1 = allgather(m1.s)`, an output nobody reads
};

void check_state(const Schedule& s, const std::string& state) {
  if (s.has_stage_transforms())
    throw UserError(
        fmt::format("as_slice {}: fuse or overlap was already applied; apply split, "
                    "reorder and as_slice before fuse and overlap",
                    state));
  const TensorDecl* decl = s.program.find_input(state);
  if (decl == nullptr)
    throw UserError(fmt::format("as_slice {}: '{}' is not an input of {}; name a state tensor",
                                state, state, s.program.name));
  if (!decl->shardable)
    throw UserError(
        fmt::format("as_slice {}: '{}' is not shardable; mark it `shardable: true` in "
                    "the workload if it is optimizer state nobody needs whole",
                    state, state));
  if (!decl->type.layout.is_replicated())
    throw UserError(fmt::format("as_slice {}: '{}' is {}, not replicated", state, state,
                                to_string(decl->type.layout)));
}

void check_readers(const Program& p, const std::string& state) {
  const TensorType& type = p.type_of(state);
  for (int u : p.users(state)) {
    const Stmt& st = p.stmts[static_cast<std::size_t>(u)];
    if (st.type.layout != Layout::sliced(0) || st.type.shape != type.shape)
      throw UserError(fmt::format(
          "as_slice {}: statement '{}' reads {} whole (its value is {}); split the allreduce "
          "and reorder its allgather first so that every reader of {} runs on slices",
          state, st.name, state, to_string(st.type.layout), state));
  }
}

bool is_output(const Program& p, const std::string& n) {
  for (const auto& o : p.outputs)
    if (o == n) return true;
  return false;
}

Target find_target(const Program& p, const std::string& state) {
  Target t;
  for (std::size_t i = 0; i < p.inputs.size(); ++i)
    if (p.inputs[i].name == state) t.decl = static_cast<int>(i);
  for (const auto& st : p.stmts)
    if (st.op == OpKind::update && st.target == state) t.update = st.name;
  if (t.update.empty())
    throw UserError(fmt::format("as_slice {}: no statement updates {}", state, state));
  for (int u : p.users(t.update)) {
    const Stmt& st = p.stmts[static_cast<std::size_t>(u)];
    if (st.op == OpKind::allgather) t.gather = st.name;
  }
  if (t.gather.empty() || !p.users(t.gather).empty() || !is_output(p, t.gather))
    throw UserError(fmt::format(
        "as_slice {}: the new value '{}' of {} must be gathered only to become an output "
        "(`NAME = allgather({})`, NAME an output nobody reads); keep {} replicated otherwise",
        state, t.update, state, t.update, state));
  return t;
}

void rename_value(Program& p, const std::string& from, const std::string& to) {
  auto rename = [&](const std::string& n) { return n == from ? to : n; };
  for (auto& st : p.stmts) {
    if (st.name == from) st.name = to;
    for (auto& o : st.operands) o = rename(o);
    if (st.expr) st.expr = rename_tensors(st.expr, rename);
  }
  for (auto& o : p.outputs) o = rename(o);
}

}  // namespace

Schedule as_slice(Schedule s, const std::string& state) {
  check_state(s, state);
  Program& p = s.program;
  check_readers(p, state);
  const Target t = find_target(p, state);
  TensorDecl& decl = p.inputs[static_cast<std::size_t>(t.decl)];
  decl.type.layout = Layout::sliced(0);
  decl.shardable = false;  // sliced for good now, no longer a candidate
  std::erase_if(p.stmts, [&](const Stmt& st) { return st.name == t.gather; });
  rename_value(p, t.update, t.gather);
  s.program = remove_dead_code(std::move(s.program));
  check(s.program);
  s.stages = default_stages(s.program);
  s.history.push_back(AsSlice{state});
  return s;
}

}  // namespace coconet::model
