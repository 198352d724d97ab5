#include "exec/update_in_place.h"

#include "model/error.h"

namespace coconet::exec {
namespace {

using model::OpKind;
using model::Program;
using model::Stmt;

// Every value `name` is computed from, transitively (inputs included).
std::set<std::string> ancestors(const Program& p, const std::string& name) {
  std::set<std::string> seen;
  std::vector<std::string> todo{name};
  while (!todo.empty()) {
    const std::string n = todo.back();
    todo.pop_back();
    const Stmt* s = p.find_stmt(n);
    if (s == nullptr) continue;
    for (const auto& r : Program::reads(*s))
      if (seen.insert(r).second) todo.push_back(r);
  }
  return seen;
}

// Whether every statement reading `target`, other than `value`'s own, is one `value` is computed
// from.
bool old_values_read_first(const Program& p, const std::string& target, const std::string& value) {
  const std::set<std::string> before = ancestors(p, value);
  for (int i : p.users(target)) {
    const std::string& reader = p.stmts[static_cast<std::size_t>(i)].name;
    if (reader != value && !before.contains(reader)) return false;
  }
  return true;
}

// Where `v`'s part lies in `t`'s part on this rank (elements in), when it lies inside it.
std::optional<std::int64_t> offset_inside(const plan::ValueView& v, const plan::ValueView& t) {
  if (!v.here || !t.here || v.type.dtype != t.type.dtype || v.global_dims != t.global_dims)
    return std::nullopt;
  if (v.local_cols != t.local_cols || v.col_begin != t.col_begin) return std::nullopt;
  if (v.row_begin < t.row_begin || v.row_begin + v.local_rows > t.row_begin + t.local_rows)
    return std::nullopt;
  return (v.row_begin - t.row_begin) * t.local_cols;
}

}  // namespace

std::map<std::string, InPlace> in_place_values(const Program& p,
                                               const std::map<std::string, plan::ValueView>& views,
                                               const std::set<std::string>& scratch) {
  std::map<std::string, InPlace> out;
  for (const Stmt& s : p.stmts) {
    if (s.op != OpKind::update || !p.find_input(s.target)) continue;
    const plan::ValueView& t = views.at(s.target);
    const plan::ValueView& v = views.at(s.name);
    // A value a fused op keeps in scratch is written at its gather's own
    // place: in place when the gather is (listed all the same, so that
    // check_reads_before_writes holds the program that writes it).
    const auto at = offset_inside(v, t);
    if (!at || !old_values_read_first(p, s.target, s.name)) continue;
    out.emplace(s.name, InPlace{s.target, *at});
    // The gather of a sliced update: the whole new state, in place.
    for (int i : p.users(s.name)) {
      const Stmt& g = p.stmts[static_cast<std::size_t>(i)];
      if (g.op != OpKind::allgather || scratch.contains(g.name)) continue;
      const plan::ValueView& gv = views.at(g.name);
      const auto whole = offset_inside(gv, t);
      if (whole && *whole == 0 && gv.local_rows == t.local_rows &&
          old_values_read_first(p, s.target, g.name))
        out.emplace(g.name, InPlace{s.target, 0});
    }
  }
  return out;
}

void check_reads_before_writes(const model::ElementwiseProgram& program,
                               const std::map<std::string, InPlace>& in_place) {
  for (std::size_t o = 0; o < program.output_names.size(); ++o) {
    const auto it = in_place.find(program.output_names[o]);
    if (it == in_place.end()) continue;
    int slot = -1;
    for (std::size_t i = 0; i < program.input_names.size(); ++i)
      if (program.input_names[i] == it->second.target) slot = static_cast<int>(i);
    if (slot < 0) continue;
    bool stored = false;
    for (const model::Instr& in : program.code) {
      if (in.code == model::OpCode::store && in.slot == static_cast<int>(o)) stored = true;
      if (in.code == model::OpCode::load && in.slot == slot && stored)
        throw InternalError("'" + program.output_names[o] + "' is written in place over '" +
                            it->second.target + "' before the program's last read of it");
    }
  }
}

}  // namespace coconet::exec
