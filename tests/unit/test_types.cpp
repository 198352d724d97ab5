// Unit tests of shapes, layouts and slicing.
#include <gtest/gtest.h>

#include "model/error.h"
#include "model/types.h"

using namespace coconet::model;

TEST(Types, DimParsesProductsOfSizesAndConstants) {
  const Dim d = parse_dim("4*H");
  EXPECT_EQ(d.constant, 4);
  ASSERT_EQ(d.symbols.size(), 1u);
  EXPECT_EQ(d.eval({{"H", 3072}}), 12288);
  EXPECT_EQ(parse_dim("B*S").eval({{"B", 8}, {"S", 1024}}), 8192);
  EXPECT_EQ(parse_dim("7").eval({}), 7);
  EXPECT_EQ(parse_dim("4*H").str(), "4*H");
}

TEST(Types, UnboundSizeIsAUserError) {
  EXPECT_THROW((void)parse_dim("N").eval({}), coconet::UserError);
}

TEST(Types, LayoutsRoundTripThroughText) {
  for (const Layout l : {Layout::replicated(), Layout::local(), Layout::sliced(0), Layout::sliced(2)})
    EXPECT_EQ(parse_layout(to_string(l)), l);
}

TEST(Types, PromotionPrefersF32) {
  EXPECT_EQ(promote(DType::f16, DType::f16), DType::f16);
  EXPECT_EQ(promote(DType::f16, DType::f32), DType::f32);
  EXPECT_EQ(promote(DType::f16, DType::bf16), DType::f32);
  EXPECT_EQ(bytes_of(DType::bf16), 2);
}

TEST(Types, RaggedSlicesCoverTheDimensionOnceAndDifferByAtMostOne) {
  for (std::int64_t n : {0, 1, 5, 37, 1000}) {
    for (int p : {1, 2, 3, 4, 8}) {
      std::int64_t next = 0;
      std::int64_t lo = n, hi = 0;
      for (int r = 0; r < p; ++r) {
        const Extent e = slice_extent(n, p, r);
        EXPECT_EQ(e.begin, next);
        next += e.size;
        lo = std::min(lo, e.size);
        hi = std::max(hi, e.size);
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(hi - lo, 1);
    }
  }
}

TEST(Types, LocalDimsCutOnlyTheSlicedDimension) {
  const std::vector<std::int64_t> g = {10, 6};
  EXPECT_EQ(local_dims(g, Layout::sliced(1), 4, 0), (std::vector<std::int64_t>{10, 2}));
  EXPECT_EQ(local_dims(g, Layout::sliced(1), 4, 3), (std::vector<std::int64_t>{10, 1}));
  EXPECT_EQ(local_dims(g, Layout::replicated(), 4, 3), g);
}
