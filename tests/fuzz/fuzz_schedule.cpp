// Fuzzes schedule YAML: directives replayed on the adam workload, knobs, and
// the stages/overlaps a file may list.
#include "model/parse.h"
#include "model/schedule.h"
#include "tests/fuzz/fuzz_common.h"
#include "tests/paths.h"

namespace {
const coconet::model::Program& adam() {
  static const coconet::model::Program p =
      coconet::model::load_program(coconet::test::source_root() + "/workloads/adam.yaml");
  return p;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace coconet;
  return fuzz::accept_user_errors([&] {
    const model::Schedule s = model::schedule_from_yaml(adam(), fuzz::text_of(data, size), "fuzz.yaml");
    (void)model::to_yaml(s);
  });
}
