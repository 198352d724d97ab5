// `coconet run` on bad input: a rank count the program cannot use, sizes that
// do not fit in memory, a missing mpirun, an unknown schedule, --schedule best
// without a topology. Each is a clear
// message and exit code 2, before anything runs. A good run exits 0 with
// every row verified, so these checks can tell the two apart.
#include <array>
#include <cstdio>
#include <string>
#include <utility>

#include <gtest/gtest.h>
#include <sys/wait.h>
#include "tests/paths.h"

namespace {

struct Result {
  int code = -1;
  std::string output;
};

Result run(const std::string& args, const std::string& env = "") {
  const std::string cmd = env + " " + coconet::test::coconet_binary() + " run " + args + " 2>&1";
  Result r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), pipe) != nullptr) r.output += buf.data();
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(RunErrors, RankCountThePipelineCannotUse) {
  const auto r = run("gpt3_pipeline --ranks 3 --set B=1 --set S=4 --set H=4 --iters 1");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("multiple of 2"), std::string::npos) << r.output;
}

TEST(RunErrors, SizesThatDoNotFitInMemory) {
  const auto r = run("sgd --ranks 1 --set N=1000000000000 --iters 1");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("GiB"), std::string::npos) << r.output;
}

TEST(RunErrors, MissingMpirun) {
  const auto r = run("sgd --ranks 2 --set N=100", "env -u COCONET_MPIRUN PATH=/nonexistent");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("mpirun"), std::string::npos) << r.output;
}

// --hosts: each misuse named, exit 2, before mpirun starts anything.
TEST(RunErrors, HostsMisused) {
  const std::array<std::pair<const char*, const char*>, 5> cases{{
      {"sgd --set N=100 --hosts a,b", "needs --ranks"},
      {"sgd --set N=100 --ranks 1 --hosts a,b", "every host needs a rank"},
      {"sgd --set N=100 --ranks 2 --hosts a,a", "named twice"},
      {"sgd --set N=100 --ranks 2 --hosts a:1,b", "from --ranks"},
      {"sgd --set N=100 --ranks 2 --hosts a,b --backend cuda", "mpirun --host"},
  }};
  for (const auto& [args, says] : cases) {
    const auto r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("--hosts"), std::string::npos) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << args << "\n" << r.output;
  }
}

TEST(RunErrors, UnknownScheduleName) {
  const auto r = run("sgd --ranks 1 --set N=100 --schedule NOPE");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("AR-C"), std::string::npos) << r.output;  // lists the real ones
}

// A run whose steps the cost model predicts past a minute says so before it
// starts (here the paper's megatron_mlp sizes but B on cpu-local: minutes;
// the injected fault then ends it at the top of the run loop); a short one
// says nothing.
TEST(RunNotes, ALongRunSaysHowLongItWillTakeBeforeItStarts) {
  const auto r = run("megatron_mlp --ranks 1 --topology cpu-local --set B=2 --iters 100", "COCONET_TEST_FAULT=throw@rank0");
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("predicted to take"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("10 schedule(s) x 102 steps"), std::string::npos) << r.output;
  const auto quick = run("sgd --ranks 1 --topology cpu-local --set N=1001 --iters 2");
  EXPECT_EQ(quick.code, 0) << quick.output;
  EXPECT_EQ(quick.output.find("predicted to take"), std::string::npos) << quick.output;
}

TEST(RunErrors, GoodRunExitsZeroVerified) {
  const auto r = run("sgd --ranks 2 --set N=1001 --iters 2 --format json");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("\"verified\": true"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("\"verified\": false"), std::string::npos) << r.output;
}

TEST(RunErrors, BestWithoutTopologySaysToPassOne) {
  const auto r = run("sgd --ranks 1 --set N=100 --iters 1 --schedule best");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--topology"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("coconet calibrate"), std::string::npos) << r.output;
}

TEST(RunErrors, BestOnAnUnknownTopology) {
  const auto r = run("sgd --ranks 1 --set N=100 --iters 1 --schedule best --topology no-such-topology");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("no-such-topology"), std::string::npos) << r.output;
}

TEST(RunBest, PicksThePredictedFastestAndPrintsBothTimes) {
  const auto r = run("sgd --ranks 2 --set N=1001 --iters 2 --schedule best --topology cpu-local");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("best on cpu-local by the cost model: sgd"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("predicted_us"), std::string::npos) << r.output;
}

TEST(RunBest, JsonRowHasThePredictionAndIsVerified) {
  const auto r = run("adam --ranks 2 --set N=1001 --iters 2 --schedule best --topology cpu-local --format json");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("\"chosen_by\": \"prediction\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"predicted_us\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"verified\": true"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("\"verified\": false"), std::string::npos) << r.output;
}

}  // namespace
