// Fuzzes model files (models/*.yaml, read by `coconet step`): the shared YAML
// loader's limits, then every key and value check of the model reader.
#include "step/spec.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace coconet;
  return fuzz::accept_user_errors([&] { (void)step::parse_model(fuzz::text_of(data, size), "fuzz.yaml"); });
}
