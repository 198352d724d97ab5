// Starting the ranks of a job from a plain command line: outside mpirun,
// `coconet run|validate|calibrate --ranks N` runs
// `mpirun -np N <this same command line>` and watches it, with the flags a small machine or a
// container needs (more ranks than cores, shared memory between local ranks
// without ptrace, ranks that yield the core while they wait, root allowed) and
// the ranks pinned where that measures better (Binding), so nobody has to know
// mpirun. Used by cli/ and validation/.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plan/capabilities.h"

namespace coconet::exec {

// mpirun's path: $COCONET_MPIRUN when set and not empty, else the first
// executable `mpirun` on $PATH; nullopt when there is none.
[[nodiscard]] std::optional<std::string> find_mpirun();

// Where mpirun puts the ranks' threads.
enum class Binding {
  // The OS places every thread: more ranks than cores (a pinned rank could not
  // leave a shared core), and the cuda backend (NCCL's proxy thread needs a
  // core beside the rank's own).
  none,
  // Each rank pinned to a core of its own: its threads never migrate and no
  // two ranks share a core. The cpu backend's collectives need both ranks
  // to progress in turn; measured here (2 cores, 2 ranks, sgd N=4096 `AR-C`,
  // 8 launches of 50 steps each), the median step was 38-89 us floating
  // and 39-50 us pinned.
  core,
};

// mpirun's --bind-to value for Binding::core.
inline constexpr const char* kPinnedBinding = "core:overload-allowed,if-supported";

// `core` for the cpu backend at no more ranks than this machine has CPUs online, else `none`.
[[nodiscard]] Binding binding_for(plan::BackendKind backend, int ranks);

// The full argument list (argv[0] = `mpirun`) that runs `self` with `args` on
// `ranks` ranks placed by `binding`; `as_root` adds --allow-run-as-root.
[[nodiscard]] std::vector<std::string> mpirun_arguments(const std::string& mpirun, int ranks, Binding binding,
                                                        const std::string& self,
                                                        const std::vector<std::string>& args, bool as_root);

// UserError when `ranks` is past model::kMaxLocalRanks.
void check_rank_limit(int ranks);

// The rank limit, then: more ranks than cores time the OS scheduler as much
// as the schedules: refused (UserError naming --ranks and --oversubscribe)
// unless `oversubscribe`, then warned about on stderr when `warn`.
void check_cores(int ranks, bool oversubscribe, bool warn);

// Runs this process's own command line (/proc/self/exe, /proc/self/cmdline)
// on `ranks` ranks placed by `binding` under mpirun and ends with its exit status: mpirun's
// output passes through; a rank killed by a signal is named with the signal
// and what it was running (exec/rank_status.h), exit 1; SIGINT or SIGTERM
// reach every rank, "interrupted", exit 130. Throws UserError when mpirun
// cannot be found (naming the fix) or started.
[[noreturn]] void relaunch_under_mpirun(int ranks, Binding binding);

}  // namespace coconet::exec
