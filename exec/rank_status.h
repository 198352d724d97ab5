// What each rank of a job that coconet started is running, noted in a file
// per rank in the folder the supervising coconet names ($COCONET_RANK_STATUS_DIR,
// exec/mpirun.h), so that when a rank dies of a signal the supervisor can say
// which rank, which signal and what it was running. Outside such a job the
// notes cost nothing.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

namespace coconet::exec {

inline constexpr const char* kRankStatusEnv = "COCONET_RANK_STATUS_DIR";

// Replaces this rank's note with `parts` joined (e.g. "adam",
// " fuse(RS-C-AG)+asSlice(m,v)", ", stage fuse(RS-C-AG)"); outside a
// supervised job nothing is joined or written.
void note_rank_status(std::initializer_list<std::string_view> parts);

// The last note of world rank `rank` in `dir` ("" when it left none).
[[nodiscard]] std::string read_rank_status(const std::string& dir, int rank);

}  // namespace coconet::exec
