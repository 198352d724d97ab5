// Deciding the single-kernel path of a fused op (see lsa_fused_choice.h).
#include "exec/cuda/lsa_fused_choice.h"

namespace coconet::exec::cuda {
namespace kc = coconet::kernels::cuda;

namespace {

// Why `form` is not of the single kernel's shape, or "" when it is.
std::string shape_refusal(const plan::FusedForm& form, const model::Stmt* head) {
  if (!form.norms_before.empty()) return "it has a norm phase before its program";
  if (form.passes.size() != 1)
    return "its program runs in " + std::to_string(form.passes.size()) + " passes";
  if (!form.passes[0].norms_after.empty()) return "it has a norm phase after its program";
  if (head == nullptr) return "its head collective '" + form.head + "' is not a statement";
  if (head->op != model::OpKind::reducescatter && head->op != model::OpKind::allreduce)
    return "its head is not a reduce-scatter or an allreduce";
  if (head->reduce != model::ReduceOp::sum)
    return "its head reduces with another operation than sum";
  if (head->operands.size() != 1) return "its head has not exactly one operand";
  return "";
}

}  // namespace

std::optional<LsaFusedRoles> lsa_single_kernel(const plan::FusedForm& form,
                                               const model::Program& program, std::string& why) {
  const model::Stmt* head = program.find_stmt(form.head);
  why = shape_refusal(form, head);
  if (!why.empty()) return std::nullopt;
  const kernels::ElementwiseProgram& prog = form.passes[0].program;
  LsaFusedRoles r;
  int reduced = 0;
  for (const auto& name : prog.input_names) {
    const bool is_head = name == form.head;
    reduced += is_head ? 1 : 0;
    r.inputs.push_back(is_head ? kc::LsaRole::reduced : kc::LsaRole::local);
    r.input_windows.push_back(is_head ? head->operands.front() : "");
  }
  if (reduced != 1) {
    why =
        "its program does not read the head's result '" + form.head + "' exactly once as an input";
    return std::nullopt;
  }
  const bool all_gathered = head->op == model::OpKind::allreduce;
  if (all_gathered && !form.gathers.empty()) {
    why = "an allreduce head followed by allgathers";
    return std::nullopt;
  }
  for (const auto& name : prog.output_names) {
    const std::string into = all_gathered ? name : plan::gather_of(form, program, name);
    r.outputs.push_back(into.empty() ? kc::LsaRole::local : kc::LsaRole::gathered);
    r.output_windows.push_back(into);
  }
  return r;
}

}  // namespace coconet::exec::cuda
