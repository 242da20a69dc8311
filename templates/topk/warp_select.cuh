// Top-k for short rows (MoE routing: n = 64 to 512): one warp per row, the
// row's keys in registers, ITEMS per lane. The threshold is found one key bit
// at a time, a radix select of width 1 where each step is one warp reduction
// (no shared memory, no barriers); it stops as soon as exactly k keys reach
// the candidate threshold. For small k (MoE routing) a tournament over
// per-lane sorted keys takes k warp reductions instead (see tournament()).
#pragma once
#include "topk/args.h"
#include "topk/keys.cuh"
#include "topk/policy.cuh"

namespace topk {

// Sorts a register array descending with a bitonic network; N is a power of
// two and every index is a compile-time constant, so `v` stays in registers.
template <int N, class T>
__device__ __forceinline__ void sort_desc(T (&v)[N]) {
#pragma unroll
  for (int size = 2; size <= N; size <<= 1)
#pragma unroll
    for (int stride = size / 2; stride > 0; stride >>= 1)
#pragma unroll
      for (int i = 0; i < N; ++i) {
        const int j = i ^ stride;
        if (j > i) {
          const T a = v[i], b = v[j];
          const T hi = a > b ? a : b, lo = a > b ? b : a;
          const bool desc = (i & size) == 0;
          v[i] = desc ? hi : lo;
          v[j] = desc ? lo : hi;
        }
      }
}

// Small k: every lane sorts its keys, packed with the inverted element index
// (so all packed keys are distinct, ties go to the lower index, and a
// missing element packs to 0, below every real one); then k rounds each take
// the warp's largest head and let its lane advance. k dependent warp
// reductions instead of one per key bit.
constexpr int kTournamentMaxK = 16;

template <class P, class Raw>
__device__ __forceinline__ void tournament(const u32 (&key)[P::kItems], int L, int k, int start, const Raw* src,
                                           int* oi, Raw* ov, bool values) {
  constexpr int I = P::kItems;
  const u32 lane = lane_id();
  if (Keys<P::kDtype>::kBits == 16) {
    u32 v[I];
#pragma unroll
    for (int i = 0; i < I; ++i) {
      const int e = i * 32 + static_cast<int>(lane);
      v[i] = e < L ? (key[i] << 16) | (0xffffu - static_cast<u32>(e)) : 0u;
    }
    sort_desc(v);
    for (int j = 0; j < k; ++j) {
      const u32 m = __reduce_max_sync(kFullMask, v[0]);
      if (v[0] == m) {  // exactly one lane: packed keys are distinct
        const int e = static_cast<int>(0xffffu - (m & 0xffffu));
        oi[j] = start + e;
        if (values) ov[j] = src[e];
#pragma unroll
        for (int i = 0; i + 1 < I; ++i) v[i] = v[i + 1];
        v[I - 1] = 0;
      }
    }
  } else {
    u64 v[I];
#pragma unroll
    for (int i = 0; i < I; ++i) {
      const int e = i * 32 + static_cast<int>(lane);
      v[i] = e < L ? (static_cast<u64>(key[i]) << 32) | (0xffffffffu - static_cast<u32>(e)) : 0ull;
    }
    sort_desc(v);
    for (int j = 0; j < k; ++j) {
      const u32 hi = static_cast<u32>(v[0] >> 32);
      const u32 mh = __reduce_max_sync(kFullMask, hi);
      const u32 ml = __reduce_max_sync(kFullMask, hi == mh ? static_cast<u32>(v[0]) : 0u);
      if (hi == mh && static_cast<u32>(v[0]) == ml) {
        const int e = static_cast<int>(0xffffffffu - ml);
        oi[j] = start + e;
        if (values) ov[j] = src[e];
#pragma unroll
        for (int i = 0; i + 1 < I; ++i) v[i] = v[i + 1];
        v[I - 1] = 0;
      }
    }
  }
}

template <class P>
__device__ __forceinline__ void warp_topk(const TopkArgs& a) {
  using K = Keys<P::kDtype>;
  using Raw = typename K::Raw;
  constexpr int I = P::kItems;
  constexpr int KB = K::kBits;
  const int rowi = blockIdx.x * (P::kBlock / 32) + static_cast<int>(threadIdx.x >> 5);
  if (rowi >= a.batch) return;  // the whole warp leaves together
  const u32 lane = lane_id();
  const bool smallest = (a.flags & TOPK_FLAG_SMALLEST) != 0;
  const bool values = (a.flags & TOPK_FLAG_VALUES) != 0 && a.out_val != nullptr;
  const int k = a.k;
  int start = 0, end = a.n;
  if (a.flags & TOPK_FLAG_RANGES) {
    start = a.ranges[2 * rowi];
    end = a.ranges[2 * rowi + 1];
    start = start < 0 ? 0 : (start > a.n ? a.n : start);
    end = end < start ? start : (end > a.n ? a.n : end);
  }
  const int L = end - start;
  const Raw* src = static_cast<const Raw*>(a.input) + static_cast<long long>(rowi) * a.row_stride + start;
  int* oi = a.out_idx + static_cast<long long>(rowi) * k;
  Raw* ov = values ? static_cast<Raw*>(a.out_val) + static_cast<long long>(rowi) * k : nullptr;

  if (L <= k) {
    for (int j = lane; j < L; j += 32) {
      oi[j] = start + j;
      if (values) ov[j] = src[j];
    }
    for (int pos = L + lane; pos < k; pos += 32) {
      oi[pos] = -1;
      if (values) ov[pos] = static_cast<Raw>(K::kLowest);
    }
    return;
  }

  // Lane l holds elements l, l + 32, ...: coalesced loads, and a sorted row
  // spreads its largest elements over many lanes (the prefilter below relies
  // on that). Missing elements get key 0; every candidate threshold is >= 1,
  // so they are never counted, and the tie step checks validity explicitly.
  const u32 flip = smallest ? (KB == 32 ? ~0u : 0xffffu) : 0u;
  u32 key[I];
#pragma unroll
  for (int i = 0; i < I; ++i) {
    const int e = i * 32 + static_cast<int>(lane);
    key[i] = e < L ? K::key_flip(src[e], flip) : 0u;
  }

  if (k <= kTournamentMaxK) {
    tournament<P>(key, L, k, start, src, oi, ov, values);
    return;
  }
  u32 thr = 0;
  bool exact = false;
  if (!exact) {
    for (int bit = KB - 1; bit >= 0; --bit) {
      const u32 cand = thr | (1u << bit);
      u32 c = 0;
#pragma unroll
      for (int i = 0; i < I; ++i) c += key[i] >= cand ? 1u : 0u;
      c = __reduce_add_sync(kFullMask, c);
      if (c >= static_cast<u32>(k)) {
        thr = cand;
        if (c == static_cast<u32>(k)) {
          exact = true;
          break;
        }
      }
    }
  }

  // Strictly above the threshold (or at it, when exactly k reach it).
  u32 sel = 0, tie = 0;
#pragma unroll
  for (int i = 0; i < I; ++i) {
    if (exact ? key[i] >= thr : key[i] > thr) sel |= 1u << i;
    else if (!exact && key[i] == thr && i * 32 + static_cast<int>(lane) < L) tie |= 1u << i;
  }
  const u32 ns = __popc(sel);
  const u32 sincl = warp_inclusive_prefix(ns);
  const u32 stotal = __shfl_sync(kFullMask, sincl, 31);
  u32 pos = sincl - ns;
#pragma unroll
  for (int i = 0; i < I; ++i)
    if ((sel >> i) & 1u) {
      const int e = i * 32 + static_cast<int>(lane);
      oi[pos] = start + e;
      if (values) ov[pos] = src[e];
      ++pos;
    }
  if (!exact) {
    const u32 need = static_cast<u32>(k) - stotal;
    const u32 nt = __popc(tie);
    u32 t = warp_inclusive_prefix(nt) - nt;
#pragma unroll
    for (int i = 0; i < I; ++i)
      if ((tie >> i) & 1u) {
        if (t < need) {
          const int e = i * 32 + static_cast<int>(lane);
          oi[stotal + t] = start + e;
          if (values) ov[stotal + t] = src[e];
        }
        ++t;
      }
  }
}

}  // namespace topk
