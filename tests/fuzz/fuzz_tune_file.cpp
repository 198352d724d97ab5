// Fuzzes tune files (`coconet tune --out`, read by `run`/`simulate --schedule
// FILE`): the loader's limits over many documents, each document's workload
// and point, and the schedule of every document for sgd or adam replayed on it.
#include "model/parse.h"
#include "model/schedule_file.h"
#include "tests/fuzz/fuzz_common.h"
#include "tests/paths.h"

namespace {
const coconet::model::Program& workload(const std::string& name) {
  static const coconet::model::Program sgd =
      coconet::model::load_program(coconet::test::source_root() + "/workloads/sgd.yaml");
  static const coconet::model::Program adam =
      coconet::model::load_program(coconet::test::source_root() + "/workloads/adam.yaml");
  return name == "sgd" ? sgd : adam;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace coconet;
  return fuzz::accept_user_errors([&] {
    const auto docs = model::schedule_documents(fuzz::text_of(data, size), "fuzz.yaml");
    for (const auto& d : docs) {
      if (d.point) (void)d.point->text();
      if (d.workload == "sgd" || d.workload == "adam")
        (void)model::to_yaml(model::schedule_from_node(workload(d.workload), d.root, "fuzz.yaml"));
    }
  });
}
