// Transformations and schedule files that must be rejected, each with a
// message that names the problem and the fix (and, for files, the line).
#include <gtest/gtest.h>

#include "model/builder.h"
#include "model/transforms.h"
#include "unit/test_sched_util.h"

namespace coconet::model {
namespace {

using sched_test::workload;

// Runs `f`, expects a UserError whose message contains every one of `parts`.
template <typename F>
void expect_user_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no UserError";
  } catch (const UserError& e) {
    const std::string msg = e.what();
    for (const auto& part : parts) EXPECT_NE(msg.find(part), std::string::npos) << msg;
  }
}

Schedule reordered(const std::string& w, const std::string& ar) {
  return reorder(split(initial_schedule(workload(w)), ar), ar);
}

TEST(SplitErrors, NeedsAnAllreduce) {
  const Schedule s = initial_schedule(workload("adam"));
  expect_user_error([&] { (void)split(s, "m1"); }, {"split m1", "not an allreduce"});
  expect_user_error([&] { (void)split(s, "nope"); }, {"no statement defines 'nope'"});
}

TEST(SplitErrors, NotTwice) {
  const Schedule s = split(initial_schedule(workload("adam")), "g1");
  expect_user_error([&] { (void)split(s, "g1"); }, {"not an allreduce"});
}

TEST(ProgramTransformErrors, MustComeBeforeFuseAndOverlap) {
  const Schedule fused = fuse(initial_schedule(workload("sgd")), "g1", "w1");
  expect_user_error([&] { (void)split(fused, "g1"); }, {"before fuse and overlap"});
  const Schedule ol = overlap(initial_schedule(workload("megatron_mlp")), "y", "z");
  expect_user_error([&] { (void)split(ol, "z"); }, {"before fuse and overlap"});
  const Schedule fr = fuse(reordered("adam", "g1"), "g1.rs", "w1");
  expect_user_error([&] { (void)as_slice(fr, "m"); }, {"before fuse and overlap"});
  const Schedule os = overlap(split(initial_schedule(workload("megatron_mlp")), "z"), "y", "z.rs");
  expect_user_error([&] { (void)reorder(os, "z"); }, {"before fuse and overlap"});
}

TEST(ReorderErrors, NeedsAnAllgather) {
  expect_user_error([&] { (void)reorder(initial_schedule(workload("adam")), "g1"); },
                    {"reorder g1", "not the value of an allgather", "split"});
}

TEST(ReorderErrors, NothingCanMove) {
  // After reorder, m1 = allgather(m1.s) feeds only outputs: nothing to move.
  expect_user_error([&] { (void)reorder(reordered("adam", "g1"), "m1"); },
                    {"reorder m1", "can run on its slices"});
}

TEST(AsSliceErrors, NeedsAShardableReplicatedState) {
  const Schedule s = reordered("adam", "g1");
  expect_user_error([&] { (void)as_slice(s, "w"); }, {"not shardable", "shardable: true"});
  expect_user_error([&] { (void)as_slice(s, "g1"); }, {"not an input"});
  const Schedule twice = as_slice(s, "m");
  expect_user_error([&] { (void)as_slice(twice, "m"); }, {"as_slice m"});
}

TEST(AsSliceErrors, ReadersMustRunOnSlicesFirst) {
  expect_user_error([&] { (void)as_slice(initial_schedule(workload("adam")), "m"); },
                    {"reads m whole", "reorder"});
  expect_user_error([&] { (void)as_slice(split(initial_schedule(workload("lamb")), "g1"), "v"); },
                    {"reads v whole"});
}

TEST(AsSliceErrors, TheGatheredNewValueMustFeedOnlyOutputs) {
  const Program p = ProgramBuilder("reads_state")
                        .param("N", 8)
                        .tensor("g", DType::f32, {"N"}, Layout::local())
                        .tensor("h", DType::f32, {"N"}, Layout::local())
                        .tensor("m", DType::f32, {"N"}, Layout::replicated(), 0, true)
                        .stmt("g1 = allreduce(sum, g)")
                        .stmt("m1 = update(m, m + g1)")
                        .stmt("t = m1 + h")
                        .output("m1")
                        .output("t")
                        .build();
  const Schedule s = reorder(split(initial_schedule(p), "g1"), "g1");
  expect_user_error([&] { (void)as_slice(s, "m"); },
                    {"as_slice m", "'m1.s'", "must be gathered only to become an output"});
}

