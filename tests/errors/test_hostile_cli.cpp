// Hostile input through the `coconet` command (issue 14): each case ends
// with exit 2 and a message naming the input and its limit, within a time
// bound (no hang, no crash, no exit 3), and the unsafe-write cases leave the
// victim file untouched. Each test starts the built binary (tests/paths.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include "tests/paths.h"

namespace {

namespace fs = std::filesystem;

struct Result {
  int code = -1;   // exit status; -1 when killed by a signal
  int signal = 0;  // the signal that ended it, if any
  double seconds = 0;
  std::string out;
  std::string err;
  [[nodiscard]] std::string all() const { return "stdout:\n" + out + "\nstderr:\n" + err; }
};

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class HostileCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("coconet-hostile-") + info->name() + "-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs coconet in dir_ with a time limit; a run past it is killed (and fails the test).
  Result run(const std::vector<std::string>& args, double limit_s = 60,
             double interrupt_after_s = -1) {
    const fs::path out = dir_ / ".stdout", err = dir_ / ".stderr";
    const auto start = std::chrono::steady_clock::now();
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (::chdir(dir_.c_str()) != 0) ::_exit(127);
      const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(o, 1);
      ::dup2(e, 2);
      ::setenv("COCONET_ROOT", coconet::test::source_root().c_str(), 1);
      std::vector<std::string> argv{coconet::test::coconet_binary()};
      argv.insert(argv.end(), args.begin(), args.end());
      std::vector<char*> p;
      for (auto& a : argv) p.push_back(a.data());
      p.push_back(nullptr);
      ::execv(p[0], p.data());
      ::_exit(127);
    }
    Result r;
    int status = 0;
    bool interrupted = false;
    for (;;) {
      if (::waitpid(pid, &status, WNOHANG) == pid) break;
      const double now =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (interrupt_after_s >= 0 && !interrupted && now > interrupt_after_s) {
        ::kill(pid, SIGINT);
        interrupted = true;
      }
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
          limit_s) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        ADD_FAILURE() << "coconet ran past " << limit_s << " s";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    r.out = read_text(out);
    r.err = read_text(err);
    return r;
  }

  // Expects exit 2 with `message` in stderr.
  void rejected(const std::vector<std::string>& args, const std::string& message,
                double limit_s = 60) {
    const Result r = run(args, limit_s);
    EXPECT_EQ(r.code, 2) << r.all();
    EXPECT_NE(r.err.find(message), std::string::npos) << "wanted: " << message << "\n" << r.all();
  }

  fs::path write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return dir_ / name;
  }

  fs::path dir_;
};

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

std::string workload(const std::string& line, const std::string& outputs = "[y]") {
  return "name: h\nparams: {N: 1024}\nscalars: {lr: 0.5}\ntensors:\n"
         "  g: {dtype: f32, shape: [N], layout: local}\n  w: {dtype: f32, shape: [N], layout: "
         "replicated}\n"
         "program:\n  - g1 = allreduce(sum, g)\n  - " +
         line + "\noutputs: " + outputs + "\n";
}

// --- bounds ---------------------------------------------------------------------

TEST_F(HostileCli, NestedParenthesesAreAUserError) {
  write("deep.yaml", workload("y = " + repeat("(", 20000) + "g1" + repeat(")", 20000)));
  rejected({"predict", "deep.yaml"}, "deeper than the limit of 512 levels");
  write("deep2.yaml", workload("y = " + repeat("(", 5000) + "g1" + repeat(")", 5000)));
  rejected({"predict", "deep2.yaml"}, "deeper than the limit of 512 levels");
}

TEST_F(HostileCli, NestedCallsAndSignsAreAUserError) {
  write("calls.yaml", workload("y = " + repeat("sqrt(", 5000) + "g1" + repeat(")", 5000)));
  rejected({"predict", "calls.yaml"}, "deeper than the limit of 512 levels");
  write("minus.yaml", workload("y = " + repeat("-", 60000) + "g1"));
  rejected({"predict", "minus.yaml"}, "deeper than the limit of 512 levels");
}

TEST_F(HostileCli, FlatSumIsAUserError) {
  write("sum.yaml", workload("y = g1" + repeat("+g1", 5000)));
  rejected({"predict", "sum.yaml"}, "more than the limit of 512");
}

