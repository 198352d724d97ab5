// The launcher's argument list (exec/launch.h): the flags a container needs, root only when root.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <unistd.h>

#include "exec/launch.h"

namespace coconet::exec {
namespace {

// The launcher's argument list (exec/launch.h): the flags a container needs, root only when root.
TEST(Launch, MpirunArgumentsCarryTheContainerFlagsAndTheCommand) {
  const auto args = mpirun_arguments("/usr/bin/mpirun", 3, Binding::none, "/bin/coconet", {"run", "sgd"}, false);
  const std::vector<std::string> head{"/usr/bin/mpirun", "-np", "3"};
  EXPECT_TRUE(std::equal(head.begin(), head.end(), args.begin()));
  for (const char* flag : {"--oversubscribe", "self,vader", "btl_vader_single_copy_mechanism", "mpi_yield_when_idle"})
    EXPECT_NE(std::find(args.begin(), args.end(), flag), args.end()) << flag;
  EXPECT_EQ(std::find(args.begin(), args.end(), "--allow-run-as-root"), args.end());
  EXPECT_EQ(args[args.size() - 3], "/bin/coconet");
  EXPECT_EQ(args.back(), "sgd");
  const auto root = mpirun_arguments("mpirun", 2, Binding::none, "x", {}, true);
  EXPECT_NE(std::find(root.begin(), root.end(), "--allow-run-as-root"), root.end());
}

// The value that follows --bind-to.
std::string bind_to(const std::vector<std::string>& args) {
  const auto at = std::find(args.begin(), args.end(), "--bind-to");
  return at == args.end() || at + 1 == args.end() ? "" : *(at + 1);
}

// Pinned ranks for the cpu backend within the cores, the OS's placement otherwise.
TEST(Launch, RanksArePinnedToCoresOnlyForTheCpuBackendWithinTheCores) {
  EXPECT_EQ(bind_to(mpirun_arguments("mpirun", 2, Binding::core, "x", {}, false)), kPinnedBinding);
  EXPECT_EQ(bind_to(mpirun_arguments("mpirun", 2, Binding::none, "x", {}, false)), "none");
  const int cores = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  EXPECT_EQ(binding_for(plan::BackendKind::cpu, 1), Binding::core);
  EXPECT_EQ(binding_for(plan::BackendKind::cpu, cores), Binding::core);
  EXPECT_EQ(binding_for(plan::BackendKind::cpu, cores + 1), Binding::none);
  EXPECT_EQ(binding_for(plan::BackendKind::cuda, 1), Binding::none);
}

}  // namespace
}  // namespace coconet::exec
