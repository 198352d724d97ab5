// The element-wise kernels of coconet on the cpu: 16-bit conversions (round to
// nearest even), compiled programs against the model's double evaluation,
// dropout masks independent of the block they are computed in, and matmul.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu_elementwise.h"
#include "kernels/cpu_gemm.h"
#include "kernels/cpu_matmul.h"
#include "kernels/cpu_rowreduce.h"
#include "model/elementwise_program.h"
#include "model/half.h"
#include "model/parse.h"

namespace coconet::kernels {
namespace {

TEST(Half, KnownValuesRoundToNearestEven) {
  EXPECT_EQ(model::float_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(model::float_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(model::float_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(model::float_to_f16(65520.0f), 0x7c00);           // ties to even: overflow to inf
  EXPECT_EQ(model::float_to_f16(1.0f + 0x1p-11f), 0x3c00);    // halfway, even stays
  EXPECT_EQ(model::float_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);  // halfway, odd rounds up
  EXPECT_EQ(model::float_to_f16(0x1p-24f), 0x0001);           // smallest subnormal
  EXPECT_EQ(model::float_to_f16(0x1p-25f), 0x0000);           // half of it: ties to even zero
  EXPECT_TRUE(std::isnan(model::f16_to_float(model::float_to_f16(NAN))));
  EXPECT_EQ(model::float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(model::float_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  EXPECT_EQ(model::float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
}

TEST(Half, EveryF16RoundTrips) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float f = model::f16_to_float(bits);
    if (std::isnan(f)) continue;
    EXPECT_EQ(model::float_to_f16(f), bits) << h;
  }
}

TEST(Half, VerifierOfRoundTripCanFail) {
  // A value between two f16 numbers does not survive the round trip.
  const float between = 1.0f + 0x1p-12f;
  EXPECT_NE(model::f16_to_float(model::float_to_f16(between)), between);
}

// The bulk conversions (load_f32 / store_f32, with F16C on a CPU that has it)
// agree with half.h's scalar ones bit for bit: every f16 widened, and every
// f32 of a sweep over exponents and the bits that decide rounding narrowed
// (ties, subnormals, overflow, signs). NaN need only stay NaN.
TEST(Half, BulkConversionsAreTheScalarOnes) {
  if (!f16c_conversions()) GTEST_SKIP() << "no F16C here: the bulk conversions are the scalar ones";
  std::vector<std::uint16_t> every(0x10000);
  for (std::uint32_t h = 0; h < 0x10000; ++h) every[h] = static_cast<std::uint16_t>(h);
  std::vector<float> wide(every.size());
  load_f32(reinterpret_cast<const std::byte*>(every.data()), model::DType::f16, 0, 1,
           static_cast<std::int64_t>(every.size()), wide.data());
  int differ = 0;
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const float want = model::f16_to_float(every[h]);
    if (std::isnan(want) ? !std::isnan(wide[h]) : model::float_bits(want) != model::float_bits(wide[h])) ++differ;
  }
  EXPECT_EQ(differ, 0);

  std::vector<float> narrow_in;
  for (std::uint32_t exp = 90; exp <= 160; ++exp)        // 2^-37 .. 2^33: subnormal f16 to overflow
    for (std::uint32_t low = 0; low < 0x4000; low += 7)  // the 13 bits f16 drops, and above
      for (std::uint32_t sign : {0u, 0x80000000u})
        narrow_in.push_back(model::bits_float(sign | (exp << 23) | (low * 0x101u & 0x7fffffu)));
  for (float f : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, INFINITY, -INFINITY, NAN,
                  // exact ties in the normal range: even stays, odd rounds up, both signs
                  1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, -(1.0f + 0x1p-11f), -(1.0f + 3 * 0x1p-11f),
                  1024.0f + 0.5f, 1025.0f + 0.5f, 0x1p-14f + 0x1p-25f, 0x1p-14f + 3 * 0x1p-25f})
    narrow_in.push_back(f);
  std::vector<std::uint16_t> narrow(narrow_in.size());
  store_f32(reinterpret_cast<std::byte*>(narrow.data()), model::DType::f16, 0, 1,
            static_cast<std::int64_t>(narrow.size()), narrow_in.data());
  differ = 0;
  for (std::size_t i = 0; i < narrow.size(); ++i) {
    const std::uint16_t want = model::float_to_f16(narrow_in[i]);
    const bool nan = (want & 0x7c00u) == 0x7c00u && (want & 0x3ffu) != 0;
    if (nan ? !((narrow[i] & 0x7c00u) == 0x7c00u && (narrow[i] & 0x3ffu) != 0) : narrow[i] != want) ++differ;
  }
  EXPECT_EQ(differ, 0) << "of " << narrow.size();
}

struct Case {
  const char* expr;
};

double model_value(const model::Expr& e, const std::vector<double>& x, const std::vector<double>& y, std::size_t i) {
  model::ElementContext ctx;
  ctx.tensor = [&](const std::string& n) { return n == "x" ? x[i] : y[i]; };
  ctx.scalar = [](const std::string&) { return 0.5; };
  ctx.global_index = i;
  return model::eval(e, ctx);
}

TEST(ElementwiseProgram, AgreesWithModelEvaluation) {
  const std::vector<const char*> exprs = {"x + y*2", "x - 0.5*y/(sqrt(y)+1)", "dropout(x + y, 0.25) * 3",
                                          "max(x, y) - min(x, y)", "-x / y"};
  constexpr std::size_t kN = 1000;
  std::vector<double> x(kN), y(kN);
  for (std::size_t i = 0; i < kN; ++i) {
    x[i] = static_cast<double>(i % 7) - 3.0;
    y[i] = 1.0 + static_cast<double>(i % 5);
  }
  for (const char* text : exprs) {
    const auto e = model::parse_expr(text);
    const auto p = model::compile_elementwise({{"out", e, model::DType::f32}},
                                       {{"x", model::DType::f32}, {"y", model::DType::f32}}, {{"lr", 0.5}});
    std::vector<float> xf(x.begin(), x.end()), yf(y.begin(), y.end()), out(kN);
    auto bytes = [](auto& v) { return reinterpret_cast<std::byte*>(v.data()); };
    std::vector<CpuOperand> ins;
    for (const auto& name : p.input_names)
      ins.push_back({name == "x" ? bytes(xf) : bytes(yf), model::DType::f32, {0, 1, 1}});
    const std::vector<CpuOperand> outs{{bytes(out), model::DType::f32, {0, 1, 1}}};
    cpu_elementwise(p, ins, outs, model::Block{static_cast<std::int64_t>(kN), 1, 0, 0, 1});
    for (std::size_t i = 0; i < kN; ++i) {
      const double want = model_value(e, x, y, i);
      EXPECT_NEAR(out[i], want, 1e-5 * std::max(1.0, std::fabs(want))) << text << " at " << i;
    }
  }
}

TEST(ElementwiseProgram, DropoutMaskDoesNotDependOnTheBlock) {
  const auto e = model::parse_expr("dropout(x, 0.5)");
  const auto p = model::compile_elementwise({{"out", e, model::DType::f32}}, {{"x", model::DType::f32}}, {});
  constexpr std::int64_t kRows = 6, kCols = 5;
  std::vector<float> x(kRows * kCols, 1.0f), whole(kRows * kCols), pieces(kRows * kCols);
  auto bytes = [](auto& v) { return reinterpret_cast<std::byte*>(v.data()); };
  const std::vector<CpuOperand> in{{bytes(x), model::DType::f32, {0, kCols, 1}}};
  cpu_elementwise(p, in, std::vector<CpuOperand>{{bytes(whole), model::DType::f32, {0, kCols, 1}}},
                  model::Block{kRows, kCols, 0, 0, kCols});
  for (std::int64_t r = 0; r < kRows; r += 2)  // two rows at a time, like a chunk
    cpu_elementwise(p, std::vector<CpuOperand>{{bytes(x), model::DType::f32, {r * kCols, kCols, 1}}},
                    std::vector<CpuOperand>{{bytes(pieces), model::DType::f32, {r * kCols, kCols, 1}}},
                    model::Block{2, kCols, r, 0, kCols});
  EXPECT_EQ(whole, pieces);
  int dropped = 0;
  for (float v : whole) dropped += v == 0.0f ? 1 : 0;
  EXPECT_GT(dropped, 0);
  EXPECT_LT(dropped, kRows * kCols);
}

TEST(ElementwiseProgram, FusedStatementsReadRoundedValues) {
  // b reads a, which is stored as f16: it must see the rounded value.
  const auto p = model::compile_elementwise({{"a", model::parse_expr("x / 3"), model::DType::f16},
                                      {"b", model::parse_expr("a * 3"), model::DType::f32}},
                                     {{"x", model::DType::f32}}, {});
  std::vector<float> x{1.0f};
  std::vector<std::uint16_t> a(1);
  std::vector<float> b(1);
  cpu_elementwise(p, std::vector<CpuOperand>{{reinterpret_cast<std::byte*>(x.data()), model::DType::f32, {0, 1, 1}}},
                  std::vector<CpuOperand>{{reinterpret_cast<std::byte*>(a.data()), model::DType::f16, {0, 1, 1}},
                                          {reinterpret_cast<std::byte*>(b.data()), model::DType::f32, {0, 1, 1}}},
                  model::Block{1, 1, 0, 0, 1});
  EXPECT_EQ(b[0], model::f16_to_float(a[0]) * 3.0f);
}

TEST(CpuMatmul, SmallIntegerProductIsExact) {
  constexpr std::int64_t kM = 3, kK = 4, kN = 2;
  std::vector<std::uint16_t> a(kM * kK), b(kK * kN), out(kM * kN);
  for (std::int64_t i = 0; i < kM * kK; ++i) a[static_cast<std::size_t>(i)] = model::float_to_f16(static_cast<float>(i % 3));
  for (std::int64_t i = 0; i < kK * kN; ++i) b[static_cast<std::size_t>(i)] = model::float_to_f16(static_cast<float>(i % 4) - 1);
  auto bytes = [](auto& v) { return reinterpret_cast<std::byte*>(v.data()); };
  cpu_matmul({bytes(a), model::DType::f16, 0, kM, kK, kK}, {bytes(b), model::DType::f16, 0, kK, kN, kN},
             {bytes(out), model::DType::f16, 0, kM, kN, kN});
  for (std::int64_t i = 0; i < kM; ++i)
    for (std::int64_t j = 0; j < kN; ++j) {
      float want = 0;
      for (std::int64_t k = 0; k < kK; ++k)
        want += model::f16_to_float(a[static_cast<std::size_t>(i * kK + k)]) * model::f16_to_float(b[static_cast<std::size_t>(k * kN + j)]);
      EXPECT_EQ(model::f16_to_float(out[static_cast<std::size_t>(i * kN + j)]), want);
    }
}

// A batched product: one GEMM per batch, each at its own stride (f32 in
// place, with a padded stride between products to show the strides are used).
TEST(CpuMatmul, BatchedProductsAreEachTheirOwnGemm) {
  constexpr std::int64_t kQ = 3, kM = 2, kK = 3, kN = 4, kPad = 1;
  constexpr std::int64_t kSa = kM * kK + kPad, kSb = kK * kN, kSo = kM * kN + kPad;
  std::vector<float> a(kQ * kSa), b(kQ * kSb), out(kQ * kSo, -7.0f);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(i % 5) - 2;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = float(i % 3);
  auto bytes = [](auto& v) { return reinterpret_cast<std::byte*>(v.data()); };
  cpu_matmul_batched({bytes(a), model::DType::f32, 0, kM, kK, kK}, {bytes(b), model::DType::f32, 0, kK, kN, kN},
                     {bytes(out), model::DType::f32, 0, kM, kN, kN}, kQ, {kSa, kSb, kSo});
  for (std::int64_t q = 0; q < kQ; ++q) {
    for (std::int64_t i = 0; i < kM; ++i)
      for (std::int64_t j = 0; j < kN; ++j) {
        float want = 0;
        for (std::int64_t k = 0; k < kK; ++k)
          want += a[std::size_t(q * kSa + i * kK + k)] * b[std::size_t(q * kSb + k * kN + j)];
        EXPECT_EQ(out[std::size_t(q * kSo + i * kN + j)], want) << q << " " << i << " " << j;
      }
    EXPECT_EQ(out[std::size_t(q * kSo + kM * kN)], -7.0f) << "the padding between products is untouched";
  }
}

// The cpu row reduction: rows of f16 reduced exactly (integers), a ragged
// offset, and rows of no elements (a rank holding no columns).
TEST(CpuRowReduce, SumsAndMaximaOfEachRow) {
  constexpr std::int64_t kRows = 3, kInner = 5, kOffset = 2;
  std::vector<std::uint16_t> in(kOffset + kRows * kInner);
  for (std::int64_t i = 0; i < kRows * kInner; ++i)
    in[static_cast<std::size_t>(kOffset + i)] = model::float_to_f16(static_cast<float>((i * 7) % 11) - 5.0f);
  std::vector<float> out(kRows);
  auto* in_bytes = reinterpret_cast<std::byte*>(in.data());
  auto* out_bytes = reinterpret_cast<std::byte*>(out.data());
  for (const auto op : {model::ReduceOp::sum, model::ReduceOp::max}) {
    cpu_row_reduce({in_bytes, model::DType::f16, kOffset, kRows * kInner}, {out_bytes, model::DType::f32, 0, kRows},
                   kInner, op);
    for (std::int64_t r = 0; r < kRows; ++r) {
      float want = op == model::ReduceOp::max ? -INFINITY : 0.0f;
      for (std::int64_t k = 0; k < kInner; ++k) {
        const float x = static_cast<float>(((r * kInner + k) * 7) % 11) - 5.0f;
        want = op == model::ReduceOp::max ? std::max(want, x) : want + x;
      }
      EXPECT_EQ(out[static_cast<std::size_t>(r)], want) << r;
    }
  }
  cpu_row_reduce({in_bytes, model::DType::f16, 0, 0}, {out_bytes, model::DType::f32, 0, kRows}, 0, model::ReduceOp::max);
  EXPECT_EQ(out[0], -INFINITY);
  cpu_row_reduce({in_bytes, model::DType::f16, 0, 0}, {out_bytes, model::DType::f32, 0, kRows}, 0, model::ReduceOp::sum);
  EXPECT_EQ(out[2], 0.0f);
}

// gelu and tanh in a compiled program evaluate as model/ops.h does in f32.
TEST(CpuElementwise, GeluAndTanhAsTheOpsMath) {
  const auto prog = model::compile_elementwise({{"y", model::parse_expr("gelu(x) + tanh(x)"), model::DType::f32}},
                                        {{"x", model::DType::f32}}, {});
  std::vector<float> x(64), y(64);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = -4.0f + 0.125f * static_cast<float>(i);
  const CpuOperand in{reinterpret_cast<std::byte*>(x.data()), model::DType::f32, {0, 0, 1}};
  const CpuOperand out{reinterpret_cast<std::byte*>(y.data()), model::DType::f32, {0, 0, 1}};
  cpu_elementwise(prog, {&in, 1}, {&out, 1}, model::Block{1, 64, 0, 0, 64});
  for (std::size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(y[i], model::apply_unary(model::UnaryOp::gelu, x[i]) + std::tanh(x[i])) << x[i];
}

// The tile engine (one loop per instruction over a tile) is bit for bit the
// one-element evaluator every device runs (eval_element): every unary and
// binary operation, select, casts, f16 and bf16 storage and outputs, a later
// statement reading an earlier rounded one, and values that overflow f16,
// underflow to its subnormals or give NaN; 1000 elements (a ragged last tile).
TEST(CpuElementwise, EveryOperationBitForBitAsTheOneElementEvaluator) {
  const std::vector<model::ElementwiseStmt> stmts = {
      {"a", model::parse_expr("sqrt(x) + rsqrt(y) - abs(x) * exp(x * 0.001) + log(y) + tanh(x) + gelu(x) - x"),
       model::DType::f16},
      {"b", model::parse_expr("pow(y, 0.5) + max(x, y) + min(x, a) + (x < y) + (x <= a) + (x > y) + (x >= y) + "
                              "(x == y) + (x != y) - x / y"),
       model::DType::bf16},
      {"c", model::parse_expr("select(x > a, cast(x * 3, f16), cast(b, bf16)) + dropout(y, 0.5) * -a"),
       model::DType::f32}};
  const auto p = model::compile_elementwise(stmts, {{"x", model::DType::f16}, {"y", model::DType::bf16}}, {});
  constexpr std::size_t kN = 1000;
  const float specials[] = {0.0f, -0.0f, -2.5f, 60000.0f, 1e-7f, 3.0e-5f, -1e5f, 7.0f, 0.1f};
  std::vector<std::uint16_t> x(kN), y(kN);
  for (std::size_t i = 0; i < kN; ++i) {
    x[i] = model::float_to_f16(i % 10 == 9 ? 0.37f * float(int(i % 23) - 11) : specials[i % 9]);
    y[i] = model::float_to_bf16(i % 3 == 0 ? specials[(i / 3) % 9] : 0.5f + 0.01f * float(i));
  }
  std::vector<std::uint16_t> a(kN), b(kN);
  std::vector<float> c(kN);
  auto bytes = [](auto& v) { return reinterpret_cast<std::byte*>(v.data()); };
  std::vector<CpuOperand> ins;
  for (const auto& name : p.input_names)
    ins.push_back(name == "x" ? CpuOperand{bytes(x), model::DType::f16, {0, 0, 1}}
                              : CpuOperand{bytes(y), model::DType::bf16, {0, 0, 1}});
  const std::vector<CpuOperand> outs{{bytes(a), model::DType::f16, {0, 0, 1}},
                                     {bytes(b), model::DType::bf16, {0, 0, 1}},
                                     {bytes(c), model::DType::f32, {0, 0, 1}}};
  cpu_elementwise(p, ins, outs, model::Block{1, std::int64_t(kN), 0, 0, std::int64_t(kN)});
  const auto same = [](float u, float v) { return (std::isnan(u) && std::isnan(v)) || model::float_bits(u) == model::float_bits(v); };
  int nans = 0;
  for (std::size_t i = 0; i < kN; ++i) {
    float want[model::kMaxOutputs] = {};
    const auto load = [&](int slot) {
      return p.input_names[std::size_t(slot)] == "x" ? model::f16_to_float(x[i]) : model::bf16_to_float(y[i]);
    };
    model::eval_element(p.code.data(), int(p.code.size()), p.output_types.data(), load, i, want);
    EXPECT_TRUE(same(model::f16_to_float(a[i]), want[0])) << "a at " << i << ": " << model::f16_to_float(a[i]) << " vs " << want[0];
    EXPECT_TRUE(same(model::bf16_to_float(b[i]), want[1])) << "b at " << i << ": " << model::bf16_to_float(b[i]) << " vs " << want[1];
    EXPECT_TRUE(same(c[i], want[2])) << "c at " << i << ": " << c[i] << " vs " << want[2];
    nans += std::isnan(want[0]) ? 1 : 0;
  }
  EXPECT_GT(nans, 0);  // the special values reach the NaN paths
  EXPECT_LT(nans, int(kN));
}


// Storage for one operand of the tests below: `n` elements of `t` holding a
// pattern with negatives, fractions and zeros, shifted by `seed` so that
// operands differ.
struct Stored {
  model::DType t = model::DType::f32;
  std::vector<std::uint16_t> half;
  std::vector<float> full;
  Stored(model::DType dtype, std::size_t n, std::size_t seed) : t(dtype) {
    const auto x = [seed](std::size_t i) {
      return 0.25f * float(int((i + 7 * seed) % 29) - 14) + 0.001f * float((i + seed) % 7);
    };
    if (t == model::DType::f32) {
      full.resize(n);
      for (std::size_t i = 0; i < n; ++i) full[i] = x(i);
    } else {
      half.resize(n);
      for (std::size_t i = 0; i < n; ++i) half[i] = t == model::DType::f16 ? model::float_to_f16(x(i)) : model::float_to_bf16(x(i));
    }
  }
  std::byte* bytes() { return t == model::DType::f32 ? reinterpret_cast<std::byte*>(full.data()) : reinterpret_cast<std::byte*>(half.data()); }
  [[nodiscard]] float at(std::size_t i) const {
    if (t == model::DType::f32) return full[i];
    return t == model::DType::f16 ? model::f16_to_float(half[i]) : model::bf16_to_float(half[i]);
  }
};

// Runs `stmts` over n contiguous elements and compares every output with the
// one-element evaluator, bit for bit (NaN as NaN). `over`: output name ->
// input name whose buffer it is written into (the input's values as they
// were before the call are what the evaluator reads). An input named z is
// broadcast (its element 0 everywhere). Returns the count of differing elements.
int differences(const std::vector<model::ElementwiseStmt>& stmts, const std::map<std::string, model::DType>& inputs,
                std::size_t n, const std::map<std::string, std::string>& over = {}) {
  const auto p = model::compile_elementwise(stmts, inputs, {});
  std::map<std::string, Stored> in;
  for (const auto& [name, t] : inputs) in.emplace(name, Stored(t, n, in.size() + 1));
  std::map<std::string, Stored> before = in;
  std::vector<CpuOperand> ins, outs;
  for (const auto& name : p.input_names) ins.push_back({in.at(name).bytes(), in.at(name).t, {0, 0, name == "z" ? 0 : 1}});
  std::map<std::string, Stored> out;
  for (std::size_t k = 0; k < p.output_names.size(); ++k) {
    const std::string& name = p.output_names[k];
    const auto it = over.find(name);
    Stored& s = it != over.end() ? in.at(it->second) : out.emplace(name, Stored(p.output_types[k], n, 0)).first->second;
    EXPECT_EQ(s.t, p.output_types[k]) << name;
    outs.push_back({s.bytes(), s.t, {0, 0, 1}});
  }
  cpu_elementwise(p, ins, outs, model::Block{1, std::int64_t(n), 0, 0, std::int64_t(n)});
  int differ = 0;
  for (std::size_t i = 0; i < n; ++i) {
    float want[model::kMaxOutputs] = {};
    const auto load = [&](int slot) {
      const std::string& name = p.input_names[std::size_t(slot)];
      return before.at(name).at(name == "z" ? 0 : i);
    };
    model::eval_element(p.code.data(), int(p.code.size()), p.output_types.data(), load, i, want);
    for (std::size_t k = 0; k < p.output_names.size(); ++k) {
      const std::string& name = p.output_names[k];
      const auto it = over.find(name);
      const float got = it != over.end() ? in.at(it->second).at(i) : out.at(name).at(i);
      const bool same = (std::isnan(got) && std::isnan(want[k])) || model::float_bits(got) == model::float_bits(want[k]);
      differ += same ? 0 : 1;
    }
  }
  return differ;
}

std::vector<model::ElementwiseStmt> parsed(const std::vector<std::pair<std::string, std::string>>& text, model::DType t) {
  std::vector<model::ElementwiseStmt> stmts;
  for (const auto& [name, expr] : text) stmts.push_back({name, model::parse_expr(expr), t});
  return stmts;
}

// The engine's shortcuts, bit for bit as the one-element evaluator, at sizes
// of one short tile, of several long tiles with a ragged last one, and in
// between: f32 outputs computed straight into their buffers, also over an
// input updated in place; an output written over an input that a later
// statement loads again (which must go through a run, or the later load
// reads the new values); a product with a scalar left for its consumer to
// compute (add, subtract, multiply, divide, both operands scaled), computed
// first for any other consumer (max, sqrt, select, a cast, a store), and not
// left over a run the next push overwrites (`z * sqrt(x) + sqrt(y)`, z a
// broadcast scalar);
// 16-bit inputs loaded several times (converted once a tile).
TEST(CpuElementwise, DirectOutputsAndScaledRunsBitForBitAsTheOneElementEvaluator) {
  using model::DType;
  const std::map<std::string, DType> f32_inputs{{"x", DType::f32}, {"y", DType::f32}, {"z", DType::f32}};
  const std::map<std::string, DType> mixed{{"x", DType::f32}, {"y", DType::f32}, {"g", DType::f16}, {"h", DType::bf16}};
  for (const std::size_t n : {std::size_t{1000}, std::size_t{4096 * 2 + 333}, std::size_t{5000}}) {
    SCOPED_TRACE(n);
    EXPECT_EQ(differences(parsed({{"a", "z * sqrt(x) + sqrt(y)"}, {"b", "x * 2 + y * 3"}, {"c", "(x * 2) / (y * 0.5) - 1"}},
                                 DType::f32), f32_inputs, n), 0);
    EXPECT_EQ(differences(parsed({{"a", "max(x * 2, y)"}, {"b", "sqrt(abs(y * 0.25))"}, {"c", "select(x > 0, x * 2, y)"},
                                  {"d", "cast(x * 3, bf16) - (y * 7 < 1)"}, {"e", "x * 0.1"}},
                                 DType::f32), f32_inputs, n), 0);
    // f16 / bf16 outputs and inputs, a scaled run stored through a run.
    EXPECT_EQ(differences(parsed({{"a", "g * g + g * 0.5"}, {"b", "h * 3"}, {"c", "0.001 * g * g + h"}}, DType::bf16), mixed, n), 0);
    EXPECT_EQ(differences(parsed({{"a", "g * 0.7"}, {"b", "x + 0.5 * g"}}, DType::f16), mixed, n), 0);
    // Adam's updates (a long program) with the state updated in place.
    const auto adam = parsed({{"m1", "0.9 * m + 0.1 * g"}, {"v1", "0.999 * v + 0.001 * g * g"},
                              {"w1", "w - 0.001 * m1 / (sqrt(v1) + 0.00000001)"}}, DType::f32);
    const std::map<std::string, DType> state{{"g", DType::f16}, {"m", DType::f32}, {"v", DType::f32}, {"w", DType::f32}};
    EXPECT_EQ(differences(adam, state, n), 0);
    EXPECT_EQ(differences(adam, state, n, {{"m1", "m"}, {"v1", "v"}, {"w1", "w"}}), 0);
    // `a` lands in y's buffer, which `b` (a later statement) loads again.
    EXPECT_EQ(differences(parsed({{"a", "x * 3 + 1"}, {"b", "y - 0.5 * x"}}, DType::f32), f32_inputs, n, {{"a", "y"}}), 0);
  }
}

// The loops that widen a 16-bit input and narrow a 16-bit output inside the
// add, subtract, multiply or divide (no conversion passes), bit for bit as
// the one-element evaluator: f16 and bf16 scaled, f16 lanes with ragged
// tails (sizes not a multiple of 8), a 16-bit run beside a scalar, an f32
// run, a scaled run or another 16-bit run, outputs of the other 16-bit type,
// values that overflow to infinity, fall to f16 subnormals or give NaN
// (x / (x - x) at zeros), a 16-bit state updated in place, a 16-bit output
// read back by a later statement (through a run), an operation that is not
// one of the four (written through a run), and an input loaded twice.
TEST(CpuElementwise, SixteenBitLoopsBitForBitAsTheOneElementEvaluator) {
  using model::DType;
  for (const DType t : {DType::f16, DType::bf16}) {
    const DType other = t == DType::f16 ? DType::bf16 : DType::f16;
    const std::map<std::string, DType> ins{{"x", t}, {"y", t}, {"h", other}, {"w", DType::f32}, {"z", t}};
    for (const std::size_t n : {std::size_t{1}, std::size_t{13}, std::size_t{1000}, std::size_t{4096 * 2 + 333}}) {
      SCOPED_TRACE(testing::Message() << model::to_string(t) << " " << n);
      EXPECT_EQ(differences(parsed({{"a", "x * 2"}}, t), ins, n), 0);
      EXPECT_EQ(differences(parsed({{"a", "2 - x"}, {"b", "x / 3"}, {"c", "w + x"}, {"d", "x * y"}}, t), ins, n), 0);
      EXPECT_EQ(differences(parsed({{"a", "x * 30000"}, {"b", "x * 0.00001"}, {"c", "x / (x - x)"}, {"d", "x * 1e38"}}, t), ins, n), 0);
      EXPECT_EQ(differences(parsed({{"a", "x * 0.5 + w * 3"}, {"b", "h * 3 - y"}, {"c", "z * x"}}, other), ins, n), 0);
      EXPECT_EQ(differences(parsed({{"a", "x * 3"}, {"b", "a + y"}, {"c", "max(x, y)"}, {"d", "sqrt(abs(y)) * 2"}}, t), ins, n), 0);
      EXPECT_EQ(differences(parsed({{"a", "x * x + y"}}, t), ins, n), 0);
      EXPECT_EQ(differences(parsed({{"x1", "x * 0.9 + 0.1"}}, t), ins, n, {{"x1", "x"}}), 0);
    }
  }
}

// A square root left for the add, subtract, multiply or divide that
// consumes it (taken inside that loop), bit for bit as the one-element
// evaluator: beside a scalar, an f32 run, a scaled run, a 16-bit run or
// another root; taken first for any other consumer (max, a store, another
// sqrt); of negatives (NaN); Adam's `sqrt(v) + eps` with its state in place.
TEST(CpuElementwise, RootsBitForBitAsTheOneElementEvaluator) {
  using model::DType;
  const std::map<std::string, DType> ins{{"x", DType::f32}, {"y", DType::f32}, {"g", DType::f16}, {"h", DType::bf16},
                                         {"z", DType::f32}};
  for (const std::size_t n : {std::size_t{13}, std::size_t{1000}, std::size_t{4096 * 2 + 333}}) {
    SCOPED_TRACE(n);
    EXPECT_EQ(differences(parsed({{"a", "sqrt(x) + 0.001"}, {"b", "2 * sqrt(y)"}, {"c", "sqrt(x) / sqrt(y)"},
                                  {"d", "y - sqrt(abs(x))"}}, DType::f32), ins, n), 0);
    EXPECT_EQ(differences(parsed({{"a", "sqrt(x) * g"}, {"b", "h + sqrt(y)"}, {"c", "y * 0.5 - sqrt(x)"},
                                  {"d", "sqrt(x) * 3 + y"}, {"e", "z * sqrt(y)"}}, DType::f32), ins, n), 0);
    EXPECT_EQ(differences(parsed({{"a", "max(sqrt(x), y)"}, {"b", "sqrt(x)"}, {"c", "sqrt(sqrt(y)) - 1"}}, DType::bf16),
                          ins, n), 0);
    EXPECT_EQ(differences(parsed({{"x1", "x - 0.01 * y / (sqrt(abs(x)) + 0.00000001)"}}, DType::f32), ins, n, {{"x1", "x"}}), 0);
  }
}

// A 16-bit run scaled by a constant and read by its consumer's loop (`w +
// 0.5 * g`: widened and multiplied there), bit for bit as the one-element
// evaluator, f16 and bf16: beside an f32 run or a scalar, under each of the
// four operations and on either side, scaled again, beside another scaled
// run or 16-bit run (settled first), read by an operation that is not one
// of the four (max), into 16-bit outputs, stored through a run (an output
// read back), and over its f32 partner in place; at ragged sizes, at one
// short tile and over several long ones. Each 16-bit input is loaded once
// in its program (one loaded again is converted once a tile instead).
TEST(CpuElementwise, ScaledSixteenBitRunsBitForBitAsTheOneElementEvaluator) {
  using model::DType;
  for (const DType t : {DType::f16, DType::bf16}) {
    const std::map<std::string, DType> ins{{"x", t}, {"y", t}, {"w", DType::f32}, {"v", DType::f32}};
    for (const std::size_t n : {std::size_t{13}, std::size_t{1000}, std::size_t{4096 * 2 + 333}}) {
      SCOPED_TRACE(testing::Message() << model::to_string(t) << " " << n);
      for (const char* e : {"w + 0.5 * x", "w - x * 0.25", "0.5 * x - w", "3 * x / w", "w / (x * 0.75)", "1 + x * 0.1",
                            "x * 0.5 * 3", "0.5 * x + 0.25 * y", "0.5 * x + w * 3", "max(0.5 * x, w)",
                            "x * 30000 - y * 0.001", "v * (x * 0.5) + w"}) {
        SCOPED_TRACE(e);
        EXPECT_EQ(differences(parsed({{"a", e}}, DType::f32), ins, n), 0);
        EXPECT_EQ(differences(parsed({{"a", e}}, t), ins, n), 0);
      }
      EXPECT_EQ(differences(parsed({{"a", "w + 0.5 * x"}, {"b", "0.5 * y - v"}}, t), ins, n), 0);
      EXPECT_EQ(differences(parsed({{"a", "x * 0.5"}, {"b", "a + w"}}, t), ins, n), 0);
      EXPECT_EQ(differences(parsed({{"w1", "w + 0.5 * x"}}, DType::f32), ins, n, {{"w1", "w"}}), 0);
    }
  }
}

// A product or quotient of two runs (or of a scaled run and a run, or of a
// run and a root plus a constant: Adam's `0.001 * m / (sqrt(v) + eps)`)
// computed inside the loop of the add or subtract that consumes it next,
// bit for bit as the one-element evaluator: beside an f32 run, a scalar or
// a scaled run, with a scaled operand on either side of a product, a
// divisor computed into the run above (`x / (y - w)`, which a push after it
// would overwrite: `+ (w - y)`), division by zero (infinities, NaN), square
// roots of negatives; computed first for any other consumer (a multiply, a
// max, a store, a 16-bit output, a 16-bit run or a root beside it), a
// divide by a scaled run, a root plus a constant not divided (stored, or
// multiplied); Adam's updates with a bf16 gradient, and in place.
TEST(CpuElementwise, PairsBitForBitAsTheOneElementEvaluator) {
  using model::DType;
  const std::map<std::string, DType> ins{{"x", DType::f32}, {"y", DType::f32}, {"w", DType::f32},
                                         {"g", DType::f16}, {"z", DType::f32}};
  for (const std::size_t n : {std::size_t{13}, std::size_t{1000}, std::size_t{4096 * 2 + 333}}) {
    SCOPED_TRACE(n);
    EXPECT_EQ(differences(parsed({{"a", "w + x * y"}, {"b", "w - x * y"}, {"c", "w - 0.3 * x / y"}, {"d", "1 - x / y"},
                                  {"e", "0.9 * w + x * (0.1 * y)"}, {"f", "0.9 * w - 0.1 * x * y"}, {"h", "z * x + x * y"}},
                                 DType::f32), ins, n), 0);
    EXPECT_EQ(differences(parsed({{"a", "x / (y - w) + (w - y)"}, {"b", "w - x / (y - w)"}, {"c", "w - x / (y - y)"},
                                  {"d", "x / (y * 0.5) + w"}, {"e", "max(x * y, w)"}, {"f", "x * y * w"}},
                                 DType::f32), ins, n), 0);
    EXPECT_EQ(differences(parsed({{"a", "g + x * y"}, {"b", "sqrt(abs(x)) + x * y"}, {"c", "x * y"}}, DType::f32), ins, n), 0);
    EXPECT_EQ(differences(parsed({{"a", "w + x * y"}, {"b", "w - 0.5 * x / (sqrt(abs(y)) + 0.25)"}}, DType::f16), ins, n), 0);
    EXPECT_EQ(differences(parsed({{"a", "w - 0.001 * x / (sqrt(abs(y)) + 0.00000001)"}, {"b", "w - x / (1 + sqrt(y))"},
                                  {"c", "sqrt(abs(y)) + 1"}, {"d", "(sqrt(abs(y)) + 1) * 2"}, {"e", "(sqrt(abs(x)) + 1) / y - w"},
                                  {"f", "x * (sqrt(abs(y)) + 0.5) + w"}}, DType::f32), ins, n), 0);
    const auto adam = parsed({{"m1", "0.9 * m + 0.1 * g"}, {"v1", "0.999 * v + 0.001 * g * g"},
                              {"w1", "w - 0.001 * m1 / (sqrt(v1) + 0.00000001)"}}, DType::f32);
    const std::map<std::string, DType> state{{"g", DType::bf16}, {"m", DType::f32}, {"v", DType::f32}, {"w", DType::f32}};
    EXPECT_EQ(differences(adam, state, n), 0);
    EXPECT_EQ(differences(adam, state, n, {{"m1", "m"}, {"v1", "v"}, {"w1", "w"}}), 0);
  }
}

// Every GEMM level this CPU runs (kernels/cpu_gemm.h) at a blocked size with
// ragged edges, strided operands and output: small-integer products are
// exact, so each level equals the naive sum; and the levels are told apart
// (a level the CPU lacks is refused, not silently replaced).
TEST(CpuGemm, EveryLevelExactOnSmallIntegers) {
  constexpr std::int64_t kM = 67, kK = 300, kN = 45, kPad = 3;
  std::vector<float> a(kM * (kK + kPad)), b(kK * (kN + kPad));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(int(i % 7) - 3);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = float(int(i % 5) - 2);
  std::vector<double> want(kM * kN, 0.0);
  for (std::int64_t i = 0; i < kM; ++i)
    for (std::int64_t k = 0; k < kK; ++k)
      for (std::int64_t j = 0; j < kN; ++j)
        want[std::size_t(i * kN + j)] += double(a[std::size_t(i * (kK + kPad) + k)]) * b[std::size_t(k * (kN + kPad) + j)];
  int ran = 0;
  for (GemmLevel level : {GemmLevel::baseline, GemmLevel::avx2_fma, GemmLevel::avx512}) {
    std::vector<float> c(kM * (kN + kPad), -7.0f);
    const GemmF32 g{a.data(), kK + kPad, b.data(), kN + kPad, c.data(), kN + kPad, kM, kN, kK};
    if (static_cast<int>(level) > static_cast<int>(gemm_level())) {
      EXPECT_ANY_THROW(gemm_f32(g, level)) << gemm_level_name(level);
      continue;
    }
    gemm_f32(g, level);
    ++ran;
    int differ = 0;
    for (std::int64_t i = 0; i < kM; ++i)
      for (std::int64_t j = 0; j < kN; ++j) differ += c[std::size_t(i * (kN + kPad) + j)] == want[std::size_t(i * kN + j)] ? 0 : 1;
    EXPECT_EQ(differ, 0) << gemm_level_name(level);
    EXPECT_EQ(c[std::size_t(kN)], -7.0f) << "the padding between rows is left alone";
  }
  EXPECT_GE(ran, 1);
}

// The engine's layouts against the one-element evaluator, bit for bit:
// contiguous f32 inputs (read in place), a broadcast operand (a scalar for
// the whole tile: constants and scalar-only operations never filled), a
// strided f16 input, a block of rows that cannot be flattened (a column
// slice), several tiles with a ragged last one, a statement of scalars only,
// one read back by a later statement, and an output written over its own
// input (an in-place update, as Adam's state is).
TEST(CpuElementwise, LayoutsBitForBitAsTheOneElementEvaluator) {
  const std::vector<model::ElementwiseStmt> stmts = {
      {"m", model::parse_expr("0.9 * m + 0.1 * g * z"), model::DType::f32},
      {"s", model::parse_expr("z * 3 + sqrt(z) - select(z > 1, z, 2)"), model::DType::bf16},
      {"a", model::parse_expr("x / (sqrt(m) + 0.001) + dropout(z, 0.25) + s"), model::DType::f16},
      {"b", model::parse_expr("max(a, x) * 2 - (g < a)"), model::DType::f32}};
  const auto p = model::compile_elementwise(
      stmts, {{"x", model::DType::f32}, {"g", model::DType::f16}, {"z", model::DType::f32}, {"m", model::DType::f32}}, {});
  constexpr std::int64_t kRows = 3, kCols = 2500, kLd = kCols + 7;  // rows of a wider matrix: not flattenable
  std::vector<float> x(kRows * kLd), m(kRows * kLd), z{1.75f}, b(kRows * kLd);
  std::vector<std::uint16_t> g(kRows * kLd * 2), a(kRows * kLd);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = 0.25f * float(int(i % 37) - 18);
    m[i] = 0.125f * float(i % 11);
  }
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = model::float_to_f16(0.5f * float(int(i % 13) - 6));
  const std::vector<float> m_before = m;
  auto bytes = [](auto& v) { return reinterpret_cast<std::byte*>(v.data()); };
  std::vector<CpuOperand> ins;
  for (const auto& name : p.input_names) {
    if (name == "x") ins.push_back({bytes(x), model::DType::f32, {0, kLd, 1}});
    if (name == "g") ins.push_back({bytes(g), model::DType::f16, {0, 2 * kLd, 2}});  // every other element
    if (name == "z") ins.push_back({bytes(z), model::DType::f32, {0, 0, 0}});
    if (name == "m") ins.push_back({bytes(m), model::DType::f32, {0, kLd, 1}});
  }
  std::vector<std::uint16_t> s(kRows * kLd);
  const std::vector<CpuOperand> outs{{bytes(m), model::DType::f32, {0, kLd, 1}},  // over its input
                                     {bytes(s), model::DType::bf16, {0, kLd, 1}},
                                     {bytes(a), model::DType::f16, {0, kLd, 1}},
                                     {bytes(b), model::DType::f32, {0, kLd, 1}}};
  cpu_elementwise(p, ins, outs, model::Block{kRows, kCols, 0, 0, kCols});
  const auto same = [](float u, float v) { return (std::isnan(u) && std::isnan(v)) || model::float_bits(u) == model::float_bits(v); };
  int differ = 0;
  for (std::int64_t r = 0; r < kRows; ++r)
    for (std::int64_t c = 0; c < kCols; ++c) {
      const auto at = static_cast<std::size_t>(r * kLd + c);
      const auto load = [&](int slot) {
        const auto& name = p.input_names[std::size_t(slot)];
        if (name == "x") return x[at];
        if (name == "g") return model::f16_to_float(g[static_cast<std::size_t>(r * 2 * kLd + 2 * c)]);
        if (name == "z") return z[0];
        return m_before[at];
      };
      float want[model::kMaxOutputs] = {};
      model::eval_element(p.code.data(), int(p.code.size()), p.output_types.data(), load,
                   static_cast<std::uint64_t>(r * kCols + c), want);
      const float got[] = {m[at], model::bf16_to_float(s[at]), model::f16_to_float(a[at]), b[at]};
      for (int k = 0; k < 4; ++k) differ += same(got[k], want[k]) ? 0 : 1;
    }
  EXPECT_EQ(differ, 0);
  EXPECT_NE(m, m_before);  // the update landed (the check above can fail)
}

}  // namespace
}  // namespace coconet::kernels
