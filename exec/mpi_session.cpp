// One MPI initialisation per process; finalised by a static guard at exit.
#include "exec/mpi_session.h"

#include <mpi.h>

#include <algorithm>
#include <string>

#include "exec/rank_status.h"
#include "model/error.h"

namespace coconet::exec {
namespace {

struct Session {
  bool initialised_here = false;
  ~Session() { finalize_mpi(); }
};

Session& session() {
  static Session s;
  return s;
}

}  // namespace

void ensure_mpi() {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (initialised) return;
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  session().initialised_here = true;
  note_rank_status({"started"});  // the supervisor's sign that this rank of the job came up (exec/mpirun.h)
  if (provided < MPI_THREAD_MULTIPLE)
    throw UserError(
        "this MPI library does not provide MPI_THREAD_MULTIPLE, which the cpu backend needs for "
        "its communication thread; use an Open MPI built with thread support");
}

std::string mpi_library() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "unknown MPI";
  const std::string version(text, static_cast<std::size_t>(std::max(length, 0)));
  const std::string first = version.substr(0, version.find(','));
  return first.substr(0, first.find_last_not_of(" \n") + 1);
}

void finalize_mpi() {
  if (!session().initialised_here) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
  session().initialised_here = false;
}

}  // namespace coconet::exec
