// The launcher's argument list (exec/mpirun.h): the flags a container needs, root only when root.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <unistd.h>

#include "exec/mpirun.h"
#include "model/error.h"

namespace coconet::exec {
namespace {

// The launcher's argument list (exec/mpirun.h): the flags a container needs, root only when root.
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

// `--hosts a,b`: ranks in blocks (the first hosts take the remainder), each
// host once, names a host can have; more hosts than ranks refused.
TEST(Launch, HostsTakeTheRanksInBlocks) {
  const auto h = parse_hosts("node1,node2", 5, "--hosts");
  EXPECT_EQ(h.names, (std::vector<std::string>{"node1", "node2"}));
  EXPECT_EQ(h.ranks, (std::vector<int>{3, 2}));
  EXPECT_EQ(ranks_per_host(h, 5), 3);
  EXPECT_EQ(parse_hosts("10.0.0.1", 4, "--hosts").ranks, (std::vector<int>{4}));
  EXPECT_EQ(ranks_per_host(Hosts{}, 7), 7);
  for (const char* bad : {"", "a,", ",a", "a,,b", "a,a", "a:2,b", "a b", "a;b"})
    EXPECT_THROW((void)parse_hosts(bad, 4, "--hosts"), UserError) << "'" << bad << "'";
  EXPECT_THROW((void)parse_hosts("a,b,c", 2, "--hosts"), UserError);
  try {
    (void)parse_hosts("a:2", 2, "--hosts");
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--ranks"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--hosts 'a:2'"), std::string::npos) << e.what();
  }
}

// Across hosts: mpirun's --host with each host's slots, TCP beside shared
// memory, slots filled in order, coconet's variables forwarded (-x); on one
// host none of them.
TEST(Launch, HostsReachMpirunWithTcpAndTheForwardedVariables) {
  const auto hosts = parse_hosts("a,b", 3, "--hosts");
  const auto args = mpirun_arguments("mpirun", 3, Binding::none, "x", {"run"}, false, hosts, {"COCONET_ROOT"});
  const auto after = [&](const char* flag) {
    const auto at = std::find(args.begin(), args.end(), flag);
    return at == args.end() || at + 1 == args.end() ? std::string() : *(at + 1);
  };
  EXPECT_EQ(after("--host"), "a:2,b:1");
  EXPECT_EQ(after("--map-by"), "slot");
  EXPECT_EQ(after("-x"), "COCONET_ROOT");
  EXPECT_NE(std::find(args.begin(), args.end(), "self,vader,tcp"), args.end());
  EXPECT_EQ(args.back(), "run");
  const auto local = mpirun_arguments("mpirun", 3, Binding::none, "x", {"run"}, false, {}, {"COCONET_ROOT"});
  for (const char* flag : {"--host", "-x", "self,vader,tcp"})
    EXPECT_EQ(std::find(local.begin(), local.end(), flag), local.end()) << flag;
}

// Only coconet's own variables travel to other hosts.
TEST(Launch, CoconetEnvironmentIsTheCoconetVariables) {
  ::setenv("COCONET_TEST_LAUNCH_VAR", "1", 1);
  const auto names = coconet_environment();
  EXPECT_NE(std::find(names.begin(), names.end(), "COCONET_TEST_LAUNCH_VAR"), names.end());
  for (const auto& n : names) EXPECT_EQ(n.rfind("COCONET_", 0), 0u) << n;
  ::unsetenv("COCONET_TEST_LAUNCH_VAR");
}

}  // namespace
}  // namespace coconet::exec
