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

// Where the ranks run when they span machines (`run --hosts a,b`): the
// hosts, in order, and how many ranks each takes. Empty: every rank on this
// machine.
struct Hosts {
  std::vector<std::string> names;
  std::vector<int> ranks;  // ranks per host, same length as names
};

// The hosts of `--hosts LIST` (comma-separated names or addresses, as mpirun's
// `--host` takes them) for `ranks` ranks, placed in blocks: host i takes the
// next ranks/hosts ranks, the first ranks%hosts one more, so ranks 0..k-1 share
// the first host (a pipeline's stage or a tensor-parallel group stays on one
// machine where it fits). UserError naming `flag` for an empty name, a
// repeated one, a name with a character a host name cannot hold (`:` included:
// the ranks per host come from --ranks) or more hosts than ranks.
[[nodiscard]] Hosts parse_hosts(const std::string& list, int ranks, const std::string& flag);

// The most ranks any host of `hosts` takes (`ranks` when there are none).
[[nodiscard]] int ranks_per_host(const Hosts& hosts, int ranks);

// The full argument list (argv[0] = `mpirun`) that runs `self` with `args` on
// `ranks` ranks placed by `binding`; `as_root` adds --allow-run-as-root. With
// `hosts`: `--host name:ranks,...`, TCP between hosts beside shared memory
// within one, and each variable of `forwarded` passed to every rank with `-x`
// (a remote launcher, ssh, starts ranks with its own environment).
[[nodiscard]] std::vector<std::string> mpirun_arguments(const std::string& mpirun, int ranks, Binding binding,
                                                        const std::string& self,
                                                        const std::vector<std::string>& args, bool as_root,
                                                        const Hosts& hosts = {},
                                                        const std::vector<std::string>& forwarded = {});

// The names of this process's environment variables that start with
// `COCONET_` (coconet's own settings: COCONET_ROOT, the rank status folder,
// the progress switch), which a run across hosts forwards to every rank.
[[nodiscard]] std::vector<std::string> coconet_environment();

// UserError when `ranks` is past model::kMaxLocalRanks.
void check_rank_limit(int ranks);

// The rank limit, then: more ranks than cores time the OS scheduler as much
// as the schedules: refused (UserError naming --ranks and --oversubscribe)
// unless `oversubscribe`, then warned about on stderr when `warn`.
void check_cores(int ranks, bool oversubscribe, bool warn);

// check_cores for a job over `hosts`: the most ranks one host takes against
// this machine's cores (the hosts are taken to be alike), the message naming
// --hosts. Without hosts, check_cores(ranks, ...).
void check_cores(int ranks, const Hosts& hosts, bool oversubscribe, bool warn);

// Runs this process's own command line (/proc/self/exe, /proc/self/cmdline)
// on `ranks` ranks placed by `binding` under mpirun and ends with its exit status: mpirun's
// output passes through; a rank killed by a signal is named with the signal
// and what it was running (exec/rank_status.h), exit 1; SIGINT or SIGTERM
// reach every rank, "interrupted", exit 130. Throws UserError when mpirun
// cannot be found (naming the fix) or started.
// With `hosts`, the ranks run on those machines (mpirun starts them there with
// its remote launcher, ssh unless configured otherwise: OMPI_MCA_plm_rsh_agent).
[[noreturn]] void relaunch_under_mpirun(int ranks, Binding binding, const Hosts& hosts = {});

}  // namespace coconet::exec
