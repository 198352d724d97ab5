// A test-only backend for fused ops: forwards everything to a real backend,
// counts the fused calls it is given and runs them with the default pipeline
// (exec/fused_call.h), or, in `wrong` mode, with a copy of each program whose
// first binary operation is another one (+ for anything else, - for +): a
// wrong generated program, which the verifier must catch.
#pragma once

#include <memory>
#include <vector>

#include "exec/fused_call.h"
#include "perturbing_backend.h"

namespace coconet::exec::testing {

class FusedCountingBackend final : public PerturbingBackend {
 public:
  FusedCountingBackend(std::unique_ptr<Backend> inner, bool wrong)
      : PerturbingBackend(std::move(inner), Fault::none, 0), wrong_(wrong) {}

  [[nodiscard]] int fused_calls() const { return calls_; }

  void fused(const FusedCall& call) override {
    ++calls_;
    if (!wrong_) return run_fused(*this, call);
    FusedCall changed = call;
    std::vector<model::ElementwiseProgram> programs;  // the changed copies, alive during the call
    programs.reserve(call.passes.size());
    for (auto& pass : changed.passes) {
      if (pass.pieces.empty() || pass.pieces.front().computes.empty()) continue;
      programs.push_back(*pass.pieces.front().computes.front().program);
      for (auto& in : programs.back().code)
        if (in.code == model::OpCode::binary) {
          const auto add = static_cast<std::uint8_t>(model::BinaryOp::add);
          in.op = in.op == add ? static_cast<std::uint8_t>(model::BinaryOp::sub) : add;
          break;
        }
      for (auto& piece : pass.pieces)
        for (auto& c : piece.computes) c.program = &programs.back();
    }
    run_fused(*this, changed);
    synchronize();  // the copies die here; work queued on a stream must not outlive them
  }

 private:
  bool wrong_;
  int calls_ = 0;
};

}  // namespace coconet::exec::testing
