// Top-k for short rows (MoE routing: n = 64 to 512): one warp per row, the
// row's keys in registers, ITEMS per lane. The threshold is found one key bit
// at a time, a radix select of width 1 where each step is one warp reduction
// (no shared memory, no barriers); it stops as soon as exactly k keys reach
// the candidate threshold. For small k (MoE routing) a tournament of
// per-lane sorted keys takes the place of the bit steps or, in the bound
// variant (Policy BOUND = 1: 32-bit keys, k <= 8), a lower bound from the
// lane maxima (small_k).
#pragma once
#include "topk/args.h"
#include "topk/keys.cuh"
#include "topk/policy.cuh"
#include "topk/row.cuh"

namespace topk {

// Which element of the row a lane's item i is. Strided: lane l holds
// elements l, l + 32, ... (coalesced scalar loads, any row). Vector: a whole,
// 16-byte-aligned row is read in 16-byte vectors, vector j * 32 + l going
// to lane l, so that the items of a vector are consecutive elements.
template <class P>
struct ItemMap {
  static constexpr int V = Keys<P::kDtype>::kVec;
  bool vec;
  int lane;
  __device__ __forceinline__ int operator()(int i) const {
    return vec ? ((i / V) * 32 + lane) * V + i % V : i * 32 + lane;
  }
};

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

// Small k (k <= 16, but k <= 8 of 32-bit keys in the bound variant go to
// small_k): every lane sorts its keys, packed with the
// inverted element index (so all packed keys are distinct, ties go to the
// lower index, and a missing element packs to 0, below every real one);
// then k rounds each take the warp's largest head and let its lane advance.
// k dependent warp reductions instead of one per key bit, each round with a
// short dependent chain and its output written at once. For 16-bit keys
// (one reduction per round) this beat small_k's lower bound on H100, also
// with the keys packed the same way there: 16384 x 256 bf16 k = 8 8.80 us
// against 9.71.

template <class P, class Raw>
__device__ __forceinline__ void tournament(const u32 (&key)[P::kItems], const ItemMap<P>& at, int L, int k, int start,
                                           const Raw* src, int* oi, Raw* ov, bool values) {
  constexpr int I = P::kItems;
  if (Keys<P::kDtype>::kBits == 16) {
    u32 v[I];
#pragma unroll
    for (int i = 0; i < I; ++i) {
      const int e = at(i);
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
      const int e = at(i);
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

// Small k of 32-bit keys (MoE routing, k <= 8): the k-th largest lane
// maximum t is a lower bound of the threshold, since k lanes hold a key >=
// t. Usually exactly k keys reach t (43% of normal rows of 256 with k = 8:
// the top k sit in k different lanes) and they are the top-k; otherwise the
// few extra keys at or above t are dropped from below, one distinct value
// per round (0.9 rounds per row on average at that shape). The tournament
// above needs two reductions per round for 32-bit keys (key, then index)
// and a per-lane sort of 64-bit packed keys: Nsight Compute counted 610
// warp instructions per fp32 row of 256 there, 380 here; on H100 4096 x 256
// k = 8 took 4.78 us there, 4.24 us here (k = 2: 4.16 -> 2.91 us; k = 16
// was slower, 6.18 -> 7.71 us, hence the bound of 8).
template <class P, class Raw>
__device__ __forceinline__ void small_k(const u32 (&key)[P::kItems], const ItemMap<P>& at, int L, int k, int start,
                                        const Raw* src, int* oi, Raw* ov, bool values) {
  constexpr int I = P::kItems;
  const u32 uk = static_cast<u32>(k);
  // Missing elements hold key 0, the lowest key: counts at key 0 leave
  // them out, and a threshold of 0 checks validity.
  const u32 missing = static_cast<u32>(32 * I - L);
  u32 mx = key[0];
#pragma unroll
  for (int i = 1; i < I; ++i) mx = max(mx, key[i]);
  // Lanes without elements take no part; more than k lanes hold one (L > k).
  bool live = static_cast<int>(lane_id()) < L;  // item 0 is valid (the vector map takes whole rows)
  u32 taken = 0, t;
  for (;;) {
    t = __reduce_max_sync(kFullMask, live ? mx : 0u);
    const bool hit = live && mx == t;
    taken += __popc(__ballot_sync(kFullMask, hit));
    if (taken >= uk) break;
    live = live && !hit;
  }
  u32 ge = 0;
#pragma unroll
  for (int i = 0; i < I; ++i)
    if (key[i] >= t) ge |= 1u << i;
  u32 cnt = __reduce_add_sync(kFullMask, static_cast<u32>(__popc(ge))) - (t == 0 ? missing : 0u);
  // Drop: cnt keys are >= lo; the smallest value goes while k remain.
  u32 lo = t, thr = 0, need = 0;
  bool ties = false;
  while (cnt > uk) {
    u32 m = 0xffffffffu;
#pragma unroll
    for (int i = 0; i < I; ++i)
      if (key[i] >= lo) m = min(m, key[i]);
    const u32 v = __reduce_min_sync(kFullMask, m);
    u32 e = 0;
#pragma unroll
    for (int i = 0; i < I; ++i) e += key[i] == v ? 1u : 0u;
    e = __reduce_add_sync(kFullMask, e) - (v == 0 ? missing : 0u);
    if (cnt - e < uk) {  // v is the threshold: all above it, then ties
      thr = v;
      need = uk - (cnt - e);
      ties = true;
      break;
    }
    cnt -= e;
    lo = v + 1;  // no overflow: k >= 1 keys are above v
  }
  u32 sel = 0, tie = 0;
  if (!ties) {
    if (lo == t) {
      sel = ge;
    } else {
#pragma unroll
      for (int i = 0; i < I; ++i)
        if (key[i] >= lo) sel |= 1u << i;
    }
  } else {
#pragma unroll
    for (int i = 0; i < I; ++i) {
      if (key[i] > thr) sel |= 1u << i;
      else if (key[i] == thr) tie |= 1u << i;
    }
  }
  if ((ties ? thr : lo) == 0 && missing != 0) {  // key 0: real elements only
    u32 valid = 0;
#pragma unroll
    for (int i = 0; i < I; ++i)
      if (at(i) < L) valid |= 1u << i;
    sel &= valid;
    tie &= valid;
  }
  // Output slots: selected keys first, in lane order, then the ties.
  const u32 mine = (static_cast<u32>(__popc(sel)) << 16) | static_cast<u32>(__popc(tie));
  const u32 before = warp_inclusive_prefix(mine) - mine;
  u32 pos = before >> 16;
  while (sel != 0) {
    const int e = at(__ffs(sel) - 1);
    sel &= sel - 1;
    oi[pos] = start + e;
    if (values) ov[pos] = src[e];
    ++pos;
  }
  const u32 above = uk - need;
  u32 tp = before & 0xffffu;
  while (tie != 0 && tp < need) {
    const int e = at(__ffs(tie) - 1);
    tie &= tie - 1;
    oi[above + tp] = start + e;
    if (values) ov[above + tp] = src[e];
    ++tp;
  }
}

template <class P, bool kBound>
__device__ __forceinline__ void warp_rows(const TopkArgs& a) {
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
  const RowRange range = row_range(a, rowi);
  const int start = range.start, end = range.end;
  const int L = end - start;
  const Raw* src = static_cast<const Raw*>(a.input) + static_cast<long long>(rowi) * a.row_stride + start;
  int* oi = a.out_idx + static_cast<long long>(rowi) * k;
  Raw* ov = values ? static_cast<Raw*>(a.out_val) + static_cast<long long>(rowi) * k : nullptr;

  if (L <= k) {
    for (int j = lane; j < L; j += 32) {
      oi[j] = start + j;
      if (values) ov[j] = src[j];
    }
    pad_output(oi, ov, L + static_cast<int>(lane), k, 32, static_cast<Raw>(K::kLowest));
    return;
  }

  // Missing elements (short rows) get key 0; every candidate threshold of
  // the bit search is >= 1, so they are never counted, and the tie steps
  // check validity explicitly.
  const u32 flip = smallest ? (KB == 32 ? ~0u : 0xffffu) : 0u;
  constexpr int V = K::kVec;
  const ItemMap<P> at{kBound && I % V == 0 && L == 32 * I && (reinterpret_cast<unsigned long long>(src) & 15u) == 0,
                      static_cast<int>(lane)};
  u32 key[I];
  if (at.vec) {  // one 16-byte load per V items instead of V loads
    const uint4* row4 = reinterpret_cast<const uint4*>(src);
#pragma unroll
    for (int j = 0; j < I / V; ++j) {
      const uint4 q = row4[j * 32 + static_cast<int>(lane)];
      const u32 w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int c = 0; c < V; ++c)
        key[j * V + c] = K::key_flip(V == 4 ? w[c] : (w[c / 2] >> (16 * (c % 2))) & 0xffffu, flip);
    }
  } else {
#pragma unroll
    for (int i = 0; i < I; ++i) {
      const int e = i * 32 + static_cast<int>(lane);
      key[i] = e < L ? K::key_flip(src[e], flip) : 0u;
    }
  }

  if (kBound && k <= 8) {
    small_k<P>(key, at, L, k, start, src, oi, ov, values);
    return;
  }
  if (k <= 16) {
    tournament<P>(key, at, L, k, start, src, oi, ov, values);
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
    else if (!exact && key[i] == thr && at(i) < L) tie |= 1u << i;
  }
  const u32 ns = __popc(sel);
  const u32 sincl = warp_inclusive_prefix(ns);
  const u32 stotal = __shfl_sync(kFullMask, sincl, 31);
  u32 pos = sincl - ns;
#pragma unroll
  for (int i = 0; i < I; ++i)
    if ((sel >> i) & 1u) {
      const int e = at(i);
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
          const int e = at(i);
          oi[stotal + t] = start + e;
          if (values) ov[stotal + t] = src[e];
        }
        ++t;
      }
  }
}

// The variant picks the body (Policy BOUND, the warp-mode "rounds" knob):
// 0 = the strided map with the tournament (k <= 16) or the bit search;
// 1 = 32-bit keys only: vector loads of whole aligned rows and, for k <= 8,
// small_k. small_k's dependent chain is longer than the tournament's, so it
// pays off when many rows keep the SMs busy: on H100 4096 x 256 k = 8 took
// 4.30 us with it against 4.80, 16384 x 256 10.98 against 14.34, but
// 1024 x 256 3.00 against 2.66. The tuner picks per shape. 16-bit keys
// keep BOUND 0 (small_k was slower for them at every batch measured), and
// 32 items per lane spilled with small_k.
template <class P>
__device__ __forceinline__ void warp_topk(const TopkArgs& a) {
  warp_rows<P, P::kBound == 1>(a);
}

}  // namespace topk
