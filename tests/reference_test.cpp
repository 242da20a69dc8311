// The CPU reference and the exactness checker: it must accept every valid
// top-k and reject everything else. No GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "tuner/reference.hpp"

namespace topk::tuner {
namespace {

Problem Prob(DType dt, int64_t batch, int64_t n, int64_t k) {
  Problem p;
  p.dtype = dt;
  p.batch = batch;
  p.n = n;
  p.k = k;
  return p;
}

// A valid answer built independently of the checker: indices of the k best
// (key desc, index asc) per row, -1 padding.
std::vector<int32_t> Answer(const HostMatrix& m, const Problem& p, const int32_t* ranges) {
  std::vector<int32_t> out(static_cast<size_t>(p.batch * p.k), -1);
  for (int64_t r = 0; r < p.batch; ++r) {
    int64_t s, e;
    RowRange(p, ranges, r, &s, &e);
    std::vector<int32_t> idx(static_cast<size_t>(e - s));
    std::iota(idx.begin(), idx.end(), static_cast<int32_t>(s));
    std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) {
      return OrderKey(p.dtype, m.raw(r, a), !p.largest) > OrderKey(p.dtype, m.raw(r, b), !p.largest);
    });
    for (int64_t j = 0; j < std::min<int64_t>(p.k, e - s); ++j) out[static_cast<size_t>(r * p.k + j)] = idx[j];
  }
  return out;
}

std::vector<uint8_t> ValuesOf(const HostMatrix& m, const Problem& p, const std::vector<int32_t>& idx) {
  const int es = DTypeSize(p.dtype);
  std::vector<uint8_t> v(idx.size() * static_cast<size_t>(es));
  for (int64_t r = 0; r < p.batch; ++r)
    for (int64_t j = 0; j < p.k; ++j) {
      const int32_t c = idx[static_cast<size_t>(r * p.k + j)];
      const uint32_t raw = c >= 0 ? m.raw(r, c) : LowestRaw(p.dtype);
      std::memcpy(v.data() + static_cast<size_t>((r * p.k + j) * es), &raw, static_cast<size_t>(es));
    }
  return v;
}

TEST(ConversionTest, HalfAndBf16RoundTripAndRound) {
  for (float f : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f}) {
    EXPECT_EQ(HalfToFloat(FloatToHalf(f)), f) << f;
  }
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // rounds to +inf
  EXPECT_EQ(FloatToHalf(1.0f + 1.0f / 4096), 0x3c00);  // tie to even
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(BF16ToFloat(FloatToBF16(1.5f)), 1.5f);
  EXPECT_EQ(FloatToBF16(1.0f + 1.0f / 256), 0x3f80);  // tie to even
  EXPECT_TRUE(std::isnan(BF16ToFloat(FloatToBF16(std::nanf("")))));
}

TEST(OrderKeyTest, NaNAboveInfAndSignedZerosEqual) {
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    HostMatrix m(dt, 1, 6, 6);
    m.set_float(0, 0, -std::numeric_limits<float>::infinity());
    m.set_float(0, 1, -1.0f);
    m.set_float(0, 2, -0.0f);
    m.set_float(0, 3, 0.0f);
    m.set_float(0, 4, std::numeric_limits<float>::infinity());
    m.set_float(0, 5, std::nanf(""));
    auto key = [&](int c, bool smallest) { return OrderKey(dt, m.raw(0, c), smallest); };
    EXPECT_LT(key(0, false), key(1, false));
    EXPECT_LT(key(1, false), key(2, false));
    EXPECT_EQ(key(2, false), key(3, false));
    EXPECT_LT(key(3, false), key(4, false));
    EXPECT_LT(key(4, false), key(5, false));
    // Smallest: NaN comes last, -inf first.
    EXPECT_GT(key(0, true), key(1, true));
    EXPECT_LT(key(5, true), key(0, true));
    // A negative NaN is still above +inf.
    const uint32_t neg_nan = dt == DType::kF32 ? 0xffc00001u : (dt == DType::kF16 ? 0xfe01u : 0xffc1u);
    EXPECT_GT(OrderKey(dt, neg_nan, false), key(4, false));
  }
}

class CheckerTest : public ::testing::TestWithParam<std::tuple<DType, Dist>> {};

