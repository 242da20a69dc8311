// The filter family: one CTA per row reads the row once, keeping in shared
// memory every element whose key is above a running threshold; when the
// candidate list would overflow, an exact select cuts it back to k and the
// threshold rises to the k-th key. A last exact select leaves the top k.
//
// The threshold is a key, not a digit of it, so a shifted distribution or
// a few distinct values cost what normal data costs: the expected number of
// elements that enter the list is about k ln(n / k) whatever the values
// (the running-threshold idea of DeepSeek's DeepSelect, in our own code).
// Exact always: the list holds every element seen with a key above the
// threshold and, since the last cut, exactly k at or above it; ties at the
// k-th key are cut by arrival, which any valid top-k allows.
//
// With the `guess` knob (TopkArgs::rounds = 1; for the tests, 2 guesses
// too high on purpose and 3 streams without barriers whatever the sample;
// one CTA per row has no other use for it)
// the stream does not start open: one 16-byte vector per thread, taken in
// runs of a warp's 32 consecutive vectors evenly spaced over the row, is a
// sample of S keys whose rank k S / L (plus 4.5
// standard deviations and three) gives a starting threshold a little below
// the k-th key, so the list fills with about that many times L / S keys
// and the large first cuts of an open start are skipped. A guessed start
// streams the row without a barrier or a cut: the threshold stays, every
// warp appends its survivors through one shared counter, and a last select
// leaves the top k. Should fewer than k keys pass the guess (a rare sample),
// the row is read again from an open start; should more pass than the list
// holds (rows of few distinct values, or a list of few threads), again from
// the k-th key of those it kept: exact either way.
#pragma once
#include "topk/args.h"
#include "topk/block_scan.cuh"
#include "topk/keys.cuh"
#include "topk/row.cuh"
#include "topk/swar.cuh"
#include "topk/types.cuh"

