// Starting the ranks of `validate` and `calibrate`: outside mpirun, `--ranks N`
// runs this same command line again as `mpirun -np N` (exec/mpirun.h, the
// same relaunch as `coconet run`), telling the ranks whether the user's
// stderr is a terminal so the progress bar shows there and nowhere else.
#pragma once

#include <functional>

#include "exec/backend.h"
#include "exec/mpirun.h"
#include "plan/capabilities.h"

namespace coconet::validation {

// Replaces this process with mpirun running this command on `ranks` ranks,
// placed for `backend` (exec::binding_for), over `hosts` when given (then
// unpinned: ranks of hosts that share cores, such as containers or network
// namespaces on one machine, would be pinned to the same ones, and pinning
// has not been measured across hosts).
// Throws UserError when mpirun (or $COCONET_MPIRUN) cannot be found or started.
[[noreturn]] void run_under_mpirun(int ranks, plan::BackendKind backend, const exec::Hosts& hosts = {});

// Runs `work` on this rank. With more than one rank, an exception on a rank is
// reported from that rank (host and rank named) and aborts the whole job with
// the exit code main would use (1 run failure, 2 bad input, 3 internal), so no
// peer hangs in a collective; with one rank it propagates as usual.
void run_guarded(exec::Backend& backend, const std::function<void()>& work);

}  // namespace coconet::validation
