// The `coconet` command's exit codes, seen from outside as a parent process
// sees them (waitpid): 0 for success and --help, 2 for a bad flag, a missing
// subcommand or bad input, and 130 (an exit, not a death by signal) when
// SIGINT arrives while the command works.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model/error.h"
#include "tests/paths.h"

namespace coconet {
namespace {

// A started `coconet`: its pid and the read ends of its stdout and stderr.
struct Process {
  pid_t pid = -1;
  int out = -1;
  int err = -1;
};

// How it ended: exited with `code`, or killed by a signal (`exited` false).
struct Outcome {
  bool exited = false;
  int code = -1;
  std::string out;
  std::string err;
};

// Starts `coconet args...`; `stdout_bytes` > 0 shrinks its stdout pipe to that size.
Process start(const std::vector<std::string>& args, int stdout_bytes = 0) {
  std::array<int, 2> out{};
  std::array<int, 2> err{};
  if (::pipe(out.data()) != 0 || ::pipe(err.data()) != 0) return {};
  if (stdout_bytes > 0 && ::fcntl(out[0], F_SETPIPE_SZ, stdout_bytes) < 0) return {};
  const std::string binary = coconet::test::coconet_binary();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
    std::vector<char*> argv{const_cast<char*>(binary.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  return {pid, out[0], err[0]};
}

// Reads whatever is ready on `fd` into `text`; false at end of file.
bool read_some(int fd, std::string& text) {
  std::array<char, 4096> buf{};
  const ssize_t n = ::read(fd, buf.data(), buf.size());
  if (n <= 0) return false;
  text.append(buf.data(), static_cast<std::size_t>(n));
  return true;
}

// Reads both streams to their end, then reaps the process.
Outcome finish(Process p) {
  Outcome o;
  std::array<pollfd, 2> fds{pollfd{p.out, POLLIN, 0}, pollfd{p.err, POLLIN, 0}};
  int open_streams = 2;
  while (open_streams > 0 && ::poll(fds.data(), fds.size(), -1) > 0) {
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      if (!read_some(fds[i].fd, i == 0 ? o.out : o.err)) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_streams;
      }
    }
  }
  int status = 0;
  ::waitpid(p.pid, &status, 0);
  o.exited = WIFEXITED(status);
  o.code = o.exited ? WEXITSTATUS(status) : -1;
  return o;
}

Outcome run(const std::vector<std::string>& args) { return finish(start(args)); }

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CliExitCodes, SuccessAndHelpExitZero) {
  const Outcome list = run({"list"});
  EXPECT_TRUE(list.exited);
  EXPECT_EQ(list.code, kExitOk) << list.err;
  const Outcome help = run({"--help"});
  EXPECT_EQ(help.code, kExitOk) << help.err;
  EXPECT_TRUE(contains(help.out, "Subcommands:")) << help.out;
}

TEST(CliExitCodes, BadFlagExitsTwo) {
  const Outcome o = run({"list", "--no-such-flag"});
  EXPECT_TRUE(o.exited);
  EXPECT_EQ(o.code, kExitUserError) << o.out << o.err;
  EXPECT_TRUE(contains(o.err, "--no-such-flag")) << o.err;
}

TEST(CliExitCodes, MissingSubcommandExitsTwo) {
  const Outcome o = run({});
  EXPECT_EQ(o.code, kExitUserError) << o.out << o.err;
}

TEST(CliExitCodes, BadInputExitsTwoWithOneMessage) {
  const Outcome o = run({"show", "no-such-workload"});
  EXPECT_EQ(o.code, kExitUserError) << o.out << o.err;
  EXPECT_TRUE(contains(o.err, "coconet: error: unknown workload 'no-such-workload'")) << o.err;
}

// The command writes more than a small pipe holds and nobody reads it, so it
// is still working (blocked in write) when SIGINT arrives; the first bytes on
// stdout show that it is past startup.
TEST(CliExitCodes, InterruptExits130) {
  constexpr int kPipeBytes = 4096;  // the smallest pipe Linux makes; the output is ~28 KB
  Process p =
      start({"show", "gpt3_pipeline", "megatron_attention", "megatron_mlp", "--format", "json"},
            kPipeBytes);
  ASSERT_GT(p.pid, 0);
  pollfd ready{p.out, POLLIN, 0};
  constexpr int kStartupTimeoutMs = 30000;
  ASSERT_EQ(::poll(&ready, 1, kStartupTimeoutMs), 1) << "coconet wrote nothing";
  ASSERT_EQ(::kill(p.pid, SIGINT), 0);
  const Outcome o = finish(p);
  EXPECT_TRUE(o.exited) << "coconet died of the signal instead of exiting";
  EXPECT_EQ(o.code, kExitInterrupted) << o.err;
  EXPECT_TRUE(contains(o.err, "coconet: interrupted")) << o.err;
}

}  // namespace
}  // namespace coconet