TEST_F(HostileCli, ManyChainedStatementsAreFast) {
  std::string yaml =
      "name: chain\nparams: {N: 64}\ntensors:\n  w: {dtype: f32, shape: [N], layout: "
      "replicated}\nprogram:\n  - y1 = w * 0.5\n";
  for (int i = 2; i <= 4000; ++i)
    yaml += "  - y" + std::to_string(i) + " = y" + std::to_string(i - 1) + " * 0.5\n";
  write("chain.yaml", yaml + "outputs: [y4000]\n");
  const Result r = run({"show", "chain.yaml"}, 30);
  EXPECT_EQ(r.code, 0) << r.all();
}

TEST_F(HostileCli, ShapeProductsPast64BitsAreAUserError) {
  write("ab.yaml",
        "name: ab\nparams: {A: 4294967296, B: 4294967296}\ntensors:\n"
        "  g: {dtype: f32, shape: [A*B], layout: local}\nprogram:\n  - y = allreduce(sum, "
        "g)\noutputs: [y]\n");
  rejected({"predict", "ab.yaml"}, "does not fit in 64 bits");
  write("a_b.yaml",
        "name: ab\nparams: {A: 4294967296, B: 4294967296}\ntensors:\n"
        "  g: {dtype: f32, shape: [A, B], layout: local}\nprogram:\n  - y = allreduce(sum, "
        "g)\noutputs: [y]\n");
  rejected({"predict", "a_b.yaml"}, "does not fit in 64 bits");
  write("aa.yaml",
        "name: aa\nparams: {A: 3037000499}\ntensors:\n"
        "  g: {dtype: f32, shape: [A, A], layout: local}\nprogram:\n  - y = allreduce(sum, "
        "g)\noutputs: [y]\n");
  rejected({"predict", "aa.yaml"}, "does not fit in 64 bits");
}

TEST_F(HostileCli, SizeAtTheInt64MaximumIsAUserError) {
  rejected({"predict", "sgd", "--set", "N=9223372036854775807"}, "does not fit in 64 bits");
}

// Counts below 1 name their own flag, in our words (not CLI11's, not --set's).
TEST_F(HostileCli, CountsBelowOneNameTheirFlag) {
  rejected({"collective", "--nodes", "0"}, "--nodes: needs a whole number of at least 1, got 0");
  rejected({"step", "gpt3-175b", "--nodes", "0"}, "--nodes: needs a whole number of at least 1, got 0");
  rejected({"step", "gpt3-175b", "--search", "--top", "0"}, "--top: needs a whole number of at least 1, got 0");
}

TEST_F(HostileCli, NodesPastTheLimitAreAUserError) {
  rejected({"predict", "--nodes", "1000000000"}, "more than the limit of 65536");
  rejected({"collective", "--nodes", "1000000000"}, "more than the limit of 65536");
}

TEST_F(HostileCli, LocalRanksPastTheLimitAreAUserError) {
  rejected({"run", "sgd", "--ranks", "1000"}, "--ranks 1000 is more than the limit of 256 ranks",
           30);
}

// More ranks than cores: refused unless asked for, naming the fix.
TEST_F(HostileCli, MoreRanksThanCoresNeedOversubscribe) {
  const std::string ranks = std::to_string(std::max(1u, std::thread::hardware_concurrency()) + 1);
  rejected({"run", "sgd", "--backend", "cpu", "--ranks", ranks}, "--oversubscribe", 30);
  rejected({"calibrate", "--backend", "cpu", "--ranks", ranks, "--out", "t.yaml"}, "--oversubscribe", 30);
}

TEST_F(HostileCli, PointsPastTheLimitAreAUserError) {
  std::string sweep;
  for (int i = 1; i <= 200; ++i) sweep += (i > 1 ? ", " : "") + std::to_string(i * 8);
  write("big.yaml",
        "name: big\ntopology: dgx-h100\nworkloads:\n  - workload: megatron_mlp\n    sizes: {B: [" +
            sweep + "], S: [" + sweep + "], H: [" + sweep + "]}\n");
  rejected({"predict", "big.yaml"}, "more than the limit of 10000 points", 20);
}