namespace topk {
namespace filter {

// TOPK_STOP_AT=N (a development define, topk-probe --define) returns at
// phase boundary N for phase timings; the output is then incomplete. One
// CTA per row: 0 set up, 1 guess selected, 2 row streamed (the list's count known),
// 4 the last cut's threshold found (nothing placed), 3 the last cut done (no
// output written; with TOPK_FILTER_DIRECT_OUT a last cut writes the output,
// so stop 3 is then the whole kernel). Cluster mode: filter_cluster.cuh.
#ifdef TOPK_STOP_AT
#define TOPK_FILTER_STOP(n) \
  if (TOPK_STOP_AT == (n)) return
#else
#define TOPK_FILTER_STOP(n) (void)0
#endif

// The 16-bit stream's survivors found two a word (RowFilter::append_step16)
// against every threshold key but the largest; 1 only against keys at or
// above +0.0's, 0 the scalar test of every element (development A/B,
// topk-probe --define TOPK_FILTER_SWAR16=0 or 1).
#ifndef TOPK_FILTER_SWAR16
#define TOPK_FILTER_SWAR16 2
#endif

// The guess's sample is taken in runs of this many consecutive 16-byte
// vectors, evenly spaced over the row (1: single vectors; development A/B,
// topk-probe --define TOPK_FILTER_SAMPLE_RUN=1).
#ifndef TOPK_FILTER_SAMPLE_RUN
#define TOPK_FILTER_SAMPLE_RUN 32
#endif

// 0: the guess's c + 2 sqrt(c) test for every row (development A/B,
// topk-probe --define TOPK_FILTER_TIE_MARGIN=0; RowFilter::guess).
#ifndef TOPK_FILTER_TIE_MARGIN
#define TOPK_FILTER_TIE_MARGIN 1
#endif

// 16-bit keys and several rows per CTA: the guess's select takes digits of
// the key's offset over the sample's span, ceil(11 / radix) passes where
// the warps' floor narrows it, else ceil(16 / radix) (0: the select of the
// top 22 bits of the key, min(ceil(22 / radix), the key's passes), which
// the one-row fp32 kernels keep; development A/B, topk-probe --define
// TOPK_FILTER_GUESS_SPAN=0; RowFilter::select_guess_span).
#ifndef TOPK_FILTER_GUESS_SPAN
#define TOPK_FILTER_GUESS_SPAN 1
#endif

// 16-bit keys and several rows per CTA: the cut's select ends with a rank
// count among the keys of the k-th key's bin once that bin holds at most
// 32 keys (0: digit passes to the end; development A/B, topk-probe --define
// TOPK_FILTER_CUT_FINISH=0; select_rank_span).
#ifndef TOPK_FILTER_CUT_FINISH
#define TOPK_FILTER_CUT_FINISH 1
#endif

// The last cut writes the row's output from its registers (1), or places
// the top k in the list and a loop after a barrier copies them out (0;
// development A/B, topk-probe --define TOPK_FILTER_DIRECT_OUT=0).
#ifndef TOPK_FILTER_DIRECT_OUT
#define TOPK_FILTER_DIRECT_OUT 1
#endif

// The guess's sample is loaded before the body's first step by kernels of
// one CTA an SM (1), or after it (0; development A/B, topk-probe --define
// TOPK_FILTER_SAMPLE_FIRST=0). Two CTAs an SM keep it after: 256 x 128256
// k1024 46.82 us with it first against 46.56 (H200), where the other
// CTA's stream hides the wait.
#ifndef TOPK_FILTER_SAMPLE_FIRST
#define TOPK_FILTER_SAMPLE_FIRST 1
#endif

// A variant's code shape. The candidate capacity is a launch argument
// (TopkArgs::buffer); the host checks k + kRoom <= capacity <= kMaxItems *
// kGroup (kRoom: kTile, or one load a thread where kTile is the whole
// list). ROWS rows per CTA (one CTA per row only): each row a group of
// BLOCK / ROWS threads with its own list, histogram and named barrier.
// CTAS: CTAs an SM the one-CTA kernel is compiled to hold (2 caps a
// 512-thread kernel at 64 registers, so that two rows share an SM).
template <int DTYPE, int BLOCK, int UNROLL, int RADIX, int ROWS = 1, int CTAS = 1>
struct Policy {
  static constexpr int kDtype = DTYPE;
  static constexpr int kBlock = BLOCK;
  static constexpr int kRows = ROWS;
  // CTAs an SM the kernel is compiled to hold (__launch_bounds__).
  static constexpr int kCtas = CTAS;
  static constexpr int kGroup = BLOCK / ROWS;  // threads per row
  static constexpr int kUnroll = UNROLL;     // 16-byte loads per thread per tile
  static constexpr int kRadix = RADIX;      // digit width of the in-list select
  static constexpr int kVec = Keys<DTYPE>::kVec;
  static constexpr int kTile = kGroup * kVec * UNROLL;  // elements per step of the row
  // A step as large as the whole list (16-bit keys at 1024 threads and two
  // loads a thread): a stream with cuts makes room for it one 16-byte load a
  // thread at a time, kRoom elements each, so that k + kRoom, not k + kTile,
  // must fit the list. Other kernels make room for whole steps (splitting
  // theirs as well cost the fp32 1024-thread kernels 96 bytes of stack).
  static constexpr bool kStepInParts = kTile >= TOPK_FILTER_MAX_ITEMS * kGroup;
  static constexpr int kRoom = kStepInParts ? kGroup * kVec : kTile;
  static constexpr int kKeyBits = Keys<DTYPE>::kBits;
  static constexpr int kBins = 1 << RADIX;
  static constexpr int kPasses = (kKeyBits + RADIX - 1) / RADIX;
  // Candidates each thread holds in registers while the list is cut.
  static constexpr int kMaxItems = TOPK_FILTER_MAX_ITEMS;
  // Dynamic shared memory before the candidate list: the histogram.
  static constexpr int kHistSmem = kBins * 4;
  static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "block size");
  // Named barriers 1..ROWS (0 is the CTA's).
  static_assert(ROWS >= 1 && ROWS <= 8 && BLOCK % ROWS == 0 && kGroup % 32 == 0 && kGroup >= 64, "rows per CTA");
  static_assert(RADIX == 8 || RADIX == 11, "digit width");
  static_assert(CTAS >= 1 && BLOCK * CTAS <= 2048, "CTAs an SM");
};

// Dynamic shared memory of a launch with `capacity` candidates (the host
// computes the same, generator/filter.cpp): a row's histogram and list, and
// with several rows per CTA one such area a row, each rounded to 16 bytes.
__host__ __device__ constexpr int smem_bytes(int hist_bytes, int capacity) { return hist_bytes + capacity * 8; }
__host__ __device__ constexpr int group_smem_stride(int hist_bytes, int capacity) {
  return (smem_bytes(hist_bytes, capacity) + 15) / 16 * 16;
}
__host__ __device__ constexpr int rows_smem_bytes(int hist_bytes, int capacity, int rows) {
  return rows == 1 ? smem_bytes(hist_bytes, capacity) : rows * group_smem_stride(hist_bytes, capacity);
}

// The threads of one row and their barrier: the CTA with one row per CTA,
// else a group of P::kGroup threads on named barrier `id` (1 + its index).
template <class P>
struct RowSync {
  unsigned t;  // the thread's index in its group
  int id;
  __device__ __forceinline__ unsigned tid() const { return P::kRows == 1 ? threadIdx.x : t; }
  __device__ __forceinline__ void bar() const {
    if (P::kRows == 1) {
      __syncthreads();
    } else {
      asm volatile("bar.sync %0, %1;" ::"r"(id), "n"(P::kGroup) : "memory");
    }
  }
};

struct Control {
  int added[3];    // candidates appended by step s, in added[s % 3] (RowFilter::make_room)
  u32 threshold;   // keys above it enter the list (after the first cut; before it every key enters)
  int taken;       // ties taken by the current cut
  int placed;      // keys above the k-th placed by the current cut
  u32 lo, hi;      // the least and greatest key of the list being cut
  ThresholdResult res;
  u32 scratch[64];
};

// Element e of the elements in a 16-byte load's four words (raw bits): a
// word each for 32-bit keys, two per word for 16-bit ones.
template <int KB>
__device__ __forceinline__ u32 unpack_raw(const u32 (&w)[4], int e) {
  return KB == 32 ? w[e] : (w[e / 2] >> (16 * (e % 2))) & 0xffffu;
}

// The key of rank `rank` (1 = largest) among `count` keys held N per thread
// (entry tid + j * group), digit by digit from the top, and in *need
// how many keys equal to it rank at or above `rank`. Requires 1 <= rank <=
// count. With fewer `passes` than the key needs, the lowest key of the
// rank's bin at that depth (its low bits zero). Every thread of the row
// (`sync`: the CTA unless given) calls it.
template <class P, int N, class S = CtaSync>
__device__ u32 select_rank(const u32 (&key)[N], int count, u32 rank, u32* hist, ThresholdResult* res, u32* scratch,
                           u32* need_out, int passes = P::kPasses, S sync = S()) {
  constexpr int T = P::kGroup, NB = P::kBins, KB = P::kKeyBits;
  u32 prefix = 0;
  u32 need = rank;
#pragma unroll 1
  for (int pass = 0; pass < passes; ++pass) {
    const int hi = KB - pass * P::kRadix;
    const int lo = hi - P::kRadix > 0 ? hi - P::kRadix : 0;
    const u32 mask = (1u << (hi - lo)) - 1u;
    for (int b = sync.tid(); b < NB; b += T) hist[b] = 0;
    sync.bar();
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const int i = static_cast<int>(sync.tid()) + j * T;
      const bool same = hi >= 32 || (key[j] >> hi) == (prefix >> hi);
      if (i < count && same) atomicAdd(&hist[(key[j] >> lo) & mask], 1u);
    }
    sync.bar();
    const ThresholdResult r = find_threshold<T, NB, false, S>(hist, need, res, scratch, nullptr, nullptr, sync);
    need -= r.above;
    prefix |= r.bin << lo;
  }
  *need_out = need;
  return prefix;
}

