// The `coconet` command as a user runs it: exit codes, every `--format json`
// output parses, the `--set` rules (model/set_flag.h), the defaults every command
// shares (model/points.h), every command example of the README, and one
// predicted time across predict, simulate, run and validate. Each test starts
// the built binary (tests/paths.h) with posix_spawn and reads its stdout,
// stderr and exit code. Exit code 1 (a run that gives a wrong result) has no
// trigger from the command line; tests/mpi covers it with an injected kernel.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "json_schema.h"
#include "tests/paths.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using Args = std::vector<std::string>;
using nlohmann::json;

struct Result {
  long max_rss_kb = 0;  // the command's peak resident memory
  int code = -1;
  std::string out;
  std::string err;

  [[nodiscard]] std::string all() const { return "stdout:\n" + out + "\nstderr:\n" + err; }
};

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The environment of this test with `overrides` ("NAME=VALUE") replacing or
// adding variables.
std::vector<std::string> environment(const Args& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string v(*e);
    bool replaced = false;
    for (const auto& o : overrides)
      replaced = replaced || v.substr(0, v.find('=')) == o.substr(0, o.find('='));
    if (!replaced) env.push_back(v);
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& texts) {
  std::vector<char*> out;
  for (auto& t : texts) out.push_back(t.data());
  out.push_back(nullptr);
  return out;
}

