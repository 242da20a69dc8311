// The grid family: one row spread over G CTAs of the grid (more than a
// thread-block cluster holds), which meet through a global workspace.
//
// Per row, every one of its G CTAs:
//   1. reads the same sample of the row (evenly spaced 16-byte vectors) and
//      finds a lower bound t of its rank-r key, r the sample's share of k
//      plus a margin: every CTA gets the same t without talking to the
//      others;
//   2. reads its slice of the row once into registers, counts the keys
//      equal to t, and adds a 256-bin histogram of the keys above t (over
//      the sample's span above t) and that count to the row's, keeping each
//      bin's sum before its own count: its keys' places among the row's
//      keys of that bin;
//   3. waits until every CTA's adds are in (each histogram word counts its
//      adds and a tally word the CTAs and their adds: no grid barrier),
//      finds the k-th key's bin in the
//      row's histogram, writes its keys above that bin straight to the output
//      (bin d's from the row's count above d) and gathers the keys in it
//      into the workspace; CTA 0 ranks that bin (a
//      few dozen keys on a normal row) as the keys arrive and finishes the
//      row.
// A guess that fails (fewer than k keys at or above t, or a k-th bin larger
// than the workspace's candidate room) sends every CTA of the row through an
// exact radix select over the keys they hold in registers, one 8-bit digit a
// grid barrier: exact, and a few microseconds slower. CTA 0 zeroes the
// candidates it read and the CTA that takes the last ticket the row's
// counters and histograms, so the workspace is zero again after every
// launch.
//
// Launched cooperatively (every CTA resident: the waits and barriers wait
// for all of them). TopkArgs: buffer = candidate room per row, rounds = sample vectors,
// cache_cap = CTAs per row, workspace = row_words(buffer) words a row.
#pragma once
#include "topk/args.h"
#include "topk/keys.cuh"
#include "topk/row.cuh"
#include "topk/types.cuh"