// The same search, for a cut: digits of the key's offset from the least
// key, lo, over the span [lo, hi] of the keys (each thread's keys within
// it), so the first pass spreads the keys over the bins instead of piling
// them into the few a normal row's top bits take (atomics on one address
// serialize), and the search ends as soon as the rank's bin is taken whole.
// Returns the threshold t and *need_out: keys above t are kept, and *need_out
// of the keys equal to t. On an early end t is one below the bin's least key
// and *need_out is 0. Every thread of the row calls it with the same lo and hi.
//
// A bin of at most 32 keys that is not one key ends the search at once
// (TOPK_FILTER_CUT_FINISH): its keys go to the first words of `hist`
// (free once find_threshold returns), and after one barrier every warp
// ranks them among themselves with shuffles, where another digit pass
// would take four barriers. scratch[63] counts them (find_threshold
// without `pre` uses scratch[0, warps) only; the guess's span words, also
// in scratch, are read before its first pass's barrier).
// One digit pass over the span [*lo, *hi] of the first `count` keys (held
// N per thread, entry tid + j * group) whose histogram `hist` the caller
// cleared before a barrier: the bin that holds rank `*need`, *need less the
// keys above it, and [*lo, *hi] narrowed to that bin. Every thread of the
// row calls it.
template <class P, int N, class S>
__device__ __forceinline__ ThresholdResult span_digit_pass(const u32 (&key)[N], int count, u32* need, u32* lo, u32* hi,
                                                           u32* hist, ThresholdResult* res, u32* scratch, S sync) {
  constexpr int T = P::kGroup, NB = P::kBins;
  const int bits = 32 - __clz(*hi - *lo);
  const int shift = bits > P::kRadix ? bits - P::kRadix : 0;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    if (j * T >= count) break;
    const int i = static_cast<int>(sync.tid()) + j * T;
    if (i < count && key[j] >= *lo && key[j] <= *hi) atomicAdd(&hist[(key[j] - *lo) >> shift], 1u);
  }
  sync.bar();
  const ThresholdResult r = find_threshold<T, NB, false, S>(hist, *need, res, scratch, nullptr, nullptr, sync);
  *need -= r.above;
  *lo += r.bin << shift;
  const u32 width = (1u << shift) - 1u;
  if (*hi - *lo > width) *hi = *lo + width;
  return r;
}

template <class P, int N, class S = CtaSync>
__device__ u32 select_rank_span(const u32 (&key)[N], int count, u32 rank, u32 lo, u32 hi, u32* hist,
                                ThresholdResult* res, u32* scratch, u32* need_out, S sync = S()) {
  constexpr int T = P::kGroup, NB = P::kBins;
  u32 need = rank;
  // Measured to pay for 16-bit keys and several rows per CTA only (the
  // one-row fp32 kernels keep the passes: docs/PERFORMANCE.md).
  constexpr bool kFinish = TOPK_FILTER_CUT_FINISH && (P::kKeyBits == 16 || P::kRows > 1);
  // Ordered before the appends by the first pass's barriers.
  if (kFinish && sync.tid() == 0) scratch[63] = 0;
#pragma unroll 1
  while (lo != hi) {
    for (int b = sync.tid(); b < NB; b += T) hist[b] = 0;
    sync.bar();
    const ThresholdResult r = span_digit_pass<P>(key, count, &need, &lo, &hi, hist, res, scratch, sync);
    if (r.count == need && lo > 0) {
      *need_out = 0;
      return lo - 1;
    }
    if (kFinish && lo != hi && r.count <= 32u) {
#pragma unroll
      for (int j = 0; j < N; ++j) {
        if (j * T >= count) break;
        const int i = static_cast<int>(sync.tid()) + j * T;
        if (i < count && key[j] >= lo && key[j] <= hi) hist[atomicAdd(&scratch[63], 1u)] = key[j];
      }
      sync.bar();
      const u32 lane = lane_id(), n = r.count;
      const u32 v = lane < n ? hist[lane] : 0u;
      const WarpRank w = warp_rank<true>(v, n);
      // The bin holds the rank: exactly the keys t with above(t) < need <=
      // above(t) + equal(t), all equal to the need-th largest of the bin.
      const u32 hit = __ballot_sync(kFullMask, lane < n && w.above < need && need <= w.above + w.equal);
      const int src = __ffs(static_cast<int>(hit)) - 1;
      *need_out = need - __shfl_sync(kFullMask, w.above, src);
      return __shfl_sync(kFullMask, v, src);
    }
  }
  *need_out = need;
  return lo;
}

template <class P>
struct RowFilter {
  using K = Keys<P::kDtype>;
  using Raw = typename K::Raw;
  static constexpr int T = P::kGroup;  // the row's threads
  static constexpr int V = P::kVec;
  static constexpr int NB = P::kBins;
  static constexpr int KB = P::kKeyBits;

  RowSync<P> grp;
  Control* ctl;
  u32* hist;
  u32* keys;
  int* idx;
  int capacity;
  u32 flip;
  // The same in every thread: the list's length before this step's appends,
  // and the step (its appends count in ctl->added[step % 3]).
  int count;
  int step;

