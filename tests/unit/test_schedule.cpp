// Schedules as data: canonical names, default stages, lookups, knobs, and the
// YAML round trip of every enumerated schedule of every workload.
#include <gtest/gtest.h>

#include "model/catalog.h"
#include "model/enumerate.h"
#include "model/schedule.h"
#include "model/transforms.h"
#include "unit/test_sched_util.h"
#include "tests/paths.h"

namespace coconet::model {
namespace {

using sched_test::workload;
using sched_test::workload_names;

TEST(Schedule, UnscheduledProgramsHaveThePapersNames) {
  EXPECT_EQ(initial_schedule(workload("sgd")).name(), "AR-C");
  EXPECT_EQ(initial_schedule(workload("adam")).name(), "AR-C");
  EXPECT_EQ(initial_schedule(workload("lamb")).name(), "AR-C");
  EXPECT_EQ(initial_schedule(workload("megatron_mlp")).name(), "MM-AR-C");
  EXPECT_EQ(initial_schedule(workload("megatron_attention")).name(), "MM-AR-C");
  EXPECT_EQ(initial_schedule(workload("gpt3_pipeline")).name(), "AR-P2P-C");
}

TEST(Schedule, BaselineIsTheUnscheduledProgram) {
  const Program p = workload("adam");
  EXPECT_EQ(baseline(p).name(), "AR-C");
  EXPECT_TRUE(baseline(p).history.empty());
}

TEST(Schedule, DefaultStagesFuseRunsOfElementwiseStatementsAndNorms) {
  const auto stages = default_stages(workload("lamb"));
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(stages[0].kind, StageKind::collective);
  EXPECT_EQ(stages[0].stmts, (std::vector<std::string>{"g1"}));
  EXPECT_EQ(stages[1].kind, StageKind::compute);
  EXPECT_EQ(stages[1].stmts, (std::vector<std::string>{"m1", "v1", "u", "wn", "un", "w1"}));
}

TEST(Schedule, DefaultStagesGiveMatmulAndSendStagesOfTheirOwn) {
  const Program p = workload("gpt3_pipeline");
  const auto stages = default_stages(p);
  ASSERT_EQ(stages.size(), 3u);
  EXPECT_EQ(stages[0].code(p), "AR");
  EXPECT_EQ(stages[1].code(p), "P2P");
  EXPECT_EQ(stages[2].code(p), "C");
  const Program mm = workload("megatron_mlp");
  EXPECT_EQ(default_stages(mm)[0].kind, StageKind::matmul);
  EXPECT_EQ(default_stages(mm)[0].code(mm), "MM");
}

TEST(Schedule, StageAndOverlapLookups) {
  Schedule s = overlap(initial_schedule(workload("megatron_mlp")), "y", "z");
  EXPECT_EQ(s.stage_of("y"), 0);
  EXPECT_EQ(s.stage_of("z"), 1);
  EXPECT_EQ(s.stage_of("out"), 2);
  EXPECT_EQ(s.stage_of("nothing"), -1);
  EXPECT_EQ(s.overlap_of(0), 0);
  EXPECT_EQ(s.overlap_of(1), 0);
  EXPECT_EQ(s.overlap_of(2), -1);
  EXPECT_EQ(s.name(), "ol(MM,AR)-C");
}

TEST(Schedule, NamesCollapseRepeatedStagesAndListSlicedStates) {
  Schedule s = reorder(split(initial_schedule(workload("adam")), "g1"), "g1");
  EXPECT_EQ(s.stages.size(), 5u);  // RS, C, AG(m1), AG(v1), AG(w1)
  EXPECT_EQ(s.name(), "RS-C-AG");
  s = as_slice(as_slice(std::move(s), "v"), "m");
  EXPECT_EQ(s.name(), "RS-C-AG+asSlice(m,v)");  // in declaration order, not application order
}

TEST(Schedule, StageTransformsAreReadOffTheHistory) {
  Schedule s = split(initial_schedule(workload("sgd")), "g1");
  EXPECT_FALSE(s.has_stage_transforms());
  s = fuse(reorder(std::move(s), "g1"), "g1.rs", "w1");
  EXPECT_TRUE(s.has_stage_transforms());
}

TEST(Directive, EachKindRoundTripsThroughItsYamlForm) {
  const std::vector<Directive> all{Split{"g1"}, Reorder{"g1"}, AsSlice{"m"}, Fuse{"g1.rs", "w1"},
                                   Overlap{"y", "z"}};
  const std::vector<std::string> ops{"split", "reorder", "as_slice", "fuse", "overlap"};
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(op_of(all[i]), ops[i]);
    EXPECT_EQ(make_directive(std::string(op_of(all[i])), args_of(all[i])), all[i]) << ops[i];
  }
  EXPECT_EQ(args_of(Fuse{"a", "b"}), (std::vector<std::string>{"a", "b"}));
  EXPECT_NE(Directive(Split{"g1"}), Directive(Reorder{"g1"}));
}

TEST(Directive, WrittenYamlKeepsTheSavedTextFormat) {
  Schedule s = reorder(split(initial_schedule(workload("adam")), "g1"), "g1");
  s = fuse(as_slice(std::move(s), "m"), "g1.rs", "m1");
  const std::string y = to_yaml(s);
  EXPECT_NE(y.find("- {op: split, args: [g1]}"), std::string::npos) << y;
  EXPECT_NE(y.find("- {op: reorder, args: [g1]}"), std::string::npos) << y;
  EXPECT_NE(y.find("- {op: as_slice, args: [m]}"), std::string::npos) << y;
  EXPECT_NE(y.find("- {op: fuse, args: [g1.rs, m1]}"), std::string::npos) << y;
}

// Schedules saved before the directives were typed (a validation report's
// inputs/schedules.yaml, one YAML document each) load and keep their names.
TEST(Directive, SavedSchedulesStillLoad) {
  const std::string text =
      read_file(coconet::test::source_root() + "/docs/report/inputs/schedules.yaml");
  int loaded = 0;
  std::size_t at = 0;
  while ((at = text.find("\nworkload: ", at)) != std::string::npos) {
    const std::size_t end = std::min(text.find("\n---", at), text.size());
    const std::string doc = text.substr(at + 1, end - at - 1);
    const std::string name = doc.substr(10, doc.find('\n') - 10);
    const Schedule s = schedule_from_yaml(workload(name), doc, "schedules.yaml");
    EXPECT_NE(doc.find("name: " + s.name() + "\n"), std::string::npos) << doc;
    ++loaded;
    at = end;
  }
  EXPECT_GT(loaded, 100);
}

TEST(Schedule, KnobNamesRoundTrip) {
  for (Algo a : {Algo::auto_, Algo::ring, Algo::tree, Algo::nvls, Algo::hierarchical})
    EXPECT_EQ(parse_algo(to_string(a)), a);
  for (Proto p : {Proto::auto_, Proto::ll, Proto::ll128, Proto::simple})
    EXPECT_EQ(parse_proto(to_string(p)), p);
  EXPECT_EQ(parse_proto("LL128"), Proto::ll128);
  EXPECT_THROW((void)parse_algo("butterfly"), UserError);
  EXPECT_THROW((void)parse_proto("fast"), UserError);
  for (Grain g : {Grain::chunk, Grain::tile}) EXPECT_EQ(parse_grain(to_string(g)), g);
  EXPECT_EQ(to_string(Grain::tile), "tile");
  EXPECT_THROW((void)parse_grain("block"), UserError);
}

TEST(Schedule, DescribeListsStagesAndKnobs) {
  const Schedule s = overlap(initial_schedule(workload("megatron_mlp")), "y", "z");
  const std::string text = describe(s);
  EXPECT_NE(text.find("ol(MM,AR)-C"), std::string::npos);
  EXPECT_NE(text.find("overlap group 0"), std::string::npos);
  EXPECT_NE(text.find("chunks=4"), std::string::npos);
}

TEST(ScheduleYaml, EveryEnumeratedScheduleOfEveryWorkloadRoundTrips) {
  for (const auto& w : workload_names()) {
    const Program p = workload(w);
    for (const auto& s : enumerate_schedules(p)) {
      SCOPED_TRACE(w + " " + s.name());
      const Schedule back = schedule_from_yaml(p, to_yaml(s));
      EXPECT_EQ(back.name(), s.name());
      EXPECT_EQ(to_string(back.program), to_string(s.program));
      EXPECT_EQ(back.history, s.history);
      EXPECT_EQ(back.knobs, s.knobs);
      ASSERT_EQ(back.stages.size(), s.stages.size());
      for (std::size_t i = 0; i < s.stages.size(); ++i)
        EXPECT_EQ(back.stages[i].stmts, s.stages[i].stmts);
      EXPECT_EQ(back.overlaps.size(), s.overlaps.size());
    }
  }
}

TEST(ScheduleYaml, KnobsRoundTrip) {
  Schedule s = overlap(initial_schedule(workload("megatron_attention")), "y", "z");
  s.knobs = {8, Algo::tree, Proto::ll128, 16, Grain::tile};
  const Schedule back = schedule_from_yaml(workload("megatron_attention"), to_yaml(s));
  EXPECT_EQ(back.knobs, s.knobs);
  EXPECT_NE(to_yaml(s).find("overlap: tile"), std::string::npos) << to_yaml(s);
}

// A bad overlap grain names the file, its line and the grains there are.
TEST(ScheduleYaml, BadOverlapGrainNamesItsLine) {
  const std::string text =
      "workload: megatron_mlp\n"
      "history:\n"
      "  - {op: overlap, args: [y, z]}\n"
      "knobs: {chunks: 4, overlap: blocks}\n";
  try {
    (void)schedule_from_yaml(workload("megatron_mlp"), text, "tile.yaml");
    FAIL() << "overlap: blocks was accepted";
  } catch (const UserError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("tile.yaml:4"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unknown overlap grain 'blocks': use chunk or tile"), std::string::npos) << msg;
  }
  const Schedule s = schedule_from_yaml(workload("megatron_mlp"),
                                        "workload: megatron_mlp\nhistory: [{op: overlap, args: [y, z]}]\n"
                                        "knobs: {overlap: tile}\n");
  EXPECT_EQ(s.knobs.overlap, Grain::tile);
}

TEST(ScheduleYaml, HandWrittenScheduleReplays) {
  const std::string text =
      "workload: sgd\n"
      "history:\n"
      "  - {op: split, args: [g1]}\n"
      "  - op: reorder\n"
      "    args: [g1]\n"
      "knobs: {algo: ring}\n";
  const Schedule s = schedule_from_yaml(workload("sgd"), text);
  EXPECT_EQ(s.name(), "RS-C-AG");
  EXPECT_EQ(s.knobs.algo, Algo::ring);
  EXPECT_EQ(s.knobs.chunks, 1);
}

TEST(ScheduleYaml, EmptyHistoryIsTheUnscheduledProgram) {
  const Schedule s = schedule_from_yaml(workload("adam"), "workload: adam\n");
  EXPECT_EQ(s.name(), "AR-C");
}

}  // namespace
}  // namespace coconet::model
