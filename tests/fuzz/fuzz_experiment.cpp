// Fuzzes the experiment parser and the size sweeps' expansion (the point limit).
#include "model/experiment.h"
#include "model/parse.h"
#include "tests/fuzz/fuzz_common.h"
#include "tests/paths.h"

namespace {
const coconet::model::Program& sgd() {
  static const coconet::model::Program p =
      coconet::model::load_program(coconet::test::source_root() + "/workloads/sgd.yaml");
  return p;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace coconet;
  return fuzz::accept_user_errors([&] {
    const model::Experiment e = model::parse_experiment(fuzz::text_of(data, size), "fuzz.yaml");
    for (const auto& run : e.workloads)
      if (run.workload == "sgd") (void)model::size_points(run, sgd());
  });
}
