// The C++ builder API: the same programs as the YAML front end.
#include "model/builder.h"

#include "model/parse.h"

namespace coconet::model {

ProgramBuilder::ProgramBuilder(std::string name) { program_.name = std::move(name); }

ProgramBuilder& ProgramBuilder::param(const std::string& name, std::int64_t value) {
  program_.params[name] = value;
  return *this;
}

ProgramBuilder& ProgramBuilder::scalar(const std::string& name, double value) {
  program_.scalars[name] = value;
  return *this;
}

ProgramBuilder& ProgramBuilder::tensor(const std::string& name, DType dtype,
                                       const std::vector<std::string>& shape, Layout layout,
                                       int group, bool shardable) {
  TensorDecl t{name, {dtype, {}, layout, group}, shardable};
  for (const auto& d : shape) t.type.shape.push_back(parse_dim(d));
  program_.inputs.push_back(std::move(t));
  return *this;
}

ProgramBuilder& ProgramBuilder::stmt(const std::string& text) {
  Stmt s;
  parse_statement(text, s, seeds_);
  program_.stmts.push_back(std::move(s));
  return *this;
}

ProgramBuilder& ProgramBuilder::output(const std::string& name) {
  program_.outputs.push_back(name);
  return *this;
}

Program ProgramBuilder::build() const {
  Program p = program_;
  check(p);
  return p;
}

}  // namespace coconet::model
