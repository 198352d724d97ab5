// Reading a fused stage's shape: one walk over its statements in order, then
// which values may stay in scratch.
#include "plan/fused_form.h"

#include <algorithm>

#include <fmt/core.h>

namespace coconet::plan {
namespace {

using model::OpKind;
using model::Stmt;

bool is_head(OpKind k) { return k == OpKind::allreduce || k == OpKind::reducescatter || k == OpKind::send; }

class FormReader {
 public:
  FormReader(const model::Program& p, const model::Stage& stage, const std::map<std::string, ValueView>& views)
      : p_(p), stage_(stage), views_(views) {}

  std::optional<FusedForm> read(std::string& why) {
    const Stmt& head = stmt(stage_.stmts.front());
    if (!is_head(head.op)) return fail(why, fmt::format("it starts with '{}', not a collective", head.name));
    form_.head = head.name;
    inside_.insert(head.name);
    form_.passes.emplace_back();
    for (std::size_t i = 1; i < stage_.stmts.size(); ++i)
      if (!add(stmt(stage_.stmts[i]), why)) return std::nullopt;
    if (form_.passes.back().stmts.empty()) form_.passes.pop_back();
    if (form_.passes.empty()) return fail(why, "no element-wise computation follows the collective");
    if (!form_.gathers.empty() && head.op != OpKind::reducescatter)
      return fail(why, "allgathers finish only a fused allreduce (a reducescatter first)");
    find_scratch();
    compile();
    return std::move(form_);
  }

 private:
  const Stmt& stmt(const std::string& n) const { return *p_.find_stmt(n); }
  const ValueView& view(const std::string& n) const { return views_.at(n); }

  static std::optional<FusedForm> fail(std::string& why, std::string reason) {
    why = std::move(reason);
    return std::nullopt;
  }

  static bool reject(std::string& why, std::string reason) {
    why = std::move(reason);
    return false;
  }

  // Whether `n` covers the head's rows and columns the way the head's result
  // does (a send's result is what the receiving group gets).
  bool over_head_rows(const std::string& n) const {
    const auto& h = view(form_.head);
    const auto& v = view(n);
    return v.rows == h.rows && v.cols == h.cols && v.type.layout == h.type.layout;
  }

  bool add(const Stmt& s, std::string& why) {
    if (model::is_elementwise(s.op)) {
      if (!form_.gathers.empty())
        return reject(why, fmt::format("'{}' computes after an allgather", s.name));
      if (!over_head_rows(s.name))
        return reject(why, fmt::format("'{}' covers other rows or another layout than '{}'", s.name, form_.head));
      form_.passes.back().stmts.push_back(s.name);
      pass_of_[s.name] = static_cast<int>(form_.passes.size()) - 1;
      inside_.insert(s.name);
      return true;
    }
    if (s.op == OpKind::norm) {
      const std::string& in = s.operands.front();
      FusedNorm n{s.name, in, view(in).type.layout.is_sliced()};
      if (in == form_.head)
        return reject(why, fmt::format("norm '{}' measures the collective's result itself", s.name));
      if (!inside_.contains(in)) {
        form_.norms_before.push_back(std::move(n));
      } else if (form_.passes.back().stmts.empty()) {  // a second norm after the same pass
        if (form_.passes.size() < 2) return reject(why, fmt::format("norm '{}' measures no computed value", s.name));
        form_.passes[form_.passes.size() - 2].norms_after.push_back(std::move(n));
      } else {
        form_.passes.back().norms_after.push_back(std::move(n));
        form_.passes.emplace_back();
      }
      inside_.insert(s.name);
      return true;
    }
    if (s.op == OpKind::allgather) {
      const std::string& in = s.operands.front();
      if (!pass_of_.contains(in))
        return reject(why, fmt::format("allgather '{}' gathers '{}', which no pass computes", s.name, in));
      if (view(s.name).rows != view(form_.head).rows)
        return reject(why, fmt::format("allgather '{}' covers other rows than '{}'", s.name, form_.head));
      form_.gathers.push_back(s.name);
      inside_.insert(s.name);
      return true;
    }
    return reject(why, fmt::format("'{}' ({}) is neither element-wise, a norm nor a trailing allgather", s.name,
                                 model::to_string(s.op)));
  }

  // Whether `n` is read after the stage: a program output, or read by a statement outside it.
  bool read_outside(const std::string& n) const {
    if (std::find(p_.outputs.begin(), p_.outputs.end(), n) != p_.outputs.end()) return true;
    for (int u : p_.users(n))
      if (!inside_.contains(p_.stmts[static_cast<std::size_t>(u)].name)) return true;
    return false;
  }

  // Readers of `n` inside the stage.
  std::vector<const Stmt*> readers(const std::string& n) const {
    std::vector<const Stmt*> out;
    for (int u : p_.users(n)) {
      const Stmt& s = p_.stmts[static_cast<std::size_t>(u)];
      if (inside_.contains(s.name)) out.push_back(&s);
    }
    return out;
  }

  // The head's result stays in scratch when only the first pass reads it; a
  // pass's result when only its own pass (registers) and allgathers read it.
  void find_scratch() {
    const auto only = [&](const std::string& n, int pass, bool gathers_too) {
      if (read_outside(n)) return false;
      for (const Stmt* r : readers(n)) {
        const auto it = pass_of_.find(r->name);
        const bool same_pass = it != pass_of_.end() && it->second == pass;
        const bool gather = gathers_too && r->op == OpKind::allgather;
        if (!same_pass && !gather) return false;
      }
      return true;
    };
    if (only(form_.head, 0, false)) form_.scratch.insert(form_.head);
    for (const auto& [name, pass] : pass_of_)
      if (only(name, pass, true)) form_.scratch.insert(name);
  }

  void compile() {
    std::map<std::string, model::DType> types;
    for (const auto& [name, v] : views_) types.emplace(name, v.type.dtype);
    for (auto& pass : form_.passes) {
      std::vector<model::ElementwiseStmt> stmts;
      for (const auto& n : pass.stmts) {
        const Stmt& s = stmt(n);
        stmts.push_back({s.name, s.expr, s.type.dtype});
      }
      pass.program = model::compile_elementwise(stmts, types, p_.scalars);
    }
  }

  const model::Program& p_;
  const model::Stage& stage_;
  const std::map<std::string, ValueView>& views_;
  FusedForm form_;
  std::set<std::string> inside_;
  std::map<std::string, int> pass_of_;
};

}  // namespace

std::string gather_of(const FusedForm& form, const model::Program& program, const std::string& value) {
  for (const auto& g : form.gathers)
    if (program.find_stmt(g)->operands.front() == value) return g;
  return {};
}

std::optional<FusedForm> fused_form(const model::Program& program, const model::Stage& stage,
                                    const std::map<std::string, ValueView>& views, std::string& why) {
  if (stage.kind != model::StageKind::fused || stage.stmts.empty()) {
    why = "not a fused stage";
    return std::nullopt;
  }
  return FormReader(program, stage, views).read(why);
}

}  // namespace coconet::plan
