// Digit extraction: where each pass's digit sits in a key (exact digits of
// R bits, or fp32's coarse 8-bit first digit) and whether a key still
// matches the prefix resolved by earlier passes. Pure functions of the key
// and the round state; no memory traffic.
#pragma once
#include "topk/radix/row_select.cuh"

namespace topk {

// The coarse first digit (fp32 keys): 8 bits with fp16's resolution, four
// bins per octave over the 32 octaves from 2^-15 to 2^17, clamped outside,
// mirrored for negative values. It is a monotone function of the key (the
// top 11 key bits are sign, exponent and two mantissa bits, and the key
// is already in selection order, so "smallest" needs nothing more), about
// 7 integer instructions. Rounding each key to fp16 took about 17 (and a
// conversion); on 64 x 32768 the coarse kernels read every key twice
// through this function.
template <class P>
__device__ __forceinline__ u32 RowSelect<P>::coarse_digit(u32 key) const {
  if (P::kDtype == kF32) {
    const u32 neg = (key >> 31) - 1u;  // all ones in the lower half of the key order
    const int m = static_cast<int>(((key >> 21) ^ neg) & 0x3ffu) - 112 * 4;  // exponent 112 + 2 bits
    const u32 c = static_cast<u32>(m < 0 ? 0 : (m > 127 ? 127 : m));
    return (128u + (c ^ neg)) & 0xffu;
  }
  return key >> 8;
}

// The first digit: compile-time shape, the hot path of pass 0.
template <class P>
__device__ __forceinline__ u32 RowSelect<P>::digit0(u32 key) const {
  if (kCoarse) return coarse_digit(key);
  return key >> (KB - R);
}

template <class P>
__device__ __forceinline__ auto RowSelect<P>::digit_bits(int p) -> DigitBits {
  const int hi = KB - (p - (kCoarse ? 1 : 0)) * R;
  const int lo = hi - R > 0 ? hi - R : 0;
  return {lo, (1u << (hi - lo)) - 1u};
}

template <class P>
__device__ __forceinline__ u32 RowSelect<P>::digit(u32 key, int p) const {
  if (p == 0) return digit0(key);
  const DigitBits b = digit_bits(p);
  return (key >> b.lo) & b.ones;
}

template <class P>
__device__ __forceinline__ bool RowSelect<P>::matches(u32 key, bool from_buffer) const {
  if (kCoarse && !(from_buffer && buffer_all_match) && coarse_digit(key) != coarse_bin) return false;
  return (key & mask) == prefix;
}

}  // namespace topk
