// Starting and guarding the ranks of validate and calibrate; the relaunch
// itself is exec's (exec/mpirun.h).
#include "validation/mpirun.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/core.h>
#include <unistd.h>

#include "exec/mpirun.h"
#include "model/error.h"
#include "validation/progress.h"

namespace coconet::validation {

void run_under_mpirun(int ranks, plan::BackendKind backend, const exec::Hosts& hosts) {
  ::setenv(kProgressEnv, ::isatty(STDERR_FILENO) ? "1" : "0", 1);
  exec::relaunch_under_mpirun(ranks, hosts.names.empty() ? exec::binding_for(backend, ranks) : exec::Binding::none,
                              hosts);
}

void run_guarded(exec::Backend& backend, const std::function<void()>& work) {
  if (backend.world_size() == 1) {
    work();
    return;
  }
  int code = kExitOk;
  std::string what;
  try {
    work();
    return;
  } catch (const std::exception& e) {
    code = exit_code_for(e);
    what = e.what();
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::fflush(stdout);
  fmt::print(stderr, "coconet: rank {} ({}) failed: {}; aborting the job\n", backend.world_rank(), host, what);
  std::fflush(stderr);
  backend.abort_job(code);
}

}  // namespace coconet::validation