TEST(FuseErrors, IllegalGroups) {
  const Schedule mm = initial_schedule(workload("megatron_mlp"));
  expect_user_error([&] { (void)fuse(mm, "y", "z"); }, {"cannot be fused", "MM stage"});
  const Schedule ag = split(initial_schedule(workload("adam")), "g1");
  expect_user_error([&] { (void)fuse(ag, "g1.rs", "g1"); }, {"no computation follows"});
  expect_user_error([&] { (void)fuse(ag, "g1", "w1"); }, {"AG stage"});
  const Schedule pipe = split(initial_schedule(workload("gpt3_pipeline")), "z");
  expect_user_error([&] { (void)fuse(pipe, "z.rs", "out"); }, {"cannot be fused"});
}

TEST(FuseErrors, OrderAndUnknownStatements) {
  const Schedule s = initial_schedule(workload("sgd"));
  expect_user_error([&] { (void)fuse(s, "w1", "g1"); }, {"earlier stage first"});
  expect_user_error([&] { (void)fuse(s, "g1", "g1"); }, {"earlier stage first"});
  expect_user_error([&] { (void)fuse(s, "g1", "zz"); }, {"'zz' is not a statement"});
}

TEST(FuseErrors, NotTwiceNorInsideAnOverlap) {
  const Schedule f = fuse(initial_schedule(workload("megatron_mlp")), "z", "out");
  expect_user_error([&] { (void)fuse(f, "z", "out"); }, {"earlier stage first"});
  const Schedule ol = overlap(initial_schedule(workload("megatron_mlp")), "y", "z");
  expect_user_error([&] { (void)fuse(ol, "z", "out"); }, {"already overlaps"});
}

TEST(OverlapErrors, IllegalChains) {
  const Program p = workload("megatron_mlp");
  const Schedule s = reorder(split(initial_schedule(p), "z"), "z");  // MM-RS-C-AG
  expect_user_error([&] { (void)overlap(s, "y", "y"); }, {"earlier stage first"});
  expect_user_error([&] { (void)overlap(initial_schedule(workload("lamb")), "g1", "w1"); },
                    {"computes a norm"});
  const Schedule once = overlap(s, "y", "z.rs");
  expect_user_error([&] { (void)overlap(once, "z.rs", "out.s"); }, {"already in an overlap group"});
}

TEST(OverlapErrors, ConsumerMustReadTheProducer) {
  const Schedule s = reordered("adam", "g1");  // RS, C, AG(m1), AG(v1), AG(w1)
  expect_user_error([&] { (void)overlap(s, "m1", "v1"); }, {"does not read what stage"});
}

TEST(OverlapErrors, SomethingMustCommunicate) {
  const Program p = ProgramBuilder("local_mm")
                        .param("M", 4)
                        .param("K", 3)
                        .tensor("a", DType::f32, {"M", "K"}, Layout::replicated())
                        .tensor("w", DType::f32, {"K", "K"}, Layout::replicated())
                        .stmt("y = matmul(a, w)")
                        .stmt("z = y * 2")
                        .output("z")
                        .build();
  expect_user_error([&] { (void)overlap(initial_schedule(p), "y", "z"); },
                    {"none of them communicates"});
}

// An alltoall is a collective the transformations leave alone: overlap
// refuses to cut it into chunks, fuse refuses to lead or extend a group with
// it (issue 16: not supported, and never a wrong schedule).
Program alltoall_program() {
  return ProgramBuilder("a2a")
      .param("R", 8)
      .param("C", 6)
      .tensor("x", DType::f32, {"R", "C"}, Layout::sliced(0))
      .tensor("w", DType::f32, {"C", "C"}, Layout::replicated())
      .stmt("y = matmul(x, w)")
      .stmt("z = alltoall(y, 1)")
      .stmt("t = z * 2")
      .stmt("u = alltoall(t, 0)")
      .output("u")
      .build();
}

TEST(OverlapErrors, AnAlltoallIsNotCutIntoChunks) {
  const Schedule s = initial_schedule(alltoall_program());
  expect_user_error([&] { (void)overlap(s, "y", "z"); },
                    {"overlap y z", "stage 1 is an alltoall", "cutting it into row chunks is not supported"});
  expect_user_error([&] { (void)overlap(s, "z", "t"); }, {"stage 1 is an alltoall"});
}

TEST(FuseErrors, AnAlltoallNeitherLeadsNorJoins) {
  const Schedule s = initial_schedule(alltoall_program());
  expect_user_error([&] { (void)fuse(s, "z", "t"); }, {"fuse z t", "starts with a A2A stage"});
  expect_user_error([&] { (void)fuse(s, "t", "u"); }, {"fuse t u", "starts with a C stage"});
}

