// The machine a calibration was taken on: its CPU model, cores, memory, MPI
// library and the date, recorded by `calibrate` in one comment line of the
// topology it writes (the topology's keys are the cost model's alone, as for
// the other records of validation/topology_comment.h), and compared with the
// machine at hand by `run`, `validate` and `predict --backend cpu`, which say
// when a calibration describes another machine. `validate` then calibrates
// into the user's cache folder first (user_cache_dir), never over the file.
//
// Design notes
// - A field that either side does not record is not compared: a calibration
//   older than this record, or one written by hand, checks what it states.
// - The date is recorded, never compared: a machine stays itself.
// - COCONET_MACHINE (kMachineEnv) replaces fields of this machine's identity,
//   in the comment's own "key=value; ..." form: how the tests fake another
//   machine, and how a container whose /proc shows the host states its own.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace coconet::validation {

inline constexpr const char* kMachineComment = "# coconet-machine:";
inline constexpr const char* kMachineEnv = "COCONET_MACHINE";

// Relative difference in total memory within which two records are one
// machine: MemTotal moves by the kernel's reservations (tens of MB between
// kernels and firmware settings on the same host), well under 5% of a machine's memory.
inline constexpr double kMemoryTolerance = 0.05;

struct MachineIdentity {
  std::string cpu;          // /proc/cpuinfo "model name"; "" unknown
  int cores = 0;            // processors online; 0 unknown
  double memory_GiB = 0;    // /proc/meminfo MemTotal; 0 unknown
  std::string mpi;          // the MPI library and version (exec::mpi_library); "" unknown
  std::string date;         // YYYY-MM-DD; "" unknown (never compared)
};

// This machine, today, with the fields COCONET_MACHINE gives replaced.
[[nodiscard]] MachineIdentity this_machine();

// "# coconet-machine: cpu=AMD EPYC; cores=2; memory_GiB=23.5; mpi=Open MPI v4.1.4; date=2026-12-02"
// (unknown fields left out; a ';' or a line break in a value becomes a space).
[[nodiscard]] std::string machine_comment(const MachineIdentity& m);

// The fields of "key=value; ..." (the comment's body, or COCONET_MACHINE's
// value) laid over `base`; an unknown key or a bad number throws UserError
// naming `where`.
[[nodiscard]] MachineIdentity parse_machine_fields(const std::string& body, MachineIdentity base,
                                                   const std::string& where);

// The machine recorded in a topology's text, when it has the comment line.
[[nodiscard]] std::optional<MachineIdentity> recorded_machine(const std::string& topology_text);

// "AMD EPYC, 2 cores, 23.5 GiB, Open MPI v4.1.4" (the known fields).
[[nodiscard]] std::string describe(const MachineIdentity& m);

// The fields known in both that differ ("cpu", "cores", "memory", "mpi").
[[nodiscard]] std::vector<std::string> differences(const MachineIdentity& recorded, const MachineIdentity& here);

// A short stable key of the compared fields (16 hex digits): a cache file's
// name part, so that calibrations of different machines do not collide.
[[nodiscard]] std::string machine_key(const MachineIdentity& m);

// Where coconet keeps what it computes for this user: $XDG_CACHE_HOME/coconet,
// else $HOME/.cache/coconet (the XDG Base Directory default). Throws
// UserError when neither variable is set.
[[nodiscard]] std::string user_cache_dir();

// The one warning line for a topology whose calibration was taken on another
// machine ("cpu-local was calibrated on A (date); this machine is B (cpu
// and cores differ): ..."), ending in `then`; empty when it records no
// machine or the same one.
[[nodiscard]] std::string other_machine_warning(const std::string& topology_name, const std::string& topology_text,
                                                const MachineIdentity& here, const std::string& then);
// The same for a topology named as the commands take it (a name of
// configs/topologies/ or a path), against this machine: read, parsed for its
// name, compared.
[[nodiscard]] std::string other_machine_warning(const std::string& topology_ref, const std::string& then);

}  // namespace coconet::validation