  // Cuts the list (count > k entries) to exactly its k largest keys and
  // sets the threshold to the k-th key, or below it where the select ended
  // on a bin taken whole (the kept keys are then exactly those above it).
  // kOut (the last cut, TOPK_FILTER_DIRECT_OUT): the kept keys go from the
  // registers straight to the row's output (out_val when given, its values
  // from the keys but for NaN, reloaded from `row`) instead of the list,
  // with no barrier after them. Every thread of the row calls it.
  template <bool kOut = false>
  __device__ void cut(int k, int* out_idx = nullptr, Raw* out_val = nullptr, const Raw* row = nullptr) {
    // The list moves through registers: every read happens before any write.
    // Slots j at or past `items` hold no key in any thread (the same branch
    // in every thread: a short list skips most of the unrolled slots).
    const int items = (count + T - 1) / T;
    u32 key[P::kMaxItems];
    int id[P::kMaxItems];
    // The keys' span: one minimum and maximum per warp, read after the
    // barrier below (and reset after the cut's last; a barrier comes
    // before the next cut).
    u32 kmin = ~0u, kmax = 0u;
#pragma unroll
    for (int j = 0; j < P::kMaxItems; ++j) {
      const int i = static_cast<int>(grp.tid()) + j * T;
      key[j] = 0u;
      id[j] = -1;
      if (j < items && i < count) {
        key[j] = keys[i];
        id[j] = idx[i];
        kmin = min(kmin, key[j]);
        kmax = max(kmax, key[j]);
      }
    }
    kmin = __reduce_min_sync(kFullMask, kmin);
    kmax = __reduce_max_sync(kFullMask, kmax);
    if (lane_id() == 0) {
      atomicMin(&ctl->lo, kmin);
      atomicMax(&ctl->hi, kmax);
    }
    if (grp.tid() == 0) {
      ctl->taken = 0;
      ctl->placed = 0;
    }
    grp.bar();
    // The k-th key; `need` of the keys equal to it are kept.
    u32 need;
    const u32 prefix = select_rank_span<P>(key, count, static_cast<u32>(k), ctl->lo, ctl->hi, hist, &ctl->res,
                                           ctl->scratch, &need, grp);
#if defined(TOPK_STOP_AT) && TOPK_STOP_AT == 4
    count = k;  // stop 4: nothing placed (the list's order is left as it is)
    if (prefix == ~need) keys[0] = need;  // keeps the select
    return;
#endif
    if (grp.tid() == 0) ctl->threshold = prefix;
    const int above = k - static_cast<int>(need);
    // Positions: one atomic per warp and kind for all its slots (an atomic
    // a slot chained about 16 shared-memory round trips: 2 us of a 64 x
    // 32768 row's 15).
    const u32 below_lane = (1u << lane_id()) - 1u;
    int nup = 0, ntie = 0;
#pragma unroll
    for (int j = 0; j < P::kMaxItems; ++j) {
      if (j >= items) break;
      const int i = static_cast<int>(grp.tid()) + j * T;
      nup += __popc(__ballot_sync(kFullMask, i < count && key[j] > prefix));
      ntie += __popc(__ballot_sync(kFullMask, i < count && key[j] == prefix));
    }
    int up0 = 0, tie0 = 0;
    if (lane_id() == 0) {
      if (nup) up0 = atomicAdd(&ctl->placed, nup);
      if (ntie) tie0 = atomicAdd(&ctl->taken, ntie);
    }
    up0 = __shfl_sync(kFullMask, up0, 0);
    tie0 = __shfl_sync(kFullMask, tie0, 0);
#pragma unroll
    for (int j = 0; j < P::kMaxItems; ++j) {
      if (j >= items) break;
      const int i = static_cast<int>(grp.tid()) + j * T;
      const bool up = i < count && key[j] > prefix;
      const bool tie = i < count && key[j] == prefix;
      const u32 ups = __ballot_sync(kFullMask, up), ties = __ballot_sync(kFullMask, tie);
      int pos = -1;
      if (up) {
        pos = up0 + __popc(ups & below_lane);
      } else if (tie) {
        const int t = tie0 + __popc(ties & below_lane);
        if (t < static_cast<int>(need)) pos = above + t;
      }
      if (pos >= 0) {
        if constexpr (kOut) {
          out_idx[pos] = id[j];
          if (out_val != nullptr) {
            const u32 v = K::raw_flip(key[j], flip);
            out_val[pos] = v == K::kNaN ? row[id[j]] : static_cast<Raw>(v);
          }
        } else {
          keys[pos] = key[j];
          idx[pos] = id[j];
        }
      }
      up0 += __popc(ups);
      tie0 += __popc(ties);
    }
    count = k;
    if constexpr (kOut) return;  // nothing reads the list or the span again
    grp.bar();
    // The span for the next cut, after the barrier: with every key equal
    // (lo == hi) the select has no barrier of its own, and a reset before
    // this one raced with the reads of lo and hi (racecheck).
    if (grp.tid() == 0) {
      ctl->lo = ~0u;
      ctl->hi = 0u;
    }
  }

  // The list position of this thread's first of `mine` survivors: one
  // atomic per warp. Every lane of the warp calls it.
  __device__ __forceinline__ int reserve(u32 mine) {
    const u32 incl = warp_inclusive_prefix(mine);
    const u32 total = __shfl_sync(kFullMask, incl, 31);
    int base = 0;
    if (lane_id() == 31 && total > 0) base = atomicAdd(&ctl->added[step % 3], static_cast<int>(total));
    base = __shfl_sync(kFullMask, base, 31);
    return count + base + static_cast<int>(incl - mine);
  }

  // Appends the keys of `n` elements held by this thread (key[e], column
  // col[e]) that pass the threshold; one atomic per warp that has any.
  template <int N>
  __device__ __forceinline__ void append(const u32 (&key)[N], const int (&col)[N], const bool (&valid)[N],
                                         u32 threshold, bool open) {
    bool pass[N];
    u32 mine = 0;
#pragma unroll
    for (int e = 0; e < N; ++e) {
      pass[e] = valid[e] && (open || key[e] > threshold);
      mine += pass[e] ? 1u : 0u;
    }
    // Once the threshold has risen most warps' steps hold no survivor.
    if (__ballot_sync(kFullMask, mine != 0) == 0) return;
    int pos = reserve(mine);
    // Past the capacity only in a stream without barriers (stream<true>),
    // whose caller sees the count and recovers.
#pragma unroll
    for (int e = 0; e < N; ++e)
      if (pass[e]) {
        if (pos < capacity) {
          keys[pos] = key[e];
          idx[pos] = col[e];
        }
        ++pos;
      }
  }

  // Before a step that may append `incoming` elements: cut the list when
  // they might not fit. Returns the threshold state for the step.
  //
  // One barrier a step: step s appends into counter added[s % 3], so after
  // the barrier every thread adds the last step's counter to its count
  // while this step's appends go elsewhere, and thread 0 clears the
  // counter of step s + 1, which every thread last read before this
  // barrier. (Two barriers a step, one to read the shared count and one
  // before appending to it, measured 5-10% slower on the 1024-thread
  // kernels.)
  __device__ __forceinline__ void make_room(int k, int incoming, u32* threshold, bool* open) {
    grp.bar();  // the last step's appends are in
    ++step;
    count += ctl->added[(step + 2) % 3];
    if (grp.tid() == 0) ctl->added[(step + 1) % 3] = 0;
    if (count + incoming > capacity) {
      cut(k);  // ends with a barrier after the new threshold is written
      *threshold = ctl->threshold;
      *open = false;
    }
  }

  // This thread's 16-byte loads of the step starting at vector v0.
  __device__ __forceinline__ void load_step(const uint4* body, int v0, int nvec, uint4 (&q)[P::kUnroll]) const {
#pragma unroll
    for (int u = 0; u < P::kUnroll; ++u) {
      const int v = v0 + u * T + static_cast<int>(grp.tid());
      q[u] = v < nvec ? body[v] : make_uint4(0u, 0u, 0u, 0u);
    }
  }

