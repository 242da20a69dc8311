// Order-preserving keys: every value maps to an unsigned integer whose
// unsigned order is the selection order (larger key = selected first).
//
// Rules (DESIGN.md "Exactness"): every NaN ranks above +inf (torch's rule),
// -0.0 equals +0.0. The keys refine that order rather than reproduce it: a
// negative NaN is turned into a positive one (it must rank above +inf), but
// NaN payloads keep distinct keys and -0.0 gets the key just below +0.0.
// Splitting a tie never inverts the order, so a top-k under the keys is a
// top-k under the rules, and the transform stays 3-4 instructions on the hot
// path. For "smallest" the key is inverted, which puts NaN last.
#pragma once
#include "topk/types.cuh"

namespace topk {

enum DType : int { kF32 = 0, kF16 = 1, kBF16 = 2 };

template <int DTYPE>
struct Keys;

template <>
struct Keys<kF32> {
  typedef u32 Raw;     // storage of one element
  typedef u32 Cached;  // what the row cache stores per element
  static constexpr int kBits = 32;
  static constexpr int kVec = 4;  // elements per 16-byte load
  static constexpr u32 kLowest = 0xff7fffffu;  // -FLT_MAX

  __device__ __forceinline__ static u32 canonical(u32 raw) {
    const u32 mag = raw & 0x7fffffffu;
    if (mag > 0x7f800000u) return 0x7fffffffu;  // NaN
    if (mag == 0) return 0;                      // -0.0
    return raw;
  }
  __device__ __forceinline__ static u32 key(u32 raw, bool smallest) { return key_flip(raw, smallest ? ~0u : 0u); }
  // `flip` is 0 (largest) or all ones (smallest).
  __device__ __forceinline__ static u32 key_flip(u32 raw, u32 flip) {
    const u32 r = raw > 0xff800000u ? 0x7fffffffu : raw;  // negative NaN -> above +inf
    return r ^ (static_cast<u32>(static_cast<int>(r) >> 31) | 0x80000000u) ^ flip;
  }
  // The raw bits of key_flip(raw, flip): exact but for NaN, whose keys all
  // come back as kNaN (the caller reloads the element for its payload).
  static constexpr u32 kNaN = 0x7fffffffu;
  __device__ __forceinline__ static u32 raw_flip(u32 key, u32 flip) {
    const u32 k = key ^ flip;
    return (k & 0x80000000u) ? k ^ 0x80000000u : ~k;
  }
};

template <int EXP_MASK>
struct Keys16 {
  typedef u16 Raw;
  typedef u16 Cached;
  static constexpr int kBits = 16;
  static constexpr int kVec = 8;
  static constexpr u32 kExpMask = EXP_MASK;  // a magnitude above it is NaN

  __device__ __forceinline__ static u32 canonical(u32 raw) {
    const u32 mag = raw & 0x7fffu;
    if (mag > (u32)EXP_MASK) return 0x7fffu;  // NaN
    if (mag == 0) return 0;
    return raw;
  }
  __device__ __forceinline__ static u32 key(u32 raw, bool smallest) { return key_flip(raw, smallest ? 0xffffu : 0u); }
  __device__ __forceinline__ static u32 key_flip(u32 raw, u32 flip) {
    const u32 r = raw > (0x8000u | EXP_MASK) ? 0x7fffu : raw;  // negative NaN -> above +inf
    return r ^ (0x8000u | ((0u - (r >> 15)) & 0x7fffu)) ^ (flip & 0xffffu);
  }
  static constexpr u32 kNaN = 0x7fffu;
  __device__ __forceinline__ static u32 raw_flip(u32 key, u32 flip) {
    const u32 k = (key ^ flip) & 0xffffu;
    return (k & 0x8000u) ? k ^ 0x8000u : ~k & 0xffffu;
  }
};

template <>
struct Keys<kF16> : Keys16<0x7c00> {
  static constexpr u32 kLowest = 0xfbffu;  // -65504
};
template <>
struct Keys<kBF16> : Keys16<0x7f80> {
  static constexpr u32 kLowest = 0xff7fu;  // -3.39e38
};

// Loads one element's raw bits.
template <int DTYPE>
__device__ __forceinline__ u32 load_raw(const void* base, long long i) {
  if (DTYPE == kF32) return static_cast<const u32*>(base)[i];
  return static_cast<const u16*>(base)[i];
}

template <int DTYPE>
__device__ __forceinline__ void store_raw(void* base, long long i, u32 v) {
  if (DTYPE == kF32)
    static_cast<u32*>(base)[i] = v;
  else
    static_cast<u16*>(base)[i] = static_cast<u16>(v);
}

}  // namespace topk
