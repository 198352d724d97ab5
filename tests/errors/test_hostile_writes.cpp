// Hostile paths and interruptions around what coconet writes (issue 14):
// planted symlinks are never followed, non-regular targets are refused, a
// report interrupted by SIGINT leaves the old report and no temporary, and
// leftovers of an earlier interrupted run are removed; values written into a
// calibrated topology cannot add YAML keys.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "model/error.h"
#include "model/safe_write.h"
#include "validation/report.h"
#ifdef COCONET_VALIDATION_HAVE_RUN
#include "validation/calibrate.h"
#endif

namespace {

namespace fs = std::filesystem;
using namespace coconet;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class HostileWrites : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("coconet-writes-") + info->name() + "-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "victim.txt") << "precious\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  [[nodiscard]] int hidden_entries() const {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir_))
      n += e.path().filename().string().starts_with(".") ? 1 : 0;
    return n;
  }

  fs::path dir_;
};

std::string user_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no UserError)";
}

validation::ReportData tiny_report(const std::string& title) {
  validation::ReportData d;
  d.title = title;
  d.backend = "cpu";
  d.topology = "t";
  d.ranks = 1;
  validation::ResultRow r;
  r.workload = "sgd";
  r.size = "N=4";
  r.scale = 4;
  r.schedule = "AR-C";
  r.baseline = true;
  r.predicted_us = 1;
  r.measured = {1, 1, 1};
  r.verified = true;
  d.rows = {r};
  return d;
}

TEST_F(HostileWrites, SymlinkTargetIsRefused) {
  fs::create_symlink(dir_ / "victim.txt", dir_ / "out.yaml");
  const std::string e = user_error(
      [&] { model::write_file_safely((dir_ / "out.yaml").string(), "x: 1\n", "--out"); });
  EXPECT_NE(e.find("is a symbolic link, not a regular file"), std::string::npos) << e;
  EXPECT_EQ(read_text(dir_ / "victim.txt"), "precious\n");
}

TEST_F(HostileWrites, PlantedTemporaryIsNotFollowed) {
  fs::create_symlink(dir_ / "victim.txt", dir_ / "out.yaml.tmp");
  model::write_file_safely((dir_ / "out.yaml").string(), "x: 1\n", "--out");
  EXPECT_EQ(read_text(dir_ / "victim.txt"), "precious\n");
  EXPECT_EQ(read_text(dir_ / "out.yaml"), "x: 1\n");
  EXPECT_EQ(hidden_entries(), 0);
}

TEST_F(HostileWrites, FifoDeviceFolderAndEmptyAreRefused) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0644), 0);
  EXPECT_NE(user_error([&] {
              model::check_output_file((dir_ / "fifo").string(), "--trace");
            }).find("is a FIFO"),
            std::string::npos);
  EXPECT_NE(user_error([&] { model::check_output_file("/dev/full", "--out"); }).find("is a device"),
            std::string::npos);
  EXPECT_NE(
      user_error([&] { model::check_output_file(dir_.string(), "--out"); }).find("is a folder"),
      std::string::npos);
  EXPECT_NE(user_error([&] { model::check_output_file("", "--out"); }).find("--out is empty"),
            std::string::npos);
  EXPECT_NE(user_error([&] {
              model::check_output_file((dir_ / "no/such/x").string(), "--out");
            }).find("does not exist"),
            std::string::npos);
}

TEST_F(HostileWrites, ReportTargetsThatAreNotFoldersAreRefused) {
  EXPECT_NE(user_error([&] { validation::check_report_target(""); }).find("--out is empty"),
            std::string::npos);
  EXPECT_NE(user_error([&] {
              validation::check_report_target((dir_ / "victim.txt").string());
            }).find("is not a folder"),
            std::string::npos);
  fs::create_directories(dir_ / "real");
  fs::create_symlink(dir_ / "real", dir_ / "link");
  EXPECT_NE(user_error([&] {
              validation::check_report_target((dir_ / "link").string());
            }).find("symbolic link"),
            std::string::npos);
}

// SIGINT after the last file of the new report is written, before it is put
// in place: the process ends with 130 and "interrupted", the old report stays,
// no temporary folder is left.
TEST_F(HostileWrites, InterruptedReportLeavesTheOldOneAndNoTemporary) {
  const fs::path report = dir_ / "report";
  const auto d = tiny_report("old");
  validation::write_report(d, validation::compute_metrics(d.rows), report.string());
  const std::string old_md = read_text(report / "report.md");
  const pid_t pid = ::fork();
  if (pid == 0) {
    model::remove_temporaries_on_interrupt(130);
    const auto n = tiny_report("new");
    validation::write_report(n, validation::compute_metrics(n.rows), report.string(),
                             [](const std::string& file) {
                               if (file == validation::kReportMarker) ::raise(SIGINT);
                             });
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_EQ(read_text(report / "report.md"), old_md);
  EXPECT_EQ(hidden_entries(), 0);
}

TEST_F(HostileWrites, LeftoversOfADeadRunAreRemoved) {
  const fs::path report = dir_ / "report";
  fs::create_directories(dir_ / ".report.999999999.0123456789abcdef.partial" / "inputs");
  std::ofstream(dir_ / ".report.999999999.0123456789abcdef.partial" / "inputs" / "x.yaml") << "x\n";
  const auto d = tiny_report("new");
  validation::write_report(d, validation::compute_metrics(d.rows), report.string());
  EXPECT_TRUE(fs::exists(report / "report.md"));
  EXPECT_EQ(hidden_entries(), 0);
}

TEST_F(HostileWrites, ReplacingAReportLeavesNoTemporary) {
  const fs::path report = dir_ / "report";
  for (const char* title : {"one", "two"}) {
    const auto d = tiny_report(title);
    validation::write_report(d, validation::compute_metrics(d.rows), report.string());
  }
  EXPECT_NE(read_text(report / "report.md").find("two"), std::string::npos);
  EXPECT_EQ(hidden_entries(), 0);
}

#ifdef COCONET_VALIDATION_HAVE_RUN
TEST(HostileCalibrate, NameCannotInjectYaml) {
  validation::CalibrateOptions o;
  o.name = "evil\"\nnodes: 999\n#";
  o.command = "coconet calibrate --name 'evil\"\nnodes: 999\n#'";
  const std::string yaml = validation::topology_yaml(validation::Fitted{}, o, "cpu", 2);
  const YAML::Node n = YAML::Load(yaml);
  EXPECT_EQ(n["name"].as<std::string>(), o.name);
  EXPECT_EQ(n["nodes"].as<int>(), 1);
}
#endif

}  // namespace