  // One step of the row: room in the list (unless kFree), then the
  // survivors appended.
  template <bool kFree>
  __device__ __forceinline__ void filter_step(const uint4 (&q)[P::kUnroll], int v0, int nvec, int col0, int k,
                                              u32* threshold, bool* open) {
    static_assert(kFree || !P::kStepInParts, "a step as large as the list streams with cuts in parts (stream)");
    if (!kFree) make_room(k, P::kTile, threshold, open);
    append_step(q, v0, nvec, col0, *threshold, *open);
  }

  // The survivors of one step of 16-bit keys against a threshold key below
  // 0xffff (kHigh: at or above +0.0's key), two elements a 32-bit word at
  // once without forming the keys of the elements that fail (topk/swar.cuh). The few that pass
  // are keyed and appended one by one, with the keys and column indices
  // append() gives them; only the order of a thread's survivors differs (the
  // high halves of its words first), which nothing depends on: the list's
  // order already varies between calls with the warps' atomics, and the
  // deterministic finish orders ties by column index. (The scalar path spends about ten integer
  // instructions an element, and the 16-bit stream was bound by them:
  // docs/PERFORMANCE.md.)
  template <bool kHigh, int N>
  __device__ __forceinline__ void append_step16(const uint4 (&q)[N], int v0, int nvec, int col0, u32 threshold) {
    static_assert(KB == 16 && N <= 4, "16-bit keys, at most 4 vectors a step");
    const u32 bias = swar::bias16(threshold);
    constexpr u32 nan_bias = swar::nan_bias16(K::kExpMask);
    // Word i of vector u passes its low half at bit 15 - (4u + i), its high
    // half at bit 31 - (4u + i).
    u32 bits = 0;
#pragma unroll
    for (int u = 0; u < N; ++u) {
      const u32 w[4] = {q[u].x, q[u].y, q[u].z, q[u].w};
      u32 ub = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) ub |= swar::pass16(w[i], bias, nan_bias, flip != 0, kHigh) >> (4 * u + i);
      // A vector past the body is zeros (load_step): +0.0 passes every
      // threshold key of the low bound, largest or smallest, so those
      // vectors are masked here; the high bound never keeps them.
      if constexpr (!kHigh)
        if (v0 + u * T + static_cast<int>(grp.tid()) >= nvec) ub = 0;
      bits |= ub;
    }
    if (__ballot_sync(kFullMask, bits != 0) == 0) return;
    int pos = reserve(static_cast<u32>(__popc(bits)));
    while (bits != 0) {
      const int b = 31 - __clz(bits);
      bits ^= 1u << b;
      const int j = 15 - (b & 15), u = j >> 2, i = j & 3, h = b >> 4;
      uint4 qq = q[0];
#pragma unroll
      for (int uu = 1; uu < N; ++uu)
        if (u == uu) qq = q[uu];
      const u32 word = (i & 2) ? ((i & 1) ? qq.w : qq.z) : ((i & 1) ? qq.y : qq.x);
      if (pos < capacity) {
        keys[pos] = K::key_flip((word >> (16 * h)) & 0xffffu, flip);
        idx[pos] = col0 + (v0 + u * T + static_cast<int>(grp.tid())) * V + 2 * i + h;
      }
      ++pos;
    }
  }

  // The survivors of one step (its vectors v0 + u * T + thread, u < N)
  // appended.
  template <int N>
  __device__ __forceinline__ void append_step(const uint4 (&q)[N], int v0, int nvec, int col0, u32 threshold,
                                              bool open) {
#if TOPK_FILTER_SWAR16
    if constexpr (KB == 16) {
      if (!open && swar::applies16(threshold) && (TOPK_FILTER_SWAR16 > 1 || swar::high16(threshold))) {
        if (swar::high16(threshold))
          append_step16<true, N>(q, v0, nvec, col0, threshold);
        else
          append_step16<false, N>(q, v0, nvec, col0, threshold);
        return;
      }
    }
#endif
    u32 key[N * V];
    int col[N * V];
    bool valid[N * V];
#pragma unroll
    for (int u = 0; u < N; ++u) {
      const int v = v0 + u * T + static_cast<int>(grp.tid());
      const u32 w[4] = {q[u].x, q[u].y, q[u].z, q[u].w};
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const u32 raw = unpack_raw<KB>(w, e);
        key[u * V + e] = K::key_flip(raw, flip);
        col[u * V + e] = col0 + v * V + e;
        valid[u * V + e] = v < nvec;
      }
    }
    append(key, col, valid, threshold, open);
  }

  // The head and tail together (fewer than 2 V elements, one per thread)
  // through the list; the caller made room for them.
  __device__ __forceinline__ void append_head_tail(const Raw* row, RowRange range, int head, int body_end,
                                                   u32 threshold, bool open) {
    const int t = grp.tid();
    const bool valid[1] = {t < head + (range.end - body_end)};
    const int col[1] = {t < head ? range.start + t : body_end + (t - head)};
    const u32 key[1] = {valid[0] ? K::key_flip(static_cast<u32>(row[col[0]]), flip) : 0u};
    append(key, col, valid, threshold, open);
  }

  // The body through the list with barriers, one 16-byte load a thread a
  // step: room for T V elements (make_room), then the survivors appended.
  // kAhead: the next step's load in flight across the room and appends,
  // from `cur`, this thread's load of the first step (a stream with cuts
  // whose step is the whole list, stream); else each step loads after its
  // room is made (the second read after a missed guess, run: a load held
  // across its cuts cost the filter kernels 32-36 bytes more spill stores,
  // and the one-load and fp32 1024-thread kernels 32 bytes more stack, for
  // a path that a normal row never takes; NVRTC 13.0, sm_90).
  template <bool kAhead>
  __device__ __forceinline__ void stream_by_load(const uint4* body, int nvec, int col0, int k, uint4 cur,
                                                 u32* threshold, bool* open) {
#pragma unroll 1
    for (int v0 = 0; v0 < nvec; v0 += T) {
      const int v = (kAhead ? v0 + T : v0) + static_cast<int>(grp.tid());
      uint4 next;
      if constexpr (kAhead) next = v < nvec ? body[v] : make_uint4(0u, 0u, 0u, 0u);
      make_room(k, T * V, threshold, open);
      if constexpr (!kAhead) cur = v < nvec ? body[v] : make_uint4(0u, 0u, 0u, 0u);
      const uint4 one[1] = {cur};
      append_step(one, v0, nvec, col0, *threshold, *open);
      if constexpr (kAhead) cur = next;
    }
  }

  // The row once through the list: the head and tail (fewer than 2 V
  // elements), then the vector body in steps; threshold and open are the
  // starting state. kFree: no barrier and no cut, the threshold stays where
  // it starts and every survivor counts in ctl->added[step % 3], those past
  // the capacity unstored (the caller recovers); for a guessed start, whose
  // survivors fit the list but for a rare sample. `first`: the loads of the
  // body's first step (load_step at 0).
  template <bool kFree>
  __device__ __forceinline__ void stream(const Raw* row, RowRange range, int head, int nvec, int body_end,
                                         const uint4* body, int k, u32 threshold, bool open,
                                         const uint4 (&first)[P::kUnroll]) {
    if (!kFree) make_room(k, head + (range.end - body_end), &threshold, &open);
    append_head_tail(row, range, head, body_end, threshold, open);
    const int col0 = range.start + head;
    // Two steps in flight: the next step's loads are issued before this
    // step waits at its barrier and appends (one row per SM needs about
    // 32 KB in flight to approach its share of HBM bandwidth).
    if constexpr (!kFree && P::kStepInParts) {
      // A step as large as the list: room is made for one load a thread at a
      // time, as in the one-load kernel (the two-load loop around the cuts
      // spilled its loads: bf16 128 x 201088 k64 on 16 values 28.7 us
      // against the one-load kernel's 24.5, H200). The first step's second
      // load is issued again.
      stream_by_load<true>(body, nvec, col0, k, first[0], &threshold, &open);
    } else {
      constexpr int kStepVecs = T * P::kUnroll;
      uint4 qa[P::kUnroll], qb[P::kUnroll];
#pragma unroll
      for (int u = 0; u < P::kUnroll; ++u) qa[u] = first[u];
      for (int v0 = 0; v0 < nvec; v0 += 2 * kStepVecs) {
        const int v1 = v0 + kStepVecs;
        if (v1 < nvec) load_step(body, v1, nvec, qb);
        filter_step<kFree>(qa, v0, nvec, col0, k, &threshold, &open);
        if (v1 >= nvec) break;
        if (v1 + kStepVecs < nvec) load_step(body, v1 + kStepVecs, nvec, qa);
        filter_step<kFree>(qb, v1, nvec, col0, k, &threshold, &open);
      }
    }
  }

  // The least key of the bin that holds sample rank `rank` (1 = largest)
  // among the N keys each thread holds, and in *c_out the sample keys at or
  // above it. The digits are those of the key's offset over [lo, hi]: hi the
  // sample's greatest key, lo its least, or, where the rank is at most the
  // row's warps, the least of the warps' greatest keys (those are that many
  // keys at or above it, so the rank's key is too; the keys below it take
  // no atomic). A normal row's top digits put most keys in a few bins, and
  // a shifted row's in one; over the span the bins follow the keys, so
  // `passes` of them place the guess where the top 22 bits took up to
  // three (an 11-bit pass over a span of 2^32 keys bins a quarter of a
  // binade, two 8-bit passes 1/128 of one); the loop also ends once the
  // bin is one key. The span's words are each warp's own (ctl->scratch,
  // free until find_threshold writes it after the first pass's atomics),
  // so the span costs no barrier of its own. Every thread of the row
  // calls it.
  template <int N>
  __device__ __forceinline__ u32 select_guess_span(const u32 (&key)[N], u32 rank, int passes, u32* c_out) {
    constexpr int NW = T / 32;
    u32 wlo = ~0u, whi = 0u;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      wlo = min(wlo, key[j]);
      whi = max(whi, key[j]);
    }
    wlo = __reduce_min_sync(kFullMask, wlo);
    whi = __reduce_max_sync(kFullMask, whi);
    if (rank <= static_cast<u32>(NW)) wlo = whi;
    const u32 lane = lane_id();
    const int w = static_cast<int>(grp.tid()) >> 5;
    if (lane == 0) {
      ctl->scratch[w] = wlo;
      ctl->scratch[32 + w] = whi;
    }
    for (int b = grp.tid(); b < NB; b += T) hist[b] = 0;
    grp.bar();
    u32 lo = __reduce_min_sync(kFullMask, lane < static_cast<u32>(NW) ? ctl->scratch[lane] : ~0u);
    u32 hi = __reduce_max_sync(kFullMask, lane < static_cast<u32>(NW) ? ctl->scratch[32 + lane] : 0u);
    u32 need = rank, in_bin = 0;
