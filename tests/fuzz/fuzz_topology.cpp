// Fuzzes the topology parser (every key, its ranges, the GPU-count limits).
#include "sim/topology.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace coconet;
  return fuzz::accept_user_errors([&] {
    const sim::Topology t = sim::parse_topology(fuzz::text_of(data, size), "fuzz.yaml");
    (void)sim::describe(t);
  });
}
