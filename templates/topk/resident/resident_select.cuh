// The resident family: a group of GROUP threads holds one row in registers
// (ITEMS keys per thread, element t + j * GROUP in thread t's key j), and a
// CTA of BLOCK threads serves BLOCK / GROUP rows, so short rows share a CTA.
// SHARED more keys per thread, when the registers do not hold the row, lie
// in dynamic shared memory (key ITEMS + j of thread t at word j * GROUP + t
// of its group's area), each read and written by its own thread only.
// In cluster mode (resident_cluster_kernel) a thread-block cluster splits
// one longer row over its CTAs' registers, a slice each.
//
// The k-th key is found digit by digit, 8 bits a pass from the top, over the
// registers: each pass counts the keys that still match the prefix into a
// 256-bin histogram in shared memory (one per group; in a cluster the CTAs'
// histograms are summed through distributed shared memory), and the first
// warp scans the bins for the one that holds the rank. The row is
// read from memory once, and every pass costs the same whatever the values:
// a shifted row or a few distinct values take the same passes over the same
// registers. A pass whose bin is taken whole ends the search early.
//
// The output: keys above the k-th in arrival order, then `need` keys equal
// to it: the first to arrive (any valid top-k), or with
// TOPK_FLAG_DETERMINISTIC the lowest-index ones, found by a second search
// over the ties' positions (so no tie pass runs after this family). Each
// warp reserves its slots of both kinds with one
// atomic on each of two counters (the leader's in a cluster).
#pragma once
#include "topk/args.h"
#include "topk/keys.cuh"
#include "topk/radix/cluster.cuh"
#include "topk/row.cuh"
#include "topk/types.cuh"

