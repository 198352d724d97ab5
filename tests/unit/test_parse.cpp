// Unit tests of the expression parser, the YAML front end and type inference.
#include <gtest/gtest.h>

#include "model/builder.h"
#include "model/catalog.h"
#include "model/error.h"
#include "model/parse.h"
#include "tests/paths.h"

using namespace coconet::model;

namespace {
Program workload(const std::string& name) {
  return load_program(coconet::test::source_root() + "/workloads/" + name + ".yaml");
}
}  // namespace

TEST(Parse, ExpressionPrecedence) {
  EXPECT_EQ(to_string(parse_expr("a + b * c")), "(a + (b * c))");
  EXPECT_EQ(to_string(parse_expr("(a + b) * c")), "((a + b) * c)");
  EXPECT_EQ(to_string(parse_expr("a - b - c")), "((a - b) - c)");
  EXPECT_EQ(to_string(parse_expr("-a * b")), "(-a * b)");
  EXPECT_EQ(to_string(parse_expr("sqrt(v) + 1e-8")), "(sqrt(v) + 1e-08)");
  EXPECT_EQ(to_string(parse_expr("select(a > 0, a, 0)")), "select((a > 0), a, 0)");
  EXPECT_EQ(to_string(parse_expr("max(a, b)")), "max(a, b)");
}

TEST(Parse, ExpressionEvaluates) {
  // parse_expr leaves every identifier a tensor reference; check() resolves scalars later.
  const Expr e = parse_expr("w - lr*m/(sqrt(v)+eps)");
  const std::map<std::string, double> values = {{"w", 1}, {"lr", 0.5}, {"m", 2}, {"v", 4}, {"eps", 0}};
  ElementContext ctx;
  ctx.tensor = [&](const std::string& n) { return values.at(n); };
  EXPECT_DOUBLE_EQ(eval(e, ctx), 1.0 - 0.5 * 2.0 / 2.0);
}

TEST(Parse, StatementsBecomeOperations) {
  std::uint64_t seeds = 0;
  Stmt s;
  parse_statement("g1 = allreduce(sum, g)", s, seeds);
  EXPECT_EQ(s.name, "g1");
  EXPECT_EQ(s.op, OpKind::allreduce);
  EXPECT_EQ(s.operands, std::vector<std::string>{"g"});
  Stmt u;
  parse_statement("m1 = update(m, beta1*m + (1-beta1)*g1)", u, seeds);
  EXPECT_EQ(u.op, OpKind::update);
  EXPECT_EQ(u.target, "m");
  EXPECT_EQ(tensors_read(u.expr), (std::vector<std::string>{"beta1", "m", "g1"}));
  Stmt d;
  parse_statement("out = dropout(z + b, 0.1) + r", d, seeds);
  EXPECT_EQ(d.op, OpKind::compute);
  EXPECT_EQ(seeds, 1u);
  Stmt snd;
  parse_statement("z1 = send(z, next)", snd, seeds);
  EXPECT_EQ(snd.op, OpKind::send);
  Stmt red;
  parse_statement("t = reduce(max, x, 2)", red, seeds);
  EXPECT_EQ(red.reduce, ReduceOp::max);
  EXPECT_EQ(red.root, 2);
  for (const char* text : {"t = allreduce(mean, x)", "t = reducescatter(mean, x)", "t = reduce(mean, x, 0)"}) {
    Stmt mean;
    parse_statement(text, mean, seeds);
    EXPECT_EQ(mean.reduce, ReduceOp::mean) << text;
  }
  EXPECT_EQ(to_string(ReduceOp::mean), "mean");
}

TEST(Parse, EveryWorkloadLoadsAndChecks) {
  for (const auto& name : list_names("workloads")) {
    SCOPED_TRACE(name);
    const Program p = load_program(resolve_workload(name));
    EXPECT_EQ(p.name, name);
    EXPECT_FALSE(p.stmts.empty());
  }
}

TEST(Inference, AdamLayoutsAndDtypes) {
  const Program p = workload("adam");
  EXPECT_EQ(p.type_of("g1").layout, Layout::replicated());
  EXPECT_EQ(p.type_of("g1").dtype, DType::f16);
  EXPECT_EQ(p.type_of("m1").dtype, DType::f32);
  EXPECT_EQ(p.type_of("w1").layout, Layout::replicated());
  // Scalars are resolved to scalar nodes, not tensors.
  EXPECT_EQ(tensors_read(p.find_stmt("m1")->expr), (std::vector<std::string>{"m", "g1"}));
}

TEST(Inference, MegatronMatmulOfSlicesIsLocal) {
  const Program p = workload("megatron_mlp");
  const auto& y = p.type_of("y");
  EXPECT_EQ(y.layout, Layout::local());
  EXPECT_EQ(to_string(y.shape), "[B*S, H]");
  EXPECT_EQ(p.type_of("out").layout, Layout::replicated());
}

TEST(Inference, SendMovesToTheNextGroup) {
  const Program p = workload("gpt3_pipeline");
  EXPECT_EQ(p.type_of("z").group, 0);
  EXPECT_EQ(p.type_of("z1").group, 1);
  EXPECT_EQ(p.type_of("out").group, 1);
  EXPECT_EQ(p.groups(), 2);
}

TEST(Inference, LambNormsAreReplicatedScalars) {
  const Program p = workload("lamb");
  EXPECT_TRUE(p.type_of("wn").shape.empty());
  EXPECT_EQ(p.type_of("un").layout, Layout::replicated());
  EXPECT_EQ(p.type_of("w1").shape, p.type_of("w").shape);
}

TEST(Inference, ReduceScatterSlicesAndAllgatherReplicates) {
  const Program p = ProgramBuilder("rs")
                        .param("N", 10)
                        .tensor("g", DType::f16, {"N"}, Layout::local())
                        .stmt("s = reducescatter(sum, g)")
                        .stmt("t = s * 2")
                        .stmt("u = allgather(t)")
                        .output("u")
                        .build();
  EXPECT_EQ(p.type_of("s").layout, Layout::sliced(0));
  EXPECT_EQ(p.type_of("t").layout, Layout::sliced(0));
  EXPECT_EQ(p.type_of("u").layout, Layout::replicated());
}

TEST(Inference, BuilderMatchesYaml) {
  const Program y = workload("sgd");
  const Program b = ProgramBuilder("sgd")
                        .param("N", 335708160)
                        .scalar("lr", 1e-3)
                        .tensor("g", DType::f16, {"N"}, Layout::local())
                        .tensor("w", DType::f32, {"N"}, Layout::replicated())
                        .stmt("g1 = allreduce(sum, g)")
                        .stmt("w1 = update(w, w - lr*g1)")
                        .output("w1")
                        .build();
  EXPECT_EQ(to_string(y), to_string(b));
}

TEST(Inference, OverrideSetsSizesAndScalars) {
  Program p = workload("adam");
  override_value(p, "N", "37");
  override_value(p, "lr", "0.5");
  EXPECT_EQ(p.params.at("N"), 37);
  EXPECT_EQ(p.scalars.at("lr"), 0.5);
  EXPECT_THROW(override_value(p, "Q", "1"), coconet::UserError);
  EXPECT_THROW(override_value(p, "N", "-3"), coconet::UserError);
}