TEST_F(HostileCli, ChunksAndChannelsOutOfRangeAreAUserError) {
  rejected({"simulate", "megatron_mlp", "-s", "ol(MM,AR)-C", "--chunks", "10000000"},
           "--chunks 10000000: needs 1 to 65536", 20);
  rejected({"collective", "--channels", "-4"}, "--channels = -4 is out of range");
  rejected({"collective", "--channels", "2147483647"}, "between 0 and 64");
}

TEST_F(HostileCli, CollectiveSizesNearTheInt64MaximumEnd) {
  const Result r =
      run({"collective", "-b", "4611686018427387904", "-e", "9223372036854775807"}, 20);
  EXPECT_EQ(r.code, 0) << r.all();
}

TEST_F(HostileCli, RootOutsideTheGroupIsAUserError) {
  write("root.yaml", workload("y = broadcast(w, 99)"));
  rejected({"predict", "root.yaml", "--ranks", "2"}, "root 99 is not a rank of a group of 2 ranks");
  write("reduce.yaml", workload("y = reduce(sum, g, 99)"));
  rejected({"predict", "reduce.yaml", "--ranks", "2"},
           "root 99 is not a rank of a group of 2 ranks");
}

TEST_F(HostileCli, DuplicateKeysAndOutputsAreAUserError) {
  write("dup.yaml", "name: a\n" + workload("y = g1 * 2"));
  rejected({"predict", "dup.yaml"}, "the key 'name' is given twice");
  write("outs.yaml", workload("y = g1 * 2", "[y, y]"));
  rejected({"predict", "outs.yaml"}, "output 'y' is listed twice");
}

TEST_F(HostileCli, NonUtf8InputIsAUserErrorEvenWithJsonOutput) {
  std::string yaml = workload("y = g1 * 2");
  yaml.replace(yaml.find("name: h"), 7, "name: h\xff\xfe");
  write("bytes.yaml", yaml);
  rejected({"predict", "bytes.yaml", "--format", "json"}, "is not valid UTF-8 (byte 7 is 0xff)");
  rejected({"show", "bytes.yaml", "--format", "json"}, "is not valid UTF-8");
}

TEST_F(HostileCli, EditedScheduleYamlIsAUserError) {
  write("s.yaml",
        "workload: adam\nhistory: []\nstages: [garbage, {code: AR}]\noverlaps: [[0, 99]]\n");
  rejected({"simulate", "adam", "-s", "s.yaml"},
           "the file's stages are [garbage, {code: AR}] but its history gives");
  write("o.yaml", "workload: adam\nhistory: []\noverlaps: [[0, 99]]\n");
  rejected({"simulate", "adam", "-s", "o.yaml"}, "the file's overlaps are [[0, 99]]");
  write("k.yaml", "workload: adam\nknobs: {chunks: 1, channels: 2147483647}\n");
  rejected({"simulate", "adam", "-s", "k.yaml"}, "k.yaml:2:30: knobs.channels = 2147483647 is more than the limit of 64");
}

TEST_F(HostileCli, NanScalarIsAUserError) {
  std::string yaml = workload("y = g1 * lr");
  yaml.replace(yaml.find("lr: 0.5"), 7, "lr: .nan");
  write("nan.yaml", yaml);
  rejected({"predict", "nan.yaml"}, "must be a finite number");
}

TEST_F(HostileCli, EmptyOutIsAUserError) {
  rejected({"validate", "--reference", "--out", ""}, "--out is empty");
}

TEST_F(HostileCli, ReportOutThatIsNotAFolderIsRefusedBeforeAnyWork) {
  write("file.txt", "precious\n");
  rejected({"validate", "--reference", "--out", "file.txt"}, "exists and is not a folder", 10);
  fs::create_directories(dir_ / "real");
  fs::create_symlink(dir_ / "real", dir_ / "link");
  rejected({"validate", "--reference", "--out", "link"}, "is a symbolic link", 10);
  EXPECT_EQ(read_text(dir_ / "file.txt"), "precious\n");
}

// --- safe writes ------------------------------------------------------------------