namespace topk {
namespace resident {

template <int DTYPE, int BLOCK, int GROUP, int ITEMS, int SHARED = 0>
struct Policy {
  static constexpr int kDtype = DTYPE;
  static constexpr int kBlock = BLOCK;
  static constexpr int kGroup = GROUP;  // threads per row
  static constexpr int kItems = ITEMS;  // keys per thread in registers
  static constexpr int kShared = SHARED;  // and in shared memory
  static constexpr int kKeys = ITEMS + SHARED;  // rows up to GROUP * kKeys
  static constexpr int kSharedBytes = BLOCK * SHARED * 4;  // dynamic, the launch's
  static constexpr int kRows = BLOCK / GROUP;
  static constexpr int kKeyBits = Keys<DTYPE>::kBits;
  static constexpr int kBins = 256;
  static constexpr int kPasses = kKeyBits / 8;
  static_assert(GROUP % 32 == 0 && GROUP >= 32 && GROUP <= BLOCK && BLOCK % GROUP == 0, "group");
  static_assert(BLOCK <= 1024, "block");
  // Groups smaller than the CTA and larger than a warp take one named
  // barrier each (ids 0..15), and every group 3 KB of static shared memory.
  static_assert(kRows <= 8, "at most 8 rows per CTA");
  static_assert(ITEMS >= 1 && ITEMS <= 32, "items");
  static_assert(SHARED >= 0 && SHARED <= 64, "shared");
};

// One group's shared state, 16-byte aligned and sized: the bins are read as
// 16-byte vectors, and a CTA's groups lie side by side.
struct __align__(16) Group {
  u32 hist[3][256];
  u32 kmin, kmax;  // the extremes of the keys in the bin found by pass 1 (this CTA's)
  u32 cmin, cmax;  // and the cluster's (cmin: in window_rank, one CTA, the group's least key)
  u32 prefix;  // the searched key's digits found so far
  u32 need;    // keys equal to the prefix (at the current depth) still to take
  u32 in_bin;  // keys equal to the prefix at the current depth
  u32 lonely;  // both bins beside that one are empty
  u32 above;   // output slots reserved for keys above the k-th
  u32 ties;    // and for keys equal to it
  u32 wmax;    // the group's largest key (window_rank)
  u32 nlist;   // keys gathered by small_bin_rank
};
static_assert(sizeof(Group) % 16 == 0 && sizeof(Group) == 3120, "group layout (generator/resident.cpp has its size)");

// The group's barrier: the CTA's when the group is the CTA, the warp's when
// it is one warp, else named barrier `id` over GROUP threads.
template <class P>
__device__ __forceinline__ void group_sync(int id) {
  if (P::kGroup == P::kBlock) {
    __syncthreads();
  } else if (P::kGroup == 32) {
    __syncwarp();
  } else {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "n"(P::kGroup) : "memory");
  }
}

// TOPK_STOP_AT=N (a development define, topk-probe --define) returns at
// phase boundary N for phase timings (one CTA per row only): 1 row loaded,
// 3 the k-th key found (no output written). The keys feed a store that never
// happens, so the loads stay.
#ifdef TOPK_STOP_AT
#define TOPK_RESIDENT_STOP(n)                                            \
  if (TOPK_STOP_AT == (n)) {                                             \
    u32 sink = prefix;                                                   \
    for (int j_ = 0; j_ < I; ++j_) sink ^= key[j_];                      \
    if (sink == 0x7fc0ffeeu) out_idx[0] = static_cast<int>(sink);        \
    return;                                                              \
  }
#else
#define TOPK_RESIDENT_STOP(n) (void)0
#endif

// 0: window_rank's 16 bits whatever the keys' span (development A/B,
// topk-probe --define TOPK_RESIDENT_SPAN_WINDOW=0).
#ifndef TOPK_RESIDENT_SPAN_WINDOW
#define TOPK_RESIDENT_SPAN_WINDOW 1
#endif

// A bin of the one-value check (find_rank, window_rank): at least this many
// keys, with empty bins beside it.
constexpr u32 kHeavyBin = 32;

// The key of rank *need_io (1 = largest) among the at most 32 keys keyof(j)
// (items with take(j)) whose bits from `lo` up equal *prefix_io's, one
// group's (C = 1): they are gathered into `list` (a histogram buffer no pass
// has in use) and the first warp ranks them among themselves, where the
// digit passes below `lo` took two barriers each. On return *prefix_io is
// that key, *need_io its rank among its ties, *lo_out 0; the result is the
// count of those ties. g->nlist is zero on entry and on return. Two
// barriers.
template <class P, class KeyOf, class Take>
__device__ __forceinline__ u32 small_bin_rank(KeyOf keyof, Take take, Group* g, int gid, int t, u32* list, int lo,
                                              u32* prefix_io, u32* need_io, int* lo_out) {
  constexpr int I = P::kKeys;
  const u32 top = *prefix_io >> lo;
#pragma unroll
  for (int j = 0; j < I; ++j)
    if (take(j) && (keyof(j) >> lo) == top) list[atomicAdd(&g->nlist, 1u)] = keyof(j);
  group_sync<P>(gid);
  if (t < 32) {
    const u32 lane = lane_id(), n = g->nlist, need = *need_io;
    const u32 v = lane < n ? list[lane] : 0u;
    const WarpRank w = warp_rank(v, n);
    // Every lane holding the key qualifies; the lowest one writes.
    const u32 m = __ballot_sync(kFullMask, lane < n && w.above < need && need <= w.above + w.equal);
    if (m != 0 && lane == static_cast<u32>(__ffs(m) - 1)) g->prefix = v, g->need = need - w.above, g->in_bin = w.equal;
    if (lane == 0) g->nlist = 0;  // every lane has read it (the shuffles above)
  }
  group_sync<P>(gid);
  *prefix_io = g->prefix;
  *need_io = g->need;
  *lo_out = 0;
  return g->in_bin;
}

// The key of rank `*need` (1 = largest) among the group's keys keyof(j) of
// the items j for which take(j) holds (in a cluster: among the cluster's),
// BITS wide, found 8 bits a pass from the top. On return *prefix holds its
// digits down to bit *lo (lower bits zero) and *need how many keys equal to
// it at that depth rank at or above the rank; the result is how many keys
// are equal to it at that depth. *q counts the passes run so far: the
// histogram buffers rotate over them (pass p on buffer (*q + p) % 3), and
// the caller clears buffer (*q + FIRST) % 3 before the first call (each
// pass clears the next). FIRST > 0 starts at that pass, the digits above it
// already in *prefix_io (window_rank's 16 bits: FIRST 2). Every thread of
// the group calls it.
//
// Two barriers a pass: the histogram is complete (over the cluster: a
// cluster barrier, whose release / acquire orders the remote reads), then
// the first warp has found the bin; in a cluster every CTA's first warp sums
// the CTAs' histograms and finds the same bin. (Every warp scanning the bins
// itself, to save the second barrier, measured 30% slower on the H100: 32
// warps reading 1 KB each cost more than the barrier.) Three buffers: the one
// cleared for the next pass was last read (by any CTA) before this CTA
// passed the previous pass's first barrier.
//
// With ONE_VALUE (32-bit keys), when the bin pass 1 found holds at least
// kHeavyBin keys and both bins beside it are empty (continuous values fill
// those: a normal row's k-th bin holds a few dozen keys there, a shifted
// row's thousands, but with neighbours), one more sweep over the registers
// finds the bin's smallest and largest key (a warp reduction and one shared
// atomic of each per warp, merged over the cluster by every CTA's first
// warp, two barriers): if they are equal the search ends at bit 0. On a row
// of few distinct values the k-th key's bin holds many copies of it at
// every depth, so no bin is taken whole, and without this passes 2 and 3
// run, each adding all of those keys to one bin. kHeavyBin is 32, not
// the 256 it was: 64 x 4096 k128 on 16 values (about 256 copies of each,
// so about half the rows fell below 256 and ran all four passes) took 6.19
// us against 4.86 (H100, docs/PERFORMANCE.md, "Shorter chains").
//
// In a cluster of more than two CTAs (`part`: kParts x 256 words of this
// CTA's shared memory, kParts = GROUP / 256) a third barrier splits the
// sum: thread t first adds bin t % 256 over CTAs t / 256, + kParts, ...
// (their remote loads in flight together) into part, and the first warp
// then adds kParts local partial sums per bin instead of waiting on two
// remote loads per CTA, one CTA after another.
template <class P, int C, int BITS, bool ONE_VALUE, int FIRST = 0, class KeyOf, class Take>
__device__ __forceinline__ u32 find_rank(KeyOf keyof, Take take, Group* g, u32* part, int gid, int t, int* q,
                                         u32* prefix_io, u32* need_io, int* lo_out) {
  using CL = Cluster<C>;
  constexpr int G = P::kGroup, I = P::kKeys;
  constexpr int kParts = C != 1 && G >= 256 ? G / 256 : 0;
  constexpr int kPerThread = kParts > 0 ? 16 / kParts : 0;  // CTAs a thread sums (clusters of at most 16)
  const u32 lane = lane_id(), csize = CL::size();
  const bool split = kParts > 0 && csize > 2;
  u32 prefix = *prefix_io, need = *need_io, in_bin = 0;
  int lo = BITS;
#pragma unroll
  for (int pass = FIRST; pass < BITS / 8; ++pass) {
    const int hi = BITS - 8 * pass;
    lo = hi - 8;
    u32* h = g->hist[(*q + pass) % 3];
    for (int b = t; b < P::kBins; b += G) g->hist[(*q + pass + 1) % 3][b] = 0;
#pragma unroll
    for (int j = 0; j < I; ++j)
      if (take(j) && (pass == 0 || (keyof(j) >> hi) == (prefix >> hi))) atomicAdd(&h[(keyof(j) >> lo) & 0xffu], 1u);
    if (C != 1) CL::sync();
    else group_sync<P>(gid);
    if (kParts > 0 && split) {
      const u32 b = static_cast<u32>(t) & 255u, p0 = static_cast<u32>(t) >> 8;
      u32 sum = 0;
#pragma unroll
      for (int u0 = 0; u0 < kPerThread; u0 += 4) {
        u32 v[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const u32 r = p0 + static_cast<u32>((u0 + e) * kParts);
          v[e] = u0 + e < kPerThread && r < csize ? CL::load(CL::map(h + b, r)) : 0u;
        }
        sum += v[0] + v[1] + v[2] + v[3];
      }
      part[p0 * 256 + b] = sum;
      group_sync<P>(gid);
    }
    if (t < 32) {
      // Lane l scans bins 255 - 8 l down to 248 - 8 l (of every CTA, or of
      // the partial sums).
      u32 c[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      if (kParts > 0 && split) {
#pragma unroll
        for (int pp = 0; pp < (kParts > 0 ? kParts : 1); ++pp) {
          const uint4* v = reinterpret_cast<const uint4*>(part + pp * 256 + 248 - 8 * lane);
          const uint4 q1 = v[1], q0 = v[0];
          c[0] += q1.w, c[1] += q1.z, c[2] += q1.y, c[3] += q1.x;
          c[4] += q0.w, c[5] += q0.z, c[6] += q0.y, c[7] += q0.x;
        }
      } else {
        const u32 at = smem_addr(h + 248 - 8 * lane);
        for (u32 r = 0; r < csize; ++r) {
          const u32 ra = C != 1 ? CL::map(h + 248 - 8 * lane, r) : at;
          const uint4 q1 = CL::load4(ra + 16), q0 = CL::load4(ra);
          c[0] += q1.w, c[1] += q1.z, c[2] += q1.y, c[3] += q1.x;
          c[4] += q0.w, c[5] += q0.z, c[6] += q0.y, c[7] += q0.x;
        }
      }
      u32 bin, cnt, left;
      if (rank_bin(c, lane, need, &bin, &cnt, &left)) {  // exactly one lane: need <= the total
        g->prefix = prefix | (bin << lo);
        g->need = left;
        g->in_bin = cnt;
        if (ONE_VALUE && pass == 1) {
          // A bin's count over the cluster (rarely needed: one lane, heavy bins).
          auto count_at = [&](u32 b) -> u32 {
            u32 n = 0;
            if (C == 1) {
              n = h[b];
            } else if (kParts > 0 && split) {
              for (int pp = 0; pp < (kParts > 0 ? kParts : 1); ++pp) n += part[pp * 256 + static_cast<int>(b)];
            } else {
              for (u32 r = 0; r < csize; ++r) n += CL::load(CL::map(h + b, r));
            }
            return n;
          };
          g->lonely = cnt >= kHeavyBin && (bin == 255u || count_at(bin + 1) == 0) && (bin == 0u || count_at(bin - 1) == 0);
        }
      }
    }
    group_sync<P>(gid);
    prefix = g->prefix;
    need = g->need;
    in_bin = g->in_bin;
    if (in_bin == need) {  // the bin is taken whole: the search ends
      *q += pass + 1;
      *prefix_io = prefix, *need_io = need, *lo_out = lo;
      return in_bin;
    }
    // A heavy bin with empty bins beside it: if all its keys are one value,
    // that value is the k-th key.
    if (ONE_VALUE && pass == 1 && pass + 1 < BITS / 8 && g->lonely) {
      u32 mn = ~0u, mx = 0u;
      auto extremes = [&](int j) {
        const u32 kj = keyof(j);
        if (take(j) && (kj >> lo) == (prefix >> lo)) mn = min(mn, kj), mx = max(mx, kj);
      };
#pragma unroll
      for (int j = 0; j < I; ++j) extremes(j);
      mn = __reduce_min_sync(kFullMask, mn);
      mx = __reduce_max_sync(kFullMask, mx);
      if (lane == 0) atomicMin(&g->kmin, mn), atomicMax(&g->kmax, mx);
      if (C != 1) {
        // Every CTA's first warp merges the cluster's extremes: lane r reads CTA r's.
        CL::sync();
        if (t < 32) {
          mn = lane < csize ? CL::load(CL::map(&g->kmin, lane)) : ~0u;
          mx = lane < csize ? CL::load(CL::map(&g->kmax, lane)) : 0u;
          mn = __reduce_min_sync(kFullMask, mn);
          mx = __reduce_max_sync(kFullMask, mx);
          if (lane == 0) g->cmin = mn, g->cmax = mx;
        }
        group_sync<P>(gid);
        mn = g->cmin, mx = g->cmax;
      } else {
        group_sync<P>(gid);
        mn = g->kmin, mx = g->kmax;
      }
      if (mn == mx) {
        *q += pass + 1;
        *prefix_io = mn, *need_io = need, *lo_out = 0;
        return in_bin;
      }
    }
  }
  *q += BITS / 8;
  *prefix_io = prefix, *need_io = need, *lo_out = lo;
  return in_bin;
}

// The first 16 bits of the key of rank *need (1 = largest) among the
// group's 32-bit keys keyof(j) of the items j with take(j), in one pass
// where the 8-bit passes 1 and 2 take two: the group's largest key (a warp
// reduction and a shared atomic per warp), then one 256-bin histogram of the
// keys' top 16 bits over the 256 values of those bits up to the largest's
// (a normal row's top 1/32 lies within two binades of its largest key).
// In a group of at most 8192 keys where every key lies within 2^23 of the
// largest (the group's least key comes with its largest, in the same
// barrier), the window narrows to the
// keys' span: bits from `shift` = the span's width less 8 up, so that the
// 256 bins cover the span (a row of normal + 100 lies within 2^20 keys,
// where 16 bits put a few hundred keys in the k-th key's bin and two more
// digit passes ran; with the span, a few, as on a normal row).
// It uses hist[0] and clears hist[1], and sets *q = 1 (hist[1] the next
// buffer; a digit pass after it, the third, starts from *q = 2). Returns
// false when those bins hold fewer than *need keys. Otherwise *prefix_io
// holds the key's bits from `shift` up (lower bits zero), *need_io the rank
// within them, *lo_out `shift` (16 unless the span narrowed it) and *in_bin
// their count; or, when those keys are all one value (a bin of at least 32
// keys with empty bins beside it, checked as find_rank does after its
// second pass), that value with *lo_out 0. One group (C = 1); hist[0] zero,
// g->wmax 0 and g->cmin ~0 on entry, behind a group barrier.
template <class P, class KeyOf, class Take>
__device__ __forceinline__ bool window_rank(KeyOf keyof, Take take, Group* g, int gid, int t, int* q, u32* prefix_io,
                                            u32* need_io, int* lo_out, u32* in_bin) {
  constexpr int G = P::kGroup, I = P::kKeys;
  const u32 lane = lane_id();
  // The span's window for groups of at most 8192 keys: on longer rows a
  // bin of the span held more than 32 keys of a shifted row, and the passes
  // below it cost more than the 16-bit window's (H200, 16 x 16384 k512,
  // shifted 13.05 -> 13.75 us, normal 11.72 -> 11.93).
  constexpr bool kSpan = TOPK_RESIDENT_SPAN_WINDOW && G * I <= 8192;
  u32 m = 0, mn = ~0u;
#pragma unroll
  for (int j = 0; j < I; ++j)
    if (take(j)) m = max(m, keyof(j)), mn = kSpan ? min(mn, keyof(j)) : mn;
  m = __reduce_max_sync(kFullMask, m);
  if (lane == 0 && m != 0) atomicMax(&g->wmax, m);
  if constexpr (kSpan) {
    mn = __reduce_min_sync(kFullMask, mn);
    if (lane == 0 && mn != ~0u) atomicMin(&g->cmin, mn);  // the group's least key
  }
  for (int b = t; b < P::kBins; b += G) g->hist[1][b] = 0;
  group_sync<P>(gid);
  const u32 wmax = g->wmax, wmin = g->cmin;
  // 16, or the span's width less 8 where that is smaller (one more bit
  // when the span's ends fall 256 bins apart), the same in every thread.
  int shift = 16;
  if (kSpan && wmin <= wmax && wmax - wmin < (1u << 23)) {
    const int bits = 32 - __clz(wmax - wmin);
    shift = bits > 8 ? bits - 8 : 0;
    if ((wmax >> shift) - (wmin >> shift) > 255u) ++shift;
  }
  const u32 top = wmax >> shift;
  u32* h = g->hist[0];
#pragma unroll
  for (int j = 0; j < I; ++j) {
    const u32 d = top - (keyof(j) >> shift);
    if (take(j) && d < 256u) atomicAdd(&h[255u - d], 1u);
  }
  group_sync<P>(gid);
  const u32 need = *need_io;
  if (t < 32) {
    if (t == 0) g->in_bin = 0;
    __syncwarp();
    const uint4* v = reinterpret_cast<const uint4*>(h + 248 - 8 * lane);
    const uint4 q1 = v[1], q0 = v[0];
    const u32 c[8] = {q1.w, q1.z, q1.y, q1.x, q0.w, q0.z, q0.y, q0.x};
    u32 bin, cnt, left;
    if (rank_bin(c, lane, need, &bin, &cnt, &left)) {  // at most one lane
      g->prefix = (top - (255u - bin)) << shift;
      g->need = left;
      g->in_bin = cnt;
      g->lonely = cnt >= kHeavyBin && bin != 0u && (bin == 255u || h[bin + 1] == 0) && h[bin - 1] == 0;
    }
  }
  group_sync<P>(gid);
  const u32 cnt = g->in_bin;
  *q = 1;
  if (cnt == 0) return false;  // fewer than `need` keys in the window
  u32 prefix = g->prefix;
  *need_io = g->need;
  *in_bin = cnt;
  *prefix_io = prefix;
  *lo_out = shift;
  if (cnt != *need_io && g->lonely) {
    // A heavy bin with empty bins beside it: one value?
    u32 mx = 0u;
    mn = ~0u;
#pragma unroll
    for (int j = 0; j < I; ++j) {
      const u32 kj = keyof(j);
      if (take(j) && (kj >> shift) == (prefix >> shift)) mn = min(mn, kj), mx = max(mx, kj);
    }
    mn = __reduce_min_sync(kFullMask, mn);
    mx = __reduce_max_sync(kFullMask, mx);
    if (lane == 0) atomicMin(&g->kmin, mn), atomicMax(&g->kmax, mx);
    group_sync<P>(gid);
    mn = g->kmin, mx = g->kmax;
    if (mn == mx) {
      *prefix_io = mn;
      *lo_out = 0;
    }
  }
  return true;
}

// One row: the whole of it in this group's registers (C = 1), or this CTA's
// slice of it, the row split over the thread-block cluster (C = 2, any
// size from the launch: one group per CTA, histograms summed over the cluster
// through distributed shared memory).
template <class P, int C>
__device__ void select_row(const TopkArgs& a, int rowi, int gid, int t, Group* g, u32* sk, u32* part) {
  using CL = Cluster<C>;
  using K = Keys<P::kDtype>;
  using Raw = typename K::Raw;
  constexpr int G = P::kGroup, I = P::kItems, N = P::kKeys, KB = P::kKeyBits;
  constexpr bool kClustered = C != 1;
  const bool values = (a.flags & TOPK_FLAG_VALUES) != 0 && a.out_val != nullptr;
  const int k = a.k;
  const u32 flip = (a.flags & TOPK_FLAG_SMALLEST) ? (KB == 32 ? ~0u : 0xffffu) : 0u;
  const Raw* row = static_cast<const Raw*>(a.input) + static_cast<long long>(rowi) * a.row_stride;
  int* out_idx = a.out_idx + static_cast<long long>(rowi) * k;
  Raw* out_val = values ? static_cast<Raw*>(a.out_val) + static_cast<long long>(rowi) * k : nullptr;
  const RowRange range = row_range(a, rowi);
  const int L = range.end - range.start;
  const u32 rank = CL::rank(), csize = CL::size();
  if (L <= k) {
    // No shared memory is touched: the cluster's CTAs may simply leave.
    if (rank == 0) take_whole_range(row, range, out_idx, out_val, t, G, k, static_cast<Raw>(K::kLowest));
    return;
  }
  // This CTA's slice; the host checks n <= cluster x GROUP x (ITEMS +
  // SHARED), so a longer range is a host bug.
  const int S = (L + static_cast<int>(csize) - 1) / static_cast<int>(csize);
  if (S > G * N || csize > 16) __trap();  // find_rank sums at most 16 CTAs
  const int s0 = static_cast<int>(rank) * S;
  const int len = L - s0 < S ? (L - s0 > 0 ? L - s0 : 0) : S;

  const Raw* base = row + range.start + s0;
  // Deterministic mode compares values as the contract does (-0.0 equal to
  // +0.0, every NaN equal): canonical bits before the key.
  const bool det = (a.flags & TOPK_FLAG_DETERMINISTIC) != 0;
  auto load = [&](int j) -> u32 {
    const int i = t + j * G;
    const u32 raw = i < len ? static_cast<u32>(base[i]) : 0u;
    return i < len ? K::key_flip(det ? K::canonical(raw) : raw, flip) : 0u;
  };
  u32 key[I];
#pragma unroll
  for (int j = 0; j < I; ++j) key[j] = load(j);
  // The shared-memory keys, 8 a thread between stores; read-only loads
  // (ld.global.nc), which the compiler may move past the shared stores.
#pragma unroll
  for (int j0 = I; j0 < N; j0 += 8) {
    u32 v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int i = t + (j0 + e) * G;
      if (j0 + e < N) {
        const u32 raw = i < len ? static_cast<u32>(__ldg(base + i)) : 0u;
        v[e] = i < len ? K::key_flip(det ? K::canonical(raw) : raw, flip) : 0u;
      }
    }
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (j0 + e < N) sk[(j0 + e - I) * G + t] = v[e];
  }
  // Key j: a register (j < ITEMS, a constant once unrolled) or shared memory.
  auto kv = [&](int j) -> u32 { return j < I ? key[j < I ? j : 0] : sk[(j - I) * G + t]; };
  const u32 lane = lane_id();
  u32 prefix = 0, need = static_cast<u32>(k);
  if (!kClustered) TOPK_RESIDENT_STOP(1);
  if (t == 0) {
    g->above = 0;
    g->ties = 0;
  }
  for (int b = t; b < P::kBins; b += G) g->hist[0][b] = 0;
  if (t == 0) g->kmin = ~0u, g->kmax = 0u, g->cmin = ~0u, g->wmax = 0u, g->nlist = 0u;
  group_sync<P>(gid);

  // The k-th key, and in deterministic mode, when more keys equal it than
  // the k need, the index below which the lowest-index `need` of them lie
  // (a second search over their positions, larger key for a lower index).
  int q = 0, lo = 0;
  auto valid = [&](int j) { return t + j * G < len; };
  u32 in_bin = 0;
  // One CTA, 32-bit keys, k at most 1/32 of the row: the first 16 bits in
  // one pass (window_rank), the digit passes after them (or from the start
  // where the window misses). H100, 64 rows, ranges, us, before / after:
  // 4096 k128 normal 5.07 / 4.69, shifted 5.87 / 5.42, 16 values 4.87 /
  // 4.41, plateau 5.02 / 4.66; 8192 k256 7.74 / 7.24; 2048 k64 4.21 /
  // 3.78. At k n / 8 (4096 k512) 5.11 / 6.02: a row of 64 whose largest
  // key lies over two binades above its k-th misses the window and pays
  // it and every digit pass.
  bool windowed = false;
  if constexpr (!kClustered && KB == 32) {
    if (32LL * k <= L) {
      windowed = window_rank<P>(kv, valid, g, gid, t, &q, &prefix, &need, &lo, &in_bin);
      if (windowed && lo != 0 && in_bin != need) {
        if (in_bin <= 32) {
          // A normal row's bin of 16 bits holds a few keys: one warp ranks
          // them, where two digit passes took four barriers (H100, 64 rows,
          // ranges: 4096 k128 4.67 -> 4.46 us, 8192 k256 7.29 -> 6.49,
          // 2048 k64 3.79 -> 3.60).
          in_bin = small_bin_rank<P>(kv, valid, g, gid, t, g->hist[2], lo, &prefix, &need, &lo);
        } else if (lo == 16) {
          q = 2;  // the third pass on hist[1]
          in_bin = find_rank<P, C, KB, true, 2>(kv, valid, g, part, gid, t, &q, &prefix, &need, &lo);
        } else {
          // A narrow span's bin of more keys, not one value: the digit
          // passes over the bits below the window's, moved to the top of
          // the key (the bin's keys only; the rank is the bin's, q = 1 and
          // hist[1] clear), the one-value check's extremes reset once
          // every thread has read them.
          group_sync<P>(gid);
          if (t == 0) g->kmin = ~0u, g->kmax = 0u;
          const int up = 32 - lo;
          const u32 bin = prefix >> lo;
          u32 low = 0;
          int low_lo = 0;
          in_bin = find_rank<P, C, KB, true>([&](int j) { return kv(j) << up; },
                                             [&](int j) { return valid(j) && (kv(j) >> lo) == bin; }, g, part, gid,
                                             t, &q, &low, &need, &low_lo);
          prefix |= low >> up;
          lo = low_lo > up ? low_lo - up : 0;
        }
      }
    }
  }
  if (!windowed) in_bin = find_rank<P, C, KB, true>(kv, valid, g, part, gid, t, &q, &prefix, &need, &lo);
  if (!kClustered) TOPK_RESIDENT_STOP(3);
  const bool pick = det && in_bin > need;  // then lo == 0
  constexpr int IB = kClustered ? 24 : 16;  // position bits: rows up to 2^24 (cluster) or 2^16
  static_assert(kClustered || G * N <= (1 << 16), "one CTA's row positions fit 16 bits");
  constexpr u32 kPosTop = (1u << IB) - 1u;
  u32 iprefix = 0;
  int ilo = 0;
  if (pick) {
    u32 ineed = need;
    find_rank<P, C, IB, false>([&](int j) { return kPosTop - static_cast<u32>(s0 + t + j * G); },
                        [&](int j) { return t + j * G < len && kv(j) == prefix; }, g, part, gid, t, &q, &iprefix,
                        &ineed, &ilo);
  }
  // A tie is taken unless positions are picked and it lies beyond them.
  auto taken = [&](int j) {
    return !pick || ((kPosTop - static_cast<u32>(s0 + t + j * G)) >> ilo) >= (iprefix >> ilo);
  };

  // Keys whose top KB - lo bits exceed the prefix's are above the k-th;
  // `need` of those equal to it complete the k. Each warp reserves its slots
  // of both kinds with one atomic each on the (leader's) counters.
  const u32 T = prefix >> lo;
  const int above = k - static_cast<int>(need);
  u32 na = 0, nt = 0;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    if (t + j * G >= len) continue;
    const u32 kk = kv(j) >> lo;
    na += kk > T ? 1u : 0u;
    nt += kk == T && taken(j) ? 1u : 0u;
  }
  const u32 mine = na | (nt << 16);  // a warp holds at most 32 x 96 of each
  const u32 incl = warp_inclusive_prefix(mine);
  const u32 total = __shfl_sync(kFullMask, incl, 31);
  u32 got = 0;
  if (lane == 31 && (total & 0xffffu) != 0) got = CL::atomic_add(CL::map(&g->above, 0), total & 0xffffu);
  if (lane == 30 && (total >> 16) != 0) got = CL::atomic_add(CL::map(&g->ties, 0), total >> 16);
  const u32 before = incl - mine;
  int pa = static_cast<int>(__shfl_sync(kFullMask, got, 31) + (before & 0xffffu));
  int pt = static_cast<int>(__shfl_sync(kFullMask, got, 30) + (before >> 16));
  // The leader's counters are not touched after this.
  CL::arrive_relaxed();
#pragma unroll
  for (int j = 0; j < N; ++j) {
    const int i = t + j * G;
    if (i >= len) continue;
    const u32 kk = kv(j) >> lo;
    int pos = -1;
    if (kk > T) {
      pos = pa++;
    } else if (kk == T && taken(j)) {
      if (pt < static_cast<int>(need)) pos = above + pt;
      ++pt;
    }
    if (pos >= 0) {
      out_idx[pos] = range.start + s0 + i;
      if (values) out_val[pos] = base[i];
    }
  }
  // No CTA leaves while another may still read its histograms or count on
  // the leader's counters.
  CL::wait();
}

}  // namespace resident

