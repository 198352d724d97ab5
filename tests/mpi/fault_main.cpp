// A job in which one rank fails on purpose (throws, dies, or hangs at its
// first allreduce), guarded the way `coconet run` guards its ranks: the
// failing rank reports itself and aborts the job, a watchdog aborts a hung
// one. The tests check that the whole job exits non-zero, quickly.
#include <cstdio>
#include <cstring>
#include <string>

#include "exec/runtime.h"
#include "exec/watchdog.h"
#include "model/catalog.h"
#include "model/parse.h"
#include "perturbing_backend.h"

namespace {

// Seconds without progress before the watchdog aborts (short: the test hangs on purpose).
constexpr double kWatchdogS = 3.0;
constexpr int kFailingRank = 1;
constexpr int kAbortCode = 3;

coconet::exec::testing::Fault parse_fault(const std::string& s) {
  using coconet::exec::testing::Fault;
  if (s == "throw") return Fault::throw_error;
  if (s == "die") return Fault::die;
  if (s == "hang") return Fault::hang;
  return Fault::none;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace coconet::exec;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s throw|die|hang\n", argv[0]);
    return 2;
  }
  testing::PerturbingBackend backend(make_backend("cpu"), parse_fault(argv[1]), kFailingRank);
  Watchdog watchdog(kWatchdogS, [&backend] {
    std::fprintf(stderr, "rank %d: no progress for %.0f s; aborting the job\n", backend.world_rank(), kWatchdogS);
    backend.abort_job(kAbortCode);
  });
  try {
    const auto p = coconet::model::load_program(coconet::model::resolve_workload("sgd"));
    coconet::model::Bindings sizes{{"N", 1000}};
    RunOptions o;
    o.iters = 1;
    o.warmup = 0;
    const auto refs = compute_references(backend, p, sizes, o);
    (void)refs;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d failed while running: %s; aborting the job\n", backend.world_rank(), e.what());
    backend.abort_job(kAbortCode);
  }
  return 0;
}
