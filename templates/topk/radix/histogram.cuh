// Block histogram: adding digits to a shared-memory histogram (one atomic
// per warp when a warp's digits agree) and pass 0's read of the row, which
// histograms the first digit, captures while speculating and fills the row
// cache. The histogram is complete after the caller's next barrier.
#pragma once
#include "topk/radix/row_select.cuh"

namespace topk {

// Adds the digits of the `m`-masked elements to `h`. A warp whose elements
// all share one digit (all-equal rows, few distinct values) adds once
// instead of hammering one bin with 32 atomics.
template <class P>
template <int N>
__device__ __forceinline__ void RowSelect<P>::hist_add(u32* h, const u32 (&d)[N], u32 m) const {
  const u32 any = __ballot_sync(kFullMask, m != 0);
  if (any == 0) return;
  const u32 cnt = __popc(m);
  u32 d0 = 0;
  bool single = true, have = false;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if ((m >> i) & 1u) {
      if (!have) {
        d0 = d[i];
        have = true;
      } else if (d[i] != d0) {
        single = false;
      }
    }
  }
  const u32 ref = __shfl_sync(kFullMask, d0, __ffs(any) - 1);
  if (__all_sync(kFullMask, cnt == 0 || (single && d0 == ref))) {
    const u32 total = __reduce_add_sync(kFullMask, cnt);
    if (lane_id() == 0) atomicAdd(&h[ref], total);
    return;
  }
#pragma unroll
  for (int i = 0; i < N; ++i)
    if ((m >> i) & 1u) atomicAdd(&h[d[i]], 1u);
}

// hist_add for a warp whose every lane holds N valid elements.
template <class P>
template <int N>
__device__ __forceinline__ void RowSelect<P>::hist_add_full(u32* h, const u32 (&d)[N]) const {
  bool single = true;
#pragma unroll
  for (int i = 1; i < N; ++i) single = single && d[i] == d[0];
  const u32 ref = __shfl_sync(kFullMask, d[0], 0);
  if (__all_sync(kFullMask, single && d[0] == ref)) {
    if (lane_id() == 0) atomicAdd(&h[ref], 32u * N);
    return;
  }
#pragma unroll
  for (int i = 0; i < N; ++i) atomicAdd(&h[d[i]], 1u);
}

// Pass 0: histogram of the first digit over the slice (unless kHist is
// false: the capture-only part of a speculative pass 0); captures while
// speculating; fills the cache.
template <class P>
template <bool kHist>
struct RowSelect<P>::Pass0Op {
  RowSelect* self;
  template <int N>
  __device__ __forceinline__ void operator()(const u32 (&raw)[N], const u32 (&col)[N], u32 valid, int j,
                                             bool warp_full) const {
    RowSelect& s = *self;
    u32 key[N], d[N];
#pragma unroll
    for (int i = 0; i < N; ++i) {
      key[i] = K::key_flip(raw[i], s.flip);
      d[i] = s.digit0(key[i]);
    }
    if constexpr (kHist) {
      if (warp_full)
        s.hist_add_full(s.hist, d);
      else
        s.hist_add(s.hist, d, valid);
    }
    if (!kClustered && s.spec) s.capture(key, col, d, valid);
    if (s.cache_len > 0) {
      if (N == V && valid == (1u << V) - 1u && j + V <= s.cache_len) {
        uint4 q;
        if (V == 4) {
          q.x = key[0];
          q.y = key[1 % N];
          q.z = key[2 % N];
          q.w = key[3 % N];
        } else {
          q.x = key[0] | (key[1 % N] << 16);
          q.y = key[2 % N] | (key[3 % N] << 16);
          q.z = key[4 % N] | (key[5 % N] << 16);
          q.w = key[6 % N] | (key[7 % N] << 16);
        }
        *reinterpret_cast<uint4*>(s.cache + s.shift + j) = q;
      } else {
#pragma unroll
        for (int i = 0; i < N; ++i)
          if (((valid >> i) & 1u) && j + i < s.cache_len) s.cache[s.shift + j + i] = static_cast<Cached>(key[i]);
      }
    }
  }
};

}  // namespace topk