template <class P>
__global__ void __launch_bounds__(P::kBlock, 1) resident_kernel(TopkArgs a) {
  await_prior_grids();
  __shared__ __align__(16) resident::Group groups[P::kRows];
  extern __shared__ __align__(16) u32 resident_keys[];  // P::kSharedBytes
  const int gid = static_cast<int>(threadIdx.x) / P::kGroup;
  const int t = static_cast<int>(threadIdx.x) % P::kGroup;
  const int rowi = static_cast<int>(blockIdx.x) * P::kRows + gid;
  if (rowi >= a.batch) return;  // whole groups: no barrier waits on them
  resident::select_row<P, 1>(a, rowi, gid, t, &groups[gid], resident_keys + gid * P::kGroup * P::kShared, nullptr);
}

// Cluster mode: a thread-block cluster per row (its size from the launch, so
// one binary serves 2 to 16), one group of BLOCK threads per CTA.
template <class P>
__global__ void __launch_bounds__(P::kBlock, 1) resident_cluster_kernel(TopkArgs a) {
  await_prior_grids();
  static_assert(P::kGroup == P::kBlock, "cluster mode: one group per CTA");
  __shared__ __align__(16) resident::Group group;
  __shared__ __align__(16) u32 part[P::kBlock >= 256 ? P::kBlock : 256];  // find_rank's partial sums
  extern __shared__ __align__(16) u32 resident_keys[];  // P::kSharedBytes
  const int rowi = static_cast<int>(blockIdx.x / Cluster<2>::size());
  if (rowi >= a.batch) return;  // whole clusters
  resident::select_row<P, 2>(a, rowi, 0, static_cast<int>(threadIdx.x), &group, resident_keys, part);
}

}  // namespace topk
