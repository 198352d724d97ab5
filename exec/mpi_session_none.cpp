// A build without MPI (the sanitizer build, COCONET_WITH_MPI=OFF): no backend
// here needs MPI, and one that would says so.
#include "exec/mpi_session.h"

#include "model/error.h"

namespace coconet::exec {

void ensure_mpi() {
  throw UserError("this coconet was built without MPI; install Open MPI (scripts/install-deps.sh) and rebuild");
}

void finalize_mpi() {}

std::string mpi_library() { return "none"; }

}  // namespace coconet::exec
