// The generated programs bench_gpu times (plain C++, kept out of the .cu so
// nvcc never parses the model headers): Adam's three update statements of
// workloads/adam.yaml compiled by kernels::compile_elementwise, as the
// runtime compiles a fused element-wise stage on one rank (g1 = g).
#include "bench/bench_gpu_programs.h"

#include <map>
#include <string>

#include "model/catalog.h"
#include "model/parse.h"
#include "model/program.h"

namespace coconet::bench {

model::ElementwiseProgram adam_program() {
  const model::Program p = model::load_program(model::resolve_workload("adam"));
  std::vector<model::ElementwiseStmt> stmts;
  for (const auto& s : p.stmts)
    if (s.op == model::OpKind::update) stmts.push_back({s.name, s.expr, s.type.dtype});
  std::map<std::string, model::DType> inputs;
  for (const auto& t : p.inputs) inputs[t.name] = t.type.dtype;
  inputs["g1"] = p.type_of("g1").dtype;  // the allreduce's output, g itself on one rank
  return model::compile_elementwise(stmts, inputs, p.scalars);
}

}  // namespace coconet::bench
