// Enumeration: how many schedules each workload has, that the paper's
// schedules are among them, that names are unique, and that each is legal.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "model/enumerate.h"
#include "unit/test_sched_util.h"

namespace coconet::model {
namespace {

using sched_test::workload;
using sched_test::workload_names;

std::vector<std::string> names_of(const std::vector<Schedule>& all) {
  std::vector<std::string> out;
  for (const auto& s : all) out.push_back(s.name());
  return out;
}

TEST(Enumerate, CountsPerWorkload) {
  // split x reorder x as_slice, then the largest fusion from each collective,
  // then each maximal overlap chain (see enumerate.cpp).
  const std::map<std::string, std::size_t> expected{{"sgd", 5},
                                                    {"adam", 7},
                                                    {"lamb", 7},
                                                    {"megatron_mlp", 10},
                                                    {"megatron_attention", 10},
                                                    {"gpt3_pipeline", 12}};
  for (const auto& [w, n] : expected) {
    const auto all = enumerate_schedules(workload(w));
    EXPECT_EQ(all.size(), n) << w << ": " << ::testing::PrintToString(names_of(all));
  }
}

TEST(Enumerate, ContainsThePapersSchedules) {
  const std::map<std::string, std::vector<std::string>> required{
      {"sgd", {"AR-C", "RS-AG-C", "RS-C-AG", "fuse(RS-C-AG)"}},
      {"adam",
       {"AR-C", "RS-AG-C", "RS-C-AG", "fuse(RS-C-AG)", "RS-C-AG+asSlice(m,v)",
        "fuse(RS-C-AG)+asSlice(m,v)"}},
      {"lamb",
       {"AR-C", "RS-AG-C", "RS-C-AG", "fuse(RS-C-AG)", "RS-C-AG+asSlice(m,v)",
        "fuse(RS-C-AG)+asSlice(m,v)"}},
      {"megatron_mlp", {"MM-AR-C", "MM-RS-C-AG", "ol(MM,fuse(RS-C-AG))"}},
      {"megatron_attention", {"MM-AR-C", "MM-RS-C-AG", "ol(MM,fuse(RS-C-AG))"}},
      {"gpt3_pipeline", {"AR-P2P-C", "RS-P2P-C-AG", "ol(RS,fuse(P2P-C),AG)"}}};
  for (const auto& [w, names] : required) {
    const auto all = names_of(enumerate_schedules(workload(w)));
    for (const auto& n : names)
      EXPECT_NE(std::find(all.begin(), all.end(), n), all.end()) << w << " lacks " << n;
  }
}

TEST(Enumerate, UnscheduledFirstAndNamesUnique) {
  for (const auto& w : workload_names()) {
    const Program p = workload(w);
    const auto all = enumerate_schedules(p);
    ASSERT_FALSE(all.empty());
    EXPECT_EQ(all.front().name(), initial_schedule(p).name()) << w;
    EXPECT_TRUE(all.front().history.empty()) << w;
    const auto names = names_of(all);
    EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size()) << w;
  }
}

// The tuner searches an overlapped schedule over two chunks or more because
// its stages in sequence (the one-chunk execution) are listed on their own.
TEST(Enumerate, EveryOverlappedScheduleHasItsSequenceListed) {
  int overlapped = 0;
  for (const auto& w : workload_names()) {
    const auto all = enumerate_schedules(workload(w));
    const auto names = names_of(all);
    for (const auto& s : all) {
      if (s.overlaps.empty()) continue;
      ++overlapped;
      Schedule sequence = s;
      sequence.overlaps.clear();
      EXPECT_NE(sequence.name(), s.name());
      EXPECT_NE(std::find(names.begin(), names.end(), sequence.name()), names.end())
          << w << ": " << s.name() << " without its overlap, " << sequence.name() << ", is not listed";
    }
  }
  EXPECT_GT(overlapped, 0);
}

TEST(Enumerate, EverySchedulesProgramChecksAndItsStagesCoverIt) {
  for (const auto& w : workload_names()) {
    for (const auto& s : enumerate_schedules(workload(w))) {
      SCOPED_TRACE(w + " " + s.name());
      Program copy = s.program;
      EXPECT_NO_THROW(check(copy));
      std::vector<std::string> staged;
      for (const auto& st : s.stages) staged.insert(staged.end(), st.stmts.begin(), st.stmts.end());
      std::vector<std::string> stmts;
      for (const auto& st : s.program.stmts) stmts.push_back(st.name);
      EXPECT_EQ(staged, stmts);
      EXPECT_EQ(s.knobs.chunks, s.overlaps.empty() ? 1 : 4);
    }
  }
}

}  // namespace
}  // namespace coconet::model
