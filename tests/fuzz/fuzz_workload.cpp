// Fuzzes the workload front end: YAML, statements, expressions, type checking;
// a program that parses is also printed and given its initial schedule.
#include "model/parse.h"
#include "model/schedule.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace coconet;
  return fuzz::accept_user_errors([&] {
    const model::Program p = model::parse_program(fuzz::text_of(data, size), "fuzz.yaml");
    (void)model::to_string(p);
    (void)model::initial_schedule(p).name();
  });
}