TEST_P(CheckerTest, AcceptsValidAnswersRejectsBrokenOnes) {
  const auto [dt, dist] = GetParam();
  Problem p = Prob(dt, 6, 1001, 37);
  p.values = true;
  p.ranges = true;
  HostMatrix m(dt, p.batch, p.n, p.stride());
  Fill(&m, dist, 7, p.k);
  const std::vector<int32_t> ranges = MakeRanges(p.batch, p.n, 7);
  const Reference ref = ComputeReference(m, p, ranges.data());
  std::vector<int32_t> idx = Answer(m, p, ranges.data());
  std::vector<uint8_t> vals = ValuesOf(m, p, idx);
  ASSERT_TRUE(Check(m, p, ranges.data(), ref, idx.data(), vals.data()).ok())
      << Check(m, p, ranges.data(), ref, idx.data(), vals.data()).first_error;

  // Any order of a row's valid entries is fine.
  for (int64_t r = 0; r < p.batch; ++r) {
    int64_t s, e;
    RowRange(p, ranges.data(), r, &s, &e);
    const int64_t want = std::min<int64_t>(p.k, e - s);
    std::reverse(idx.begin() + r * p.k, idx.begin() + r * p.k + want);
  }
  vals = ValuesOf(m, p, idx);
  EXPECT_TRUE(Check(m, p, ranges.data(), ref, idx.data(), vals.data()).ok());

  // Row 0 is a full row (MakeRanges case 0): break it in every way.
  const int es = DTypeSize(dt);
  auto expect_bad = [&](std::vector<int32_t> bi, std::vector<uint8_t> bv, const char* what) {
    const CheckResult r = Check(m, p, ranges.data(), ref, bi.data(), bv.data());
    EXPECT_FALSE(r.ok()) << what;
    EXPECT_EQ(r.bad_rows, 1) << what;
  };
  {
    auto bi = idx;
    bi[1] = bi[0];  // duplicate
    expect_bad(bi, ValuesOf(m, p, bi), "duplicate");
  }
  {
    auto bi = idx;
    bi[0] = static_cast<int32_t>(p.n);  // out of range
    auto bv = ValuesOf(m, p, idx);
    expect_bad(bi, bv, "out of range");
  }
  {
    auto bi = idx;
    bi[2] = -1;  // missing element
    expect_bad(bi, ValuesOf(m, p, bi), "missing");
  }
  {
    auto bv = vals;
    bv[static_cast<size_t>(3 * es)] ^= 1;  // value inconsistent with its index
    expect_bad(idx, bv, "value");
  }
  if (dist != Dist::kAllEqual) {
    // Swap a selected index for an unselected one with a smaller key.
    auto bi = idx;
    std::vector<bool> used(static_cast<size_t>(p.n));
    for (int64_t j = 0; j < p.k; ++j) used[static_cast<size_t>(idx[static_cast<size_t>(j)])] = true;
    const uint32_t worst = ref.row_keys[0].back();
    for (int32_t c = 0; c < p.n; ++c)
      if (!used[static_cast<size_t>(c)] && OrderKey(dt, m.raw(0, c), false) < worst) {
        bi[0] = c;
        break;
      }
    if (bi[0] != idx[0]) expect_bad(bi, ValuesOf(m, p, bi), "wrong multiset");
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypesAndDists, CheckerTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                                            ::testing::ValuesIn(AllDists())));