#pragma unroll 1
    for (int pass = 0;; ++pass) {
      if (pass > 0) {
        for (int b = grp.tid(); b < NB; b += T) hist[b] = 0;
        grp.bar();
      }
      in_bin = span_digit_pass<P>(key, N * T, &need, &lo, &hi, hist, &ctl->res, ctl->scratch, grp).count;
      if (pass + 1 >= passes || lo == hi) break;
    }
    *c_out = rank - need + in_bin;
    return lo;
  }

  // The sample: G 16-byte vectors a thread (G = 512 / T below 512 threads,
  // else 1; T the row's threads). At least 512 vectors: a 256-thread CTA
  // takes two each, so that its list (16 keys a thread) passes guess()'s
  // test on normal rows. A group of several rows per CTA holds at most 16
  // sample keys a thread (16-bit keys in groups of 128: 2 vectors, not 4;
  // the 1024-thread kernels' spills went from 176 to 112 bytes and the
  // short-row defaults ran 1.09-1.16x faster, H200).
  static constexpr int kSampleG0 = T < 512 ? 512 / T : 1;
  static constexpr int kSampleVecs = P::kRows > 1 && kSampleG0 * V > 16 ? 16 / V : kSampleG0;
  static constexpr int kSampleKeys = T * V * kSampleVecs;

  // The sample rank guess() selects (1 = largest), or 0 where the row takes
  // no guess: shorter than the sample, or a rank of a quarter of the sample
  // or more. r0 = k S / L, rank r0 + 4.5 sqrt(r0) + 3.
  __device__ __forceinline__ int sample_rank(int nvec, int L, int k, int mode) const {
    if (nvec < T * kSampleVecs) return 0;
    const float r0 = static_cast<float>(k) * kSampleKeys / static_cast<float>(L);
    // guess 2 (tests): the sample's largest key, too high wherever k > L / S.
    const int rank = mode == 2 ? 1 : static_cast<int>(ceilf(r0 + 4.5f * sqrtf(r0) + 3.0f));
    return rank >= kSampleKeys / 4 ? 0 : rank;
  }

  // This thread's sample vectors: runs of R consecutive vectors (a warp's
  // 512 bytes) evenly spaced over the body. Kernels of one CTA an SM issue
  // them before the body's first step (TOPK_FILTER_SAMPLE_FIRST), so that
  // they do not wait behind its loads.
  __device__ __forceinline__ void load_sample(const uint4* body, int nvec, uint4 (&q)[kSampleVecs]) const {
    constexpr int G = kSampleVecs, R = TOPK_FILTER_SAMPLE_RUN;
    static_assert(T % R == 0, "a run of sample vectors within a group");
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const int sv = static_cast<int>(grp.tid()) + g * T;  // sample vector sv of T G
      q[g] = body[static_cast<long long>(sv / R) * nvec / (T * G / R) + sv % R];
    }
  }

  // The sample's guess of a starting threshold from the sample vectors q
  // (load_sample; S = T V G keys) and the rank sample_rank() gave: the key
  // of sample rank r0 + 4.5 sqrt(r0) + 3 with r0 = k S / L (its bin's
  // lowest key, never above it, after the digit passes that cover 22
  // bits, or over the sample's span for 16-bit keys and several rows per
  // CTA: select_guess_span), when that rank is under a quarter of the
  // sample. For values independent of
  // their position the k-th key's sample rank is about Poisson(r0): the
  // guess lets fewer than k keys through about once in 10^5 rows or less
  // (a miss costs a second read, never exactness). (One key per thread at rank
  // r0 + 3 sqrt(r0) + 2 missed in one row of 128-256 on the H200, and the
  // launch waited for that row's second read; four scattered keys per thread
  // cost a sector each, 25% more traffic on fp32 rows.)
  //
  // *free_stream: the stream may go without barriers, since the c sample
  // keys at or above the guess, c + 2 sqrt(c) of them scaled to the row, fit
  // the list. Rows of few values, whose top value has more copies than the
  // list holds, stream with cuts instead (after the first cut the threshold
  // is that value and its copies stop entering). A wider margin, 4 sqrt(c) +
  // 4, sent normal rows of 512 threads at slack 1 to the stream with cuts,
  // which cut at nearly every step (H200: 134 us against 34); it applies
  // only where c is over twice the rank, most of it copies of the guessed
  // key: rows of 16 values at 64 x 131072 (bf16, 8192 copies of the top
  // value against a list of 8256) overflowed in one row of 64 at 2 sqrt(c)
  // and the launch waited for its second read (H100: 42.7 us against
  // 23.8). guess 3, for
  // the tests, streams free whatever the sample. Every thread of the row
  // calls it.
  __device__ __forceinline__ void guess(const uint4 (&q)[kSampleVecs], int L, int mode, int rank, u32* threshold,
                                        bool* open, bool* free_stream) {
    constexpr int G = kSampleVecs, S = kSampleKeys;
    u32 key[V * G];
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const u32 w[4] = {q[g].x, q[g].y, q[g].z, q[g].w};
#pragma unroll
      for (int e = 0; e < V; ++e) key[g * V + e] = K::key_flip(unpack_raw<KB>(w, e), flip);
    }
    float c;
    u32 t;
    // The span's select for 16-bit keys and several rows per CTA; the
    // one-row fp32 kernels keep the top 22 bits (measured slower with the
    // span: docs/PERFORMANCE.md).
    if constexpr (TOPK_FILTER_GUESS_SPAN && (KB == 16 || P::kRows > 1)) {
      u32 c_keys;
      // 11 bits of a span the warps' floor narrows (rank <= warps), 16 of
      // one from the sample's least key, which for a normal row is about
      // 2^31 keys wide; guess 2 (tests) selects the sample's largest key
      // itself, so that it stays too high.
      constexpr int kNarrow = (11 + P::kRadix - 1) / P::kRadix, kWide = (16 + P::kRadix - 1) / P::kRadix;
      const int passes = mode == 2 ? 32 : rank <= T / 32 ? kNarrow : kWide;
      t = select_guess_span(key, static_cast<u32>(rank), passes, &c_keys);
      c = static_cast<float>(c_keys);
    } else {
      u32 need;
      // At least 22 bits of the key (a coarser guess let a shifted row's
      // survivors overflow the list of 512 threads with 8-bit digits).
      constexpr int kCover22 = (22 + P::kRadix - 1) / P::kRadix;
      constexpr int kGuessPasses = kCover22 < P::kPasses ? kCover22 : P::kPasses;
      t = select_rank<P, V * G>(key, S, static_cast<u32>(rank), hist, &ctl->res, ctl->scratch, &need, kGuessPasses,
                                grp);
      c = static_cast<float>(rank - static_cast<int>(need) + static_cast<int>(ctl->res.count));
    }
    if (t == 0) return;  // every key is at or above it: nothing to skip
    *threshold = t - 1;
    *open = false;
    // Most of c copies of the guessed key (a row of few values): 4 sqrt(c) + 4.
    const float margin = TOPK_FILTER_TIE_MARGIN && c > 2.0f * rank ? 4.0f * sqrtf(c) + 4.0f : 2.0f * sqrtf(c);
    *free_stream = mode == 3 || (c + margin) * (static_cast<float>(L) / S) <= capacity;
  }

  // `gid`: the row's group in the CTA (0 with one row per CTA).
  __device__ void run(const TopkArgs& a, unsigned char* smem, Control* control, int gid) {
    const int rowi = static_cast<int>(blockIdx.x) * P::kRows + gid;
    if (P::kRows > 1 && rowi >= a.batch) return;  // the last CTA's groups past the last row
    const bool values = (a.flags & TOPK_FLAG_VALUES) != 0 && a.out_val != nullptr;
    const int k = a.k;
    flip = (a.flags & TOPK_FLAG_SMALLEST) ? (KB == 32 ? ~0u : 0xffffu) : 0u;
    const Raw* row = static_cast<const Raw*>(a.input) + static_cast<long long>(rowi) * a.row_stride;
    int* out_idx = a.out_idx + static_cast<long long>(rowi) * k;
    Raw* out_val = values ? static_cast<Raw*>(a.out_val) + static_cast<long long>(rowi) * k : nullptr;
    const RowRange range = row_range(a, rowi);
    const int L = range.end - range.start;
    if (L <= k) {
      take_whole_range(row, range, out_idx, out_val, static_cast<int>(grp.tid()), T, k, static_cast<Raw>(K::kLowest));
      return;
    }
    {
      // The launch must provide the layout the host computed; a mismatch is
      // a host bug, and trapping beats corrupting shared memory.
      u32 dyn;
      asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
      if (static_cast<int>(dyn) < rows_smem_bytes(P::kHistSmem, a.buffer, P::kRows) || a.buffer < k + P::kRoom ||
          a.buffer > P::kMaxItems * T)
        __trap();
    }
    ctl = control + gid;
    capacity = a.buffer;
    hist = reinterpret_cast<u32*>(smem + (P::kRows == 1 ? 0 : gid * group_smem_stride(P::kHistSmem, capacity)));
    keys = hist + NB;
    idx = reinterpret_cast<int*>(keys + capacity);
    // Scalar head up to 16-byte alignment, vector body, scalar tail.
    const unsigned long long addr = reinterpret_cast<unsigned long long>(row + range.start);
    int head = static_cast<int>(((16u - (addr & 15u)) & 15u) / sizeof(Raw));
    if (head > L) head = L;
    const int nvec = (L - head) / V;
    const int body_end = range.start + head + nvec * V;
    const uint4* body = reinterpret_cast<const uint4*>(row + range.start + head);
    count = 0;
    step = 0;  // the head and tail of a stream with barriers are step 1
    if (grp.tid() == 0) {
      ctl->added[0] = ctl->added[1] = ctl->added[2] = 0;
      ctl->lo = ~0u;
      ctl->hi = 0u;
    }
    // The starting threshold: every key enters until the first cut, or the
    // sample's guess.
    u32 threshold = 0;
    bool open = true, free_stream = false;
    // The body's first step is loaded before the guess, so that its loads
    // are in flight while the sample is selected (H100: 0.5-1.5% faster),
    // and with one CTA an SM after the sample's loads, which it would
    // delay (H200, rows from memory: bf16 128 x 201088 k64 22.62 us
    // against 22.93).
    TOPK_FILTER_STOP(0);
    uint4 first[P::kUnroll], sample[kSampleVecs];
    const int rank = a.rounds != 0 ? sample_rank(nvec, L, k, a.rounds) : 0;
    constexpr bool kSampleFirst = TOPK_FILTER_SAMPLE_FIRST && P::kCtas == 1;
    if (kSampleFirst && rank > 0) load_sample(body, nvec, sample);
    load_step(body, 0, nvec, first);
    if (!kSampleFirst && rank > 0) load_sample(body, nvec, sample);
    if (rank > 0) guess(sample, L, a.rounds, rank, &threshold, &open, &free_stream);
    const bool guessed = !open;
    TOPK_FILTER_STOP(1);
    if (free_stream) {
      // Without barriers (one a step measured slower); the barriers in
      // guess() ordered the counters' reset. The count may pass the capacity.
      stream<true>(row, range, head, nvec, body_end, body, k, threshold, open, first);
    } else {
      stream<false>(row, range, head, nvec, body_end, body, k, threshold, open, first);
    }
    grp.bar();
    count += ctl->added[step % 3];
    TOPK_FILTER_STOP(2);
#ifdef TOPK_FILTER_GUESS_DEBUG
    // Development aid (topk-probe --define TOPK_FILTER_GUESS_DEBUG): a guess
    // that let fewer than k keys through, or more than the list holds, and
    // a guessed start that streamed with cuts.
    if (grp.tid() == 0 && guessed && (count < k || count > capacity || !free_stream))
      printf("filter guess: row %d L %d threshold %08x count %d k %d capacity %d free %d\n", rowi, L, threshold,
             count, k, capacity, free_stream ? 1 : 0);
#endif
    if (guessed && (count < k || count > capacity)) {
      // A rare sample: the row again through a list with barriers, one
      // element per thread a step over the head and tail and one 16-byte
      // load a thread a step over the body (stream_by_load; a second copy of
      // the two-step vector stream cost the kernels registers and spills).
      // Too few keys passed: from an open start. Too many: the list holds
      // `capacity` of them, whose k-th key t is at most the row's, so the
      // keys at or above t are enough.
      threshold = 0;
      open = true;
      if (count > capacity) {
        count = capacity;
        cut(k);
        if (ctl->threshold > 0) {
          threshold = ctl->threshold - 1;
          open = false;
        }
      }
      grp.bar();  // every thread has read the counters and the threshold
      if (grp.tid() == 0) ctl->added[0] = ctl->added[1] = ctl->added[2] = 0;
      count = 0;
      step = 0;
      make_room(k, head + (range.end - body_end), &threshold, &open);
      append_head_tail(row, range, head, body_end, threshold, open);
      stream_by_load<false>(body, nvec, range.start + head, k, make_uint4(0u, 0u, 0u, 0u), &threshold, &open);
      grp.bar();
      count += ctl->added[step % 3];
    }
    if (TOPK_FILTER_DIRECT_OUT && count > k) {
      // Stop 3 then includes the output.
      cut<true>(k, out_idx, out_val, row);
      return;
    }
    if (count > k) cut(k);
    TOPK_FILTER_STOP(3);
    // The list is the row's top k. Values come back from their keys, not
    // from the row (a gather that missed L2 on the rows that stream from
    // memory), but for NaN, whose key keeps no payload.
    for (int j = grp.tid(); j < k; j += T) {
      const int c = idx[j];
      out_idx[j] = c;
      if (values) {
        const u32 v = K::raw_flip(keys[j], flip);
        out_val[j] = v == K::kNaN ? row[c] : static_cast<Raw>(v);
      }
    }
  }
};

}  // namespace filter

template <class P>
__global__ void __launch_bounds__(P::kBlock, P::kCtas) filter_kernel(TopkArgs a) {
  await_prior_grids();
  extern __shared__ __align__(16) unsigned char filter_smem[];
  __shared__ filter::Control control[P::kRows];
  filter::RowFilter<P> f;
  const int gid = P::kRows == 1 ? 0 : static_cast<int>(threadIdx.x) / P::kGroup;
  f.grp.t = threadIdx.x % P::kGroup;
  f.grp.id = 1 + gid;
  f.run(a, filter_smem, control, gid);
}

}  // namespace topk
