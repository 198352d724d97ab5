// A small C++ API that builds the same programs as the YAML front end:
//
//   ProgramBuilder b("adam");
//   b.param("N", 1024).scalar("lr", 1e-3);
//   b.tensor("g", DType::f16, {"N"}, Layout::local());
//   b.stmt("g1 = allreduce(sum, g)");
//   b.output("w1");
//   Program p = b.build();  // checked
#pragma once

#include <string>
#include <vector>

#include "model/program.h"

namespace coconet::model {

class ProgramBuilder {
 public:
  explicit ProgramBuilder(std::string name);
  ProgramBuilder& param(const std::string& name, std::int64_t value);
  ProgramBuilder& scalar(const std::string& name, double value);
  ProgramBuilder& tensor(const std::string& name, DType dtype, const std::vector<std::string>& shape,
                         Layout layout, int group = 0, bool shardable = false);
  // `text` is a statement in the DSL: "name = expression".
  ProgramBuilder& stmt(const std::string& text);
  ProgramBuilder& output(const std::string& name);
  [[nodiscard]] Program build() const;  // runs check(); throws UserError

 private:
  Program program_;
  std::uint64_t seeds_ = 0;
};

}  // namespace coconet::model
