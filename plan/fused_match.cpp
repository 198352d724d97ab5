// Recognition by evaluation: the stage's element-wise statements compiled as
// the runtime compiles them, run on the host (kernels::eval_element) at a few
// probe points under every assignment of operands to roles.
#include "plan/fused_match.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "kernels/elementwise_program.h"

namespace coconet::plan {
namespace {

using model::OpKind;
using model::Stmt;

// Relative tolerance of a probe comparison: both sides are f32 results a few
// roundings apart (sqrt and a division), far below a wrong formula's error.
constexpr double kProbeTolerance = 1e-5;
// Probe points (g, w, m, v): values of both signs and magnitudes, so that no
// two roles and no two formulas agree on all of them.
constexpr std::array<std::array<float, 4>, 4> kProbes = {{{0.5f, 1.25f, 0.75f, 2.0f},
                                                          {-3.0f, 0.1f, -0.2f, 0.5f},
                                                          {7.0f, -2.5f, 1.5f, 9.0f},
                                                          {0.0f, 4.0f, -1.0f, 0.25f}}};

struct Parts {
  const Stmt* rs = nullptr;
  std::vector<const Stmt*> compute;
  const Stmt* ag = nullptr;
};

// Where the operands sit in the compiled program: input slots g, w, m, v and
// output slots w1, m1, v1 (-1: unused by sgd).
struct Roles {
  int g = -1, w = -1, m = -1, v = -1;
  int w1 = -1, m1 = -1, v1 = -1;
};

std::optional<Parts> parts_of(const model::Program& p, const model::Stage& stage) {
  if (stage.kind != model::StageKind::fused || stage.stmts.size() < 3) return std::nullopt;
  Parts parts{p.find_stmt(stage.stmts.front()), {}, p.find_stmt(stage.stmts.back())};
  if (parts.rs->op != OpKind::reducescatter || parts.rs->reduce != model::ReduceOp::sum ||
      parts.ag->op != OpKind::allgather)
    return std::nullopt;
  for (std::size_t i = 1; i + 1 < stage.stmts.size(); ++i) {
    const Stmt* s = p.find_stmt(stage.stmts[i]);
    if (!model::is_elementwise(s->op)) return std::nullopt;
    parts.compute.push_back(s);
  }
  return parts;
}

// The new weights' shard must not be read outside the stage: the fused path never writes it.
bool shard_stays_inside(const model::Program& p, const model::Stage& stage, const std::string& value) {
  if (std::find(p.outputs.begin(), p.outputs.end(), value) != p.outputs.end()) return false;
  for (const auto& s : p.stmts) {
    if (std::find(stage.stmts.begin(), stage.stmts.end(), s.name) != stage.stmts.end()) continue;
    const auto reads = model::Program::reads(s);
    if (std::find(reads.begin(), reads.end(), value) != reads.end()) return false;
  }
  return true;
}

std::optional<FusedHyper> hyper_of(const model::Program& p, FusedUpdate u) {
  const auto get = [&](const char* name) -> std::optional<double> {
    const auto it = p.scalars.find(name);
    return it == p.scalars.end() ? std::nullopt : std::optional<double>(it->second);
  };
  FusedHyper h;
  if (!get("lr")) return std::nullopt;
  h.lr = *get("lr");
  if (u == FusedUpdate::sgd) return h;
  if (!get("beta1") || !get("beta2") || !get("eps")) return std::nullopt;
  h.beta1 = *get("beta1");
  h.beta2 = *get("beta2");
  h.eps = *get("eps");
  return h;
}

bool close(double got, double want) {
  return std::abs(got - want) <= kProbeTolerance * std::max(1.0, std::abs(want));
}

bool matches(const kernels::ElementwiseProgram& prog, FusedUpdate u, const Roles& r, const FusedHyper& h) {
  for (const auto& [g, w, m, v] : kProbes) {
    std::vector<float> in(prog.input_names.size(), 0.0f), out(prog.output_names.size(), 0.0f);
    in[static_cast<std::size_t>(r.g)] = g;
    in[static_cast<std::size_t>(r.w)] = w;
    if (u == FusedUpdate::adam) {
      in[static_cast<std::size_t>(r.m)] = m;
      in[static_cast<std::size_t>(r.v)] = v;
    }
    kernels::eval_element(prog.code.data(), static_cast<int>(prog.code.size()), prog.output_types.data(),
                          [&](int slot) { return in[static_cast<std::size_t>(slot)]; }, 0, out.data());
    const auto at = [&](int slot) { return static_cast<double>(out[static_cast<std::size_t>(slot)]); };
    if (u == FusedUpdate::sgd) {
      if (!close(at(r.w1), w - h.lr * g)) return false;
      continue;
    }
    const double m1 = h.beta1 * m + (1 - h.beta1) * g;
    const double v1 = h.beta2 * v + (1 - h.beta2) * g * g;
    if (!close(at(r.m1), m1) || !close(at(r.v1), v1) || !close(at(r.w1), w - h.lr * m1 / (std::sqrt(v1) + h.eps)))
      return false;
  }
  return true;
}

int slot_of(const std::vector<std::string>& names, const std::string& name) {
  const auto it = std::find(names.begin(), names.end(), name);
  return it == names.end() ? -1 : static_cast<int>(it - names.begin());
}

// Tries every assignment of the non-gradient inputs and outputs to roles.
std::optional<Roles> find_roles(const kernels::ElementwiseProgram& prog, FusedUpdate u, const Parts& parts,
                                const FusedHyper& h) {
  Roles r;
  r.g = slot_of(prog.input_names, parts.rs->name);
  r.w1 = slot_of(prog.output_names, parts.ag->operands.front());
  const std::size_t states = u == FusedUpdate::sgd ? 1 : 3;
  if (r.g < 0 || r.w1 < 0 || prog.input_names.size() != states + 1 || prog.output_names.size() != states)
    return std::nullopt;
  std::vector<int> ins, outs;
  for (int i = 0; i < static_cast<int>(prog.input_names.size()); ++i)
    if (i != r.g) ins.push_back(i);
  for (int i = 0; i < static_cast<int>(prog.output_names.size()); ++i)
    if (i != r.w1) outs.push_back(i);
  do {
    do {
      r.w = ins[0];
      if (u == FusedUpdate::adam) r.m = ins[1], r.v = ins[2], r.m1 = outs[0], r.v1 = outs[1];
      if (matches(prog, u, r, h)) return r;
    } while (std::next_permutation(outs.begin(), outs.end()));
  } while (std::next_permutation(ins.begin(), ins.end()));
  return std::nullopt;
}

// Whether the values have the shapes and layouts the fused kernels need.
bool shapes_fit(const model::Program& p, const FusedUpdateMatch& m) {
  const auto& g = p.type_of(m.g);
  const auto& w = p.type_of(m.w);
  const auto& w_out = p.type_of(m.w_out);
  if (g.shape.size() != 1 || w.shape != g.shape || w_out.shape != g.shape || w.layout.is_sliced() ||
      w.dtype != w_out.dtype)
    return false;
  if (m.update == FusedUpdate::sgd) return true;
  for (const std::string* n : {&m.m, &m.v, &m.m_out, &m.v_out}) {  // the moments stay sliced
    const auto& t = p.type_of(*n);
    if (t.shape != g.shape || !t.layout.is_sliced() || t.dtype != w.dtype) return false;
  }
  return true;
}

kernels::ElementwiseProgram compile_parts(const model::Program& p, const Parts& parts) {
  std::vector<kernels::ElementwiseStmt> stmts;
  for (const auto* s : parts.compute) stmts.push_back({s->name, s->expr, s->type.dtype});
  std::map<std::string, model::DType> types;
  for (const auto& in : p.inputs) types.emplace(in.name, in.type.dtype);
  for (const auto& s : p.stmts) types.emplace(s.name, s.type.dtype);
  return kernels::compile_elementwise(stmts, types, p.scalars);
}

}  // namespace

std::optional<FusedUpdateMatch> match_fused_update(const model::Program& program, const model::Stage& stage) {
  const auto parts = parts_of(program, stage);
  if (!parts || !shard_stays_inside(program, stage, parts->ag->operands.front())) return std::nullopt;
  const auto u = parts->compute.size() == 1 ? std::optional(FusedUpdate::sgd)
                 : parts->compute.size() == 3 ? std::optional(FusedUpdate::adam)
                                              : std::nullopt;
  if (!u) return std::nullopt;
  const auto h = hyper_of(program, *u);
  if (!h) return std::nullopt;
  const auto prog = compile_parts(program, *parts);
  const auto roles = find_roles(prog, *u, *parts, *h);
  if (!roles) return std::nullopt;
  const auto in = [&](int slot) { return prog.input_names[static_cast<std::size_t>(slot)]; };
  const auto out = [&](int slot) { return prog.output_names[static_cast<std::size_t>(slot)]; };
  FusedUpdateMatch m;
  m.update = *u;
  m.hyper = *h;
  m.g = parts->rs->operands.front();
  m.g_shard = parts->rs->name;
  m.w = in(roles->w);
  m.w_out = parts->ag->name;
  if (*u == FusedUpdate::adam) {
    m.m = in(roles->m);
    m.v = in(roles->v);
    m.m_out = out(roles->m1);
    m.v_out = out(roles->v1);
  }
  if (!shapes_fit(program, m)) return std::nullopt;
  return m;
}

}  // namespace coconet::plan