TEST(DirectiveErrors, UnknownOpAndWrongArity) {
  expect_user_error([] { (void)make_directive("tile", {"g1"}); },
                    {"unknown transformation 'tile'", "split, reorder, as_slice, fuse, overlap, fuse_kernel or flash_attention"});
  expect_user_error([] { (void)make_directive("split", {}); },
                    {"takes 1 statement name", "split: [g1]"});
  expect_user_error([] { (void)make_directive("fuse", {"g1"}); },
                    {"takes 2 statement name", "fuse: [g1.rs, w1]"});
  expect_user_error([] { (void)make_directive("as_slice", {"m", "v"}); },
                    {"takes 1 statement name"});
}

TEST(ScheduleYamlErrors, MalformedYamlNamesTheLine) {
  expect_user_error(
      [] { (void)schedule_from_yaml(workload("sgd"), "workload: sgd\nhistory: [\n", "bad.yaml"); },
      {"bad.yaml:", "malformed YAML"});
}

TEST(ScheduleYamlErrors, UnknownKeys) {
  expect_user_error(
      [] { (void)schedule_from_yaml(workload("sgd"), "workload: sgd\nchunks: 4\n", "s.yaml"); },
      {"s.yaml:2:1", "unknown key 'chunks'"});
  expect_user_error(
      [] {
        (void)schedule_from_yaml(workload("sgd"), "workload: sgd\nknobs: {chunk: 4}\n", "s.yaml");
      },
      {"s.yaml:2", "unknown key 'chunk' in knobs"});
  expect_user_error(
      [] {
        (void)schedule_from_yaml(workload("sgd"),
                                 "workload: sgd\nhistory:\n  - {op: split, arg: [g1]}\n", "s.yaml");
      },
      {"s.yaml:3", "unknown key 'arg'"});
}

TEST(ScheduleYamlErrors, IllegalReplayNamesTheEntry) {
  const std::string text =
      "workload: adam\n"
      "history:\n"
      "  - {op: split, args: [g1]}\n"
      "  - {op: as_slice, args: [m]}\n";
  expect_user_error([&] { (void)schedule_from_yaml(workload("adam"), text, "s.yaml"); },
                    {"s.yaml:4:5", "as_slice m", "reads m whole"});
  expect_user_error(
      [] {
        (void)schedule_from_yaml(workload("adam"), "workload: adam\nhistory:\n  - {op: tile}\n",
                                 "s.yaml");
      },
      {"s.yaml:3", "unknown transformation 'tile'"});
  expect_user_error(
      [] {
        (void)schedule_from_yaml(
            workload("adam"), "workload: adam\nhistory:\n  - {op: fuse, args: [g1]}\n", "s.yaml");
      },
      {"s.yaml:3", "directive 'fuse' takes 2 statement name(s), got 1"});
}

TEST(ScheduleYamlErrors, WrongWorkloadOrStaleName) {
  expect_user_error([] { (void)schedule_from_yaml(workload("adam"), "workload: sgd\n", "s.yaml"); },
                    {"s.yaml:1", "for workload 'sgd', not 'adam'"});
  expect_user_error([] { (void)schedule_from_yaml(workload("adam"), "history: []\n", "s.yaml"); },
                    {"needs `workload: NAME`"});
  expect_user_error(
      [] {
        (void)schedule_from_yaml(workload("adam"), "workload: adam\nname: RS-C-AG\n", "s.yaml");
      },
      {"s.yaml:2", "its history gives 'AR-C'"});
}

TEST(ScheduleYamlErrors, BadKnobValues) {
  expect_user_error(
      [] {
        (void)schedule_from_yaml(workload("sgd"), "workload: sgd\nknobs: {chunks: 0}\n", "k.yaml");
      },
      {"k.yaml:2", "knobs.chunks must be at least 1"});
  expect_user_error(
      [] {
        (void)schedule_from_yaml(workload("sgd"), "workload: sgd\nknobs: {chunks: many}\n",
                                 "k.yaml");
      },
      {"k.yaml:2", "knobs.chunks must be an integer"});
  expect_user_error(
      [] {
        (void)schedule_from_yaml(workload("sgd"), "workload: sgd\nknobs: {algo: fast}\n", "k.yaml");
      },
      {"k.yaml:2", "unknown algorithm 'fast'"});
}

TEST(ScheduleYamlErrors, NotAMapping) {
  expect_user_error([] { (void)schedule_from_yaml(workload("sgd"), "- split\n", "l.yaml"); },
                    {"l.yaml", "mapping"});
}

}  // namespace
}  // namespace coconet::model