TEST_F(HostileCli, OutThatIsASymlinkIsRefusedAndTheVictimKept) {
  write("victim.txt", "precious\n");
  fs::create_symlink(dir_ / "victim.txt", dir_ / "best.yaml");
  rejected({"tune", "sgd", "--out", "best.yaml"}, "is a symbolic link, not a regular file");
  EXPECT_EQ(read_text(dir_ / "victim.txt"), "precious\n");
}

TEST_F(HostileCli, PlantedTemporarySymlinkIsNotFollowed) {
  write("victim.txt", "precious\n");
  fs::create_symlink(dir_ / "victim.txt", dir_ / "best.yaml.tmp");
  const Result r = run({"tune", "sgd", "--out", "best.yaml"});
  EXPECT_EQ(r.code, 0) << r.all();
  EXPECT_EQ(read_text(dir_ / "victim.txt"), "precious\n");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(dir_ / "best.yaml")));
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".best.yaml."), std::string::npos)
        << "leftover " << e.path();
}

TEST_F(HostileCli, StepTraceThroughASymlinkOrIntoAFolderIsRefusedBeforeAnyWork) {
  write("victim.txt", "precious\n");
  fs::create_symlink(dir_ / "victim.txt", dir_ / "step.json");
  rejected({"step", "gpt3-175b", "--trace", "step.json"}, "is a symbolic link, not a regular file");
  EXPECT_EQ(read_text(dir_ / "victim.txt"), "precious\n");
  fs::create_directory(dir_ / "folder");
  rejected({"step", "gpt3-175b", "--trace", "folder"}, "--trace");
  rejected({"step", "gpt3-175b", "--trace", "no-such-folder/step.json"}, "--trace");
}

TEST_F(HostileCli, FifoAndDevicesAreRefused) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0644), 0);
  rejected({"simulate", "sgd", "-s", "AR-C", "--trace", "fifo"}, "is a FIFO, not a regular file",
           20);
  rejected({"tune", "sgd", "--out", "/dev/full"}, "is a device, not a regular file");
  EXPECT_TRUE(fs::is_fifo(dir_ / "fifo"));
}

// Every seed of the fuzz corpus (shipped YAML, hostile inputs, past findings)
// through the command that reads it: exit 0 or 2, never 3, a signal or a hang.
TEST_F(HostileCli, NoCorpusInputGivesAnInternalError) {
  const fs::path corpus = fs::path(coconet::test::source_root()) / "tests/fuzz/corpus";
  const std::vector<std::pair<std::string, std::vector<std::string>>> readers = {
      {"workload", {"show"}},
      {"workload", {"predict"}},
      {"experiment", {"predict"}},
      {"topology", {"collective", "-e", "1M", "-t"}},
      {"schedule", {"simulate", "adam", "-s"}},
  };
  for (const auto& [folder, command] : readers)
    for (const auto& e : fs::directory_iterator(corpus / folder)) {
      std::vector<std::string> args = command;
      args.push_back(e.path().string());
      const Result r = run(args, 30);
      EXPECT_TRUE(r.code == 0 || r.code == 2) << e.path() << "\n" << r.all();
      EXPECT_EQ(r.signal, 0) << e.path();
    }
}

// SIGINT at several moments of validate --reference: each run ends within 5 s
// of the signal with exit 130 and "interrupted" (or had finished: 0), and no
// temporary report folder is left next to --out.
TEST_F(HostileCli, InterruptedValidateLeavesNoTemporary) {
  // validate --reference takes about 0.2 s: the moments cover its start, its work and its writes.
  for (double at : {0.02, 0.06, 0.1, 0.14, 0.18, 0.22}) {
    const Result r = run({"validate", "--reference", "--out", "rep"}, 60, at);
    EXPECT_LT(r.seconds, at + 5.0) << r.all();
    if (r.code == 130) {
      EXPECT_NE(r.err.find("interrupted"), std::string::npos) << r.all();
    } else if (r.code == -1) {
      EXPECT_EQ(r.signal, SIGINT) << r.all();  // before main installed the handler
    } else {
      EXPECT_EQ(r.code, 0) << r.all();  // finished before the signal
    }
    for (const auto& e : fs::directory_iterator(dir_))
      EXPECT_FALSE(e.path().filename().string().starts_with(".rep")) << "leftover " << e.path();
  }
}

}  // namespace
