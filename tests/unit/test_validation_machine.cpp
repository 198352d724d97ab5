// The machine a calibration was taken on (validation/machine_identity.h): its
// comment line round-trips, only fields both sides record are compared
// (memory within kMemoryTolerance), COCONET_MACHINE replaces fields and a bad
// one is refused, the cache folder follows XDG, and the warning names both machines.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "model/error.h"
#include "validation/machine_identity.h"

namespace coconet::validation {
namespace {

const MachineIdentity kEpyc{"AMD EPYC 7B13", 2, 23.5, "Open MPI v4.1.4", "2026-12-01"};

TEST(MachineIdentity, CommentRoundTrips) {
  const std::string line = machine_comment(kEpyc);
  EXPECT_EQ(line, "# coconet-machine: cpu=AMD EPYC 7B13; cores=2; memory_GiB=23.5; mpi=Open MPI v4.1.4; date=2026-12-01");
  const auto back = recorded_machine("name: x\n" + line + "\nnodes: 1\n");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->cpu, kEpyc.cpu);
  EXPECT_EQ(back->cores, 2);
  EXPECT_DOUBLE_EQ(back->memory_GiB, 23.5);
  EXPECT_EQ(back->mpi, kEpyc.mpi);
  EXPECT_EQ(back->date, kEpyc.date);
  EXPECT_FALSE(recorded_machine("name: x\n").has_value());
  // A separator inside a value cannot split the record.
  MachineIdentity odd = kEpyc;
  odd.cpu = "A; B";
  EXPECT_EQ(recorded_machine(machine_comment(odd))->cpu, "A  B");
}

TEST(MachineIdentity, OnlyFieldsBothRecordAreCompared) {
  EXPECT_TRUE(differences(kEpyc, kEpyc).empty());
  MachineIdentity xeon = kEpyc;
  xeon.cpu = "Intel Xeon";
  xeon.cores = 4;
  EXPECT_EQ(differences(kEpyc, xeon), (std::vector<std::string>{"cpu", "cores"}));
  const MachineIdentity partial{"AMD EPYC 7B13", 0, 0, "", ""};  // an older record: cpu alone
  EXPECT_TRUE(differences(partial, kEpyc).empty());
  MachineIdentity more = kEpyc;
  more.memory_GiB = 23.5 * (1 + kMemoryTolerance / 2);
  EXPECT_TRUE(differences(kEpyc, more).empty()) << "within the tolerance";
  more.memory_GiB = 23.5 * (1 + 2 * kMemoryTolerance);
  EXPECT_EQ(differences(kEpyc, more), std::vector<std::string>{"memory"});
  more.mpi = "MPICH 4.0";
  EXPECT_EQ(differences(kEpyc, more), (std::vector<std::string>{"memory", "mpi"}));
  MachineIdentity later = kEpyc;
  later.date = "2027-01-01";
  EXPECT_TRUE(differences(kEpyc, later).empty()) << "the date is never compared";
  EXPECT_NE(machine_key(kEpyc), machine_key(xeon));
  EXPECT_EQ(machine_key(kEpyc), machine_key(later));
}

TEST(MachineIdentity, TheEnvironmentReplacesFieldsAndABadOneIsRefused) {
  ::setenv(kMachineEnv, "cpu=Fake CPU; cores=64", 1);
  const MachineIdentity m = this_machine();
  EXPECT_EQ(m.cpu, "Fake CPU");
  EXPECT_EQ(m.cores, 64);
  EXPECT_FALSE(m.date.empty()) << "today";
  ::setenv(kMachineEnv, "cores=many", 1);
  EXPECT_THROW((void)this_machine(), UserError);
  ::setenv(kMachineEnv, "socket=1", 1);
  EXPECT_THROW((void)this_machine(), UserError);
  ::unsetenv(kMachineEnv);
}

TEST(MachineIdentity, CacheFolderFollowsXdg) {
  ::setenv("XDG_CACHE_HOME", "/tmp/xdg-here", 1);
  EXPECT_EQ(user_cache_dir(), "/tmp/xdg-here/coconet");
  ::unsetenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const std::string saved = home ? home : "";
  ::setenv("HOME", "/tmp/home-here", 1);
  EXPECT_EQ(user_cache_dir(), "/tmp/home-here/.cache/coconet");
  ::unsetenv("HOME");
  EXPECT_THROW((void)user_cache_dir(), UserError);
  if (home) ::setenv("HOME", saved.c_str(), 1);
}

TEST(MachineIdentity, TheWarningNamesBothMachinesOrIsEmpty) {
  const std::string text = "name: cpu-local\n" + machine_comment(kEpyc) + "\n";
  MachineIdentity xeon = kEpyc;
  xeon.cpu = "Intel Xeon";
  EXPECT_EQ(other_machine_warning("cpu-local", text, xeon, "so what"),
            "cpu-local was calibrated on another machine: AMD EPYC 7B13, 2 cores, 23.5 GiB, Open MPI v4.1.4 "
            "(2026-12-01); this one is Intel Xeon, 2 cores, 23.5 GiB, Open MPI v4.1.4 (cpu differs): so what");
  EXPECT_EQ(other_machine_warning("cpu-local", text, kEpyc, "so what"), "");
  EXPECT_EQ(other_machine_warning("dgx-h100", "name: dgx-h100\n", xeon, "so what"), "") << "no record, no claim";
}

}  // namespace
}  // namespace coconet::validation
