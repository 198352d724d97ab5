// Fuzzes the statement and expression parser on its own (no YAML around it).
#include "model/expr.h"
#include "model/parse.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace coconet;
  const std::string text = fuzz::text_of(data, size);
  fuzz::accept_user_errors([&] {
    const model::Expr e = model::parse_expr(text);
    (void)model::to_string(e);
    (void)model::tensors_read(e);
  });
  return fuzz::accept_user_errors([&] {
    model::Stmt s;
    std::uint64_t seeds = 0;
    model::parse_statement(text, s, seeds);
  });
}
