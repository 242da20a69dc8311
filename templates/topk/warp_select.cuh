// Top-k for short rows (MoE routing: n = 64 to 512): one warp per row, the
// row's keys in registers, ITEMS per lane. The threshold is found one key bit
// at a time, a radix select of width 1 where each step is one warp reduction
// (no shared memory, no barriers); it stops as soon as exactly k keys reach
// the candidate threshold.
#pragma once
#include "topk/args.h"
#include "topk/keys.cuh"
#include "topk/policy.cuh"

namespace topk {

template <class P>
__device__ __forceinline__ void warp_topk(const TopkArgs& a) {
  using K = Keys<P::kDtype>;
  using Raw = typename K::Raw;
  constexpr int I = P::kItems;
  constexpr int V = K::kVec;
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

  // Lane l holds elements [l*I, l*I + I): contiguous, so 16-byte loads work
  // and lane order is index order (ties below go to the lowest index).
  // Missing elements get key 0; every candidate threshold is >= 1, so they
  // are never counted, and the tie step checks validity explicitly.
  u32 key[I];
  const int e0 = static_cast<int>(lane) * I;
  const bool vec_ok = (I % V == 0) && ((reinterpret_cast<unsigned long long>(src) & 15u) == 0);
  if (vec_ok) {
#pragma unroll
    for (int q = 0; q < I / V; ++q) {
      const int e = e0 + q * V;
      if (e + V <= L) {
        const uint4 x = *reinterpret_cast<const uint4*>(src + e);
        const u32 w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
        for (int i = 0; i < V; ++i) {
          const u32 raw = V == 4 ? w[i % 4] : ((w[(i / 2) % 4] >> (16 * (i & 1))) & 0xffffu);
          key[q * V + i] = K::key(raw, smallest);
        }
      } else {
#pragma unroll
        for (int i = 0; i < V; ++i) key[q * V + i] = e + i < L ? K::key(src[e + i], smallest) : 0u;
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < I; ++i) key[i] = e0 + i < L ? K::key(src[e0 + i], smallest) : 0u;
  }

  u32 thr = 0;
  bool exact = false;
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

  // Strictly above the threshold (or at it, when exactly k reach it).
  u32 sel = 0, tie = 0;
#pragma unroll
  for (int i = 0; i < I; ++i) {
    if (exact ? key[i] >= thr : key[i] > thr) sel |= 1u << i;
    else if (!exact && key[i] == thr && e0 + i < L) tie |= 1u << i;
  }
  const u32 ns = __popc(sel);
  const u32 sincl = warp_inclusive_prefix(ns);
  const u32 stotal = __shfl_sync(kFullMask, sincl, 31);
  u32 pos = sincl - ns;
#pragma unroll
  for (int i = 0; i < I; ++i)
    if ((sel >> i) & 1u) {
      oi[pos] = start + e0 + i;
      if (values) ov[pos] = src[e0 + i];
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
          oi[stotal + t] = start + e0 + i;
          if (values) ov[stotal + t] = src[e0 + i];
        }
        ++t;
      }
  }
}

}  // namespace topk
