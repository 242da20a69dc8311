// Tests of two 16-bit keys a 32-bit word against a threshold key, without
// forming the keys (SWAR). The kernels (filter/filter_select.cuh) and the
// host tests (tests/swar_test.cpp) share this code, so it depends on
// nothing else and compiles for both.
//
// Against a threshold key t below 0xffff an element passes (key > t) as
// its magnitude m, its raw bits less the sign, compares with a bound of t,
// the sign picking the comparison (the keys of topk/keys.cuh; E the
// exponent mask, m > E a NaN):
//   t >= 0x8000 (t at or above +0.0's key), with t' = t - 0x8000:
//     "largest" keeps a positive element with m > t' and every negative
//     NaN; "smallest" a negative element with t' < m <= E;
//   t < 0x8000, with u = 0x7fff - t:
//     "largest" keeps every positive element, every negative NaN and a
//     negative element with m < u; "smallest" a non-NaN negative element
//     and a positive one with m < u.
// m + (0xffff - t) reaches bit 15 of its half exactly when m > t', m +
// (t + 1) when m >= u, m + (0x7fff - E) when m > E; the magnitudes are
// masked to 15 bits, so no sum carries into the other half.
#pragma once

#if defined(__CUDACC__)
#define TOPK_SWAR_FN __host__ __device__ __forceinline__
#else
#define TOPK_SWAR_FN inline
#endif

namespace topk {
namespace swar {

// Whether the two-a-word test applies to threshold key t (16-bit keys):
// every key but the largest, which no key exceeds.
TOPK_SWAR_FN constexpr bool applies16(unsigned t) { return t < 0xffffu; }

// Which of the two bounds above: t at or above +0.0's key.
TOPK_SWAR_FN constexpr bool high16(unsigned t) { return t >= 0x8000u; }

// Both halves' bias for threshold key t: 0xffff - t where high16(t),
// else t + 1.
TOPK_SWAR_FN constexpr unsigned bias16(unsigned t) { return (high16(t) ? 0xffffu - t : t + 1u) * 0x00010001u; }

// Both halves' bias for the exponent mask E (0x7c00 fp16, 0x7f80 bf16).
TOPK_SWAR_FN constexpr unsigned nan_bias16(unsigned exp_mask) { return (0x7fffu - exp_mask) * 0x00010001u; }

// Bit 15 set when the low half of `w` passes, bit 31 when the high half
// does; the other bits zero. `bias` = bias16(t) and `high` = high16(t)
// with applies16(t), `nan_bias` = nan_bias16(E). Each case is one
// three-input logic op of the word (its sign bits), the bound's sum and
// the NaN sum.
TOPK_SWAR_FN constexpr unsigned pass16(unsigned w, unsigned bias, unsigned nan_bias, bool smallest, bool high) {
  const unsigned m = w & 0x7fff7fffu;
  const unsigned a = m + bias, nan = m + nan_bias;
  const unsigned r = high ? (smallest ? (w & a & ~nan) : ((w & nan) | (~w & a)))
                          : (smallest ? ((w & ~nan) | (~w & ~a)) : (~w | nan | ~a));
  return r & 0x80008000u;
}

}  // namespace swar
}  // namespace topk