// Runs `coconet args...` in `dir` and waits for it.
Result coconet(const Args& args, const fs::path& dir, const Args& env_overrides = {}) {
  std::vector<std::string> argv{coconet::test::coconet_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> env = environment(env_overrides);
  const fs::path out = dir / "stdout.txt";
  const fs::path err = dir / "stderr.txt";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  Result r;
  pid_t pid = 0;
  auto argp = pointers(argv);
  auto envp = pointers(env);
  const fs::path here = fs::current_path();
  fs::current_path(dir);
  const int spawned = posix_spawn(&pid, argp[0], &actions, nullptr, argp.data(), envp.data());
  fs::current_path(here);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return r;
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.max_rss_kb = usage.ru_maxrss;
  r.out = read_text(out);
  r.err = read_text(err);
  return r;
}

// The JSON document a command printed on stdout (null when it does not parse).
json parsed(const Result& r) {
  try {
    return json::parse(r.out);
  } catch (const json::exception& e) {
    ADD_FAILURE() << "not JSON: " << e.what() << "\n" << r.all();
    return json();
  }
}

#ifdef COCONET_TEST_HAVE_MPI
constexpr bool kHaveMpi = true;
#else
constexpr bool kHaveMpi = false;
#endif

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The predicted time of each schedule in a `predict --format json` point.
std::map<std::string, double> times_by_schedule(const json& point, const char* key) {
  std::map<std::string, double> out;
  for (const auto& row : point.at("rows"))
    out[row.at("schedule").get<std::string>()] = row.at(key).get<double>();
  return out;
}

// `j` names `kind` in "schema" and conforms to docs/schema/<kind>.schema.json.
::testing::AssertionResult conforms(const json& j, const std::string& kind) {
  const fs::path file = fs::path(coconet::test::source_root()) / "docs" / "schema" / (kind + ".schema.json");
  const json schema = json::parse(read_text(file), nullptr, false);
  if (schema.is_discarded()) return ::testing::AssertionFailure() << file << " is not JSON";
  const auto errors = coconet::test::schema_errors(schema, j);
  if (errors.empty()) return ::testing::AssertionSuccess();
  auto failure = ::testing::AssertionFailure() << kind << ": " << errors.size() << " violation(s)";
  for (std::size_t i = 0; i < errors.size() && i < 10; ++i) failure << "\n  " << errors[i];
  return failure;
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / (std::string("coconet-cli-") + info->test_suite_name() +
                                        "." + info->name() + "." + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  Result run(const Args& args, const Args& env = {}) const { return coconet(args, dir_, env); }
  // A bad input: exit 2, with `flag` in the message.
  void expect_rejected(const Args& args, const std::string& flag) const {
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << r.all();
    EXPECT_TRUE(contains(r.err, flag)) << "expected '" << flag << "' in\n" << r.all();
  }
  fs::path dir_;
};

// ---- exit codes ---------------------------------------------------------------

TEST_F(Cli, ExitCodes) {
  EXPECT_EQ(run({"predict", "adam", "--set", "N=4096"}).code, 0);
  EXPECT_EQ(run({}).code, 2);                               // no subcommand
  EXPECT_EQ(run({"predict", "--no-such-flag"}).code, 2);    // usage
  EXPECT_EQ(run({"predict", "no-such-workload"}).code, 2);  // bad input
  EXPECT_EQ(run({"simulate", "adam", "--schedule", "NOPE"}).code, 2);
  EXPECT_EQ(run({"predict", "gpt3_pipeline", "--ranks", "3"}).code, 2);  // 2 groups do not divide 3
  // More ranks than GPUs.
  EXPECT_EQ(run({"predict", "adam", "--nodes", "1", "--ranks", "64"}).code, 2);
  expect_rejected({"predict", "adam", "--ranks", "0"}, "--ranks");
  expect_rejected({"predict", "adam", "--nodes", "0"}, "--nodes");
  expect_rejected({"simulate", "adam", "--schedule", "AR-C", "--algo", "bogus"}, "--algo bogus: ");
  expect_rejected({"simulate", "adam", "--schedule", "AR-C", "--chunks", "0"}, "--chunks 0: ");
  expect_rejected({"collective", "-b", "1.5"}, "-b 1.5: ");
}

// ---- messages of our own ---------------------------------------------------------

TEST_F(Cli, VersionNamesTheBuild) {
  const Result r = run({"--version"});
  EXPECT_EQ(r.code, 0) << r.all();
  for (const char* part : {"coconet ", "commit ", "build type ", "CUDA ", "NCCL ", "MPI "})
    EXPECT_TRUE(contains(r.out, part)) << part << "\n" << r.all();
}

TEST_F(Cli, ParseErrorsNameTheFlagAndWhatItTakes) {
  const auto said = [&](const Args& args, const std::vector<std::string>& parts) {
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << r.all();
    for (const auto& p : parts) EXPECT_TRUE(contains(r.err, p)) << "expected '" << p << "' in\n" << r.all();
    for (const char* raw : {"not in range", "At Most", "A subcommand is required", "Could not convert",
                            "Run with --help", "not an allowed value"})
      EXPECT_FALSE(contains(r.err, raw)) << raw << "\n" << r.all();
  };
  said({"predcit", "adam"}, {"unknown command 'predcit'", "did you mean 'predict'"});
  said({}, {"name a command", "predict"});
  said({"run", "adam", "--ranks", "0"}, {"--ranks", "at least 1"});
  said({"predict", "--ranks", "abc"}, {"--ranks", "'abc'"});
  said({"predict", "--nodes", "0"}, {"--nodes", "at least 1"});
  said({"predict", "--format", "bogus"}, {"--format", "table, json or csv"});
  said({"predict", "--topology", "dgx-h100", "--topology", "dgx-h200"}, {"--topology takes one value"});
  said({"predict", "--no-such-flag"}, {"--no-such-flag", "coconet predict --help"});
  said({"run", "adam", "--backend", "gpu"}, {"--backend", "cpu or cuda"});
  said({"validate"}, {"--out is required"});
  for (const char* cmd : {"list", "show", "collective", "predict", "tune", "simulate", "run", "validate", "calibrate",
                          "compare"}) {
    const Result help = run({cmd, "--help"});
    EXPECT_EQ(help.code, 0) << cmd;
    EXPECT_FALSE(contains(help.out, "ENUM") || contains(help.out, "->") || contains(help.out, "in [")) << help.out;
    EXPECT_TRUE(contains(help.out, "table|json|csv")) << cmd << "\n" << help.out;
  }
}

// A mistyped flag or name gets the nearest one: CLI11 lists the extras with
// the value first ("dgx-a100 --topolgy"), and a target that is neither an
// experiment nor a workload lists both kinds.
TEST_F(Cli, MistypedFlagsAndNamesGetTheNearest) {
  const auto said = [&](const Args& args, const std::vector<std::string>& parts) {
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << r.all();
    for (const auto& p : parts) EXPECT_TRUE(contains(r.err, p)) << "expected '" << p << "' in\n" << r.all();
  };
  said({"predict", "adam", "--topolgy", "dgx-a100"}, {"--topolgy", "did you mean --topology?"});
  said({"predict", "adam", "--topolgy=dgx-a100"}, {"did you mean --topology?"});
  said({"predict", "adma"}, {"neither an experiment nor a workload (did you mean 'adam'?)", "experiments are ",
                             "workloads are ", "megatron_mlp", "cpu-local"});
  said({"predict", "cpu-locl"}, {"did you mean 'cpu-local'?"});
  said({"predict", "adam", "--topology", "dgx-a10"}, {"unknown topology 'dgx-a10' (did you mean 'dgx-a100'?)"});
  // Nothing near: no suggestion, still both lists.
  const Result far = run({"predict", "zzzzzzzzzz"});
  EXPECT_EQ(far.code, 2) << far.all();
  EXPECT_FALSE(contains(far.err, "did you mean")) << far.all();
  EXPECT_TRUE(contains(far.err, "workloads are ")) << far.all();
}

// `coconet list` names every model of models/ (what `coconet step` takes), in each format.
TEST_F(Cli, ListNamesTheModels) {
  std::vector<std::string> models;
  for (const auto& e : fs::directory_iterator(fs::path(coconet::test::source_root()) / "models"))
    if (e.path().extension() == ".yaml") models.push_back(e.path().stem().string());
  std::sort(models.begin(), models.end());
  ASSERT_FALSE(models.empty());
  const Result text = run({"list"});
  ASSERT_EQ(text.code, 0) << text.all();
  EXPECT_TRUE(contains(text.out, "models (")) << text.out;
  const json j = parsed(run({"list", "--format", "json"}));
  EXPECT_TRUE(conforms(j, "list"));
  EXPECT_EQ(j["models"].get<std::vector<std::string>>(), models);
  const Result csv = run({"list", "--format", "csv"});
  for (const auto& m : models) {
    EXPECT_TRUE(contains(text.out, "  " + m + "\n")) << m << "\n" << text.out;
    EXPECT_TRUE(contains(csv.out, "models," + m + "\n")) << m << "\n" << csv.out;
  }
}

// `step --format csv` has the breakdown of `--format json` (breakdown_ms), one column per part, in ms.
TEST_F(Cli, StepCsvHasTheBreakdownColumns) {
  const Args args{"step", "megatron-1.7b", "--topology", "dgx-a100", "--nodes", "4"};
  Args as_json = args, as_csv = args;
  as_json.insert(as_json.end(), {"--format", "json"});
  as_csv.insert(as_csv.end(), {"--format", "csv"});
  const json j = parsed(run(as_json));
  ASSERT_EQ(j["layouts"].size(), 1u) << j.dump();
  const Result csv = run(as_csv);
  ASSERT_EQ(csv.code, 0) << csv.all();
  std::istringstream lines(csv.out);
  std::string header, values;
  std::getline(lines, header);
  std::getline(lines, values);
  const auto cells = [](const std::string& line) {
    std::vector<std::string> out;
    std::istringstream in(line);
    for (std::string c; std::getline(in, c, ',');) out.push_back(c);
    return out;
  };
  const auto names = cells(header), row = cells(values);
  ASSERT_EQ(names.size(), row.size()) << csv.out;
  // (That the parts make up the step is held against a pipeline laid out
  // independently in test_step, tests/unit/step_independent.h.)
  const json& b = j["layouts"][0]["breakdown_ms"];
  for (const char* part : {"compute", "tp_comm", "cp_comm", "pp_bubble", "pp_p2p", "dp_comm", "optimizer"}) {
    const auto at = std::find(names.begin(), names.end(), std::string(part) + "_ms");
    ASSERT_NE(at, names.end()) << part << "_ms in " << header;
    const double v = std::stod(row[std::size_t(at - names.begin())]);
    EXPECT_NEAR(v, b[part].get<double>(), 0.005 + 1e-9) << part;  // printed with 2 decimals
  }
  // Only CSV is widened: the table of --search keeps its columns.
  EXPECT_FALSE(contains(run(args).out, "compute_ms"));
}

// With a straggler, each stage's alone_us is its slowest ranks' (named in
// alone_ranks), never more than the stage's span on a schedule that does not overlap.
TEST_F(Cli, SimulateWithAStragglerPrintsTheSlowestRanksAlone) {
  const Args args{"simulate", "adam", "--schedule", "RS-C-AG", "--topology", "dgx-h100", "--set", "N=64M",
                  "--set", "stragglers=[{rank: 3, compute_scale: 0.5, hbm_scale: 0.5}]", "--format", "json"};
  const json j = parsed(run(args));
  ASSERT_EQ(j["points"].size(), 1u) << j.dump();
  EXPECT_TRUE(conforms(j, "simulate"));
  bool straggler_named = false;
  for (const auto& row : j["points"][0]["rows"]) {
    const double span = row["end_us"].get<double>() - row["start_us"].get<double>();
    EXPECT_LE(row["alone_us"].get<double>(), span * (1 + 1e-9)) << row.dump();
    ASSERT_TRUE(row.contains("alone_ranks")) << row.dump();
    straggler_named = straggler_named || contains(row["alone_ranks"].get<std::string>(), "rank 3");
  }
  EXPECT_TRUE(straggler_named) << j.dump(2);
  Args text(args.begin(), args.end() - 2);
  const Result r = run(text);
  EXPECT_TRUE(contains(r.out, "alone_ranks")) << r.out;
  EXPECT_TRUE(contains(r.out, "on its slowest ranks")) << r.out;
}

// ---- every json output parses -------------------------------------------------

TEST_F(Cli, ShowJson) {
  const json one = parsed(run({"show", "adam", "--set", "N=4096", "--format", "json"}));
  ASSERT_EQ(one["workloads"].size(), 1u);
  EXPECT_EQ(one["workloads"][0].value("workload", ""), "adam");
  EXPECT_GE(one["workloads"][0]["schedules"].size(), 7u);
  const json two = parsed(run({"show", "adam", "sgd", "--format", "json"}));
  EXPECT_EQ(two["workloads"].size(), 2u);
}

// The paper's overlap on its DGX-2 (issue 33): the MLP's ol(MM,fuse(RS-C-AG))
// with tiles is priced below MM-fuse(RS-C-AG) (with chunks it is not: each
// chunk's GEMM leaves SMs idle), and predict chooses tile for it.
TEST_F(Cli, PredictPricesTheTiledMlpBelowItsUnoverlappedSchedule) {
  const json j = parsed(run({"predict", "megatron_mlp", "--topology", "dgx2-v100", "--set", "B=8", "--format", "json"}));
  std::map<std::string, json> rows;
  for (const json& r : j["points"][0]["rows"]) rows[r["schedule"].get<std::string>()] = r;
  ASSERT_TRUE(rows.contains("ol(MM,fuse(RS-C-AG))") && rows.contains("MM-fuse(RS-C-AG)")) << j.dump();
  const json& tiled = rows["ol(MM,fuse(RS-C-AG))"];
  EXPECT_EQ(tiled["knobs"]["overlap"], "tile") << tiled.dump();
  EXPECT_LT(tiled["time_us"].get<double>(), rows["MM-fuse(RS-C-AG)"]["time_us"].get<double>()) << j.dump();
  const Result bad = run({"simulate", "megatron_mlp", "--schedule", "ol(MM,RS)-C-AG", "--overlap", "blocks"});
  EXPECT_EQ(bad.code, 2) << bad.all();
  EXPECT_TRUE(contains(bad.err, "--overlap blocks: unknown overlap grain 'blocks': use chunk or tile")) << bad.all();
  const Result untileable = run({"simulate", "gpt3_pipeline", "--schedule", "ol(AR,P2P)-C", "--overlap", "tile"});
  EXPECT_EQ(untileable.code, 2) << untileable.all();
  EXPECT_TRUE(contains(untileable.err, "is not a matmul then the reduce-scatter or allreduce")) << untileable.all();
}

// The plan's JSON says which units run as tiles and why a group asked to
// does not (plan.schema.json's tile and untiled).
TEST_F(Cli, ShowPlanJsonSaysWhichUnitsRunAsTiles) {
  const auto tiled_units = [&](const std::string& schedule, const std::string& overlap) {
    const json j = parsed(run({"show", "megatron_mlp", "--plan", schedule, "--overlap", overlap, "--format", "json"}));
    EXPECT_TRUE(conforms(j, "plan")) << j.dump();
    int tiles = 0;
    for (const json& u : j["units"]) tiles += u["tile"].get<bool>() ? 1 : 0;
    return tiles;
  };
  EXPECT_EQ(tiled_units("ol(MM,RS)-C-AG", "tile"), 1);
  EXPECT_EQ(tiled_units("ol(MM,RS)-C-AG", "chunk"), 0);
  EXPECT_EQ(tiled_units("MM-RS-C-AG", "tile"), 0);  // nothing overlapped: nothing to tile
}

TEST_F(Cli, PredictJson) {
  const json j = parsed(run({"predict", "adam", "--set", "N=4096", "--format", "json"}));
  ASSERT_EQ(j["points"].size(), 1u);
  const json& p = j["points"][0];
  EXPECT_EQ(p["sizes"], json({{"N", 4096}}));
  EXPECT_EQ(p["label"], "N=4096");
  EXPECT_TRUE(p["rows"][0]["knobs"]["chunks"].is_number_integer()) << p["rows"][0].dump();
  EXPECT_EQ(p["workload"], "adam");
  EXPECT_GE(p["rows"].size(), 7u);
  EXPECT_EQ(p["backend"], "cuda");  // the default on a GPU topology
  const json all = parsed(run({"predict", "--format", "json"}));  // the embedded default experiment
  EXPECT_EQ(all["points"].size(), 12u);
}

// Predictions describe what the chosen backend runs: both run every fused
// stage as one fused op (LAMB's too). cuda's 32 MiB pieces hide the update
// under the transfers on a GPU cluster; the cpu backend's 256 KiB pieces pay
// the cluster's collective latency per piece, so there the same stage costs
// more than its parts.
TEST_F(Cli, PredictionsFollowTheBackend) {
  const auto time_of = [&](const char* backend, const std::string& schedule) {
    const json j = parsed(run({"predict", "adam", "--set", "N=64M", "--backend", backend, "--format", "json"}));
    EXPECT_EQ(j["points"][0]["backend"], backend);
    for (const auto& row : j["points"][0]["rows"])
      if (row["schedule"] == schedule) return row["time_us"].get<double>();
    ADD_FAILURE() << "no row " << schedule;
    return 0.0;
  };
  EXPECT_LT(time_of("cuda", "fuse(RS-C-AG)+asSlice(m,v)"), 0.99 * time_of("cuda", "RS-C-AG+asSlice(m,v)"));
  EXPECT_GT(time_of("cpu", "fuse(RS-C-AG)+asSlice(m,v)"), time_of("cuda", "fuse(RS-C-AG)+asSlice(m,v)"));
  EXPECT_EQ(parsed(run({"predict", "adam", "--topology", "cpu-local", "--format", "json"}))["points"][0]["backend"],
            "cpu");
  const json plan = parsed(run({"show", "lamb", "--plan", "fuse(RS-C-AG)+asSlice(m,v)", "--backend", "cuda",
                                "--format", "json"}));
  int ops = 0;
  for (const auto& u : plan["units"])
    for (const auto& op : u["ops"]) {
      ++ops;
      EXPECT_EQ(op["class"], "fused");
    }
  EXPECT_EQ(ops, 1);
  EXPECT_EQ(run({"predict", "adam", "--backend", "tpu"}).code, 2);
}

TEST_F(Cli, TuneJsonAndItsBestSchedule) {
  const Result r = run({"tune", "megatron_mlp", "--set", "B=1", "--set", "S=64", "--set", "H=128",
                        "--format", "json", "--out", "best.yaml"});
  EXPECT_EQ(r.code, 0) << r.all();
  const json j = parsed(r);
  ASSERT_EQ(j["points"].size(), 1u);
  EXPECT_EQ(j["points"][0]["label"], "B=1 H=128 S=64");
  EXPECT_EQ(j["points"][0]["sizes"]["H"], 128);
  EXPECT_TRUE(contains(read_text(dir_ / "best.yaml"), "knobs")) << read_text(dir_ / "best.yaml");
}

// The choice `show --plan` reports for each collective is the one the
// simulator prices (sim/resolve.h): on dgx-h100 with one channel's LL128
// ceiling lowered to 20 GB/s, the fused allreduce of adam runs on twice
// NCCL's 16 default channels (the unit's choice, not NCCL's own: see
// tests/unit/test_sim_resolve.cpp), and simulate's stage names the same
// algorithm, protocol and channels.
TEST_F(Cli, ShowPlanReportsTheChoiceTheSimulatorPrices) {
  const Args sets = {"--topology", "dgx-h100", "--set", "N=4194304", "--set", "nodes=1", "--set",
                     "nccl.channel_GBps=20", "--format", "json"};
  Args show = {"show", "adam", "--plan", "fuse(RS-C-AG)"};
  show.insert(show.end(), sets.begin(), sets.end());
  const json plan = parsed(run(show));
  EXPECT_TRUE(conforms(plan, "plan"));
  EXPECT_EQ(plan["resolved_on"], "dgx-h100");
  Args simulate = {"simulate", "adam", "--schedule", "fuse(RS-C-AG)"};
  simulate.insert(simulate.end(), sets.begin(), sets.end());
  const json sim = parsed(run(simulate));
  ASSERT_EQ(sim["points"].size(), 1u) << sim.dump();
  const std::string bound = sim["points"][0]["rows"][0]["bound"].get<std::string>();
  int collectives = 0;
  for (const auto& u : plan["units"])
    for (const auto& op : u["ops"])
      for (const auto& c : op["collectives"]) {
        ++collectives;
        EXPECT_EQ(c["channels"], 32) << c.dump();
        const std::string priced = c["algo"].get<std::string>() + "/" + c["proto"].get<std::string>() + " x" +
                                   std::to_string(c["channels"].get<int>()) + " channels";
        EXPECT_TRUE(contains(bound, c["op"].get<std::string>()) && contains(bound, priced))
            << priced << " not in simulate's " << bound;
      }
  EXPECT_EQ(collectives, 4) << plan.dump(2);  // the reduce-scatter of g, the all-gathers of w, m, v
  // The text form names the choice and where it was resolved.
  show.resize(show.size() - 2);
  const Result text = run(show);
  EXPECT_TRUE(contains(text.out, "collectives resolved on dgx-h100")) << text.out;
  EXPECT_TRUE(contains(text.out, " x32")) << text.out;
}

// A topology naming an NCCL table that does not exist: exit 2, its
// file:line, and the versions there are.
TEST_F(Cli, AnUnknownNcclVersionNamesTheKnownOnes) {
  std::ifstream in(coconet::test::source_root() + "/configs/topologies/dgx-h100.yaml");
  std::stringstream text;
  text << in.rdbuf();
  std::string t = text.str();
  t.replace(t.find("version: \"2.28\""), 15, "version: \"2.99\"");
  std::ofstream(dir_ / "t.yaml") << t;
  const Result r = run({"show", "adam", "--plan", "AR-C", "--topology", "t.yaml"});
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_TRUE(contains(r.err, "t.yaml:")) << r.all();
  EXPECT_TRUE(contains(r.err, "known versions are 2.28 and 2.30")) << r.all();
}

TEST_F(Cli, SimulateJson) {
  const Result r = run({"simulate", "adam", "--schedule", "fuse(RS-C-AG)", "--set", "N=4096",
                        "--format", "json", "--trace", "trace.json"});
  EXPECT_EQ(r.code, 0) << r.all();
  const json j = parsed(r);
  ASSERT_EQ(j["points"].size(), 1u);
  EXPECT_EQ(j["points"][0]["label"], "N=4096");
  EXPECT_EQ(j["points"][0]["sizes"]["N"], 4096);
  EXPECT_GT(j["points"][0]["time_us"].get<double>(), 0);
  EXPECT_TRUE(json::accept(read_text(dir_ / "trace.json")));
}

// An asymmetric cluster through --set, its trace by class or by rank, and
// bad asymmetry or --trace-ranks values: exit 2 naming the place.
TEST_F(Cli, SimulateAsymmetricTraceRanks) {
  const Args base = {"simulate", "adam", "--schedule", "fuse(RS-C-AG)", "--set", "N=4096", "--nodes", "1",
                     "--set", "stragglers=[{rank: 3, compute_scale: 0.5, hbm_scale: 0.5}]"};
  const auto processes = [&](const std::string& mode) {
    Args a = base;
    a.insert(a.end(), {"--trace", "t-" + mode + ".json", "--trace-ranks", mode});
    const Result r = run(a);
    EXPECT_EQ(r.code, 0) << r.all();
    int n = 0;
    const json trace = json::parse(read_text(dir_ / ("t-" + mode + ".json")));
    for (const auto& e : trace["traceEvents"])
      if (e["name"] == "process_name") ++n;
    return n;
  };
  EXPECT_EQ(processes("classes"), 2);
  EXPECT_EQ(processes("all"), 8);
  Args bad = base;
  bad.insert(bad.end(), {"--trace-ranks", "every"});
  const Result r = run(bad);
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_TRUE(contains(r.err, "--trace-ranks")) << r.all();
  const Result y = run({"simulate", "adam", "--schedule", "fuse(RS-C-AG)", "--set", "stragglers=[{rank: 99, compute_scale: 0.5}]"});
  EXPECT_EQ(y.code, 2) << y.all();
  EXPECT_TRUE(contains(y.err, "--set stragglers")) << y.all();
}

// ---- one output contract: every JSON output follows its schema ------------------

TEST_F(Cli, SchemasUseOnlyTheCheckedSubset) {
  for (const auto& entry : fs::directory_iterator(fs::path(coconet::test::source_root()) / "docs" / "schema")) {
    const json schema = json::parse(read_text(entry.path()));
    const std::string kind = entry.path().filename().string().substr(0, entry.path().filename().string().find('.'));
    EXPECT_EQ(schema["properties"]["schema"]["const"], "coconet." + kind + "/1") << entry.path();
    const auto unknown = coconet::test::unknown_keywords(schema);
    EXPECT_TRUE(unknown.empty()) << entry.path() << ": " << (unknown.empty() ? "" : unknown.front());
  }
}

TEST_F(Cli, SchemaCheckerRejectsTheOldForms) {
  json j = parsed(run({"predict", "adam", "--set", "N=4096", "--format", "json"}));
  ASSERT_TRUE(conforms(j, "predict"));
  json old_sizes = j;
  old_sizes["points"][0]["sizes"] = "N=4096";
  EXPECT_FALSE(conforms(old_sizes, "predict"));
  json old_knobs = j;
  old_knobs["points"][0]["rows"][0]["knobs"] = "chunks=1 auto/auto channels=32";
  EXPECT_FALSE(conforms(old_knobs, "predict"));
  json untagged = j;
  untagged.erase("schema");
  EXPECT_FALSE(conforms(untagged, "predict"));
  EXPECT_FALSE(conforms(j, "tune"));  // the wrong kind
}

TEST_F(Cli, EveryJsonOutputFollowsItsSchema) {
  const std::vector<std::pair<Args, std::string>> outputs = {
      {{"list"}, "list"},
      {{"show", "adam", "sgd"}, "show"},
      {{"show", "lamb", "--plan", "fuse(RS-C-AG)+asSlice(m,v)"}, "plan"},
      {{"predict", "adam", "--set", "N=4096"}, "predict"},
      {{"predict"}, "predict"},
      {{"tune", "adam", "--set", "N=4096"}, "tune"},
      {{"simulate", "adam", "--schedule", "fuse(RS-C-AG)", "--set", "N=4096"}, "simulate"},
      {{"simulate", "adam", "--schedule", "AR-C", "--set", "N=4096", "--backend", "cpu"}, "simulate"},
      {{"collective", "-b", "1K", "-e", "1M", "-f", "32"}, "collective"},
      {{"validate", "--reference", "--out", "reference"}, "validate"},
      {{"compare", "adam", "--set", "N=4096", "-t", "dgx-h100", "-t", "dgx-a100"}, "compare"},
      {{"compare", "megatron-1.7b", "-t", "dgx-a100", "-t", "dgx-h100", "-N", "4"}, "compare_steps"},
      {{"step", "gpt3-175b", "--topology", "dgx-h100", "--nodes", "128"}, "step"},
      {{"step", "gpt3-175b", "--topology", "dgx-h100", "--nodes", "128", "--search"}, "step"},
      {{"step", "deepseek-v3", "--topology", "dgx-h100", "--nodes", "128"}, "step"},  // recompute mla_up_proj
  };
  for (const auto& [args, kind] : outputs) {
    Args with = args;
    with.insert(with.end(), {"--format", "json"});
    const Result r = run(with);
    ASSERT_EQ(r.code, 0) << r.all();
    EXPECT_TRUE(conforms(parsed(r), kind)) << with.front() << " " << (with.size() > 1 ? with[1] : "");
  }
}

TEST_F(Cli, CompareAModelPutsItsStepOnEachSideAndSaysWhenTheGpuCountsDiffer) {
  const Result r = run({"compare", "llama3-70b", "-t", "dgx-h100", "-t", "dgx-a100", "-N", "32"});
  ASSERT_EQ(r.code, 0) << r.all();
  EXPECT_TRUE(contains(r.out, "llama3-70b step on each side")) << r.out;
  EXPECT_FALSE(contains(r.err, "different GPU counts")) << r.err;  // 256 GPUs on both
  const json j = parsed(run({"compare", "llama3-70b", "-t", "dgx-h100", "-N", "16", "-N", "32", "--format", "json"}));
  ASSERT_EQ(j["sides"].size(), 2u);
  EXPECT_EQ(j["sides"][0]["gpus"], 128);
  EXPECT_EQ(j["sides"][1]["gpus"], 256);
  EXPECT_TRUE(j["note"].is_string());  // the GPU counts differ: said
  // The step of each side is `coconet step`'s, and the ratio is the second's over the first's.
  const json one = parsed(run({"step", "llama3-70b", "-t", "dgx-h100", "-N", "16", "--format", "json"}));
  const json two = parsed(run({"step", "llama3-70b", "-t", "dgx-h100", "-N", "32", "--format", "json"}));
  const double first_ms = one["layouts"][0]["step_ms"].get<double>();
  const double second_ms = two["layouts"][0]["step_ms"].get<double>();
  EXPECT_DOUBLE_EQ(j["sides"][0]["step_ms"].get<double>(), first_ms);
  EXPECT_DOUBLE_EQ(j["sides"][1]["step_ms"].get<double>(), second_ms);
  EXPECT_NEAR(j["sides"][1]["ratio"].get<double>(), second_ms / first_ms, 1e-9);
  EXPECT_NE(first_ms, second_ms) << "twice the GPUs, the same global batch: not the same step";
  // A workload's sides say their nodes and ranks, and warn when the ranks differ.
  const Result w = run({"compare", "adam", "--set", "N=4096", "-t", "dgx-h100", "-N", "1", "-N", "2"});
  ASSERT_EQ(w.code, 0) << w.all();
  EXPECT_TRUE(contains(w.out, "ranks")) << w.out;
  EXPECT_TRUE(contains(w.err, "the ratio compares different rank counts")) << w.err;
  // Flags of the other kind are refused.
  const Result bad = run({"compare", "llama3-70b", "-t", "dgx-h100", "-t", "dgx-a100", "--ranks", "8"});
  EXPECT_EQ(bad.code, 2) << bad.all();
  const Result search = run({"compare", "adam", "-t", "dgx-h100", "-t", "dgx-a100", "--search"});
  EXPECT_EQ(search.code, 2) << search.all();
}

// ---- step: a whole training step ---------------------------------------------------

TEST_F(Cli, StepPrintsTheBreakdownAndSearchFindsLayoutsThatFit) {
  const Result r = run({"step", "gpt3-175b", "--topology", "dgx-h100", "--nodes", "128"});
  ASSERT_EQ(r.code, 0) << r.all();
  for (const char* part : {"step time", "exposed TP communication", "pipeline bubble", "exposed DP communication",
                           "optimizer", "model TFLOP/s per GPU", "MFU", "memory per GPU"})
    EXPECT_TRUE(contains(r.out, part)) << part << "\n" << r.out;
  // The MFU names the peak of the precision used: FP8 GEMMs against the FP8 rate.
  EXPECT_TRUE(contains(r.out, "of 989 TFLOP/s dense bf16")) << r.out;
  const Result fp8 = run({"step", "gpt3-175b", "-t", "dgx-h100", "-N", "128", "--set", "training.dtype=fp8"});
  ASSERT_EQ(fp8.code, 0) << fp8.all();
  EXPECT_TRUE(contains(fp8.out, "of 1979 TFLOP/s dense fp8")) << fp8.out;
  const json j = parsed(run({"step", "gpt3-175b", "-t", "dgx-h100", "-N", "128", "--search", "--format", "json"}));
  ASSERT_GE(j["layouts"].size(), 1u);
  EXPECT_EQ(j["search"], true);
  for (const auto& l : j["layouts"]) {
    EXPECT_TRUE(l["memory_GB"]["fits"].get<bool>()) << l.dump();
    EXPECT_EQ(l["dp"].get<int>() * l["tp"].get<int>() * l["cp"].get<int>() * l["pp"].get<int>(), 1024);
  }
  const Result csv = run({"step", "gpt3-175b", "-t", "dgx-h100", "-N", "128", "--format", "csv"});
  EXPECT_TRUE(contains(csv.out, "dp,tp,cp,pp,micro_batch")) << csv.all();
}

TEST_F(Cli, StepTraceEndsAtThePrintedStepTime) {
  const fs::path trace = dir_ / "step.json";
  const Result r = run({"step", "gpt3-175b", "-t", "dgx-h100", "-N", "128", "--format", "json", "--trace",
                        trace.string()});
  ASSERT_EQ(r.code, 0) << r.all();
  EXPECT_TRUE(contains(r.err, "wrote trace")) << r.err;
  const double step_ms = parsed(r)["layouts"][0]["step_ms"].get<double>();
  std::ifstream in(trace);
  const json t = json::parse(in);
  double end_us = 0;
  std::set<int> stages;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] != "X") continue;
    end_us = std::max(end_us, e["ts"].get<double>() + e["dur"].get<double>());
    stages.insert(e["pid"].get<int>());
  }
  EXPECT_NEAR(end_us / 1e3, step_ms, 1e-6 * step_ms);
  EXPECT_EQ(stages.size(), 16u);  // pp 16
  // With --search, the trace is the best layout's.
  const Result s = run({"step", "gpt3-175b", "-t", "dgx-h100", "-N", "128", "--search", "--format", "json",
                        "--trace", trace.string()});
  ASSERT_EQ(s.code, 0) << s.all();
  std::ifstream again(trace);
  EXPECT_NEAR(json::parse(again)["otherData"]["time_us"].get<double>() / 1e3,
              parsed(s)["layouts"][0]["step_ms"].get<double>(), 1e-9);
  const Result bad = run({"step", "gpt3-175b", "--trace", (dir_ / "missing" / "t.json").string()});
  EXPECT_EQ(bad.code, 2) << bad.all();
  EXPECT_TRUE(contains(bad.err, "--trace")) << bad.err;
}

