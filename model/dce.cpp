// Dead code removal: drops statements whose values no output needs. One
// backward pass suffices because the program is in SSA form (a value is
// defined before every read of it).
#include <set>

#include "model/transforms.h"

namespace coconet::model {

Program remove_dead_code(Program p) {
  std::set<std::string> live(p.outputs.begin(), p.outputs.end());
  std::vector<bool> keep(p.stmts.size(), false);
  for (std::size_t i = p.stmts.size(); i-- > 0;) {
    const Stmt& st = p.stmts[i];
    if (!live.contains(st.name)) continue;
    keep[i] = true;
    for (const auto& r : Program::reads(st)) live.insert(r);
  }
  std::vector<Stmt> kept;
  kept.reserve(p.stmts.size());
  for (std::size_t i = 0; i < p.stmts.size(); ++i)
    if (keep[i]) kept.push_back(std::move(p.stmts[i]));
  p.stmts = std::move(kept);
  return p;
}

}  // namespace coconet::model