// dense_top is the input that sends the resident family's window over the
// keys' span to the passes below it: every fp32 key within 2^23 of the
// largest, the k-th key's bin of the 256 over that span (k = n / 32)
// holding more than 32 distinct keys. ParseDist names every input.
TEST(DistTest, DenseTopCrowdsTheTopOfANarrowSpan) {
  HostMatrix m(DType::kF32, 1, 4096, 4096);
  Fill(&m, Dist::kDenseTop, 7, 128);
  std::vector<uint32_t> keys;
  for (int64_t c = 0; c < 4096; ++c) {
    const float v = m.get_float(0, c);
    ASSERT_GT(v, 64.0f);
    ASSERT_LE(v, 100.0f);
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    keys.push_back(bits);  // positive floats: the bits order as the values
  }
  std::sort(keys.begin(), keys.end(), std::greater<uint32_t>());
  const uint32_t span = keys.front() - keys.back();
  ASSERT_LT(span, 1u << 23);
  int bits = 0;
  while ((span >> bits) != 0) ++bits;
  const int shift = bits > 8 ? bits - 8 : 0;
  const uint32_t bin = keys[127] >> shift;
  std::vector<uint32_t> in_bin;
  for (uint32_t k : keys)
    if ((k >> shift) == bin) in_bin.push_back(k);
  EXPECT_GT(std::unique(in_bin.begin(), in_bin.end()) - in_bin.begin(), 32);
  for (Dist d : AllDists()) EXPECT_EQ(*ParseDist(DistName(d)), d);
  const Status bad = ParseDist("nope").status();
  EXPECT_NE(bad.message().find("dense_top"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("distinct16"), std::string::npos) << bad.message();
}

TEST(CheckerTest, PaddingAndSortedOrder) {
  Problem p = Prob(DType::kF32, 1, 10, 15);
  p.values = true;
  p.sorted = true;
  HostMatrix m(DType::kF32, 1, 10, 10);
  Fill(&m, Dist::kNormal, 3, p.k);
  const Reference ref = ComputeReference(m, p, nullptr);
  std::vector<int32_t> idx = Answer(m, p, nullptr);
  std::vector<uint8_t> vals = ValuesOf(m, p, idx);
  EXPECT_TRUE(Check(m, p, nullptr, ref, idx.data(), vals.data()).ok());
  // Padding value must be the lowest finite value.
  auto bv = vals;
  std::memset(bv.data() + 4 * 12, 0, 4);
  EXPECT_FALSE(Check(m, p, nullptr, ref, idx.data(), bv.data()).ok());
  // Padding must be -1.
  auto bi = idx;
  bi[11] = 0;
  EXPECT_FALSE(Check(m, p, nullptr, ref, bi.data(), vals.data()).ok());
  // Sorted order violated.
  bi = idx;
  std::swap(bi[0], bi[1]);
  EXPECT_FALSE(Check(m, p, nullptr, ref, bi.data(), ValuesOf(m, p, bi).data()).ok());
}

TEST(CheckerTest, NegativeZeroEqualsZeroAndTiesAnyWay) {
  // Row: [-0.0, +0.0, 1]: k = 2 may pick either zero.
  Problem p = Prob(DType::kF32, 1, 3, 2);
  HostMatrix m(DType::kF32, 1, 3, 3);
  m.set_float(0, 0, -0.0f);
  m.set_float(0, 1, 0.0f);
  m.set_float(0, 2, 1.0f);
  const Reference ref = ComputeReference(m, p, nullptr);
  for (int32_t z : {0, 1}) {
    std::vector<int32_t> idx = {2, z};
    EXPECT_TRUE(Check(m, p, nullptr, ref, idx.data(), nullptr).ok()) << z;
  }
}

// Deterministic mode: any valid top-k passes the plain check, only the
// lowest-index ties (under the rules' equality: -0.0 equals +0.0) pass the
// deterministic one; rows with at most k elements have nothing to choose.
TEST(CheckerTest, DeterministicWantsTheLowestIndexTies) {
  // Row: [1, -0.0, 5, +0.0, 0, 5, 2], k = 4: 5, 5, 2, then one zero of three.
  Problem p = Prob(DType::kF32, 1, 7, 4);
  HostMatrix m(DType::kF32, 1, 7, 7);
  const float row[] = {1, -0.0f, 5, 0.0f, 0, 5, 2};
  for (int c = 0; c < 7; ++c) m.set_float(0, c, row[c]);
  p.k = 3;  // 5, 5, 2: no choice
  Reference ref = ComputeReference(m, p, nullptr);
  std::vector<int32_t> idx = {5, 6, 2};
  p.deterministic = true;
  EXPECT_TRUE(Check(m, p, nullptr, ref, idx.data(), nullptr).ok());
  p.k = 5;  // 5, 5, 2, 1, then the zero at index 1 (-0.0 equals +0.0)
  ref = ComputeReference(m, p, nullptr);
  for (int32_t z : {1, 3, 4}) {
    std::vector<int32_t> five = {2, 5, 6, 0, z};
    p.deterministic = false;
    EXPECT_TRUE(Check(m, p, nullptr, ref, five.data(), nullptr).ok()) << z;
    p.deterministic = true;
    const CheckResult r = Check(m, p, nullptr, ref, five.data(), nullptr);
    EXPECT_EQ(r.ok(), z == 1) << z << ": " << r.first_error;
    if (z != 1) {
      EXPECT_NE(r.first_error.find("deterministic"), std::string::npos) << r.first_error;
    }
  }
  // A range of at most k elements takes all of them, in any order.
  Problem q = Prob(DType::kF32, 1, 7, 4);
  q.ranges = true;
  q.deterministic = true;
  const std::vector<int32_t> rg = {1, 5};  // -0.0, 5, +0.0, 0
  const Reference rr = ComputeReference(m, q, rg.data());
  std::vector<int32_t> all = {4, 2, 3, 1};
  EXPECT_TRUE(Check(m, q, rg.data(), rr, all.data(), nullptr).ok());
}

TEST(RangesTest, CoverEmptyReversedEndAndClampedCases) {
  const auto r = MakeRanges(16, 1000, 1);
  Problem p = Prob(DType::kF32, 16, 1000, 10);
  p.ranges = true;
  bool empty = false, at_end = false, odd = false, clamped = false, reversed = false;
  for (int64_t i = 0; i < 16; ++i) {
    int64_t s, e;
    RowRange(p, r.data(), i, &s, &e);
    EXPECT_LE(0, s);
    EXPECT_LE(s, e);
    EXPECT_LE(e, 1000);
    empty |= s == e;
    at_end |= e == 1000 && s > 0;
    odd |= (e - s) % 2 == 1;
    clamped |= r[2 * i] < 0;
    reversed |= r[2 * i] > r[2 * i + 1];
  }
  EXPECT_TRUE(empty && at_end && odd && clamped && reversed);
}

}  // namespace
}  // namespace topk::tuner