TEST_F(Cli, StepRejectsImpossibleLayoutsWithTheirLine) {
  const Result tp = run({"step", "gpt3-175b", "-t", "dgx-h100", "-N", "128", "--set", "parallel.tp=5"});
  EXPECT_EQ(tp.code, 2) << tp.all();
  EXPECT_TRUE(contains(tp.err, "gpt3-175b.yaml:")) << tp.err;
  const Result gpus = run({"step", "gpt3-175b", "-t", "dgx-h100", "-N", "128", "--set", "parallel.dp=16"});
  EXPECT_EQ(gpus.code, 2) << gpus.all();
  EXPECT_TRUE(contains(gpus.err, "more than the cluster's 1024")) << gpus.err;
  const fs::path bad = dir_ / "bad.yaml";
  std::ofstream(bad) << "model: {layers: 2, hidden: 64, heads: 4, sequence: 8, vocabulary: 10, width: 3}\n"
                        "training: {global_batch: 8}\nparallel: {}\n";
  const Result unknown = run({"step", bad.string(), "-t", "dgx-h100", "-N", "1"});
  EXPECT_EQ(unknown.code, 2) << unknown.all();
  EXPECT_TRUE(contains(unknown.err, "bad.yaml:1:")) << unknown.err;
  EXPECT_TRUE(contains(unknown.err, "unknown key 'width'")) << unknown.err;
  EXPECT_EQ(run({"step", "no-such-model"}).code, 2);
  const Result overlap = run({"step", "gpt3-175b", "-t", "dgx-h100", "-N", "128", "--search-tp-overlap"});
  EXPECT_EQ(overlap.code, 2) << overlap.all();
  EXPECT_TRUE(contains(overlap.err, "--search-tp-overlap needs --search")) << overlap.err;
  const Result maybe = run({"step", "gpt3-175b", "-t", "dgx-h100", "-N", "128", "--set", "parallel.tp_overlap=maybe"});
  EXPECT_EQ(maybe.code, 2) << maybe.all();
  EXPECT_TRUE(contains(maybe.err, "tp_overlap")) << maybe.err;
}

