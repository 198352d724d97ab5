// The launcher's argument list (exec/launch.h): the flags a container needs, root only when root.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "exec/launch.h"

namespace coconet::exec {
namespace {

// The launcher's argument list (exec/launch.h): the flags a container needs, root only when root.
TEST(Launch, MpirunArgumentsCarryTheContainerFlagsAndTheCommand) {
  const auto args = mpirun_arguments("/usr/bin/mpirun", 3, "/bin/coconet", {"run", "sgd"}, false);
  const std::vector<std::string> head{"/usr/bin/mpirun", "-np", "3"};
  EXPECT_TRUE(std::equal(head.begin(), head.end(), args.begin()));
  for (const char* flag : {"--oversubscribe", "self,vader", "btl_vader_single_copy_mechanism", "mpi_yield_when_idle"})
    EXPECT_NE(std::find(args.begin(), args.end(), flag), args.end()) << flag;
  EXPECT_EQ(std::find(args.begin(), args.end(), "--allow-run-as-root"), args.end());
  EXPECT_EQ(args[args.size() - 3], "/bin/coconet");
  EXPECT_EQ(args.back(), "sgd");
  const auto root = mpirun_arguments("mpirun", 2, "x", {}, true);
  EXPECT_NE(std::find(root.begin(), root.end(), "--allow-run-as-root"), root.end());
}

}  // namespace
}  // namespace coconet::exec
