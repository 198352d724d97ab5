// Stage demands from statement types. An element-wise kernel reads each value
// produced outside it once (a replicated operand of a sliced statement only
// through its slice) and writes each value that outlives it once (updates,
// outputs, values read by a later stage); values made and consumed inside the
// kernel (a fused collective's reduced slice) never touch HBM.
#include "sim/stage_work.h"

#include <algorithm>
#include <map>
#include <set>

#include "model/error.h"

namespace coconet::sim {

using model::OpKind;

int default_group_size(const Topology& t, const model::Program& p) {
  return std::max(1, t.total_gpus() / std::max(1, p.groups()));
}

namespace {

class Sizer {
 public:
  Sizer(const model::Program& p, const Context& ctx) : p_(p), ctx_(ctx) {}

  [[nodiscard]] std::int64_t global_numel(const std::string& n) const {
    return model::numel(model::eval_shape(p_.type_of(n).shape, ctx_.sizes));
  }
  [[nodiscard]] std::int64_t local_numel(const std::string& n) const {
    const auto& t = p_.type_of(n);
    return model::numel(model::local_dims(model::eval_shape(t.shape, ctx_.sizes), t.layout, ctx_.ranks, 0));
  }
  [[nodiscard]] std::vector<std::int64_t> local_dims(const std::string& n) const {
    const auto& t = p_.type_of(n);
    return model::local_dims(model::eval_shape(t.shape, ctx_.sizes), t.layout, ctx_.ranks, 0);
  }
  [[nodiscard]] double elem_bytes(const std::string& n) const { return model::bytes_of(p_.type_of(n).dtype); }
  [[nodiscard]] double local_bytes(const std::string& n) const { return double(local_numel(n)) * elem_bytes(n); }

 private:
  const model::Program& p_;
  const Context& ctx_;
};

bool outlives(const model::Program& p, const model::Stmt& s, const std::set<std::string>& inside) {
  if (s.op == OpKind::update) return true;
  if (std::find(p.outputs.begin(), p.outputs.end(), s.name) != p.outputs.end()) return true;
  for (int u : p.users(s.name))
    if (!inside.contains(p.stmts[u].name)) return true;
  return false;
}

CollectiveWork collective_of(const model::Stmt& s, const Sizer& z, int ranks) {
  CollectiveWork c;
  c.stmt = s.name;
  const std::string& x = s.operands.at(0);
  switch (s.op) {
    case OpKind::allreduce: c.op = CollOp::allreduce; c.bytes = z.local_bytes(x); break;
    case OpKind::reducescatter: c.op = CollOp::reducescatter; c.bytes = z.local_bytes(s.name) * ranks; break;
    case OpKind::allgather: c.op = CollOp::allgather; c.bytes = z.local_bytes(x) * ranks; break;
    case OpKind::broadcast: c.op = CollOp::broadcast; c.bytes = z.local_bytes(s.name); break;
    case OpKind::reduce: c.op = CollOp::reduce; c.bytes = z.local_bytes(x); break;
    case OpKind::send: c.op = CollOp::send; c.bytes = z.local_bytes(x); break;
    default: throw InternalError("collective_of: not a communication statement: " + s.name);
  }
  return c;
}

void add_elementwise(const model::Program& p, const model::Stmt& s, const Sizer& z,
                     const std::set<std::string>& inside, std::map<std::string, double>& reads, StageWork& w) {
  auto read = [&](const std::string& name, std::int64_t elems) {
    if (inside.contains(name)) return;
    const double b = double(std::min(elems, z.local_numel(name))) * z.elem_bytes(name);
    reads[name] = std::max(reads[name], b);
  };
  if (s.op == OpKind::norm) {
    const std::string& x = s.operands.at(0);
    const std::int64_t n = z.local_numel(x);
    constexpr double kFlopsPerSquareAdd = 2.0;
    w.flops += kFlopsPerSquareAdd * double(n);
    read(x, n);
    if (n < z.global_numel(x)) ++w.sliced_norms;
  } else {
    const std::int64_t n = z.local_numel(s.name);
    w.flops += double(model::flops_per_element(s.expr)) * double(n);
    for (const auto& name : model::Program::reads(s)) read(name, n);
  }
  if (s.type.shape.empty()) return;  // a scalar result stays in registers
  if (outlives(p, s, inside)) w.hbm_bytes += z.local_bytes(s.name);
}

StageWork work_of(const model::Program& p, const model::Stage& st, const Context& ctx, const Sizer& z) {
  StageWork w;
  w.kind = st.kind;
  w.code = st.code(p);
  w.stmts = st.stmts;
  const std::set<std::string> inside(st.stmts.begin(), st.stmts.end());
  std::map<std::string, double> reads;
  bool group_set = false;
  for (const auto& name : st.stmts) {
    const model::Stmt& s = *p.find_stmt(name);
    if (model::is_communication(s.op)) {
      w.collectives.push_back(collective_of(s, z, ctx.ranks));
      const int g = s.op == OpKind::send ? p.type_of(s.operands.at(0)).group : s.type.group;
      if (!group_set) w.group = g;
      group_set = true;
      if (s.op == OpKind::send) w.dest_group = s.type.group;
    } else if (s.op == OpKind::matmul) {
      const auto a = z.local_dims(s.operands.at(0));
      const auto b = z.local_dims(s.operands.at(1));
      w.has_gemm = true;
      w.gemm = GemmShape{a.size() >= 2 ? model::numel({a.begin(), a.end() - 1}) : 1, b.back(), a.back(),
                         p.type_of(s.operands.at(0)).dtype};
      if (!group_set) w.group = s.type.group;
      group_set = true;
    } else {
      add_elementwise(p, s, z, inside, reads, w);
      if (!group_set) w.group = s.type.group;
      group_set = true;
    }
  }
  for (const auto& [name, bytes] : reads) w.hbm_bytes += bytes;
  return w;
}

}  // namespace

std::vector<StageWork> stage_work(const model::Schedule& s, const Context& ctx) {
  const Sizer z(s.program, ctx);
  std::vector<StageWork> out;
  out.reserve(s.stages.size());
  for (const auto& st : s.stages) out.push_back(work_of(s.program, st, ctx, z));
  return out;
}

}  // namespace coconet::sim