// The layer's forward and backward schedules the tuner chose are printed and
// in the json; tp_overlap=true lets them overlap or fuse the TP collectives.
TEST_F(Cli, StepSaysWhichLayerSchedulesTheTunerChose) {
  const Result r = run({"step", "gpt3-175b", "-t", "dgx-h100", "-N", "128"});
  ASSERT_EQ(r.code, 0) << r.all();
  EXPECT_TRUE(contains(r.out, "the tuner's best schedules of the layer programs (TP overlap off)")) << r.out;
  const json off = parsed(run({"step", "gpt3-175b", "-t", "dgx-h100", "-N", "128", "--format", "json"}));
  const json on = parsed(run({"step", "gpt3-175b", "-t", "dgx-h100", "-N", "128", "--format", "json", "--set",
                              "parallel.tp_overlap=true"}));
  const auto& a = off["layouts"][0];
  const auto& b = on["layouts"][0];
  EXPECT_FALSE(a["tp_overlap"].get<bool>());
  EXPECT_TRUE(b["tp_overlap"].get<bool>());
  EXPECT_FALSE(a["layer_fwd_schedule"].get<std::string>().empty());
  EXPECT_EQ(a["layer_bwd_schedule"].get<std::string>().find("ol("), std::string::npos);
  EXPECT_LE(b["step_ms"].get<double>(), a["step_ms"].get<double>());
}

// ---- compare: the same experiment on several clusters ------------------------------

