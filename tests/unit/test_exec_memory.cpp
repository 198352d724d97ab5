// exec::check_memory: a run that does not fit in a rank's memory is refused
// before anything is allocated, with sizes that would fit.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "dry_backend.h"
#include "exec/runtime.h"
#include "model/enumerate.h"
#include "model/error.h"
#include "model/parse.h"
#include "plan/capabilities.h"

namespace coconet::exec {
namespace {

// SGD over a gradient of N and a weight of N x W: two sizes, the bytes in N times W.
constexpr const char* kSgd =
    "name: sgd2d\nparams: {N: 1, W: 1}\ntensors:\n"
    "  g: {dtype: f32, shape: [N, W], layout: local}\n  w: {dtype: f32, shape: [N, W], layout: replicated}\n"
    "program:\n  - g1 = allreduce(sum, g)\n  - w1 = update(w, w - 0.01*g1)\noutputs: [w1]\n";

struct Fixture {
  testing::DryBackend backend{0, 2, plan::cpu_capabilities()};
  model::Program program = model::parse_program(kSgd, "<test>");
  std::vector<model::Schedule> schedules = model::enumerate_schedules(program);
  RunOptions options;
  Fixture() {
    backend.set_groups(1);
    options.interpreter_limit = 0;
  }
};

// The --set flags of a refusal's hint, as sizes.
model::Bindings hinted_sizes(const std::string& message, model::Bindings sizes) {
  static const std::regex flag(R"(--set (\w+)=(\d+))");
  int found = 0;
  for (std::sregex_iterator it(message.begin(), message.end(), flag), end; it != end; ++it, ++found)
    sizes[(*it)[1].str()] = std::stoll((*it)[2].str());
  EXPECT_GT(found, 0) << message;
  return sizes;
}

TEST(CheckMemory, ARunThatFitsPasses) {
  Fixture f;
  f.backend.set_available_bytes(std::int64_t{1} << 30);
  EXPECT_NO_THROW(check_memory(f.backend, f.program, f.schedules, {{"N", 1024}, {"W", 1024}}, f.options));
}

// Far past the memory (4 TiB of f32 values against 64 MiB): the hinted sizes fit.
TEST(CheckMemory, ARunPastTheMemoryIsRefusedWithSizesThatFit) {
  Fixture f;
  f.backend.set_available_bytes(std::int64_t{64} << 20);
  const model::Bindings sizes{{"N", std::int64_t{1} << 20}, {"W", std::int64_t{1} << 20}};
  std::string message;
  try {
    check_memory(f.backend, f.program, f.schedules, sizes, f.options);
    FAIL() << "a run of terabytes fitted in 64 MiB";
  } catch (const UserError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("sgd2d at N=1048576 W=1048576 needs"), std::string::npos) << message;
  const model::Bindings hint = hinted_sizes(message, sizes);
  EXPECT_NO_THROW(check_memory(f.backend, f.program, f.schedules, hint, f.options)) << message;
  // Not smaller than it needs to be: doubling either hinted size no longer fits.
  for (const auto& [name, value] : hint) {
    model::Bindings twice = hint;
    twice[name] = value * 2;
    EXPECT_THROW(check_memory(f.backend, f.program, f.schedules, twice, f.options), UserError) << name;
  }
}

}  // namespace
}  // namespace coconet::exec
