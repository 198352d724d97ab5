// The cpu backend's host side at BERT-large sizes: the fast input fill
// (model/input_fill.h) gives input_at's values exactly, whatever the span
// (its remainder by a double quotient up to 2^16 integers, input_element's
// beyond), and the host pool (exec/cpu/host_pool.h) hands
// out zeroed blocks, reuses released ones and holds no more than its peak.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "exec/cpu/host_pool.h"
#include "model/input_fill.h"
#include "model/input_pattern.h"

namespace coconet {
namespace {

// Every element of blocks of many shapes, ranges and starting points.
TEST(InputPatternFill, FillsInputAtsValuesElementForElement) {
  const std::vector<model::InputRange> ranges{model::classic_input_range(true),
                                              model::classic_input_range(false),
                                              {-1000, 1000, 3},
                                              {0, 0, 0},
                                              {-5, 17, 10},
                                              {0, 48, 0},         // 49: a quotient by a double one under the true one
                                              {0, 65534, 0},      // 65535 integers: the widest quotient by a double
                                              {-32768, 32767, 0},  // 2^16: the last span it takes
                                              {0, 65536, 0},      // 2^16 + 1: input_element's own remainder
                                              {-(std::int64_t{1} << 40), std::int64_t{1} << 40, 0}};
  int checked = 0;
  for (const bool local : {false, true})
    for (const auto& range : ranges)
      for (const std::int64_t local_cols : {1, 3, 64, 1000})
      for (const bool whole_rows : {false, true}) {  // a block of whole rows is one run (a vector: rows of one)
        model::InputPattern p;
        p.key = model::input_key(42, 3);
        p.local = local;
        p.rank = 1;
        p.row_begin = 5;
        p.col_begin = whole_rows ? 0 : 7;
        p.cols = whole_rows ? local_cols : local_cols + 11;
        p.local_cols = local_cols;
        p.range = range;
        const std::int64_t count = 3 * local_cols + 5;
        for (const std::int64_t first :
             {std::int64_t{0}, std::int64_t{1}, local_cols - 1, local_cols + 2}) {
          if (first < 0 || first >= count) continue;
          std::vector<double> wide(static_cast<std::size_t>(count - first));
          std::vector<float> narrow(wide.size());
          model::fill_input_values(p, first, std::span<double>(wide));
          model::fill_input_values(p, first, std::span<float>(narrow));
          for (std::int64_t i = first; i < count; ++i) {
            const double want = model::input_at(p, i);
            ASSERT_EQ(wide[static_cast<std::size_t>(i - first)], want) << "element " << i;
            ASSERT_EQ(narrow[static_cast<std::size_t>(i - first)], static_cast<float>(want))
                << "element " << i;
            ++checked;
          }
        }
      }
  EXPECT_GT(checked, 10000);
  // A million elements at the widest spans the quotient by a double takes,
  // and at span 49, where it is one off for about 1% of the hashes.
  for (const std::int64_t hi : {std::int64_t{48}, std::int64_t{65534}, std::int64_t{65535}, std::int64_t{40000}}) {
    model::InputPattern p;
    p.key = model::input_key(7, 1);
    p.local = true;
    p.cols = p.local_cols = 1;
    p.range = {0, hi, 0};
    std::vector<float> got(1 << 20);
    model::fill_input_values(p, 0, std::span<float>(got));
    for (std::size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], static_cast<float>(model::input_at(p, static_cast<std::int64_t>(i)))) << hi << " " << i;
  }
}

constexpr std::size_t kMiB = std::size_t{1} << 20;

bool all_zero(const exec::cpu::HostBlock& b, std::size_t bytes) {
  return std::all_of(b.data(), b.data() + bytes, [](std::byte x) { return x == std::byte{0}; });
}

TEST(HostPool, ReleasedBlocksComeBackZeroed) {
  exec::cpu::HostPool pool;
  exec::cpu::HostBlock a = pool.take(3 * kMiB);
  ASSERT_NE(a.data(), nullptr);
  EXPECT_GE(a.capacity(), 3 * kMiB);
  EXPECT_TRUE(all_zero(a, 3 * kMiB));
  std::fill(a.data(), a.data() + 3 * kMiB, std::byte{0x5a});
  std::byte* const first = a.data();
  pool.give_back(std::move(a));
  EXPECT_EQ(pool.free_bytes(), exec::cpu::HostPool::rounded(3 * kMiB));
  exec::cpu::HostBlock b = pool.take(3 * kMiB);
  EXPECT_EQ(b.data(), first);  // the same mapping, reused
  EXPECT_TRUE(all_zero(b, 3 * kMiB));
  EXPECT_EQ(pool.free_bytes(), 0u);
  EXPECT_EQ(pool.take(0).data(), nullptr);
  exec::cpu::HostBlock small = pool.take(100);
  EXPECT_TRUE(all_zero(small, 100));
}

// A plan of two 8 MiB buffers, then one of four 2 MiB ones: the second maps
// its own sizes after giving up free blocks, never holding more than the
// first plan's 16 MiB.
TEST(HostPool, HoldsNoMoreThanItsPeakInUse) {
  exec::cpu::HostPool pool;
  std::vector<exec::cpu::HostBlock> plan;
  for (int k = 0; k < 2; ++k) plan.push_back(pool.take(8 * kMiB));
  for (auto& b : plan) pool.give_back(std::move(b));
  plan.clear();
  std::size_t held_most = 0;
  for (int k = 0; k < 4; ++k) {
    plan.push_back(pool.take(2 * kMiB));
    held_most = std::max(held_most, pool.free_bytes() + static_cast<std::size_t>(k + 1) * 2 * kMiB);
  }
  EXPECT_LE(held_most, 16 * kMiB);
  for (auto& b : plan) EXPECT_TRUE(all_zero(b, 2 * kMiB));
  pool.trim();
  EXPECT_EQ(pool.free_bytes(), 0u);
}

}  // namespace
}  // namespace coconet
