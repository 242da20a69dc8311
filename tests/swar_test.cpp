// The 16-bit kernels' test of two keys a word (templates/topk/swar.cuh)
// against the key order itself, on the host: every raw value in either
// half, "largest" and "smallest", fp16 and bf16, thresholds across the
// range the test applies to (both bounds).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "topk/swar.cuh"

namespace {

constexpr unsigned kF16Exp = 0x7c00u, kBF16Exp = 0x7f80u;

// The selection key of a 16-bit raw value (docs/DESIGN.md, "Exactness"):
// NaN of either sign above +inf, -0.0 just below +0.0, the order inverted
// for "smallest". Written here from the contract rather than taken from
// topk/keys.cuh, so that the oracle does not share the kernels' code; the
// first test checks it against the float order.
unsigned Key(unsigned raw, unsigned exp_mask, bool smallest) {
  const unsigned r = raw > (0x8000u | exp_mask) ? 0x7fffu : raw;
  const unsigned key = (r & 0x8000u) ? (~r & 0xffffu) : (r | 0x8000u);
  return smallest ? key ^ 0xffffu : key;
}

float BF16ToFloat(unsigned raw) {
  const uint32_t bits = raw << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Thresholds: every 61st key, the ends of both bounds' ranges, and the
// keys of the values where the halves' sums change behaviour (zeros,
// infinities, NaN, the largest finite values) on either side of +0.0.
std::vector<unsigned> Thresholds(unsigned exp_mask) {
  std::vector<unsigned> t;
  for (unsigned v = 0; v < 0xffffu; v += 61) t.push_back(v);
  for (unsigned m : {0u, 1u, 2u, exp_mask - 1, exp_mask, exp_mask + 1, 0x7ffeu, 0x7fffu}) {
    t.push_back(0x8000u | m);
    t.push_back(0x7fffu - m);
  }
  t.push_back(0xfffeu);
  std::vector<unsigned> out;
  for (unsigned v : t)
    if (topk::swar::applies16(v)) out.push_back(v);
  return out;
}

TEST(SwarTest, KeyOrderFollowsTheValuesForBF16) {
  // The host key above is the order the test checks against: finite and
  // infinite values in float order, -0.0 just below +0.0, NaN on top.
  for (unsigned a = 0; a < 0x10000u; a += 7)
    for (unsigned b = 0; b < 0x10000u; b += 331) {
      const float fa = BF16ToFloat(a), fb = BF16ToFloat(b);
      if (fa != fa || fb != fb) continue;
      if (fa < fb) {
        ASSERT_LT(Key(a, kBF16Exp, false), Key(b, kBF16Exp, false)) << a << " " << b;
        ASSERT_GT(Key(a, kBF16Exp, true), Key(b, kBF16Exp, true)) << a << " " << b;
      }
    }
  EXPECT_EQ(Key(0x8000u, kBF16Exp, false) + 1, Key(0x0000u, kBF16Exp, false));  // -0.0 just below +0.0
  EXPECT_GT(Key(0xffc1u, kBF16Exp, false), Key(0x7f80u, kBF16Exp, false));      // -NaN above +inf
}

TEST(SwarTest, TwoKeysAWordMatchTheKeyOrder) {
  size_t checked = 0, passed = 0;
  for (unsigned exp_mask : {kF16Exp, kBF16Exp})
    for (bool smallest : {false, true}) {
      const unsigned nan_bias = topk::swar::nan_bias16(exp_mask);
      for (unsigned t : Thresholds(exp_mask)) {
        ASSERT_TRUE(topk::swar::applies16(t));
        const unsigned bias = topk::swar::bias16(t);
        const bool high = topk::swar::high16(t);
        ASSERT_EQ(high, t >= 0x8000u);
        for (unsigned lo = 0; lo < 0x10000u; ++lo) {
          // The other half walks the range in another order (a function of
          // lo and t, so not every pair occurs, but each half takes every
          // value against every threshold and the signs mix).
          const unsigned hi = (lo * 40503u + t) & 0xffffu;
          const unsigned bits = topk::swar::pass16(lo | (hi << 16), bias, nan_bias, smallest, high);
          const bool want_lo = Key(lo, exp_mask, smallest) > t, want_hi = Key(hi, exp_mask, smallest) > t;
          ASSERT_EQ(bits & ~0x80008000u, 0u);
          ASSERT_EQ((bits >> 15) & 1u, want_lo ? 1u : 0u)
              << "low half " << lo << " threshold " << t << " smallest " << smallest << " E " << exp_mask;
          ASSERT_EQ(bits >> 31, want_hi ? 1u : 0u)
              << "high half " << hi << " threshold " << t << " smallest " << smallest << " E " << exp_mask;
          checked += 2;
          passed += want_lo + want_hi;
        }
      }
    }
  // Both outcomes occurred often: the test compared something.
  EXPECT_GT(passed, checked / 20);
  EXPECT_LT(passed, checked - checked / 20);
}

TEST(SwarTest, AppliesBelowTheTopKey) {
  EXPECT_TRUE(topk::swar::applies16(0u));
  EXPECT_TRUE(topk::swar::applies16(0x7fffu));  // -0.0's key, the low bound's last
  EXPECT_TRUE(topk::swar::applies16(0x8000u));  // +0.0's, the high bound's first
  EXPECT_TRUE(topk::swar::applies16(0xfffeu));
  EXPECT_FALSE(topk::swar::applies16(0xffffu));  // nothing passes; a NaN would under the test
}

}  // namespace