namespace topk {
namespace grid {

constexpr int kDigit = 8;
constexpr int kBins = 1 << kDigit;
constexpr int kShWords = 128;  // scalars (0..15, 48..49), a small bin's list (16..47), warp sums (64..127)
// Dynamic shared memory: the histogram, the slice's histogram above the
// threshold (zeroed at the start, so that step 2 needs no barrier to clear
// one), kShWords scalars, then the candidates.
constexpr int kMaxSample = 1024;  // sample vectors
constexpr int kRecoveryHists = 4;  // the recovery's digit passes, one histogram each (32-bit keys: 4)
// CTA 0 ranks a bin of at most this many keys (and a quarter of the room)
// directly.
constexpr u32 kDirectRank = 256;
// The most CTAs a row (the host checks it).
constexpr int kMaxCtas = 256;
// Per row: 8 counters; the threshold pass's histogram, kHistWords 64-bit
// words: the kBins bins and the count of keys equal to the threshold, each
// the row's count in its low half and the number of CTAs that have added to
// it in its high half, then the tally (the CTAs that have added their
// histogram in its high half, the adds they made in its low half), so that
// a reader knows the histogram complete without a grid barrier; the
// recovery's histograms; each CTA's count of
// ties plus one (deterministic mode: 0 is "not yet written"); then the
// candidates (TopkArgs::buffer 8-byte words: key, position).
constexpr int kHistWords = kBins + 2;
constexpr int kEqWord = kBins;
constexpr int kTallyWord = kBins + 1;
constexpr int kRowWords = 8 + 2 * kHistWords + kBins * kRecoveryHists + kMaxCtas;
constexpr unsigned long long kOneCta = 1ull << 32;  // one add to a histogram word, one CTA to the tally
enum Counter { kTicket = 0, kArrive, kOutN, kTieN };
// A row's workspace words: kRowWords, then the candidates, their room
// rounded up to even so that every row starts 16-byte aligned (the
// histogram's 16-byte loads; kRowWords is a multiple of 4).
__host__ __device__ constexpr long long row_words(int buffer) {
  return kRowWords + 2LL * ((buffer + 1) & ~1);
}
static_assert(kRowWords % 4 == 0, "rows 16-byte aligned");
// The threshold's margin: standard deviations of the sample's count above
// the rank-r key (a normal row's top keys fall in a binomial).
constexpr float kSigmas = 4.5f;

template <int DTYPE, int BLOCK, int VPT, bool DET = false, int PER_SM = 1>
struct Policy {
  static constexpr bool kDet = DET;  // deterministic mode (TOPK_FLAG_DETERMINISTIC): a kernel of its own
  // CTAs an SM the kernel is compiled to hold (__launch_bounds__' minimum):
  // 2 or 4 let a batch of rows put more CTAs a row on the grid than there
  // are SMs, at 65536 / (BLOCK x PER_SM) registers a thread.
  static constexpr int kPerSm = PER_SM;
  static constexpr int kDType = DTYPE;
  static constexpr int kBlock = BLOCK;
  static constexpr int kVpt = VPT;  // 16-byte vectors of the slice a thread holds
  static constexpr int kVec = Keys<DTYPE>::kVec;
  static constexpr int kBits = Keys<DTYPE>::kBits;
  static constexpr int kSampleVecs = (kMaxSample + BLOCK - 1) / BLOCK;  // a thread's sample vectors
  static constexpr int kStaticWords = 2 * kBins + kShWords;  // dynamic shared memory before the candidates
  static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "block");
  static_assert(PER_SM >= 1 && PER_SM * BLOCK <= 2048, "CTAs an SM");
};

__device__ __forceinline__ u32 atomic_add_release(u32* p, u32 v) {
  u32 old;
  asm volatile("atom.add.release.gpu.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
__device__ __forceinline__ u32 atomic_add_acq_rel(u32* p, u32 v) {
  u32 old;
  asm volatile("atom.add.acq_rel.gpu.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
__device__ __forceinline__ u32 load_acquire(const u32* p) {
  u32 v;
  asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ u32 load_cg(const u32* p) {
  u32 v;
  asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ u32 load_relaxed(const u32* p) {
  u32 v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void store_relaxed(u32* p, u32 v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
// Two consecutive 64-bit words (16-byte aligned), read as they stand.
__device__ __forceinline__ void load_relaxed2(const unsigned long long* p, unsigned long long* a,
                                              unsigned long long* b) {
  asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];" : "=l"(*a), "=l"(*b) : "l"(p) : "memory");
}
// One 64-bit word, read as it stands.
__device__ __forceinline__ unsigned long long load_relaxed64(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
// Asks L2 for the 128-byte line that holds p (no register, no wait).
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}
// A gathered candidate: its key in the low word (never 0: every gathered key
// is above the threshold), its position in the high one, stored and read as
// one 8-byte word so that a reader that sees the key sees its position.
__device__ __forceinline__ void store_candidate(unsigned long long* p, u32 key, int pos) {
  const unsigned long long v = static_cast<unsigned long long>(key) | (static_cast<unsigned long long>(pos) << 32);
  asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// Waits until candidate *p has been stored (its key is not 0) and returns it.
__device__ __forceinline__ unsigned long long await_candidate(const unsigned long long* p) {
  unsigned long long v;
  do {
    v = load_relaxed64(p);
  } while (static_cast<u32>(v) == 0u);
  return v;
}

// Every thread of the CTA: waits until `target` arrivals of the row's CTAs
// (this one's included). Each thread's global writes and atomics before it
// are visible to every CTA after it: the CTA barrier orders them before
// thread 0's release, whose acquire by the others the CTA barrier after it
// passes on (the pattern of a cooperative grid sync).
__device__ __forceinline__ void grid_barrier(u32* arrive, u32 target) {
  __syncthreads();
  if (threadIdx.x == 0) {
    atomic_add_release(arrive, 1u);
    while (load_acquire(arrive) < target) {
    }
  }
  __syncthreads();
}

// Every thread of the CTA, once every CTA of the row has added its
// histogram (G of them): warp 0 reads the row's counts above the threshold
// and at it (sh[8], sh[9]) and, when at least k keys lie above it, finds
// the k-th key's bin in the row's histogram in registers: its bin in sh[1],
// the rank within it in sh[0], its count in sh[11], and above[d] (kBins
// words of shared memory) gets the row's count of keys in the bins above d,
// where bin d's keys start in the output. With `det`, sh[15] gets the ties
// of the CTAs before `part` (tie_cnt[0..part)). Every thread calls
// between() after the first CTA barrier, its shared writes seen by all
// after the last.
//
// No grid barrier: a CTA adds each nonzero bin of its histogram and its
// count at the threshold (zero too) as one add each, a word's high half
// counting its adds, and then one to the tally: a CTA and its number of
// adds. Warp 0 reads the words and the tally together until the tally
// shows all G CTAs and the words' adds sum to the tally's: then every add
// is in (a word's adds are never overcounted, and its count moves with
// them in one atomic), with no ordering between the words needed. A grid
// barrier (every thread's atomics performed, thread 0's release, the
// others' acquire) put about one L2 round trip more on the path from the
// last CTA's adds to the others' reads; an add to every word, zero counts
// too, so that each word counted to G, cost the same-address atomics of all
// G CTAs on every word (H100, 1 x 524288 at 128 CTAs: 8.63 -> 9.11 us).
// `nz`: which of this thread's words (i + j x blockDim) are nonzero bins.
// One CTA barrier then passes the result on.
template <int N, class Between>
__device__ __forceinline__ void grid_meet_find(unsigned long long* row_hist, const u32* tie_cnt, int part, bool det,
                                               u32 G, u32 k, u32* sh, u32* above, const bool (&nz)[N],
                                               const Between& between);
// Rows of at most this many CTAs read the whole histogram in each poll;
// more CTAs wait on the tally word alone first, their polls of every word
// crowding the lines the adds go to (development A/B, topk-probe --define
// TOPK_GRID_EAGER_CTAS=N).
#ifndef TOPK_GRID_EAGER_CTAS
#define TOPK_GRID_EAGER_CTAS 32
#endif
// The row's counter, histogram and tally lines asked into L2 at launch,
// one line a CTA (the first lines' CTAs), so that the first atomics on them
// do not wait on memory when an earlier kernel evicted them (0: none;
// development A/B, topk-probe --define TOPK_GRID_WS_PREFETCH=0).
#ifndef TOPK_GRID_WS_PREFETCH
#define TOPK_GRID_WS_PREFETCH 1
#endif

// The keys a thread writes out or gathers after the meeting (those at or
// above the k-th key's bin, about one in 16 of its keys on a normal row)
// taken one by one from a mask of its slots (1), instead of a test and a
// body for each slot, which the warp runs wherever one lane's key passes
// (0). By default (-1) the kernels of one CTA an SM take the mask: on an
// H200 8 x 131072 k2048 9.79 -> 9.16 us, 1 x 524288 8.22 -> 8.03, 1 x
// 131072 7.15 -> 7.06; those of several an SM (per_sm 2 or 4) keep the
// test per slot: two an SM gained on normal rows too (64 x 32768 12.18 ->
// 11.87) but lost on 16 distinct values (14.88 -> 15.52, past 1.25x the
// normal rows' time; docs/PERFORMANCE.md, "The grid kernel's keys out by
// a mask"). Development A/B: topk-probe --define TOPK_GRID_EMIT_MASK=0 or 1.
#ifndef TOPK_GRID_EMIT_MASK
#define TOPK_GRID_EMIT_MASK -1
#endif

// Deterministic mode, one warp after every CTA of the row has written its
// count: the ties of the row's CTAs before `part` (tie_cnt[0..part), each
// stored plus one, so 0 means not yet written), in every lane.
__device__ __forceinline__ u32 ties_before(const u32* tie_cnt, int part) {
  u32 before = 0;
  for (int p = static_cast<int>(threadIdx.x & 31); p < part; p += 32) {
    u32 v;
    do {
      v = load_relaxed(&tie_cnt[p]);
    } while (v == 0u);
    before += v - 1u;
  }
  return __reduce_add_sync(kFullMask, before);
}

// A slot from counter *c for each lane with `take`: one atomic a warp.
// Every lane calls it.
__device__ __forceinline__ u32 warp_slot(u32* c, bool take) {
  const u32 m = __ballot_sync(kFullMask, take);
  const int lane = threadIdx.x & 31;
  u32 base = 0;
  if (m != 0 && lane == __ffs(m) - 1) base = atomicAdd(c, static_cast<u32>(__popc(m)));
  base = __shfl_sync(kFullMask, base, m != 0 ? __ffs(m) - 1 : 0);
  return base + __popc(m & ((1u << lane) - 1u));
}

// Slots for this thread's m1 and m2 items in global counters *c1 and *c2,
// one atomic per CTA each; returns the first slots. ws: 64 words of shared
// scratch, base: two. Every thread calls it; two barriers.
__device__ uint2 cta_slots(u32* c1, u32 m1, u32* c2, u32 m2, u32* ws, u32* base) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  u32 i1 = m1, i2 = m2;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const u32 o1 = __shfl_up_sync(kFullMask, i1, d), o2 = __shfl_up_sync(kFullMask, i2, d);
    if (lane >= d) i1 += o1, i2 += o2;
  }
  if (lane == 31) ws[warp] = i1, ws[32 + warp] = i2;
  __syncthreads();
  if (warp == 0) {
    // The warps' totals, scanned by warp 0: lane w ends with warp w's first
    // slot; lanes 0 and 1 take the CTA's slots of the two counters.
    const int warps = static_cast<int>(blockDim.x >> 5);
    const u32 a = lane < warps ? ws[lane] : 0u, b = lane < warps ? ws[32 + lane] : 0u;
    const u32 s1 = warp_inclusive_prefix(a), s2 = warp_inclusive_prefix(b);
    if (lane < warps) ws[lane] = s1 - a, ws[32 + lane] = s2 - b;
    const u32 t1 = __shfl_sync(kFullMask, s1, 31), t2 = __shfl_sync(kFullMask, s2, 31);
    if (lane < 2) {  // both atomics in one instruction
      const u32 t = lane == 0 ? t1 : t2;
      base[lane] = t ? atomicAdd(lane == 0 ? c1 : c2, t) : 0u;
    }
  }
  __syncthreads();
  return make_uint2(base[0] + ws[warp] + i1 - m1, base[1] + ws[32 + warp] + i2 - m2);
}

// A histogram of kBins counters in shared memory.
struct Hist {
  u32* h;
  __device__ void clear() const {
    for (int i = threadIdx.x; i < kBins; i += blockDim.x) h[i] = 0;
  }
  __device__ __forceinline__ void add(u32 bin) const { atomicAdd(&h[bin], 1u); }
  // Warp 0: the bin holding rank *rank (1 = largest) among the first `bins`
  // counters, from the top; writes it to *bin, its count to *in_bin, and
  // leaves in *rank the rank within the bin. The caller puts a barrier after.
  __device__ void find(int bins, u32* rank, u32* bin, u32* in_bin) const {
    if (threadIdx.x >= 32) return;
    constexpr int kPer = kBins / 32;
    const int lane = threadIdx.x;
    const int top = bins - 1 - lane * kPer;  // this lane's bins: top, top - 1, ... (those >= 0)
    u32 sum = 0;
#pragma unroll 8
    for (int j = 0; j < kPer; ++j) sum += top - j >= 0 ? h[top - j] : 0u;
    const u32 incl = warp_inclusive_prefix(sum);
    const u32 r = *rank;
    __syncwarp();  // every lane has read *rank before one lane writes it
    const u32 excl = incl - sum;
    const u32 ballot = __ballot_sync(kFullMask, excl < r && r <= incl);
    if (ballot != 0 && lane == __ffs(ballot) - 1) {
      u32 above = excl;
      for (int j = 0; j < kPer; ++j) {
        const u32 c = h[top - j];
        if (above + c >= r) {
          *bin = top - j;
          *in_bin = c;
          *rank = r - above;
          break;
        }
        above += c;
      }
    }
    __syncwarp();
  }
};

// The rank-th largest (1 = largest) of the values the threads hold, all
// below 2^bits: digit passes of up to kDigit bits from the top; with
// stop_left > 0 the passes stop with that many low bits left and the result
// is the low end of the bin holding the rank-th value (a lower bound of it)
// unless a bin of at most 32 values resolved it first. for_each(f) calls
// f(x) on each of this thread's values. sh[0..1], sh[10..11], sh[16..47]:
// scratch; sh[0] ends as the rank within the result's ties (or its bin).
template <class ForEach>
__device__ u32 select_digits(const ForEach& for_each, int bits, u32 rank, const Hist& hist, u32* sh,
                             int stop_left) {
  if (threadIdx.x == 0) sh[0] = rank;
  u32 prefix = 0;
#pragma unroll 1
  for (int left = bits; left > stop_left;) {
    const int width = min(kDigit, left), shift = left - width;
    const u32 high = shift + width >= 32 ? 0u : ~0u << (shift + width);  // the digits already fixed
    const u32 mask = (1u << width) - 1u;
    hist.clear();
    if (threadIdx.x == 0) sh[10] = 0;
    __syncthreads();
    for_each([&](u32 x) {
      if (((x ^ prefix) & high) == 0) hist.add((x >> shift) & mask);
    });
    __syncthreads();
    hist.find(1 << width, &sh[0], &sh[1], &sh[11]);
    __syncthreads();
    const u32 in_bin = sh[11];
    prefix |= sh[1] << shift;
    left = shift;
    if (left > stop_left && in_bin <= 32) {
      // At most 32 values in the bin: one warp ranks them among themselves.
      u32* list = sh + 16;
      for_each([&](u32 x) {
        if (((x ^ prefix) >> shift) == 0) list[atomicAdd(&sh[10], 1u)] = x;
      });
      __syncthreads();
      if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        const u32 v = lane < static_cast<int>(in_bin) ? list[lane] : 0u;
        const WarpRank w = warp_rank(v, in_bin);
        const u32 r = sh[0];
        __syncwarp();  // every lane has read sh[0] before one lane writes it
        if (lane < static_cast<int>(in_bin) && w.above + w.equal_before + 1 == r) sh[1] = v, sh[0] = r - w.above;
      }
      __syncthreads();
      const u32 res = sh[1];
      __syncthreads();
      return res;
    }
  }
  return prefix;
}

// A lower bound of the rank-th largest (1 = largest) of the 32-bit values the
// threads hold, from one histogram of their top 16 bits over the 256 values
// of those bits up to the largest's: the rank-th value with its low 16 bits
// cleared, in one pass, what select_digits stopping with 16 bits left gives
// in two (unless its shortcut through a first bin of at most 32 values finds
// the value itself, up to 0xffff above this bound). *done is false, alike in every thread, when those bins
// hold fewer than `rank` values; the caller then puts a barrier before
// sh[0..2] and sh[11] are written again.
// for_each(f) calls f(x) on each of this thread's values. sh[2] ends as the
// largest value.
constexpr int kWindowShift = 16;
template <class ForEach>
__device__ u32 select_below_top(const ForEach& for_each, u32 rank, const Hist& hist, u32* sh, bool* done) {
  // The barrier first, while the sample's loads are in flight.
  hist.clear();
  if (threadIdx.x == 0) sh[0] = rank, sh[2] = 0, sh[11] = 0;
  __syncthreads();
  u32 m = 0;
  for_each([&](u32 x) { m = max(m, x); });
  m = __reduce_max_sync(kFullMask, m);
  if ((threadIdx.x & 31) == 0 && m != 0) atomicMax(&sh[2], m);
  __syncthreads();
  const u32 top = sh[2] >> kWindowShift;
  for_each([&](u32 x) {
    const u32 d = top - (x >> kWindowShift);
    if (d < static_cast<u32>(kBins)) hist.add(kBins - 1 - d);
  });
  __syncthreads();
  hist.find(kBins, &sh[0], &sh[1], &sh[11]);
  __syncthreads();
  *done = sh[11] != 0;
  return (top - (kBins - 1 - sh[1])) << kWindowShift;
}

// A CTA's slice of a row: keys in registers, positions relative to the
// range's start.
template <class P>
struct Slice {
  using K = Keys<P::kDType>;
  u32 key[P::kVpt * P::kVec];
  int v_begin, v_end;  // the slice's vectors (kVec elements each) of the range
  int len;             // the range's length

  __device__ __forceinline__ int pos(int j, int e) const {
    return (v_begin + j * P::kBlock + static_cast<int>(threadIdx.x)) * P::kVec + e;
  }
  __device__ __forceinline__ bool valid(int j, int e) const {
    const int v = v_begin + j * P::kBlock + static_cast<int>(threadIdx.x);
    return v < v_end && v * P::kVec + e < len;
  }
  // f(key, position) for each of this thread's elements of the range whose
  // key is at least `floor`: a mask of the slots first, then a loop over
  // its set bits (each key picked from the registers by a chain of
  // selects), so that a warp runs f as often as its lane with the most such
  // keys, not once a slot.
  template <class F>
  __device__ __forceinline__ void for_each_at_least(u32 floor, const F& f) const {
    constexpr int N = P::kVpt * P::kVec;
    static_assert(N <= 64, "a 64-bit mask of the slots");
    unsigned long long m = 0;
#pragma unroll
    for (int j = 0; j < P::kVpt; ++j)
#pragma unroll
      for (int e = 0; e < P::kVec; ++e)
        if (valid(j, e) && key[j * P::kVec + e] >= floor) m |= 1ull << (j * P::kVec + e);
#pragma unroll 1
    while (m != 0) {
      const int i = __ffsll(static_cast<long long>(m)) - 1;
      m &= m - 1;
      u32 x = key[0];
#pragma unroll
      for (int q = 1; q < N; ++q)
        if (q == i) x = key[q];
      f(x, pos(i / P::kVec, i % P::kVec));
    }
  }
  // f(key, position) for each of this thread's elements of the range.
  template <class F>
  __device__ __forceinline__ void for_each(const F& f) const {
#pragma unroll
    for (int j = 0; j < P::kVpt; ++j)
#pragma unroll
      for (int e = 0; e < P::kVec; ++e)
        if (valid(j, e)) f(key[j * P::kVec + e], pos(j, e));
  }
  // This thread's keys above kth and equal to it.
  __device__ __forceinline__ void count(u32 kth, u32* above, u32* eq) const {
    u32 a = 0, q = 0;
    for_each([&](u32 x, int) { a += x > kth, q += x == kth; });
    *above = a, *eq = q;
  }
};

// The keys of one whole 16-byte vector q of raw elements.
// Deterministic mode (`det`) keys canonical bits (-0.0 as +0.0, every NaN
// alike), so that values the contract calls equal are ties.
template <class P>
__device__ __forceinline__ u32 make_key(u32 raw, u32 flip, bool det) {
  using K = Keys<P::kDType>;
  return K::key_flip(det ? K::canonical(raw) : raw, flip);
}
template <class P>
__device__ __forceinline__ void vec_keys(uint4 q, u32 flip, bool det, u32* out) {
  const u32 w[4] = {q.x, q.y, q.z, q.w};
  if (P::kVec == 4) {
#pragma unroll
    for (int e = 0; e < 4; ++e) out[e] = make_key<P>(w[e], flip, det);
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) out[e] = make_key<P>((w[e >> 1] >> (16 * (e & 1))) & 0xffffu, flip, det);
  }
}

// Whether vector v (kVec elements from position v * kVec) of the range at
// `base` is whole and 16-byte aligned: one load.
template <class P>
__device__ __forceinline__ bool whole_vec(bool aligned, int v, int len) {
  return aligned && v * P::kVec + P::kVec <= len;
}

// Loads vector v of the range at `base` as keys; elements at or past `len`
// get key 0 (the caller masks them).
template <class P>
__device__ __forceinline__ void load_vec(const typename Keys<P::kDType>::Raw* base, bool aligned, int v, int len,
                                         u32 flip, bool det, u32* out) {
  const int p0 = v * P::kVec;
  if (whole_vec<P>(aligned, v, len)) {
    vec_keys<P>(__ldg(reinterpret_cast<const uint4*>(base + p0)), flip, det, out);
  } else {
#pragma unroll
    for (int e = 0; e < P::kVec; ++e) out[e] = p0 + e < len ? make_key<P>(static_cast<u32>(base[p0 + e]), flip, det) : 0u;
  }
}

// Every thread of the CTA: writes the slice's keys above `kth` to output
// slots [0, above) and its ties with `kth` to slots from `above` while fewer
// than `ties` are taken, through the row's counters *out_n and *tie_n (one
// atomic a CTA each). `emit(position, slot)` writes one output.
template <class P, class Emit>
__device__ __forceinline__ void write_above_and_ties(const Slice<P>& s, u32 kth, u32 above, u32 ties, u32* out_n,
                                                     u32* tie_n, u32* sh, const Emit& emit) {
  u32 m1, m2;
  s.count(kth, &m1, &m2);
  __syncthreads();
  uint2 slot = cta_slots(out_n, m1, tie_n, m2, sh + 64, sh + 48);
  s.for_each([&](u32 x, int p) {
    if (x > kth) emit(p, slot.x++);
    if (x == kth) {
      if (slot.y < ties) emit(p, above + slot.y);
      ++slot.y;
    }
  });
}

template <int N, class Between>
__device__ __forceinline__ void grid_meet_find(unsigned long long* row_hist, const u32* tie_cnt, int part, bool det,
                                               u32 G, u32 k, u32* sh, u32* above, const bool (&nz)[N],
                                               const Between& between) {
  // The CTA's adds: its nonzero bins and the count at the threshold.
  u32 adds = 1;
#pragma unroll
  for (int j = 0; j < N; ++j)
    if (j * static_cast<int>(blockDim.x) < kBins) adds += __syncthreads_count(nz[j]);
  if (threadIdx.x == 0) atomicAdd(&row_hist[kTallyWord], kOneCta | adds);
  between();
  if (threadIdx.x < 32) {
    const u32 lane = threadIdx.x;
    // Lane l: bins 255 - 8 l down to 248 - 8 l, words w[7] down to w[0];
    // lane 0 also the count at the threshold and the tally.
    const unsigned long long* mine = row_hist + (kBins - 8 - 8 * static_cast<int>(lane));
    unsigned long long w[8], eq = 0, tally = 0;
    const bool eager = G <= static_cast<u32>(TOPK_GRID_EAGER_CTAS);
    bool full;
    do {
      if (!eager) {
        // Many CTAs: lane 0 alone waits for the tally's last CTA first.
        if (lane == 0)
          while (static_cast<u32>(load_relaxed64(row_hist + kTallyWord) >> 32) != G) {
          }
        __syncwarp();
      }
#pragma unroll
      for (int e = 0; e < 8; e += 2) load_relaxed2(mine + e, &w[e], &w[e + 1]);
      if (lane == 0) load_relaxed2(row_hist + kEqWord, &eq, &tally);
      u32 seen = static_cast<u32>(eq >> 32);
#pragma unroll
      for (int e = 0; e < 8; ++e) seen += static_cast<u32>(w[e] >> 32);
      seen = __reduce_add_sync(kFullMask, seen);
      full = static_cast<u32>(tally >> 32) == G && seen == static_cast<u32>(tally);
    } while (!__shfl_sync(kFullMask, full, 0));
    u32 c[8], sum = 0;
#pragma unroll
    for (int e = 0; e < 8; ++e) c[e] = static_cast<u32>(w[7 - e]), sum += c[e];
    const u32 A = __reduce_add_sync(kFullMask, sum);
    if (lane == 0) sh[8] = A, sh[9] = static_cast<u32>(eq);
    if (det) {
      const u32 before = ties_before(tie_cnt, part);
      if (lane == 0) sh[15] = before;
    }
    u32 bin, cnt, left;
    // A is the same in every lane, so the whole warp scans; one lane finds the bin.
    // above[d]: the row's keys in the bins above d, the first output slot
    // of bin d's keys (from the same warp scan).
    if (A >= k && rank_bin(c, lane, k, &bin, &cnt, &left, above)) sh[1] = bin, sh[11] = cnt, sh[0] = left;
  }
  __syncthreads();
}

// Deterministic mode: every thread of the CTA writes the slice's keys above
// `kth` to output slots [0, above) (one atomic a CTA on *out_n) and its
// ties with `kth` by position: the slice's positions run in the order
// (vector j, thread, element) and the CTAs' slices follow each other, so
// the tie of rank r in this CTA is the row's tie base + r (base: the ties
// of the CTAs before) and takes slot above + base + r while that is below
// above + need. sh + 64: 64 words of scratch, alternating halves a vector
// (two barriers each).
template <class P, class Emit>
__device__ void write_above_and_lowest_ties(const Slice<P>& s, u32 kth, u32 above, u32 need, u32 base, u32* out_n,
                                            u32* sh, const Emit& emit) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  constexpr int kWarps = P::kBlock / 32;
  u32 m1 = 0;
  s.for_each([&](u32 x, int) { m1 += x > kth; });
  __syncthreads();
  uint2 slot = cta_slots(out_n, m1, out_n, 0u, sh + 64, sh + 48);
  s.for_each([&](u32 x, int p) {
    if (x > kth) emit(p, slot.x++);
  });
  __syncthreads();  // cta_slots' scratch read
  u32 before = base;  // the row's ties before this CTA's vector j
#pragma unroll
  for (int j = 0; j < P::kVpt; ++j) {
    u32 c = 0;
#pragma unroll
    for (int e = 0; e < P::kVec; ++e) c += s.valid(j, e) && s.key[j * P::kVec + e] == kth;
    const u32 incl = warp_inclusive_prefix(c);
    u32* w = sh + 64 + 32 * (j & 1);
    if (lane == 31) w[warp] = incl;
    __syncthreads();
    if (warp == 0) {
      const u32 t = lane < kWarps ? w[lane] : 0u;
      const u32 sc = warp_inclusive_prefix(t);
      __syncwarp();
      if (lane < kWarps) w[lane] = sc;
    }
    __syncthreads();
    u32 r = before + (warp > 0 ? w[warp - 1] : 0u) + incl - c;
    before += w[kWarps - 1];
#pragma unroll
    for (int e = 0; e < P::kVec; ++e)
      if (s.valid(j, e) && s.key[j * P::kVec + e] == kth) {
        if (r < need) emit(s.pos(j, e), above + r);
        ++r;
      }
  }
}

// The whole kernel (grid_topk_kernel below is its entry point); DET:
// deterministic mode (Policy::kDet, the host's `ties` knob, which the host
// sets with TOPK_FLAG_DETERMINISTIC), a kernel of its own: in one kernel
// with the other path its registers slowed that path (8 x 131072 k2048,
// H100: 11.80 against 11.24 us).
template <class P, bool DET>
__device__ __forceinline__ void grid_select(const TopkArgs& a) {
  using K = Keys<P::kDType>;
  using Raw = typename K::Raw;
  extern __shared__ u32 smem[];
  const Hist hist{smem};
  const Hist hist2{smem + kBins};  // step 2's, zeroed below
  u32* sh = smem + 2 * kBins;
  u32* fin_key = sh + kShWords;
  int* fin_idx = reinterpret_cast<int*>(fin_key + a.buffer);
  const int G = a.cache_cap;
  const int row = blockIdx.x / G, part = blockIdx.x % G;
  if (row >= a.batch) return;
  const RowRange range = row_range(a, row);
  const int len = range.end - range.start;
  const Raw* rowp = static_cast<const Raw*>(a.input) + static_cast<long long>(row) * a.row_stride;
  const Raw* base = rowp + range.start;
  int* out = a.out_idx + static_cast<long long>(row) * a.k;
  Raw* outv = (a.flags & TOPK_FLAG_VALUES) ? static_cast<Raw*>(a.out_val) + static_cast<long long>(row) * a.k : nullptr;
  const u32 k = static_cast<u32>(a.k);
  if (len <= a.k) {  // the whole range, then padding: no workspace
    take_whole_range(rowp, range, out, outv, part * P::kBlock + threadIdx.x, G * P::kBlock, a.k,
                     static_cast<Raw>(K::kLowest));
    return;
  }
  const u32 flip = (a.flags & TOPK_FLAG_SMALLEST) ? (P::kBits == 32 ? ~0u : 0xffffu) : 0u;
  constexpr bool det = DET;
  const bool aligned = (reinterpret_cast<unsigned long long>(base) & 15u) == 0;
  u32* ws = static_cast<u32*>(a.workspace) + static_cast<long long>(row) * row_words(a.buffer);
  u32* ctr = ws;
  unsigned long long* row_hist = reinterpret_cast<unsigned long long*>(ws + 8);  // 16-byte aligned
  u32* rec_hist = ws + 8 + 2 * kHistWords;  // the recovery pass p's at rec_hist + kBins p
  u32* tie_cnt = rec_hist + kBins * kRecoveryHists;  // kMaxCtas words
  // 16-byte aligned: the workspace is, and so is every row (row_words).
  unsigned long long* cand = reinterpret_cast<unsigned long long*>(ws + kRowWords);
#if TOPK_GRID_WS_PREFETCH
  {
    // The lines from the counters to the tally (up to the recovery's
    // histograms).
    const unsigned long long first = reinterpret_cast<unsigned long long>(ws) & ~127ull;
    const int lines = static_cast<int>((reinterpret_cast<unsigned long long>(rec_hist) - first + 127) / 128);
    if (threadIdx.x == P::kBlock - 1)
      for (int l = part; l < lines; l += G) prefetch_l2(reinterpret_cast<const void*>(first + 128ull * l));
  }
#endif
  const int lane = threadIdx.x & 31;
  if (threadIdx.x == 0) sh[3] = 0, sh[12] = 0, sh[14] = 0;
  hist2.clear();  // before the first barrier

  // 1. The sample's lower bound t of its rank-r key, the same in every CTA.
  const int full = len / P::kVec;  // whole vectors in the range
  const int S = min(a.rounds, full);
  u32 skey[P::kSampleVecs * P::kVec];
  int scount = 0;
  if (S > 0) {
    const int spacing = full / S;
#pragma unroll
    for (int j = 0; j < P::kSampleVecs; ++j) {
      const int i = threadIdx.x + j * P::kBlock;
      if (i < S) {
        load_vec<P>(base, aligned, i * spacing, len, flip, det, &skey[j * P::kVec]);
        scount = (j + 1) * P::kVec;
      }
    }
  }
  // The slice's whole vectors are loaded now, their latency under the
  // select's barriers; the keys are made after it.
  Slice<P> s;
  s.len = len;
  const int nvec = (len + P::kVec - 1) / P::kVec;
  const int per = (nvec + G - 1) / G;
  s.v_begin = min(nvec, part * per);
  s.v_end = min(nvec, s.v_begin + per);
  uint4 q[P::kVpt];
#pragma unroll
  for (int j = 0; j < P::kVpt; ++j) {
    const int v = s.v_begin + j * P::kBlock + threadIdx.x;
    q[j] = v < s.v_end && whole_vec<P>(aligned, v, len) ? __ldg(reinterpret_cast<const uint4*>(base + v * P::kVec))
                                                       : make_uint4(0u, 0u, 0u, 0u);
  }
  u32 t = 0;
  if (S > 0) {
    const float m = static_cast<float>(S) * P::kVec;
    const float c = static_cast<float>(k) * m / static_cast<float>(len);
    const u32 r = static_cast<u32>(fmaxf(1.f, fminf(m, ceilf(c + kSigmas * sqrtf(c) + 3.f))));
    auto sample = [&](auto f) {
#pragma unroll
      for (int i = 0; i < P::kSampleVecs * P::kVec; ++i)
        if (i < scount) f(skey[i]);
    };
    bool done = false;
    // 32-bit keys: one pass over the 256 values of the top 16 bits up to
    // the sample's largest key (a normal row's rank-th sample key is within
    // two binades of it), the digit passes when that misses.
    if constexpr (P::kBits == 32) {
      t = select_below_top(sample, r, hist, sh, &done);
      if (!done) __syncthreads();
    }
    if (!done) t = select_digits(sample, P::kBits, r, hist, sh, P::kBits / 2);
  }
  if (S <= 0) __syncthreads();  // sh[12..14] and hist2 zeroed above (no select: no barrier yet)

  // 2. The slice, its counts above and at t, and its histogram above t.
#pragma unroll
  for (int j = 0; j < P::kVpt; ++j) {
    const int v = s.v_begin + j * P::kBlock + threadIdx.x;
    if (v < s.v_end && whole_vec<P>(aligned, v, len)) {
      vec_keys<P>(q[j], flip, det, &s.key[j * P::kVec]);
    } else if (v < s.v_end) {
      load_vec<P>(base, aligned, v, len, flip, det, &s.key[j * P::kVec]);
    } else {
#pragma unroll
      for (int e = 0; e < P::kVec; ++e) s.key[j * P::kVec + e] = 0;
    }
  }
  const u32 lo = t + 1;  // every key above t is at least lo (t < the largest key: t is a sample key's bin floor)
  // The histogram's span above t: the sample's largest key, which
  // select_below_top left in sh[2] (no barrier); else a CTA max.
  const bool span_known = P::kBits == 32 && S > 0;
  u32 span = 0;
  if (span_known) {
    const u32 top = sh[2];
    span = top > t ? top - lo : 0u;
  } else {
    u32 mx = 0;
#pragma unroll
    for (int i = 0; i < P::kSampleVecs * P::kVec; ++i)
      if (i < scount && skey[i] > t) mx = max(mx, skey[i] - lo);
    mx = __reduce_max_sync(kFullMask, mx);
    if (lane == 0 && mx != 0) atomicMax(&sh[12], mx);
  }
  u32 n_eq = 0;
  s.for_each([&](u32 x, int) { n_eq += x == t; });
  if (!span_known) {
    __syncthreads();
    span = sh[12];
  }
  const int shift = max((span == 0 ? 0 : 32 - __clz(span)) - kDigit, 0);
  auto digit = [&](u32 x) { return min(static_cast<u32>(kBins - 1), (x - lo) >> shift); };
  s.for_each([&](u32 x, int) {
    if (x > t) hist2.add(digit(x));
  });
  const u32 we = __reduce_add_sync(kFullMask, n_eq);
  if (lane == 0 && we) atomicAdd(&sh[14], we);
  __syncthreads();
  // Each bin's count added to the row's, the sum before it kept: this CTA's
  // keys of bin d take the row's places [old, old + count) among bin d's,
  // so hist2.h[d] becomes old + count and each key takes one place below
  // it (a shared atomic decrement) after the grid barrier, where a scan of
  // the CTAs' counts and a global atomic each took those places before
  // (H100: 1 x 131072 k2048 7.86 -> 7.55 us, 1 x 524288 9.56 -> 8.64).
  // The sums come back while the CTA meets the others: each thread keeps
  // them in registers and writes them to hist2 inside grid_meet_find,
  // after its first barrier. The nonzero bins get an add each, and the
  // count at the threshold (the word after the bins) one whatever it is.
  constexpr int kEnds = (kBins + 1 + P::kBlock - 1) / P::kBlock;
  u32 ends[kEnds];
  bool nz[kEnds];
#pragma unroll
  for (int j = 0; j < kEnds; ++j) {
    const int i = threadIdx.x + j * P::kBlock;
    const u32 c = i < kBins ? hist2.h[i] : i == kBins ? sh[14] : 0u;
    nz[j] = i < kBins && c != 0;
    const u32 old = nz[j] || i == kBins ? static_cast<u32>(atomicAdd(&row_hist[i], kOneCta | c)) : 0u;
    ends[j] = nz[j] ? old + c : 0u;
  }
  auto write_ends = [&] {
#pragma unroll
    for (int j = 0; j < kEnds; ++j) {
      const int i = threadIdx.x + j * P::kBlock;
      if (i < kBins && ends[j]) hist2.h[i] = ends[j];
    }
  };
  if (det && threadIdx.x == 0) store_relaxed(&tie_cnt[part], sh[14] + 1u);

  // 3. Every CTA's adds in, then the row's counts and the k-th key's bin.
  // hist.h (the sample's histogram, done with) gets each bin's first output
  // slot.
  grid_meet_find(row_hist, tie_cnt, part, det, static_cast<u32>(G), k, sh, hist.h, nz, write_ends);
  const u32 A = sh[8], E = sh[9];
  u32 tie_base = det ? sh[15] : 0u;  // written by grid_meet_find in deterministic mode only
  bool miss = A + E < k;
  u32 b = 0, rb = 0, cb = 0;
  auto emit = [&](int p, u32 slot) {
    out[slot] = range.start + p;
    if (outv) outv[slot] = base[p];
  };
  // The k-th key `wkth` when it is found below (the keys above it out, then
  // `wneed` of its ties after `wabove`; deterministic: the lowest-index ones,
  // tie_base those of the CTAs before), written in one place.
  bool ties_out = false;
  u32 wkth = 0, wabove = 0, wneed = 0;
  if (!miss && A < k) {
    // Every key above t, then ties with t up to k.
    ties_out = true, wkth = t, wabove = A, wneed = k - A;
  } else if (!miss) {
    // The k-th key's bin b: keys above it straight out, those in it gathered.
    b = sh[1], rb = sh[0], cb = sh[11];
    miss = cb > static_cast<u32>(a.buffer);
    if (!miss) {
      auto out_or_gather = [&](u32 x, int p) {
        const u32 d = digit(x);
        const u32 r = atomicSub(&hist2.h[d], 1u) - 1u;  // this key's place among the row's keys of bin d
        if (d > b)
          emit(p, hist.h[d] + r);
        else
          store_candidate(cand + r, x, p);
      };
      constexpr bool kMask = TOPK_GRID_EMIT_MASK < 0 ? P::kPerSm == 1 : TOPK_GRID_EMIT_MASK != 0;
      if constexpr (kMask) {
        // Bin b's least key: b is some key's digit, so no overflow (the last
        // bin, which also holds the keys past the span, starts there too).
        s.for_each_at_least(lo + (b << shift), out_or_gather);
      } else {
        s.for_each([&](u32 x, int p) {
          if (x > t && digit(x) >= b) out_or_gather(x, p);
        });
      }
    }
  }
  if (miss) {
    // 4'. The guess failed on this row (every CTA sees it alike): an exact
    // radix select over the slices' registers, one digit a grid barrier,
    // each pass with a histogram of its own.
    u32 prefix = 0, rank = k;
    constexpr int kPasses = P::kBits / kDigit;
#pragma unroll 1
    for (int pass = 0; pass < kPasses; ++pass) {
      const int sh_d = P::kBits - kDigit * (pass + 1);
      u32* rh = rec_hist + kBins * pass;
      __syncthreads();
      hist.clear();
      __syncthreads();
      s.for_each([&](u32 x, int) {
        if (pass == 0 || ((x ^ prefix) >> (sh_d + kDigit)) == 0) hist.add((x >> sh_d) & (kBins - 1));
      });
      __syncthreads();
      for (int i = threadIdx.x; i < kBins; i += P::kBlock)
        if (hist.h[i]) atomicAdd(&rh[i], hist.h[i]);
      grid_barrier(&ctr[kArrive], static_cast<u32>(G) * (1 + pass));
      for (int i = threadIdx.x; i < kBins; i += P::kBlock) hist.h[i] = load_cg(&rh[i]);
      if (threadIdx.x == 0) sh[0] = rank;
      __syncthreads();
      hist.find(kBins, &sh[0], &sh[1], &sh[11]);
      __syncthreads();
      prefix |= sh[1] << sh_d;
      rank = sh[0];
    }
    // prefix is the k-th key; `rank` of its ties are taken (deterministic:
    // the lowest-index ones, after one more grid barrier that publishes
    // every CTA's count of them).
    ties_out = true, wkth = prefix, wabove = k - rank, wneed = rank;
    if (det) {
      u32 nq = 0;
      s.for_each([&](u32 x, int) { nq += x == prefix; });
      nq = __reduce_add_sync(kFullMask, nq);
      if (lane == 0 && nq != 0) atomicAdd(&sh[3], nq);
      __syncthreads();
      if (threadIdx.x == 0) tie_cnt[part] = sh[3] + 1u;  // before the barrier's release
      grid_barrier(&ctr[kArrive], static_cast<u32>(G) * (1 + kPasses));
      if (threadIdx.x < 32) {
        const u32 before = ties_before(tie_cnt, part);
        if (lane == 0) sh[15] = before;
      }
      __syncthreads();
      tie_base = sh[15];
    }
  }
  if (ties_out) {
    if (det)
      write_above_and_lowest_ties(s, wkth, wabove, wneed, tie_base, &ctr[kOutN], sh, emit);
    else
      write_above_and_ties(s, wkth, wabove, wneed, &ctr[kOutN], &ctr[kTieN], sh, emit);
  }

  // 5. CTA 0 ranks the gathered bin as its keys arrive (each candidate
  // word is stored whole, so no ticket needs to wait for the others); the
  // CTA that takes the last ticket zeroes the row's counters and histograms,
  // its atomic's round trip beside CTA 0's ranking.
  __syncthreads();
  // The last warp's lane 0: its atomic is issued before any poll of its own
  // (it polls only for a bin of more keys than the block's first warps take).
  constexpr int kTicketThread = P::kBlock - 32;
  if (threadIdx.x == kTicketThread) sh[4] = atomic_add_acq_rel(&ctr[kTicket], 1u) == static_cast<u32>(G - 1);
  if (!miss && A >= k && part == 0) {
    for (u32 i = threadIdx.x; i < cb; i += P::kBlock) {
      const unsigned long long v = await_candidate(cand + i);
      fin_key[i] = static_cast<u32>(v), fin_idx[i] = static_cast<int>(v >> 32);
      cand[i] = 0;  // the workspace zero again
    }
    __syncthreads();
    const u32 first = k - rb;  // the keys above the bin
    if (cb <= min(kDirectRank, static_cast<u32>(a.buffer) / 4)) {
      // Few keys (a normal row's bin holds a few dozen): each one's place
      // among them, counted directly (ties in gather order), is its output
      // slot when below rb.
      // Deterministic: ties by position instead.
      for (u32 i = threadIdx.x; i < cb; i += P::kBlock) {
        const u32 x = fin_key[i];
        const int pi = fin_idx[i];
        u32 before = 0;
        for (u32 j = 0; j < cb; ++j) {
          const u32 y = fin_key[j];
          before += (y > x) | ((y == x) & (det ? fin_idx[j] < pi : j < i));
        }
        if (before < rb) emit(pi, first + before);
      }
    } else {
      // The rb-th largest of the bin's keys: digits of their offset from the
      // bin's floor.
      const u32 floor = lo + (b << shift);
      u32 m = 0;
      for (u32 i = threadIdx.x; i < cb; i += P::kBlock) m = max(m, fin_key[i] - floor);
      m = __reduce_max_sync(kFullMask, m);
      if (threadIdx.x == 0) sh[7] = 0;
      __syncthreads();
      if (lane == 0) atomicMax(&sh[7], m);
      __syncthreads();
      const u32 bspan = sh[7];
      const int bits = bspan == 0 ? 1 : 32 - __clz(bspan);
      const u32 kth = floor + select_digits(
                                  [&](auto f) {
                                    for (u32 i = threadIdx.x; i < cb; i += P::kBlock) f(fin_key[i] - floor);
                                  },
                                  bits, rb, hist, sh, 0);
      const u32 ties_needed = sh[0];
      __syncthreads();
      // Deterministic: the ties up to the ties_needed-th lowest position,
      // the largest complement of the ties' positions.
      u32 last = ~0u;
      if (det) {
        last = ~select_digits(
            [&](auto f) {
              for (u32 i = threadIdx.x; i < cb; i += P::kBlock)
                if (fin_key[i] == kth) f(~static_cast<u32>(fin_idx[i]));
            },
            32, ties_needed, hist, sh, 0);
        __syncthreads();
      }
      if (threadIdx.x == 0) sh[5] = 0, sh[6] = 0;
      __syncthreads();
      for (u32 i0 = 0; i0 < cb; i0 += P::kBlock) {
        const u32 i = i0 + threadIdx.x;
        const u32 x = i < cb ? fin_key[i] : 0u;
        const bool tie = i < cb && x == kth && static_cast<u32>(fin_idx[i]) <= last;
        const u32 pa = warp_slot(&sh[5], i < cb && x > kth);
        const u32 pe = warp_slot(&sh[6], tie);
        if (i < cb && x > kth) emit(fin_idx[i], first + pa);
        if (tie && pe < ties_needed) emit(fin_idx[i], first + (rb - ties_needed) + pe);
      }
    }
  }
  __syncthreads();
  if (!sh[4]) return;
  u32* zero = ws + 8;
  for (int i = threadIdx.x; i < 2 * kHistWords + kBins * kRecoveryHists + (det ? kMaxCtas : 0); i += P::kBlock)
    zero[i] = 0;
  if (threadIdx.x < 8) ctr[threadIdx.x] = 0;
}

}  // namespace grid

template <class P>
__global__ void __launch_bounds__(P::kBlock, P::kPerSm) grid_topk_kernel(TopkArgs a) {
  await_prior_grids();
  grid::grid_select<P, P::kDet>(a);
}

}  // namespace topk