TEST_F(Cli, CompareClustersOnTheDefaultExperiment) {
  const Result r = run({"compare", "--topology", "dgx-h100", "--topology", "dgx-h200", "--topology", "dgx-a100",
                        "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.all();
  const json j = parsed(r);
  EXPECT_TRUE(conforms(j, "compare"));
  EXPECT_EQ(j["sides"], json({"dgx-h100", "dgx-h200", "dgx-a100"}));
  EXPECT_EQ(j["points"].size(), parsed(run({"predict", "--format", "json"}))["points"].size());
  for (const auto& p : j["points"]) {
    ASSERT_EQ(p["results"].size(), 3u) << p.dump();
    const double reference_us = p["results"][0]["time_us"];
    for (const auto& res : p["results"])
      EXPECT_NEAR(res["ratio"].get<double>(), res["time_us"].get<double>() / reference_us, 1e-9) << res.dump();
    EXPECT_GT(p["results"][2]["ratio"].get<double>(), 1.0) << "an A100 is slower than an H100: " << p.dump();
  }
  // Each side's best is what predict finds on that topology alone.
  const json a100 = parsed(run({"predict", "--topology", "dgx-a100", "--format", "json"}));
  EXPECT_EQ(j["points"][0]["results"][2]["best"], a100["points"][0]["best"]);
  EXPECT_DOUBLE_EQ(j["points"][0]["results"][2]["time_us"].get<double>(),
                   a100["points"][0]["rows"][0]["time_us"].get<double>());

  const Result table = run({"compare", "adam", "--set", "N=4096", "-t", "dgx-h100", "-t", "dgx-h200"});
  ASSERT_EQ(table.code, 0) << table.all();
  EXPECT_TRUE(contains(table.out, "ratio") && contains(table.out, "dgx-h200")) << table.all();
  const Result nodes = run({"compare", "adam", "--set", "N=4096", "-t", "dgx-h100", "--nodes", "1", "--nodes", "2",
                            "--format", "csv"});
  ASSERT_EQ(nodes.code, 0) << nodes.all();
  EXPECT_TRUE(contains(nodes.out, "workload,sizes,side,nodes,ranks,best,time_us,ratio")) << nodes.all();
  EXPECT_TRUE(contains(nodes.out, "dgx-h100 x2")) << nodes.all();
  const Result one = run({"compare", "-t", "dgx-h100"});
  EXPECT_EQ(one.code, 2) << one.all();
  EXPECT_TRUE(contains(one.err, "two or more sides")) << one.all();
}

// CSV is a header and rows for every command, list and show included (no text table).
TEST_F(Cli, EveryCommandPrintsCsv) {
  const std::vector<std::pair<Args, std::string>> outputs = {
      {{"list"}, "kind,name"},
      {{"show", "adam"}, "workload,schedule,stages,chunks,algo,proto,channels,overlap"},
      {{"show", "adam", "--plan", "AR-C"}, "unit,op,code,class,stream,group,hbm_bytes,flops,collectives"},
      {{"predict", "adam", "--set", "N=4096"}, "workload,sizes,ranks,rank,schedule,time_us,speedup,analytic_us,"
                                               "chunks,algo,proto,channels,overlap,dominant"},
      {{"simulate", "adam", "--schedule", "AR-C", "--set", "N=4096"},
       "workload,sizes,schedule,stage,start_us,end_us,alone_us,alone_ranks,bound"},
      {{"compare", "adam", "-t", "dgx-h100", "-t", "dgx-a100"}, "workload,sizes,side,nodes,ranks,best,time_us,ratio"},
      {{"simulate", "default", "--schedule", "AR-C"},
       "workload,sizes,schedule,stage,start_us,end_us,alone_us,alone_ranks,bound"},
      {{"collective", "-b", "1K", "-e", "1K"}, "bytes,time_us,algbw_GBps,busbw_GBps,algo,proto"},
  };
  for (const auto& [args, header] : outputs) {
    Args with = args;
    with.insert(with.end(), {"--format", "csv"});
    const Result r = run(with);
    ASSERT_EQ(r.code, 0) << r.all();
    EXPECT_EQ(r.out.substr(0, r.out.find('\n')), header) << r.all();
    EXPECT_EQ(r.out.find(header, 1), std::string::npos) << "one header: " << r.all();
    EXPECT_FALSE(contains(r.out, "schedules:") || contains(r.out, "==")) << r.all();
  }
}

TEST_F(Cli, CollectiveJson) {
  const json j = parsed(run({"collective", "--op", "allreduce", "--topology", "dgx-h100", "--nodes",
                             "1", "-b", "1K", "-e", "1M", "-f", "32", "--format", "json"}));
  ASSERT_EQ(j["rows"].size(), 3u);  // 1K, 32K, 1M
  EXPECT_EQ(j["rows"][0]["bytes"], 1024);
}

TEST_F(Cli, RunJson) {
  if (!kHaveMpi) GTEST_SKIP() << "no MPI in this build";
  const Result r = run({"run", "sgd", "--ranks", "2", "--set", "N=1024", "--iters", "1", "--warmup",
                        "0", "--format", "json"});
  EXPECT_EQ(r.code, 0) << r.all();
  const json j = parsed(r);
  EXPECT_EQ(j["ranks"], 2);
  ASSERT_FALSE(j["rows"].empty());
  for (const auto& row : j["rows"]) EXPECT_TRUE(row["verified"].get<bool>()) << row.dump();
  EXPECT_TRUE(conforms(j, "run"));
  const Result csv = run({"run", "sgd", "--ranks", "2", "--set", "N=1024", "--iters", "1", "--warmup", "0",
                          "--schedule", "AR-C", "--format", "csv"});
  ASSERT_EQ(csv.code, 0) << csv.all();
  EXPECT_EQ(csv.out.substr(0, csv.out.find('\n')),
            "workload,sizes,schedule,chunks,algo,proto,channels,overlap,median_us,min_us,max_us,stages_us,verified,"
            "max_abs_error")
      << csv.all();
  EXPECT_TRUE(contains(csv.out, "sgd,N=1024,AR-C,1,-,-,-,chunk,")) << csv.all();  // NCCL's knobs do not apply on cpu
}

TEST_F(Cli, CalibrateJson) {
  if (!kHaveMpi) GTEST_SKIP() << "no MPI in this build";
  // Five steps per microbenchmark: with two, a loaded machine's noise can hide
  // the cost per byte and the fit rightly refuses (exit 2). A calibration is
  // measurements: one that fails is measured once more (the first failure is
  // printed), and a second failure fails the test.
  const Args args{"calibrate", "--backend", "cpu", "--ranks", "2", "--quick", "--iters", "5",
                  "--wait-s", "1", "--out", "cal.yaml", "--format", "json"};
  Result r = run(args);
  if (r.code != 0) {
    std::cerr << "calibrate failed once (measured again):\n" << r.all() << "\n";
    r = run(args);
  }
  EXPECT_EQ(r.code, 0) << r.all();
  EXPECT_FALSE(parsed(r)["rows"].empty()) << r.all();
  EXPECT_TRUE(conforms(parsed(r), "calibrate")) << r.all();
}

// calibrate replacing a calibration that claims 1 us for the memory
// reference: every probe is a slow spell against it, --wait-s 1 cannot wait
// it out, and the sweep is kept with a warning on stderr and in the file.
// One made on other ranks is no baseline.
TEST_F(Cli, CalibrateComparesWithTheCalibrationItReplaces) {
  if (!kHaveMpi) GTEST_SKIP() << "no MPI in this build";
  const auto calibrate = [&](const std::string& previous) {
    std::ofstream(dir_ / "cal.yaml") << "name: before\n" << previous;
    const Args args{"calibrate", "--backend", "cpu", "--ranks", "2", "--quick", "--iters", "5",
                    "--out", "cal.yaml", "--wait-s", "1"};
    Result r = run(args);
    if (r.code != 0) {  // measured once more, as in CalibrateJson
      std::cerr << "calibrate failed once (measured again):\n" << r.all() << "\n";
      r = run(args);
    }
    EXPECT_EQ(r.code, 0) << r.all();
    return r;
  };
  const Result fast = calibrate("# coconet-reference-us: ranks=2 memory=1\n");
  EXPECT_TRUE(contains(fast.err, "warning: the sweep was kept from a slow spell")) << fast.all();
  EXPECT_TRUE(contains(fast.err, "its time in the calibration this replaces (1.0 us)")) << fast.all();
  const std::string written = read_text(dir_ / "cal.yaml");
  EXPECT_TRUE(contains(written, "# warning: the sweep was kept from a slow spell")) << written;
  const auto at = written.find("# coconet-reference-us: ranks=2 memory=");
  ASSERT_NE(at, std::string::npos) << written;
  // What this machine measured, kept: a slow spell against the claimed 1 us,
  // so above it by more than the guard's tolerance (validation/spell_guard.h
  // kGuardTolerance, 0.2), whatever the machine's speed.
  constexpr double kClaimedUs = 1.0, kGuardTolerance = 0.2;
  EXPECT_GT(std::stod(written.substr(at + 39)), kClaimedUs * (1 + kGuardTolerance));
  const Result other = calibrate("# coconet-reference-us: ranks=4 memory=1\n");
  EXPECT_FALSE(contains(other.err, "calibration this replaces")) << other.all();
}

TEST_F(Cli, ValidateJson) {
  if (!kHaveMpi) GTEST_SKIP() << "no MPI in this build";
  const Result r = run({"validate", coconet::test::source_root() + "/validation/testdata/validate-tiny.yaml",
                        "--backend", "cpu", "--ranks", "2", "--topology", "cpu-local", "--no-calibrate", "--iters",
                        "1", "--warmup", "0", "--budget-s", "1", "--wait-s", "1", "--out", "report", "--format",
                        "json"});
  EXPECT_EQ(r.code, 0) << r.all();
  const json printed = parsed(r);
  EXPECT_TRUE(conforms(printed, "validate"));
  EXPECT_GT(printed["metrics"]["rows"].get<int>(), 0);
  const json results = json::parse(read_text(dir_ / "report" / "results.json"));
  EXPECT_TRUE(conforms(results, "results"));
  EXPECT_EQ(results["rows"][0]["size"], "N=4096");
  EXPECT_EQ(results["metrics"], printed["metrics"]);  // one metrics object
  for (const auto& row : results["rows"]) {  // one median per round, so rounds can be paired
    ASSERT_TRUE(row.contains("round_medians_us")) << row.dump(2);
    ASSERT_EQ(row["round_medians_us"].size(), row["rounds"].get<std::size_t>()) << row.dump(2);
    for (const auto& m : row["round_medians_us"]) EXPECT_GT(m.get<double>(), 0) << row.dump(2);
  }
  const json reference =
      parsed(run({"validate", "--reference", "--out", "reference", "--format", "json"}));
  EXPECT_TRUE(conforms(reference, "validate"));
  EXPECT_GT(reference["metrics"]["rows"].get<int>(), 0);
}

// A topology whose calibration claims reference times no machine reaches
// (0.1 us for an f32 add of 65536 elements, 5 TB/s): validate measures the references
// before and after its points and warns that the machine is not as
// calibrated; one calibrated on other ranks is not compared, and says so.
TEST_F(Cli, ValidateComparesTheMachineWithItsCalibration) {
  if (!kHaveMpi) GTEST_SKIP() << "no MPI in this build";
  std::string topology;  // cpu-local without its own reference line
  std::istringstream lines(read_text(fs::path(coconet::test::source_root()) / "configs/topologies/cpu-local.yaml"));
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("# coconet-reference-us:", 0) != 0) topology += line + "\n";
  const auto validate = [&](const std::string& line) {
    std::ofstream(dir_ / "claimed.yaml") << topology << line;
    const Result r = run({"validate", coconet::test::source_root() + "/validation/testdata/validate-tiny.yaml", "--backend",
                          "cpu", "--ranks", "2", "--topology", (dir_ / "claimed.yaml").string(), "--no-calibrate",
                          "--iters", "1", "--warmup", "0", "--budget-s", "1", "--wait-s", "1", "--out", "report", "--format", "json"});
    EXPECT_EQ(r.code, 0) << r.all();
    json results = json::parse(read_text(dir_ / "report" / "results.json"));
    EXPECT_TRUE(conforms(results, "results"));
    results["report_md"] = read_text(dir_ / "report" / "report.md");  // with the notes
    fs::remove_all(dir_ / "report");
    results["stderr"] = r.err;  // what the terminal showed
    return results;
  };
  const json fast = validate("# coconet-reference-us: ranks=2 memory=0.1 collective=0.1\n");
  ASSERT_EQ(fast["machine_speed"].size(), 2u) << fast.dump(2);
  EXPECT_EQ(fast["machine_speed"][0]["reference"], "add f32 N=65536");
  EXPECT_GT(fast["machine_speed"][0]["start_us"].get<double>(), 1.0);
  bool warned = false;
  for (const auto& w : fast["warnings"]) warned = warned || contains(w.get<std::string>(), "does not run at the speed");
  EXPECT_TRUE(warned) << fast["warnings"].dump(2);
  EXPECT_TRUE(contains(fast["stderr"].get<std::string>(), "warning: the machine does not run at the speed"))
      << fast["stderr"];
  // The point guard's baseline is the claimed 0.1 us: every point is in a spell,
  // the first waits all of --wait-s 1 (two probes 0.5 s apart), and every
  // point is kept flagged.
  EXPECT_TRUE(contains(fast["report_md"].get<std::string>(), "1.0 s of --wait-s 1")) << fast["report_md"];
  for (const auto& row : fast["rows"]) {
    EXPECT_GT(row["speed_probe"]["ratio"].get<double>(), 10.0) << row.dump(2);  // a probe takes several us
    EXPECT_TRUE(row["speed_probe"]["in_spell"].get<bool>()) << row.dump(2);
  }
  EXPECT_FALSE(fast.contains("metrics_outside_spells"));  // no point outside a spell
  bool flagged = false;
  for (const auto& w : fast["warnings"]) flagged = flagged || contains(w.get<std::string>(), "kept from a slow spell");
  EXPECT_TRUE(flagged) << fast["warnings"].dump(2);
  const json other = validate("# coconet-reference-us: ranks=4 memory=1\n");
  EXPECT_TRUE(other["machine_speed"].empty()) << other.dump(2);
  for (const auto& row : other["rows"]) EXPECT_FALSE(row.contains("speed_probe")) << row.dump(2);  // no guard
  for (const auto& w : other["warnings"]) EXPECT_FALSE(contains(w.get<std::string>(), "does not run at the speed"));
}

// ---- calibrations that know their machine ---------------------------------------

// Every file under the folders a calibration could be written into, by path:
// its size and content, to show that no tracked file changed.
std::map<std::string, std::string> tracked_snapshot() {
  std::map<std::string, std::string> out;
  for (const char* folder : {"configs", "workloads", "models"})
    for (const auto& e : fs::recursive_directory_iterator(fs::path(coconet::test::source_root()) / folder))
      if (e.is_regular_file()) out[e.path().string()] = read_text(e.path());
  out["README.md"] = read_text(fs::path(coconet::test::source_root()) / "README.md");
  return out;
}

std::size_t count_of(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// cpu-local records the machine it was calibrated on (an AMD EPYC, 2 cores).
// COCONET_MACHINE fakes this one: another CPU is said in one warning line
// naming both machines by predict --backend cpu, run and validate; the same
// CPU and cores is not. validate calibrates into $XDG_CACHE_HOME/coconet
// first, reuses that calibration, and --no-calibrate predicts with cpu-local
// as it is; no file of the repository changes.
TEST_F(Cli, ACalibrationFromAnotherMachineIsSaidAndRedoneInTheCache) {
  const auto before = tracked_snapshot();
  const std::string cache = (dir_ / "cache").string();
  // The memory and MPI cpu-local records (2026-12-06) given too, so that only the CPU differs on any host.
  const std::string recorded = "memory_GiB=23.5; mpi=Open MPI v4.1.4";
  const Args other{"COCONET_MACHINE=cpu=Fake Xeon 9999; cores=2; " + recorded, "XDG_CACHE_HOME=" + cache};
  const Args same{"COCONET_MACHINE=cpu=AMD EPYC; cores=2; " + recorded, "XDG_CACHE_HOME=" + cache};
  const std::string both = "warning: cpu-local was calibrated on another machine: AMD EPYC, 2 cores, 23.5 GiB, "
                           "Open MPI v4.1.4 (2026-12-06); this one is Fake Xeon 9999, 2 cores";
  const Args predict{"predict", "adam", "--backend", "cpu", "--topology", "cpu-local", "--set", "N=4096"};
  const Result told = run(predict, other);
  EXPECT_EQ(told.code, 0) << told.all();
  EXPECT_TRUE(contains(told.err, both)) << told.all();
  EXPECT_TRUE(contains(told.err, "(cpu differs)")) << told.all();
  EXPECT_EQ(count_of(told.err, "warning:"), 1u) << told.all();
  const Result quiet = run(predict, same);
  EXPECT_FALSE(contains(quiet.err, "another machine")) << quiet.all();
  EXPECT_FALSE(contains(run({"predict", "adam", "--topology", "cpu-local", "--backend", "cuda"}, other).err,
                        "another machine"))
      << "a prediction for GPUs is not about this machine";
  const Result bad = run(predict, {"COCONET_MACHINE=cpus=4"});
  EXPECT_EQ(bad.code, 2) << bad.all();
  EXPECT_TRUE(contains(bad.err, "COCONET_MACHINE: unknown key 'cpus'")) << bad.all();
  if (kHaveMpi) {
    const Result ran = run({"run", "sgd", "--ranks", "1", "--set", "N=1024", "--schedule", "all", "--topology",
                            "cpu-local", "--iters", "1", "--warmup", "0"},
                           other);
    EXPECT_EQ(ran.code, 0) << ran.all();
    EXPECT_TRUE(contains(ran.err, both)) << ran.all();
    const Args validate{"validate", coconet::test::source_root() + "/validation/testdata/validate-tiny.yaml", "--backend",
                        "cpu", "--ranks", "2", "--topology", "cpu-local", "--iters", "1", "--warmup", "0",
                        "--budget-s", "1", "--wait-s", "1", "--out", "report"};
    Result first = run(validate, other);
    // A quick calibration on a loaded machine can rightly refuse its fit (as in CalibrateJson): once more.
    if (first.code == 2 && contains(first.err, "no cost per byte")) first = run(validate, other);
    ASSERT_EQ(first.code, 0) << first.all();
    EXPECT_TRUE(contains(first.err, both)) << first.all();
    EXPECT_TRUE(contains(first.err, "calibrating this machine into " + cache + "/coconet/cpu-local-2ranks-"))
        << first.all();
    std::vector<fs::path> cached;
    for (const auto& e : fs::directory_iterator(fs::path(cache) / "coconet")) cached.push_back(e.path());
    ASSERT_EQ(cached.size(), 1u);
    const std::string calibration = read_text(cached.front());
    EXPECT_TRUE(contains(calibration, "# coconet-machine: cpu=Fake Xeon 9999; cores=2;")) << calibration;
    EXPECT_EQ(read_text(dir_ / "report" / "inputs" / "topology.yaml"), calibration) << "the cache's calibration predicts";
    fs::remove_all(dir_ / "report");
    const Result again = run(validate, other);
    EXPECT_EQ(again.code, 0) << again.all();
    EXPECT_TRUE(contains(again.err, "predicting with this machine's calibration in " + cached.front().string()))
        << again.all();
    fs::remove_all(dir_ / "report");
    Args as_it_is = validate;
    as_it_is.push_back("--no-calibrate");
    const Result kept = run(as_it_is, other);
    EXPECT_EQ(kept.code, 0) << kept.all();
    EXPECT_TRUE(contains(kept.err, "its constants predict as they are (--no-calibrate)")) << kept.all();
    EXPECT_EQ(read_text(dir_ / "report" / "inputs" / "topology.yaml"),
              read_text(fs::path(coconet::test::source_root()) / "configs/topologies/cpu-local.yaml"));
  }
  EXPECT_TRUE(tracked_snapshot() == before) << "a file of the repository changed";
}

// ---- --set ----------------------------------------------------------------------

std::string predicted_sizes(const Result& r) {
  const json j = parsed(r);
  return j.is_null() ? "" : j["points"][0]["label"].get<std::string>();
}

TEST_F(Cli, SetSizeInDecimalNotationIsExact) {
  EXPECT_EQ(predicted_sizes(run({"predict", "adam", "--set", "N=1e6", "--format", "json"})),
            "N=1000000");
  EXPECT_EQ(predicted_sizes(run({"predict", "adam", "--set", "N=2.5e3", "--format", "json"})),
            "N=2500");
}

TEST_F(Cli, SetSizeWithBinarySuffix) {
  EXPECT_EQ(predicted_sizes(run({"predict", "adam", "--set", "N=4K", "--format", "json"})),
            "N=4096");
  EXPECT_EQ(predicted_sizes(run({"predict", "adam", "--set", "N=1M", "--format", "json"})),
            "N=1048576");
}

TEST_F(Cli, SetSizeThatIsNotAnIntegerIsRejected) {
  expect_rejected({"predict", "adam", "--set", "N=1.5"}, "--set N=1.5: ");
  expect_rejected({"predict", "adam", "--set", "N=1e-3"}, "--set N=1e-3: ");
  expect_rejected({"predict", "adam", "--set", "N=0"}, "--set N=0: ");
  expect_rejected({"predict", "adam", "--set", "N=-4"}, "--set N=-4: ");
}

TEST_F(Cli, SetSizeThatIsNotANumberIsRejectedByEveryCommand) {
  expect_rejected({"predict", "adam", "--set", "N=abc"}, "--set N=abc: ");
  expect_rejected({"tune", "adam", "--set", "N=abc"}, "--set N=abc: ");
  expect_rejected({"simulate", "adam", "--schedule", "AR-C", "--set", "N=abc"}, "--set N=abc: ");
  expect_rejected({"show", "adam", "--set", "N=abc"}, "--set N=abc: ");
  expect_rejected({"run", "adam", "--ranks", "1", "--set", "N=abc"}, "--set N=abc: ");
}

TEST_F(Cli, SetSizePastInt64IsRejected) {
  expect_rejected({"predict", "adam", "--set", "N=9223372036854775808"},
                  "--set N=9223372036854775808: ");
  expect_rejected({"predict", "adam", "--set", "N=1e19"}, "--set N=1e19: ");
  expect_rejected({"predict", "adam", "--set", "N=9000000000G"}, "--set N=9000000000G: ");
}

TEST_F(Cli, SetUnknownNameListsTheKnownOnes) {
  for (const Args& args : {Args{"predict", "adam", "--set", "Q=1"},
                           Args{"run", "adam", "--set", "Q=1"}, Args{"predict", "--set", "Q=1"}}) {
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << r.all();
    EXPECT_TRUE(contains(r.err, "--set Q=1: ")) << r.all();
    EXPECT_TRUE(contains(r.err, "sizes: ")) << r.all();
    EXPECT_TRUE(contains(r.err, "scalars: beta1, beta2, eps, lr")) << r.all();
  }
}

TEST_F(Cli, SetScalarIsAcceptedByEveryCommand) {
  EXPECT_EQ(run({"predict", "adam", "--set", "lr=0.1", "--set", "N=4096"}).code, 0);
  EXPECT_EQ(run({"tune", "adam", "--set", "lr=0.1", "--set", "N=4096"}).code, 0);
  EXPECT_EQ(
      run({"simulate", "adam", "--schedule", "AR-C", "--set", "lr=0.1", "--set", "N=4096"}).code,
      0);
  EXPECT_EQ(run({"show", "adam", "--set", "lr=0.1"}).code, 0);
  expect_rejected({"predict", "adam", "--set", "lr=fast"}, "--set lr=fast: ");
  if (!kHaveMpi) return;
  const Result r = run({"run", "adam", "--ranks", "2", "--set", "lr=0.1", "--set", "N=1024",
                        "--iters", "1", "--schedule", "AR-C"});
  EXPECT_EQ(r.code, 0) << r.all();
}

TEST_F(Cli, SetTopologyValues) {
  const json j = parsed(run({"predict", "adam", "--set", "N=4096", "--set", "nodes=1", "--set",
                             "gpu.hbm_GBps=4000", "--format", "json"}));
  EXPECT_EQ(j["points"][0]["nodes"], 1);
  EXPECT_EQ(j["points"][0]["ranks"], 8);  // every GPU of one node
  expect_rejected({"predict", "adam", "--set", "gpu.hbm_GBps=abc"}, "--set gpu.hbm_GBps");
  expect_rejected({"simulate", "adam", "--schedule", "AR-C", "--set", "gpu.no_such=1"},
                  "--set gpu.no_such=1");
  expect_rejected({"run", "adam", "--set", "gpu.hbm_GBps=4000"}, "--set gpu.hbm_GBps=4000: ");
}

TEST_F(Cli, RunChecksItsArgumentsBeforeStartingRanks) {
  // Without mpirun on the PATH a relaunch would fail with "mpirun"; the bad
  // value must be found first.
  const Args no_mpirun{"PATH=/nonexistent", "COCONET_MPIRUN="};
  const Result r = run({"run", "adam", "--ranks", "2", "--set", "N=1e5x"}, no_mpirun);
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_TRUE(contains(r.err, "--set N=1e5x: ")) << r.all();
  const Result pipeline = run({"run", "gpt3_pipeline", "--ranks", "3"}, no_mpirun);
  EXPECT_EQ(pipeline.code, 2) << pipeline.all();
  EXPECT_TRUE(contains(pipeline.err, "multiple of 2")) << pipeline.all();
}

// An mpirun that cannot be executed: the supervised start (exec/mpirun.h)
// says so, naming the path, and exits 2; nothing of the job is left.
TEST_F(Cli, AnMpirunThatCannotStartIsNamed) {
  const Result r = run({"run", "sgd", "--ranks", "2", "--set", "N=64"}, {"COCONET_MPIRUN=/nonexistent/mpirun"});
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_TRUE(contains(r.err, "could not start /nonexistent/mpirun")) << r.all();
}

// Errors that can be known before ranks start are reported before they start:
// with no mpirun to be found, a relaunch would fail naming it.
TEST_F(Cli, EveryArgumentErrorComesBeforeMpirun) {
  const Args no_mpirun{"PATH=/nonexistent", "COCONET_MPIRUN="};
  const auto rejected = [&](const Args& args, const std::string& part) {
    const Result r = run(args, no_mpirun);
    EXPECT_EQ(r.code, 2) << r.all();
    EXPECT_TRUE(contains(r.err, part)) << "expected '" << part << "' in\n" << r.all();
    EXPECT_FALSE(contains(r.err, "mpirun")) << r.all();
    EXPECT_FALSE(contains(r.err, "MPI_ABORT")) << r.all();
  };
  rejected({"run", "adam", "--ranks", "2", "--schedule", "best"}, "--schedule best");
  rejected({"run", "adam", "--ranks", "2", "--schedule", "NOPE"}, "no schedule named 'NOPE'");
  rejected({"run", "adam", "--ranks", "2", "--schedule", "missing.yaml"}, "missing.yaml");
  rejected({"run", "adam", "--ranks", "2", "--chunks", "0"}, "--chunks 0");
  rejected({"run", "adam", "--ranks", "2", "--algo", "bogus"}, "--algo bogus");
  fs::create_directories(dir_ / "notes");
  std::ofstream(dir_ / "notes" / "todo.txt") << "mine\n";
  rejected({"validate", "--ranks", "2", "--topology", "cpu-local", "--out", "notes"}, "is not a coconet report");
  rejected({"calibrate", "--ranks", "2", "--out", "no/such/folder/t.yaml"}, "--out 'no/such/folder/t.yaml'");
  rejected({"calibrate", "no-such-experiment", "--ranks", "2", "--out", "t.yaml"},
           "unknown experiment 'no-such-experiment'");
  rejected({"run", "adam", "--ranks", "2", "--interpreter-limit", "-1"}, "--interpreter-limit");
}

TEST_F(Cli, BackendIsStoredAndPrinted) {
  const json j =
      parsed(run({"predict", "adam", "--set", "N=4096", "--backend", "cuda", "--format", "json"}));
  EXPECT_EQ(j["points"][0]["backend"], "cuda");
  const json s = parsed(run({"simulate", "adam", "--schedule", "AR-C", "--set", "N=4096",
                             "--backend", "cpu", "--format", "json"}));
  EXPECT_EQ(s["points"][0]["backend"], "cpu");
  EXPECT_TRUE(
      contains(run({"tune", "adam", "--set", "N=4096", "--backend", "cuda"}).out, "backend cuda"));
  const Result bad = run({"predict", "adam", "--backend", "gpu"});
  EXPECT_EQ(bad.code, 2) << bad.all();
  EXPECT_TRUE(contains(bad.err, "--backend") && contains(bad.err, "cuda") &&
              contains(bad.err, "cpu"))
      << bad.all();
}

// ---- what tune chose, run and simulated ------------------------------------------

// tune writes one document per point with the point as data; run without --set
// takes the file's sizes, runs its schedule with its knobs and prints tune's
// prediction beside the measurement.
TEST_F(Cli, RunTheScheduleTuneWrote) {
  if (!kHaveMpi) GTEST_SKIP() << "no MPI in this build";
  const Result tuned = run({"tune", "adam", "--set", "N=4096", "--ranks", "2", "--topology", "cpu-local",
                            "--format", "json", "--out", "best.yaml"});
  ASSERT_EQ(tuned.code, 0) << tuned.all();
  const json best = parsed(tuned)["points"][0]["rows"][0];
  const std::string text = read_text(dir_ / "best.yaml");
  EXPECT_TRUE(contains(text, "point: {workload: adam, sizes: {N: 4096}, ranks: 2")) << text;

  const Result r = run({"run", "adam", "--schedule", "best.yaml", "--backend", "cpu", "--ranks", "2", "--iters",
                        "1", "--warmup", "0", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.all();
  const json j = parsed(r);
  ASSERT_EQ(j["rows"].size(), 1u);
  const json& row = j["rows"][0];
  EXPECT_EQ(row["schedule"], best["schedule"]);
  EXPECT_EQ(row["sizes"]["N"], 4096);
  EXPECT_EQ(row["knobs"]["chunks"], best["knobs"]["chunks"]) << row.dump();
  EXPECT_NEAR(row["predicted_us"].get<double>(), best["time_us"].get<double>(), 1e-3);
  EXPECT_TRUE(row["verified"].get<bool>());

  const Result table = run({"run", "adam", "--schedule", "best.yaml", "--ranks", "2", "--iters", "1", "--warmup",
                            "0", "--chunks", "2"});
  ASSERT_EQ(table.code, 0) << table.all();
  EXPECT_TRUE(contains(table.out, "chunks=2")) << table.all();
  EXPECT_TRUE(contains(table.out, "do not apply on cpu")) << table.all();
}

// A tune of a workload at its default point names 32 ranks; run on 2 says which
// points the file has and the flags that select them.
TEST_F(Cli, RunOfAnotherPointListsTheFilesPoints) {
  ASSERT_EQ(run({"tune", "adam", "--out", "best.yaml"}).code, 0);
  const Result r = run({"run", "adam", "--schedule", "best.yaml", "--backend", "cpu", "--ranks", "2"},
                       {"PATH=/nonexistent", "COCONET_MPIRUN="});
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_TRUE(contains(r.err, "no schedule for adam N=335708160 on 2 ranks")) << r.all();
  EXPECT_TRUE(contains(r.err, "--set N=335708160 --ranks 32")) << r.all();
  EXPECT_FALSE(contains(r.err, "MPI")) << r.all();
}

TEST_F(Cli, MultiPointTuneFile) {
  std::ofstream(dir_ / "two.yaml") << "name: two\ntopology: dgx-h100\nranks: 8\nworkloads:\n"
                                      "  - workload: adam\n    sizes: {N: [4096, 1048576]}\n"
                                      "  - workload: sgd\n    sizes: {N: 4096}\n";
  ASSERT_EQ(run({"tune", "two.yaml", "--out", "best.yaml", "--format", "json"}).code, 0);
  const std::string docs = read_text(dir_ / "best.yaml");
  EXPECT_TRUE(contains(docs, "point: {workload: sgd, sizes: {N: 4096}, ranks: 8")) << docs;
  const json tuned = parsed(run({"tune", "two.yaml", "--format", "json"}));
  ASSERT_EQ(tuned["points"].size(), 3u);
  for (const auto& p : tuned["points"]) {
    const std::string workload = p["workload"];
    const std::string size = std::to_string(p["sizes"]["N"].get<std::int64_t>());
    const json s = parsed(run({"simulate", workload, "--set", "N=" + size, "--ranks", "8", "--schedule",
                               "best.yaml", "--format", "json"}));
    ASSERT_EQ(s["points"].size(), 1u) << workload << " " << size;
    EXPECT_EQ(s["points"][0]["schedule"], p["best"]) << workload << " " << size;
    EXPECT_NEAR(s["points"][0]["time_us"].get<double>(), p["rows"][0]["time_us"].get<double>(), 1e-6);
  }
  const Result other = run({"simulate", "adam", "--set", "N=8192", "--ranks", "8", "--schedule", "best.yaml"});
  EXPECT_EQ(other.code, 2) << other.all();
  EXPECT_TRUE(contains(other.err, "adam N=1048576 on 8 ranks")) << other.all();
  EXPECT_TRUE(contains(other.err, "sgd N=4096 on 8 ranks")) << other.all();
  const Result lamb = run({"simulate", "lamb", "--schedule", "best.yaml"});
  EXPECT_EQ(lamb.code, 2) << lamb.all();
  EXPECT_TRUE(contains(lamb.err, "no schedule for workload 'lamb'")) << lamb.all();
}

// ---- labels that fit the topology ---------------------------------------------------

TEST_F(Cli, BottlenecksUseTheTopologysWords) {
  const json cpu = parsed(run({"simulate", "adam", "--schedule", "RS-C-AG", "--set", "N=4096", "--ranks", "2",
                               "--topology", "cpu-local", "--format", "json"}));
  for (const auto& row : cpu["points"][0]["rows"]) {
    const std::string bound = row["bound"];
    EXPECT_FALSE(contains(bound, "NVLink") || contains(bound, "HBM") || contains(bound, "SMs")) << bound;
  }
  const std::string gpu = run({"simulate", "adam", "--schedule", "RS-C-AG", "--set", "N=4096", "--ranks", "8"}).out;
  EXPECT_TRUE(contains(gpu, "NVLink-bound")) << gpu;
}

TEST_F(Cli, RunMarksPredictionsFromAnotherMachine) {
  if (!kHaveMpi) GTEST_SKIP() << "no MPI in this build";
  const auto notes_of = [&](const char* topology) {
    const Result r = run({"run", "sgd", "--ranks", "1", "--set", "N=1024", "--schedule", "best", "--topology",
                          topology, "--iters", "1", "--warmup", "0", "--format", "json"});
    EXPECT_EQ(r.code, 0) << r.all();
    return parsed(r)["notes"].dump();
  };
  EXPECT_TRUE(contains(notes_of("dgx-h100"), "describes GPUs, but this run measures the cpu backend"));
  // cpu-local was calibrated on 2 ranks (its first line says so); a run on 1 is told.
  EXPECT_TRUE(contains(notes_of("cpu-local"), "was calibrated on 2 ranks"));
}

// ---- the same defaults everywhere ----------------------------------------------

TEST_F(Cli, NamedWorkloadHasTheDefaultExperimentsRanksAndItsOwnSizes) {
  const json all = parsed(run({"predict", "--format", "json"}));
  std::map<std::string, int> ranks;
  for (const auto& p : all["points"])
    ranks[p["workload"].get<std::string>()] = p["ranks"].get<int>();
  for (const char* w : {"adam", "megatron_mlp", "gpt3_pipeline"}) {
    const json one = parsed(run({"predict", w, "--format", "json"}));
    EXPECT_EQ(one["points"][0]["ranks"].get<int>(), ranks.at(w)) << w;
    EXPECT_NE(one["points"][0]["label"], "defaults") << w;
    const json sim =
        parsed(run({"simulate", w, "--schedule", one["points"][0]["best"], "--format", "json"}));
    EXPECT_EQ(sim["points"][0]["ranks"], one["points"][0]["ranks"]) << w;
    EXPECT_EQ(sim["points"][0]["sizes"], one["points"][0]["sizes"]) << w;
  }
  EXPECT_EQ(ranks.at("megatron_mlp"), 8);
}

TEST_F(Cli, SimulateUsesTheKnobsPredictChooses) {
  const json predicted = parsed(run({"predict", "megatron_mlp", "--format", "json"}));
  const json& best = predicted["points"][0]["rows"][0];
  const json simulated =
      parsed(run({"simulate", "megatron_mlp", "--schedule", best["schedule"], "--format", "json"}));
  EXPECT_NEAR(simulated["points"][0]["time_us"].get<double>(), best["time_us"].get<double>(), 1e-6);
  EXPECT_EQ(simulated["points"][0]["knobs"], best["knobs"]);
  const json pinned = parsed(run({"simulate", "megatron_mlp", "--schedule", best["schedule"],
                                  "--chunks", "1", "--format", "json"}));
  EXPECT_EQ(pinned["points"][0]["knobs"]["chunks"], 1);
}

// predict, simulate, run --topology and validate give one predicted time for
// one (workload, sizes, ranks, topology, schedule, knobs).
TEST_F(Cli, ValidateSetRulesAreTheOthers) {
  const Result bad = run({"validate", "cpu-local", "--backend", "cpu", "--set", "N=1.5", "--out", "r"});
  EXPECT_EQ(bad.code, 2) << bad.all();
  EXPECT_TRUE(contains(bad.err, "--set N=1.5")) << bad.all();
  const Result topo = run({"validate", "cpu-local", "--backend", "cpu", "--set", "gpu.sms=1", "--out", "r"});
  EXPECT_EQ(topo.code, 2) << topo.all();
  EXPECT_TRUE(contains(topo.err, "--set gpu.sms=1")) << topo.all();
  const Result unknown = run({"validate", "cpu-local", "--backend", "cpu", "--set", "Q=4", "--out", "r"});
  EXPECT_EQ(unknown.code, 2) << unknown.all();
  EXPECT_FALSE(std::filesystem::exists(dir_ / "r"));
}

TEST_F(Cli, OnePredictedTimeAcrossCommands) {
  if (!kHaveMpi) GTEST_SKIP() << "no MPI in this build";
  const Args point{"--set", "N=4096", "--ranks", "2", "--topology", "cpu-local"};
  Args predict{"predict", "adam", "--format", "json"};
  predict.insert(predict.end(), point.begin(), point.end());
  const json p = parsed(run(predict));
  ASSERT_EQ(p["points"].size(), 1u);
  const auto predicted = times_by_schedule(p["points"][0], "time_us");
  ASSERT_GE(predicted.size(), 7u);

  for (const auto& [schedule, us] : predicted) {
    Args simulate{"simulate", "adam", "--schedule", schedule, "--format", "json"};
    simulate.insert(simulate.end(), point.begin(), point.end());
    EXPECT_NEAR(parsed(run(simulate))["points"][0]["time_us"].get<double>(), us, 1e-6 * us)
        << schedule;
  }

  Args run_args{"run", "adam", "--iters", "1", "--warmup", "0", "--format", "json"};
  run_args.insert(run_args.end(), point.begin(), point.end());
  const json measured = parsed(run(run_args));
  ASSERT_EQ(measured["rows"].size(), predicted.size());
  for (const auto& row : measured["rows"])
    EXPECT_NEAR(row["predicted_us"].get<double>(), predicted.at(row["schedule"]), 1e-6)
        << row.dump();

  // validate takes --set by the same rules: the experiment's adam at N=4096.
  std::ofstream(dir_ / "adam.yaml") << "name: one-point\ntopology: cpu-local\nworkloads:\n"
                                       "  - workload: adam\n";
  const Result v =
      run({"validate", (dir_ / "adam.yaml").string(), "--backend", "cpu", "--ranks", "2", "--set", "N=4K",
           "--topology", "cpu-local", "--no-calibrate", "--iters", "1", "--warmup", "0", "--budget-s", "1",
           "--wait-s", "1", "--out", "report"});
  ASSERT_EQ(v.code, 0) << v.all();
  const json results = json::parse(read_text(dir_ / "report" / "results.json"));
  ASSERT_EQ(results["rows"].size(), predicted.size());
  for (const auto& row : results["rows"]) {
    EXPECT_EQ(row["size"], "N=4096");
    EXPECT_NEAR(row["predicted_us"].get<double>(), predicted.at(row["schedule"]), 1e-6)
        << row.dump();
  }
}

// ---- the README's examples -------------------------------------------------------

// Every `coconet` command in a fenced block of the README, and what this test
// runs for it: the same command, made small where it would take minutes
// (2 ranks instead of 4, small sizes, one timed step, files in the test's folder).
const std::map<std::string, Args>& readme_examples() {
  static const std::map<std::string, Args> examples{
      {"coconet collective --op allreduce --topology dgx-h100 --nodes 1 -b 1K -e 8G -f 16",
       {"collective", "--op", "allreduce", "--topology", "dgx-h100", "--nodes", "1", "-b", "1K",
        "-e", "8G", "-f", "16"}},
      {"coconet run adam --backend cpu --ranks 2 --schedule all --set N=1000000",
       {"run", "adam", "--backend", "cpu", "--ranks", "2", "--schedule", "all", "--set", "N=4096",
        "--iters", "1"}},
      {"coconet calibrate --backend cpu --ranks 2 --out ~/.cache/coconet/this-machine.yaml",
       {"calibrate", "--backend", "cpu", "--ranks", "2", "--quick", "--iters", "5", "--wait-s", "1",
        "--out", "this-machine.yaml"}},
      {"coconet validate cpu-local --backend cpu --ranks 2 --topology ~/.cache/coconet/this-machine.yaml --out "
       "/tmp/report",
       {"validate", "cpu-local", "--backend", "cpu", "--ranks", "2", "--topology", "this-machine.yaml",
        "--iters", "1", "--warmup", "0", "--budget-s", "1", "--wait-s", "1", "--out", "report"}},
      {"coconet predict", {"predict"}},
      {"coconet compare --topology dgx-h100 --topology dgx-h200 --topology dgx-a100",
       {"compare", "--topology", "dgx-h100", "--topology", "dgx-h200", "--topology", "dgx-a100"}},
      {"coconet compare adam --set N=1M --topology dgx-h100 --nodes 1 --nodes 4 --format csv",
       {"compare", "adam", "--set", "N=1M", "--topology", "dgx-h100", "--nodes", "1", "--nodes", "4", "--format",
        "csv"}},
      {"coconet predict adam --set N=1e6", {"predict", "adam", "--set", "N=1e6"}},
      {"coconet predict megatron_mlp --set B=4 --set S=2K --topology dgx-a100 --nodes 2",
       {"predict", "megatron_mlp", "--set", "B=4", "--set", "S=2K", "--topology", "dgx-a100",
        "--nodes", "2"}},
      {"coconet simulate gpt3_pipeline --schedule 'ol(RS,fuse(P2P-C),AG)' --ranks 16 --trace "
       "trace.json",
       {"simulate", "gpt3_pipeline", "--schedule", "ol(RS,fuse(P2P-C),AG)", "--ranks", "16",
        "--trace", "trace.json"}},
      {"coconet run adam --ranks 2 --set N=64K --set lr=0.01 --schedule best --topology cpu-local",
       {"run", "adam", "--ranks", "2", "--set", "N=64K", "--set", "lr=0.01", "--schedule", "best",
        "--topology", "cpu-local", "--iters", "1"}},
      {"coconet tune adam --set N=64K --ranks 2 --topology cpu-local --out best.yaml",
       {"tune", "adam", "--set", "N=64K", "--ranks", "2", "--topology", "cpu-local", "--out", "best.yaml"}},
      {"coconet step gpt3-175b --topology dgx-h100 --nodes 128",
       {"step", "gpt3-175b", "--topology", "dgx-h100", "--nodes", "128"}},
      {"coconet compare llama3-70b --topology dgx-h100 --topology dgx-a100 --nodes 32",
       {"compare", "llama3-70b", "--topology", "dgx-h100", "--topology", "dgx-a100", "--nodes", "32"}},
      {"coconet step gpt3-175b --topology dgx-h100 --nodes 128 --search",
       {"step", "gpt3-175b", "--topology", "dgx-h100", "--nodes", "128", "--search"}},
      {"coconet step models/gpt3-175b.yaml --topology dgx-h100 --nodes 128 --trace step.json",
       {"step", "models/gpt3-175b.yaml", "--topology", "dgx-h100", "--nodes", "128", "--trace", "step.json"}},
      {"coconet run adam --schedule best.yaml --backend cpu --ranks 2",
       {"run", "adam", "--schedule", "best.yaml", "--backend", "cpu", "--ranks", "2", "--iters", "1"}},
  };
  return examples;
}

// The `coconet ...` lines of the README's fenced blocks ("$ " and "build/cli/" dropped).
std::set<std::string> readme_commands() {
  std::ifstream in(coconet::test::source_root() + "/README.md");
  std::set<std::string> out;
  bool fenced = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("```", 0) == 0) {
      fenced = !fenced;
      continue;
    }
    if (!fenced) continue;
    for (const char* prefix : {"$ ", "build/cli/"})
      if (line.rfind(prefix, 0) == 0) line = line.substr(std::string(prefix).size());
    if (line.rfind("coconet ", 0) == 0 || line == "coconet")
      out.insert(line.substr(0, line.find("  #")));
  }
  return out;
}

TEST_F(Cli, EveryReadmeExampleIsHere) {
  const auto commands = readme_commands();
  EXPECT_GE(commands.size(), 4u);
  for (const auto& c : commands)
    EXPECT_TRUE(readme_examples().contains(c)) << "README example not tested: " << c;
  for (const auto& [c, args] : readme_examples())
    EXPECT_TRUE(commands.contains(c)) << "tested example no longer in the README: " << c;
}

TEST_F(Cli, EveryReadmeExampleExitsZero) {
  std::vector<std::pair<std::string, Args>> ordered;  // tune first: a run example reads the file it writes
  for (const auto& [command, args] : readme_examples())
    ordered.insert(args[0] == "tune" ? ordered.begin() : ordered.end(), {command, args});
  for (const auto& [command, args] : ordered) {
    const bool mpi = args[0] == "run" || args[0] == "calibrate" || args[0] == "validate";
    if (mpi && !kHaveMpi) continue;
    Result r = run(args);
    // A quick calibration on a loaded machine can rightly refuse its fit (the
    // collectives' noise hides their cost per byte, exit 2): measure once more.
    if (args[0] == "calibrate" && r.code == 2 && contains(r.err, "no cost per byte")) r = run(args);
    EXPECT_EQ(r.code, 0) << command << "\n" << r.all();
  }
}

// Start-up cost: commands that run nothing load nothing heavy (cuBLAS is
// loaded at the first GEMM, kernels/cuda/cublas_loader.h). Goal: under 50 MB.
TEST_F(Cli, CommandsThatRunNothingStaySmall) {
  constexpr long kGoalKb = 50 * 1024;
  for (const Args& args : {Args{"list"}, Args{"show", "adam"}, Args{"predict", "adam"}}) {
    const Result r = run(args);
    EXPECT_EQ(r.code, 0) << r.all();
    EXPECT_GT(r.max_rss_kb, 0);
    EXPECT_LT(r.max_rss_kb, kGoalKb) << args.front() << ": " << r.max_rss_kb << " KB resident";
  }
}

}  // namespace
