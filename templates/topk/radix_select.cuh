// Radix-select top-k for one row per CTA or per thread-block cluster.
//
// Pass 0 histograms one digit of every key of the row (reading it from global
// memory once and, when the launch gives a row cache, keeping the keys in
// shared memory). A suffix scan over the histogram finds the bin that holds
// the k-th key: elements above it are selected, elements below are dropped,
// the bin's elements stay candidates. Each refinement pass fuses three things
// into one scan over the candidates: write the elements above the previous
// threshold, keep those in its bin, and histogram their next digit.
//
// Candidates live in a shared-memory buffer when they fit (known exactly from
// the pass-0 histogram before anything is copied, so the buffer never
// overflows); otherwise later passes re-read the row (cache, then global
// memory) and re-test the resolved key prefix. Both paths are exact; neither
// clips. In a cluster, when the whole threshold bin fits one buffer, every
// CTA sends its candidates to the leader CTA and the leader finishes alone:
// the later passes then cost no cluster barriers or distributed-memory
// histogram merges, which the profile showed to dominate long rows. A
// cluster's CTAs take their output slots and their places in the leader's
// buffer from bases the merged histograms give (the CTAs ranked below count
// first), so no scan does an atomic on another CTA's shared memory. Large
// merges (2048 bins over 8 or 16 CTAs) are a reduce-scatter: each CTA sums
// a share of the bins over the cluster and stores the sums to every CTA.
//
// The scan stops early when the threshold bin holds exactly the elements still
// needed, ranks the candidates directly once they are few (after `rounds`
// refinement passes, when at most TOPK_RANK_CAP remain), and at the last digit
// takes the still-needed ties in any order from a separate counter, so the
// output never exceeds k; when only ties are left, that last scan stops as
// soon as they are taken.
#pragma once
#include "topk/args.h"
#include "topk/block_scan.cuh"
#include "topk/cluster.cuh"
#include "topk/keys.cuh"
#include "topk/policy.cuh"
#include "topk/row.cuh"

namespace topk {

struct RowControl {
  // Cluster, leader CTA: completes when every candidate gathered into its
  // buffer has arrived (asynchronous stores from every CTA, 8 bytes each).
  unsigned long long gather_bar;
  u32 out;     // next free output slot (one CTA per row)
  u32 tie;     // ties taken at the last digit (one CTA per row)
  u32 buf_n;   // candidates in this CTA's buffer
  u32 list_n;  // entries in this CTA's rank list
  u32 max_local;
  u32 spec_overflow;  // the speculative capture ran out of buffer
  u32 rep;     // a key of the threshold bin (uniform-bin check)
  u32 rep_ok;  // rep was found
  u32 differ;  // an element of the checked bin differs from rep
  // A cluster's CTAs count the elements each takes in the current pass
  // (selections; gathered candidates or ties) locally, from bases set by the
  // histograms: no atomics on another CTA's shared memory.
  u32 sel_n;
  u32 eq_n;
  u32 pad;
  ThresholdResult thr;
  u32 scan_scratch[64];
};

// Development aids, never defined by the generator (topk-probe --define):
// TOPK_STOP_AT makes the kernel return at phase boundary TOPK_STOP_AT, so
// that timing each prefix of the phases tells where a row's time goes (its
// output is wrong by design); TOPK_TRACE has thread 0 of CTA 0 note clock64()
// at every boundary in topk_trace[1 + boundary] (entry in [0], exit in [31]).
// Boundaries: 0 after the setup; 1 after pass 0's read of the row; 2 + 2p
// after pass p's threshold search; 3 + 2p after pass p's scan. Trace only:
// [20] pass 0's scan starts, [21] it ends, [22] the gather's barrier is past,
// [23] pass 0's barrier before the merge is past, [24] the merge is done.
#ifdef TOPK_TRACE
extern "C" {
__device__ unsigned long long topk_trace[32];
}
#define TOPK_MARK(i) \
  {                  \
    if (blockIdx.x == 0 && threadIdx.x == 0 && (i) < 32) topk_trace[i] = clock64(); \
  }
#else
#define TOPK_MARK(i) {}
#endif
#ifdef TOPK_STOP_AT
#define TOPK_STOP(n)                          \
  TOPK_MARK(1 + (n))                          \
  if (TOPK_STOP_AT == (n)) {                  \
    if (kClustered && !solo) Cl::sync();      \
    return;                                   \
  }
#else
#define TOPK_STOP(n) TOPK_MARK(1 + (n))
#endif

enum Action : int { kFilter = 0, kSelectAll = 1, kTies = 2, kRankList = 3 };

template <class P>
struct RowSelect {
  using K = Keys<P::kDtype>;
  using Raw = typename K::Raw;
  using Cached = typename K::Cached;
  using Cl = Cluster<(P::kCluster > 1 ? 2 : 1)>;
  static constexpr int T = P::kBlock;
  static constexpr int R = P::kRadix;
  static constexpr int NB = 1 << R;
  static constexpr bool kClustered = P::kCluster > 1;
  static constexpr int V = K::kVec;
  static constexpr int KB = K::kBits;
  static constexpr bool kCoarse = P::kFirst == 1;
  static constexpr int kPasses = P::kPasses;
  // Slots in this CTA's buffer or output are reserved by each lane with its
  // own shared-memory atomic rather than by a warp-wide prefix sum (four
  // ballots and their popcounts): fewer instructions where few lanes have
  // something to place, and pass 0 of the one-CTA kernels is
  // instruction-bound (Nsight Compute on 128 x 131072: issue slots 70%
  // busy, DRAM 37%). 16-bit keys keep the prefix sum: their 1024-thread
  // kernels spilled with per-lane atomics.
  static constexpr bool kLaneAtomics = KB == 32;
  // process() classifies elements without a branch per element: a branch
  // around each element's digit cost a divergence-region setup and a jump
  // per element in every scan step (Nsight Compute, 64 x 32768 c2 pass 0:
  // 55 instructions per element). Same-run H100 probe: cluster kernels 1-5%
  // faster (1 x 524288 b1024 c16 20.39 -> 19.88 us, 64 x 32768 c2 b512
  // 15.23 -> 14.71); the 1024-thread one-CTA kernels spilled with it and ran
  // 1-2% slower (256 x 128256 75.97 -> 77.54), and the 1024-thread 16-bit
  // cluster kernels spilled more (bf16 128 x 201088 c2 64.87 -> 68.20), so
  // those keep the branches (here and in the cache scan's valid mask).
  static constexpr bool kBranchFree = T < 1024 || (kClustered && KB == 32);
  // A speculative pass 0 of 16-bit keys histograms only its sample and takes
  // the rest of the histogram from the captured elements (run()). Same-run
  // H100 probe: bf16 128 x 201088 k64 b1024 40.49 -> 39.35 us, on
  // all-equal rows 86.55 -> 77.46; for fp32 keys it was 3-4% slower
  // (128 x 131072 36.49 -> 37.80, 256 x 128256 76.16 -> 79.01; 7 distinct
  // values 63.57 -> 69.73), so they histogram the whole row.
  static constexpr bool kCaptureOnly = KB == 16;
  static constexpr bool kUniformCheck = !kClustered && !kCoarse && KB == 32 && kPasses >= 3;
  // Loads in flight per thread in the row scans.
  // Software prefetch of the next step in global scans (the next step's
  // loads are in flight while this one is processed): at 512 threads two
  // vectors per step and two more prefetched (128 registers at one CTA per
  // SM); at 1024 threads, at the 64-register cap, and for 16-bit keys at 512
  // (two and two spilled on sm_80), one and one. Measured on
  // H100: 512-thread kernels 6-16% faster on batched rows; 256 threads
  // 2-4% slower (registers), so smaller blocks load two steps' worth at once
  // without prefetch, as before.
  static constexpr bool kPrefetch = T >= 512;
  static constexpr int kUnroll = T >= 1024 || (T >= 512 && KB == 16) ? 1 : T >= 512 ? 2 : 4;

  // Shared memory.
  u32* hist;  // [2][NB]
  u32* ghist;  // cluster: the merged histogram
  u32* gpre;   // cluster: per bin, the CTAs ranked below this one summed
  u32* buf_key;
  u32* buf_idx;
  u64* list;
  Cached* cache;
  RowControl* ctl;
  int C;          // CTAs working on the row (1 without a cluster, or once solo)

  // The row and this CTA's slice of it.
  const Raw* row;
  int* out_idx;
  Raw* out_val;
  int k;
  int s0;         // first column of the slice
  int len;        // slice length
  int head;       // elements before the first 16-byte boundary
  int nvec;       // full 16-byte vectors after the head
  int shift;      // cache slot of element j is j + shift (aligns the body)
  int cache_len;  // elements [0, cache_len) of the slice are cached
  int S;          // candidate-buffer capacity
  u32 flip;       // 0 for largest, all ones for smallest
  bool values;

  // Round state (identical in every CTA of the cluster).
  int pass;
  int action;
  u32 bin;
  u32 need;  // elements still needed from the threshold bin
  u32 mask;  // exact key bits resolved by earlier passes
  u32 prefix;
  u32 coarse_bin;
  // Cluster: this pass's first output slot of this CTA, and its first place
  // among the pass's elements of the threshold bin (in CTA rank order).
  u32 sel_base;
  u32 eq_base;
  u32* hist_next;
  bool buffering;  // the pass-0 filter copies candidates to this CTA's buffer
  bool gather;     // ... to the leader's buffer
  bool solo;       // the leader finishes alone after a gather
  // Speculative capture (one CTA per row): pass 0 copies every element whose
  // first digit reaches spec_bin, a lower bound of the threshold estimated
  // from a sample, into the buffer; when the bound holds the filter scans
  // the buffer instead of the row. The buffer then also holds elements of
  // other first-digit bins, so later scans test the full prefix
  // (buffer_all_match false).
  bool spec;
  bool ties_only;  // the last scan has only ties left to take: it may stop once they are
  // The capture-only part of pass 0 stops once the buffer overflowed (the
  // row is then read again with a full histogram).
  bool stop_on_overflow;
  bool buffer_all_match;
  u32 spec_bin;

  // The coarse first digit (fp32 keys): 8 bits with fp16's resolution, four
  // bins per octave over the 32 octaves from 2^-15 to 2^17, clamped outside,
  // mirrored for negative values. It is a monotone function of the key (the
  // top 11 key bits are sign, exponent and two mantissa bits, and the key
  // is already in selection order, so "smallest" needs nothing more), about
  // 7 integer instructions. Rounding each key to fp16 took about 17 (and a
  // conversion); on 64 x 32768 the coarse kernels read every key twice
  // through this function.
  __device__ __forceinline__ u32 coarse_digit(u32 key) const {
    if (P::kDtype == kF32) {
      const u32 neg = (key >> 31) - 1u;  // all ones in the lower half of the key order
      const int m = static_cast<int>(((key >> 21) ^ neg) & 0x3ffu) - 112 * 4;  // exponent 112 + 2 bits
      const u32 c = static_cast<u32>(m < 0 ? 0 : (m > 127 ? 127 : m));
      return (128u + (c ^ neg)) & 0xffu;
    }
    return key >> 8;
  }

  // The first digit: compile-time shape, the hot path of pass 0.
  __device__ __forceinline__ u32 digit0(u32 key) const {
    if (kCoarse) return coarse_digit(key);
    return key >> (KB - R);
  }

  // Where exact digit `p` sits in the key (p counts the coarse pass too;
  // not for the coarse digit itself): its lowest bit and its all-ones value.
  struct DigitBits {
    int lo;
    u32 ones;
  };
  __device__ __forceinline__ static DigitBits digit_bits(int p) {
    const int hi = KB - (p - (kCoarse ? 1 : 0)) * R;
    const int lo = hi - R > 0 ? hi - R : 0;
    return {lo, (1u << (hi - lo)) - 1u};
  }

  __device__ __forceinline__ u32 digit(u32 key, int p) const {
    if (p == 0) return digit0(key);
    const DigitBits b = digit_bits(p);
    return (key >> b.lo) & b.ones;
  }

  __device__ __forceinline__ bool matches(u32 key, bool from_buffer) const {
    if (kCoarse && !(from_buffer && buffer_all_match) && coarse_digit(key) != coarse_bin) return false;
    return (key & mask) == prefix;
  }

  __device__ __forceinline__ void write(u32 pos, u32 col) const {
    out_idx[pos] = static_cast<int>(col);
    if (values) out_val[pos] = row[col];
  }

  // Adds the digits of the `m`-masked elements to `h`. A warp whose elements
  // all share one digit (all-equal rows, few distinct values) adds once
  // instead of hammering one bin with 32 atomics.
  template <int N>
  __device__ __forceinline__ void hist_add(u32* h, const u32 (&d)[N], u32 m) const {
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
  template <int N>
  __device__ __forceinline__ void hist_add_full(u32* h, const u32 (&d)[N]) const {
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

  // Reserves `cnt` consecutive slots per lane from the counter at `addr`
  // (one atomic per warp) and returns this lane's first slot.
  __device__ __forceinline__ u32 reserve(u32 addr, u32 cnt, bool cluster_wide) const {
    u32 total;
    const u32 pre = warp_exclusive_small<4>(cnt, &total);
    u32 base = 0;
    if (lane_id() == 0 && total)
      base = cluster_wide ? Cl::atomic_add(addr, total) : Cluster<1>::atomic_add(addr, total);
    return __shfl_sync(kFullMask, base, 0) + pre;
  }

  // This lane's first of `n` consecutive slots from this CTA's counter `c`
  // (per-lane atomics for 32-bit keys, see kLaneAtomics; a warp-wide
  // reservation for the cluster's candidates measured 1-11% slower on
  // H100). Warp-uniform call.
  __device__ __forceinline__ u32 take_local(u32* c, u32 n) const {
    if constexpr (kLaneAtomics) return n != 0 ? atomicAdd(c, n) : 0u;
    return reserve(smem_addr(c), n, false);
  }

  // Speculative capture: copies the elements whose first digit reaches
  // spec_bin into the buffer; beyond its capacity it only notes the
  // overflow (the speculation then fails and the exact path runs). Few
  // elements qualify (about 1.25 k of the row): see kLaneAtomics (this
  // change alone: 128 x 131072 45.7 -> 40.6 us, 256 x 128256 89.3 -> 80.6).
  template <int N>
  __device__ __forceinline__ void capture(const u32 (&key)[N], const u32 (&col)[N], const u32 (&d)[N],
                                          u32 valid) {
    u32 m = 0;
#pragma unroll
    for (int i = 0; i < N; ++i)
      if (((valid >> i) & 1u) && d[i] >= spec_bin) m |= 1u << i;
    u32 pos;
    const u32 cnt = static_cast<u32>(__popc(m));
    if constexpr (kLaneAtomics) {
      if (m == 0) return;
      pos = atomicAdd(&ctl->buf_n, cnt);
    } else {
      if (!__any_sync(kFullMask, m != 0)) return;
      pos = reserve(smem_addr(&ctl->buf_n), cnt, false);
    }
    // One overflow test per lane, not per element: an overflow fails the
    // speculation, and the buffer's contents are then dropped, so a lane
    // that overflows stores nothing. (Per element, the test and the flag's
    // store ran for every warp step of pass 0, predicated off or not: 14% of
    // the instructions of 64 x 32768 c1, Nsight Compute source counters.)
    if (pos + cnt > static_cast<u32>(S)) {
      // An atomic: leave_early() reads the flag while other lanes set it.
      atomicOr(&ctl->spec_overflow, 1u);
      return;
    }
#pragma unroll
    for (int i = 0; i < N; ++i)
      if ((m >> i) & 1u) {
        buf_key[pos] = key[i];
        buf_idx[pos] = col[i];
        ++pos;
      }
  }

  struct CaptureOp {
    RowSelect* self;
    template <int N>
    __device__ __forceinline__ void operator()(const u32 (&raw)[N], const u32 (&col)[N], u32 valid, int,
                                               bool) const {
      u32 key[N], d[N];
#pragma unroll
      for (int i = 0; i < N; ++i) {
        key[i] = K::key_flip(raw[i], self->flip);
        d[i] = self->digit0(key[i]);
      }
      self->capture(key, col, d, valid);
    }
  };

  // One step of a scan: N elements per lane, all 32 lanes of the warp
  // together (valid == 0 for lanes without work). P0: the pass-0 filter,
  // where every element is a candidate and the digit shape is known.
  template <int N, bool P0>
  __device__ __forceinline__ void process(const u32 (&key)[N], const u32 (&col)[N], u32 valid,
                                          bool from_buffer) {
    u32 sel = 0, eq = 0;
    if constexpr (kBranchFree) {
      const bool all = action == kSelectAll;
#pragma unroll
      for (int i = 0; i < N; ++i) {
        const bool in = ((valid >> i) & 1u) != 0 && (P0 || matches(key[i], from_buffer));
        const u32 d = P0 ? digit0(key[i]) : digit(key[i], pass);
        sel |= static_cast<u32>(in & ((d > bin) | (all & (d == bin)))) << i;
        eq |= static_cast<u32>(in & !all & (d == bin)) << i;
      }
    } else {
#pragma unroll
      for (int i = 0; i < N; ++i) {
        if (((valid >> i) & 1u) && (P0 || matches(key[i], from_buffer))) {
          const u32 d = P0 ? digit0(key[i]) : digit(key[i], pass);
          if (d > bin || (action == kSelectAll && d == bin))
            sel |= 1u << i;
          else if (d == bin)
            eq |= 1u << i;
        }
      }
    }
    if constexpr (kClustered) {
      if (__any_sync(kFullMask, sel != 0)) {
        u32 pos = sel_base + take_local(&ctl->sel_n, __popc(sel));
#pragma unroll
        for (int i = 0; i < N; ++i)
          if ((sel >> i) & 1u) write(pos++, col[i]);
      }
    } else if (kLaneAtomics) {
      if (sel != 0) {
        u32 pos = atomicAdd(&ctl->out, static_cast<u32>(__popc(sel)));
#pragma unroll
        for (int i = 0; i < N; ++i)
          if ((sel >> i) & 1u) write(pos++, col[i]);
      }
    } else if (__any_sync(kFullMask, sel != 0)) {
      u32 pos = reserve(Cl::map(&ctl->out, 0), __popc(sel), true);
#pragma unroll
      for (int i = 0; i < N; ++i)
        if ((sel >> i) & 1u) write(pos++, col[i]);
    }
    if (action == kSelectAll || !__any_sync(kFullMask, eq != 0)) return;
    if (action == kFilter) {
      if (kClustered && gather) {
        // Addresses in the leader's shared memory (mapa is one instruction;
        // keeping them live would cost registers in the hot loop). The
        // stores are asynchronous: the leader's mbarrier counts their bytes,
        // so nobody waits at a cluster barrier for them (whose release would
        // also wait for this CTA's output stores to global memory).
        u32 pos = eq_base + take_local(&ctl->eq_n, __popc(eq));
        const u32 lead_key = Cl::map(buf_key, 0), lead_idx = Cl::map(buf_idx, 0);
        const u32 bar = Cl::map(&ctl->gather_bar, 0);
#pragma unroll
        for (int i = 0; i < N; ++i)
          if ((eq >> i) & 1u) {
            Cl::store_async(lead_key + 4u * pos, key[i], bar);
            Cl::store_async(lead_idx + 4u * pos, col[i], bar);
            ++pos;
          }
        return;  // the leader histograms the gathered buffer itself
      }
      if (buffering) {
        u32 pos = kLaneAtomics ? (eq != 0 ? atomicAdd(&ctl->buf_n, static_cast<u32>(__popc(eq))) : 0u)
                               : reserve(smem_addr(&ctl->buf_n), __popc(eq), false);
#pragma unroll
        for (int i = 0; i < N; ++i)
          if ((eq >> i) & 1u) {
            buf_key[pos] = key[i];
            buf_idx[pos] = col[i];
            ++pos;
          }
      }
      if ((P0 ? 1 : pass + 1) < kPasses) {
        u32 dig[N];
#pragma unroll
        for (int i = 0; i < N; ++i) dig[i] = digit(key[i], P0 ? 1 : pass + 1);
        hist_add(hist_next, dig, eq);
      }
    } else if (action == kTies) {
      u32 t = kClustered ? eq_base + take_local(&ctl->eq_n, __popc(eq))
                         : reserve(Cl::map(&ctl->tie, 0), __popc(eq), true);
#pragma unroll
      for (int i = 0; i < N; ++i)
        if ((eq >> i) & 1u) {
          if (t < need) write(static_cast<u32>(k) - need + t, col[i]);
          ++t;
        }
    } else {  // kRankList
      u32 pos = reserve(smem_addr(&ctl->list_n), __popc(eq), false);
#pragma unroll
      for (int i = 0; i < N; ++i)
        if ((eq >> i) & 1u) {
          list[pos] = (static_cast<u64>(key[i]) << 32) | (0xffffffffu - col[i]);
          ++pos;
        }
    }
  }

  __device__ __forceinline__ static void unpack(const uint4& q, u32 (&raw)[V]) {
    const u32 w[4] = {q.x, q.y, q.z, q.w};
    if (V == 4) {
#pragma unroll
      for (int i = 0; i < 4; ++i) raw[i] = w[i];
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        raw[(2 * i) % V] = w[i] & 0xffffu;
        raw[(2 * i + 1) % V] = w[i] >> 16;
      }
    }
  }

  // Whether the still-needed ties are all taken (the leader's counter). The
  // loops that stop on it vote, so that a warp leaves together even if its
  // lanes read the counter apart (the warp-wide votes after the test need
  // every lane).
  __device__ __forceinline__ bool ties_taken() const {
    if constexpr (kClustered) return eq_base + Cluster<1>::load(smem_addr(&ctl->eq_n)) >= need;
    return Cl::load(Cl::map(&ctl->tie, 0)) >= need;
  }

  // Whether a row scan may stop here: the last scan's ties are taken, or the
  // speculative capture overflowed. Warp-uniform: the warp votes, so that
  // it leaves together even if its lanes read the counters apart.
  __device__ __forceinline__ bool leave_early() const {
    if (ties_only) return __any_sync(kFullMask, ties_taken());
    if (stop_on_overflow) return __any_sync(kFullMask, Cluster<1>::load(smem_addr(&ctl->spec_overflow)) != 0);
    return false;
  }

  // Visits slice elements from global memory: the body vectors [v0, v1)
  // and, on request, the head and the tail elements (outside the
  // 16-byte-aligned body; through warp 0, one per lane). F(raw[N], col[N],
  // valid, j, warp_full) is called warp-uniformly; warp_full says every lane
  // holds N valid elements.
  template <class F>
  __device__ __forceinline__ void visit_range(int v0, int v1, bool do_head, bool do_tail, const F& f) const {
    const int warp = threadIdx.x >> 5;
    const u32 lane = lane_id();
    const int nhead = do_head ? head : 0;
    const int ntail = do_tail ? len - (head + nvec * V) : 0;
    if (warp == 0 && (nhead > 0 || ntail > 0)) {
      u32 raw[1] = {0}, col[1] = {0};
      u32 valid = 0;
      int j = -1;
      if (static_cast<int>(lane) < nhead)
        j = lane;
      else if (static_cast<int>(lane) - nhead < ntail)
        j = len - ntail + (lane - nhead);
      if (j >= 0) {
        raw[0] = row[s0 + j];
        col[0] = s0 + j;
        valid = 1;
      }
      f(raw, col, valid, j, false);
    }
    const uint4* body = reinterpret_cast<const uint4*>(row + s0 + head);
    const int b0 = v0 + warp * 32;
    if constexpr (kPrefetch) {
      // The next step's loads are issued before this step's elements are
      // processed, so the memory system works while the SM computes.
      uint4 q[kUnroll] = {}, nq[kUnroll] = {};
      load_step(body, b0, v1, q);
      for (int base = b0; base < v1; base += T * kUnroll) {
        if (leave_early()) break;
        if (base + T * kUnroll < v1) load_step(body, base + T * kUnroll, v1, nq);
        visit_step(q, base, v1, f);
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) q[u] = nq[u];
      }
    } else {
      for (int base = b0; base < v1; base += T * kUnroll) {
        if (leave_early()) break;
        uint4 q[kUnroll];
        load_step(body, base, v1, q);
        visit_step(q, base, v1, f);
      }
    }
  }

  // One step of visit_range: the warp's kUnroll vectors at base, base + T, ...
  __device__ __forceinline__ static void load_step(const uint4* body, int base, int v1, uint4 (&q)[kUnroll]) {
    const int lane = static_cast<int>(lane_id());
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int v = base + u * T + lane;
      if (v < v1) q[u] = body[v];
    }
  }
  template <class F>
  __device__ __forceinline__ void visit_step(const uint4 (&q)[kUnroll], int base, int v1, const F& f) const {
    const int lane = static_cast<int>(lane_id());
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int v = base + u * T + lane;
      if (base + u * T >= v1) break;  // warp-uniform
      u32 raw[V], col[V];
      unpack(q[u], raw);
      const int j = head + v * V;
#pragma unroll
      for (int i = 0; i < V; ++i) col[i] = s0 + j + i;
      f(raw, col, v < v1 ? (1u << V) - 1u : 0u, j, base + u * T + 31 < v1);
    }
  }

  // Visits the slice elements [g0, len): g0 is 0 or head + m * V.
  template <class F>
  __device__ __forceinline__ void visit_global(int g0, const F& f) const {
    visit_range(g0 <= head ? 0 : (g0 - head) / V, nvec, g0 == 0, true, f);
  }

  // Keys of elements read from global memory, handed to process().
  template <bool P0>
  struct ScanOp {
    RowSelect* self;
    template <int N>
    __device__ __forceinline__ void operator()(const u32 (&raw)[N], const u32 (&col)[N], u32 valid, int,
                                               bool) const {
      u32 key[N];
#pragma unroll
      for (int i = 0; i < N; ++i) key[i] = K::key_flip(raw[i], self->flip);
      self->template process<N, P0>(key, col, valid, false);
    }
  };

  // Scans the current candidates (buffer, or cached slice then global
  // memory) with the current action.
  template <bool P0>
  __device__ __forceinline__ void scan(bool from_buffer) {
    if (from_buffer) {
      const u32 n = ctl->buf_n;
      for (u32 base = (threadIdx.x >> 5) * 32; base < n; base += T) {
        const u32 i = base + lane_id();
        u32 key[1] = {0}, col[1] = {0};
        if (i < n) {
          key[0] = buf_key[i];
          col[0] = buf_idx[i];
        }
        process<1, P0>(key, col, i < n ? 1u : 0u, true);
      }
      return;
    }
    if (cache_len > 0) {
      const int W = (shift + cache_len + V - 1) / V;
      const uint4* cv = reinterpret_cast<const uint4*>(cache);
      for (int base = (threadIdx.x >> 5) * 32; base < W; base += T) {
        if (ties_only && __any_sync(kFullMask, ties_taken())) return;
        const int w = base + lane_id();
        u32 key[V], col[V];
        u32 valid = 0;
        if (w < W) {
          unpack(cv[w], key);
          const int c0 = w * V;
#pragma unroll
          for (int i = 0; i < V; ++i) col[i] = s0 + c0 + i - shift;
          if (kBranchFree && c0 >= shift && c0 + V <= shift + cache_len) {  // every vector but the first and last
            valid = (1u << V) - 1u;
          } else {
#pragma unroll
            for (int i = 0; i < V; ++i)
              if (c0 + i >= shift && c0 + i < shift + cache_len) valid |= 1u << i;
          }
        } else {
#pragma unroll
          for (int i = 0; i < V; ++i) key[i] = col[i] = 0;
        }
        process<V, P0>(key, col, valid, false);
      }
    }
    if (cache_len < len) visit_global(cache_len, ScanOp<P0>{this});
  }

  // Pass 0: histogram of the first digit over the slice (unless kHist is
  // false: the capture-only part of a speculative pass 0); captures while
  // speculating; fills the cache.
  template <bool kHist>
  struct Pass0Op {
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

  // Whether every element of the threshold bin (digit `pass` equal to `bin`
  // under the resolved prefix) has one key: a key of the bin is sampled
  // (one strided element per thread), then the slice is read until an
  // element of the bin with another key turns up. Block-wide; only in the
  // kernels of kUniformCheck.
  __device__ __forceinline__ bool bin_is_uniform() {
    static_assert(kUniformCheck, "one CTA per row, exact 32-bit digits");
    if (threadIdx.x == 0) {
      ctl->rep_ok = 0;
      ctl->differ = 0;
    }
    // An element is in the bin iff its key matches the resolved prefix
    // extended by this pass's digit: one mask and one compare.
    const DigitBits b = digit_bits(pass);
    const u32 bmask = mask | (b.ones << b.lo);
    const u32 bprefix = prefix | (bin << b.lo);
    const auto in_bin = [&](u32 key) { return (key & bmask) == bprefix; };
    __syncthreads();
    const int tid = static_cast<int>(threadIdx.x);
    const int js = static_cast<int>(static_cast<long long>(tid) * len / T);  // spread: sorted rows too
    if (js < len) {
      const u32 key = K::key_flip(row[s0 + js], flip);
      if (in_bin(key)) {
        atomicExch(&ctl->rep, key);  // any key of the bin will do
        atomicOr(&ctl->rep_ok, 1u);
      }
    }
    __syncthreads();
    if (ctl->rep_ok == 0) return false;
    const u32 rep = ctl->rep;
    const u32 lane = lane_id();
    // Head and tail elements (outside the 16-byte-aligned body).
    const int ntail = len - (head + nvec * V);
    if (tid < head + ntail) {
      const int j = tid < head ? tid : len - ntail + (tid - head);
      const u32 key = K::key_flip(row[s0 + j], flip);
      if (in_bin(key) && key != rep) atomicOr(&ctl->differ, 1u);
    }
    constexpr int U = T >= 1024 ? 1 : 2;  // vectors in flight per thread (more spill at 1024)
    const uint4* body = reinterpret_cast<const uint4*>(row + s0 + head);
    for (int base = (tid >> 5) * 32; base < nvec; base += T * U) {
      if (__any_sync(kFullMask, ctl->differ != 0)) break;  // the warp leaves together
      uint4 q[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int v = base + u * T + static_cast<int>(lane);
        if (v < nvec) q[u] = body[v];
      }
      bool d = false;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int v = base + u * T + static_cast<int>(lane);
        if (v >= nvec) continue;
        u32 raw[V];
        unpack(q[u], raw);
#pragma unroll
        for (int i = 0; i < V; ++i) {
          const u32 key = K::key_flip(raw[i], flip);
          d |= in_bin(key) & (key != rep);
        }
      }
      if (__any_sync(kFullMask, d)) {
        if (lane == 0) atomicOr(&ctl->differ, 1u);
        break;
      }
    }
    __syncthreads();
    return ctl->differ == 0;
  }

  // Final step when few candidates remain: every candidate counts the
  // candidates (in all CTAs working on the row) that beat it; ties go to the
  // lower index.
  __device__ __forceinline__ void rank_finish() {
    const u32 n_local = ctl->list_n;
    for (u32 i = threadIdx.x; i < n_local; i += T) {
      const u64 x = list[i];
      u32 r = 0;
      for (int c = 0; c < C; ++c) {
        const u32 n = Cl::load(Cl::map(&ctl->list_n, c));
        const u32 a = Cl::map(list, c);
        for (u32 j = 0; j < n; ++j) r += Cl::load64(a + 8 * j) > x ? 1u : 0u;
      }
      if (r < need) write(static_cast<u32>(k) - need + r, 0xffffffffu - static_cast<u32>(x));
    }
  }

  // The cluster's histogram merge: every CTA gets the merged histogram
  // (ghist) and, per bin, the sum over the CTAs ranked below it (gpre).
  // Two ways, chosen by the merge's size (H100, same-run probe): the
  // all-gather costs no extra cluster barrier; the reduce-scatter moves C
  // times less data through distributed shared memory, for one more barrier.
  // 2048 bins over 16 CTAs: 1 x 524288 25.41 -> 20.77 us with the
  // reduce-scatter; 256 bins over 16 CTAs (1 x 131072 13.77 -> 14.15) and
  // 2048 bins over 2 or 4 CTAs (64 x 32768 15.49 -> 16.12, 28.98 -> 30.09)
  // are faster with the all-gather.
  __device__ __forceinline__ bool reduce_scatter() const {
    if constexpr (NB < 1024) return false;  // NB C < 16384 for every C <= 16
    return NB * C >= 16384;
  }

  // All-gather: every CTA loads every CTA's whole histogram, four bins per
  // request, kMergeGroup CTAs' loads in flight before any is used (CTAs
  // beyond C load nothing), and sums them itself. Ends with a block barrier.
  __device__ __forceinline__ void merge_all_gather(int cur, u32 rank) {
    constexpr int kMaxCluster = 16;
    // 8 groups made the 1024-thread kernels spill at their 64-register cap.
    constexpr int kMergeGroup = T >= 1024 ? 4 : 8;
    for (int q = threadIdx.x; q < NB / 4; q += T) {
      uint4 s = make_uint4(0, 0, 0, 0), below = make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int c0 = 0; c0 < kMaxCluster; c0 += kMergeGroup) {
        if (c0 >= C) break;
        uint4 v[kMergeGroup];
#pragma unroll
        for (int c = 0; c < kMergeGroup; ++c)
          v[c] = c0 + c < C ? Cl::load4(Cl::map(hist + cur * NB + 4 * q, c0 + c)) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int c = 0; c < kMergeGroup; ++c) {
          const bool lower = c0 + c < static_cast<int>(rank);
          s.x += v[c].x;
          s.y += v[c].y;
          s.z += v[c].z;
          s.w += v[c].w;
          below.x += lower ? v[c].x : 0u;
          below.y += lower ? v[c].y : 0u;
          below.z += lower ? v[c].z : 0u;
          below.w += lower ? v[c].w : 0u;
        }
      }
      reinterpret_cast<uint4*>(ghist)[q] = s;
      reinterpret_cast<uint4*>(gpre)[q] = below;
    }
    __syncthreads();
  }

  // Reduce-scatter: CTA r owns the bin quads [r Q / C, (r+1) Q / C) and, for
  // each, loads the four bins of every CTA (one request per CTA and quad,
  // one thread each: every load is in flight at once), scans them over the
  // CTAs in a segment of C lanes (C is a power of two up to 16, so segments
  // never straddle a warp), and stores to every CTA the quad's total and
  // the sum over the CTAs ranked below it. Each CTA loads NB words instead
  // of C NB. Ends with a cluster barrier.
  __device__ __forceinline__ void merge_reduce_scatter(int cur, u32 rank) {
    constexpr int Q = NB / 4;
    const int qa = static_cast<int>(rank) * Q / C;
    const int pairs = ((static_cast<int>(rank) + 1) * Q / C - qa) * C;
    for (int p0 = 0; p0 < pairs; p0 += T) {  // warp-uniform: every lane shuffles
      const int p = p0 + static_cast<int>(threadIdx.x);
      const int c = p & (C - 1);
      const int quad = qa + p / C;
      const uint4 v = p < pairs ? Cl::load4(Cl::map(hist + cur * NB + 4 * quad, c)) : make_uint4(0, 0, 0, 0);
      uint4 incl = v;
#pragma unroll
      for (int d = 1; d < 16; d <<= 1) {
        if (d >= C) break;
        const u32 x = __shfl_up_sync(kFullMask, incl.x, d, C);
        const u32 y = __shfl_up_sync(kFullMask, incl.y, d, C);
        const u32 z = __shfl_up_sync(kFullMask, incl.z, d, C);
        const u32 w = __shfl_up_sync(kFullMask, incl.w, d, C);
        if (c >= d) {
          incl.x += x;
          incl.y += y;
          incl.z += z;
          incl.w += w;
        }
      }
      const uint4 tot = make_uint4(__shfl_sync(kFullMask, incl.x, C - 1, C), __shfl_sync(kFullMask, incl.y, C - 1, C),
                                   __shfl_sync(kFullMask, incl.z, C - 1, C), __shfl_sync(kFullMask, incl.w, C - 1, C));
      if (p < pairs) {
        Cl::store4(Cl::map(ghist + 4 * quad, c), tot);
        Cl::store4(Cl::map(gpre + 4 * quad, c), make_uint4(incl.x - v.x, incl.y - v.y, incl.z - v.z, incl.w - v.w));
      }
    }
    Cl::sync();  // every CTA's ghist and gpre are complete
  }

  // Barrier over everything working on the row.
  __device__ __forceinline__ void sync_row() {
    if (kClustered && !solo)
      Cl::sync();
    else
      __syncthreads();
  }

  __device__ void run(const TopkArgs& a, unsigned char* smem, RowControl* control) {
    TOPK_MARK(0)
    C = static_cast<int>(Cl::size());
    const int rowi = blockIdx.x / C;
    const u32 rank = Cl::rank();
    flip = (a.flags & TOPK_FLAG_SMALLEST) ? (KB == 32 ? ~0u : 0xffffu) : 0u;
    values = (a.flags & TOPK_FLAG_VALUES) != 0 && a.out_val != nullptr;
    k = a.k;
    row = static_cast<const Raw*>(a.input) + static_cast<long long>(rowi) * a.row_stride;
    out_idx = a.out_idx + static_cast<long long>(rowi) * k;
    out_val = values ? static_cast<Raw*>(a.out_val) + static_cast<long long>(rowi) * k : nullptr;
    const RowRange range = row_range(a, rowi);
    const int start = range.start, end = range.end;
    const int L = end - start;
    int chunk = (L + C - 1) / C;
    chunk = (chunk + V - 1) / V * V;
    s0 = start + static_cast<int>(rank) * chunk;
    if (s0 > end) s0 = end;
    const int s1 = s0 + chunk < end ? s0 + chunk : end;
    len = s1 - s0;

    if (L <= k) {  // Everything in range is selected; pad the rest.
      const u32 gt = rank * T + threadIdx.x;
      for (int j = threadIdx.x; j < len; j += T) write(s0 - start + j, s0 + j);
      pad_output(out_idx, out_val, L + static_cast<int>(gt), k, C * T, static_cast<Raw>(K::kLowest));
      return;
    }

    S = a.buffer > 0 ? a.buffer : 0;
    const bool rank_ok = a.rounds < kPasses - 1;
    {
      // The launch must provide the layout the host computed; a mismatch is
      // a host bug, and trapping beats corrupting shared memory.
      u32 dyn;
      asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
      const int want = smem_layout_bytes(P::kHistSmem, S, rank_ok, a.cache_cap / V * V, sizeof(Cached));
      if (static_cast<int>(dyn) < want || a.smem_bytes != static_cast<int>(dyn)) __trap();
    }
    const unsigned long long addr = reinterpret_cast<unsigned long long>(row + s0);
    head = static_cast<int>(((16u - (addr & 15u)) & 15u) / sizeof(Raw));
    if (head > len) head = len;
    nvec = (len - head) / V;
    shift = (V - head % V) % V;
    cache_len = 0;
    const int cap = a.cache_cap / V * V;  // whole vectors: the scan reads them whole
    if (cap > shift) {
      const int avail = cap - shift;
      if (avail >= len)
        cache_len = len;
      else if (avail >= head)
        cache_len = head + (avail - head) / V * V;
    }

    ctl = control;
    hist = reinterpret_cast<u32*>(smem);
    ghist = hist + 2 * NB;
    gpre = ghist + NB;
    buf_key = ghist + (kClustered ? 2 * NB : 0);
    buf_idx = buf_key + S;
    list = reinterpret_cast<u64*>(buf_idx + S);
    cache = reinterpret_cast<Cached*>(smem + smem_layout_bytes(P::kHistSmem, S, rank_ok, 0, 0));

    for (int i = threadIdx.x; i < 2 * NB; i += T) hist[i] = 0;
    if (threadIdx.x == 0) {
      if constexpr (kClustered)
        if (rank == 0) mbar_init(&ctl->gather_bar);  // before the first cluster barrier
      ctl->out = 0;
      ctl->tie = 0;
      ctl->buf_n = 0;
      ctl->list_n = 0;
      ctl->max_local = 0;
      ctl->spec_overflow = 0;
    }
    pass = 0;
    action = kFilter;
    bin = 0;
    mask = 0;
    prefix = 0;
    coarse_bin = 0;
    buffering = false;
    gather = false;
    solo = false;
    spec = false;
    ties_only = false;
    stop_on_overflow = false;
    buffer_all_match = true;
    spec_bin = 0;
    bool buffered = false;
    u32 k_rem = static_cast<u32>(k);
    __syncthreads();
    TOPK_STOP(0)

    // Pass 0. One CTA per row with a buffer that can hold ~1.25 k: histogram
    // a sample of the slice first (a quarter or an eighth), take the highest
    // bin whose suffix in that sample reaches k scaled to the sample plus
    // three standard deviations of that count (and 2), capture the sample's
    // elements at or above it, then histogram and capture the rest in one
    // pass. The margin decides how
    // often a row falls back to a second scan: with an eighth of the row and
    // a 1.25 k + 64 target, about 1% of normal rows of 131072 (k = 2048,
    // buffer 4096) picked a bin too low, overflowed the buffer and took 2.5x
    // as long; with 128 rows one such row sets the kernel's time (measured
    // over 8 random inputs: 57-115 us, now 60.3-60.7 us). A larger margin is
    // no safer: for k = 64 of 201088 bf16 logits the bin one lower overflows
    // a 1024 buffer (+16 made that shape 1.9x slower).
    const bool try_spec = !kClustered && TOPK_SPECULATES(S, k) && nvec >= 4 * T;
    if (!try_spec) {
      visit_global(0, Pass0Op<true>{this});
    } else {
      // A quarter of the row only when the buffer leaves little room above k
      // (re-reading the sample for the capture costs an eighth of a row
      // more; measured 5% on 256 x 128256 k1024, where an eighth suffices).
      const int frac = 2 * (k + k / 4 + 64) > S ? 4 : 8;
      const int nA = nvec / frac > T ? nvec / frac : T;
      visit_range(0, nA, true, true, Pass0Op<true>{this});
      __syncthreads();
      const long long sampled = len - (nvec - nA) * static_cast<long long>(V);
      const float ks = static_cast<float>(k) * static_cast<float>(sampled) / static_cast<float>(len);
      const long long target = static_cast<long long>(ks + 3.0f * __fsqrt_rn(ks)) + 2;
      if (target < sampled) {
        spec_bin = find_threshold<T, NB>(hist, static_cast<u32>(target), &ctl->thr, ctl->scan_scratch, nullptr).bin;
        spec = true;
        visit_range(0, nA, true, true, CaptureOp{this});
      }
      if (!spec || !kCaptureOnly) {
        visit_range(nA, nvec, false, false, Pass0Op<true>{this});
      } else {
        // The rest of the row is only captured, not histogrammed: the
        // buffer then holds every element whose first digit reaches
        // spec_bin, and when there are k of them the threshold bin is one of
        // those digits, so their histogram, taken from the buffer, is all
        // the threshold search needs. When the speculation fails (the
        // buffer overflowed, or fewer than k reached spec_bin), the row is
        // read again with a full histogram. See kCaptureOnly.
        stop_on_overflow = true;
        visit_range(nA, nvec, false, false, Pass0Op<false>{this});
        stop_on_overflow = false;
        __syncthreads();
        const bool hit = ctl->spec_overflow == 0 && ctl->buf_n >= static_cast<u32>(k);
        for (int i = threadIdx.x; i < NB; i += T) hist[i] = 0;
        __syncthreads();
        if (hit) {
          const u32 n = ctl->buf_n;
          for (u32 base = (threadIdx.x >> 5) * 32; base < n; base += T) {
            const u32 i = base + lane_id();
            u32 d[1] = {i < n ? digit0(buf_key[i]) : 0u};
            hist_add(hist, d, i < n ? 1u : 0u);
          }
        } else {
          spec = false;
          if (threadIdx.x == 0) ctl->buf_n = 0;  // read again only after the loop's barrier
          visit_global(0, Pass0Op<true>{this});
        }
      }
    }
    TOPK_STOP(1)

    int cur = 0;
    for (;;) {
      sync_row();  // hist[cur] is complete in every CTA working on the row
      if (pass == 0) TOPK_MARK(23)
      const u32* g = hist + cur * NB;
      // The counters of the previous pass are no longer read (barrier
      // above); the barriers below order this before the next scan.
      if (kClustered && threadIdx.x == 0) {
        ctl->sel_n = 0;
        ctl->eq_n = 0;
      }
      if (kClustered && !solo) {
        if (reduce_scatter()) merge_reduce_scatter(cur, rank);
        else merge_all_gather(cur, rank);
        g = ghist;
      }
      if (pass == 0) TOPK_MARK(24)
      // The other histogram is free once every CTA passed the barrier above
      // (its last readers were the previous round's merges): zero it during
      // the threshold search for the next pass to fill.
      const int nxt = cur ^ 1;
      hist_next = hist + nxt * NB;
      const ThresholdResult thr =
          find_threshold<T, NB, kClustered>(g, k_rem, &ctl->thr, ctl->scan_scratch, hist_next, gpre);
      bin = thr.bin;
      need = k_rem - thr.above;
      if constexpr (kClustered) {
        // Every CTA scans what it histogrammed: the pass's elements above the
        // threshold bin of the CTAs ranked below this one come first (their
        // number is thr.above_pre), and likewise within the bin.
        sel_base = static_cast<u32>(k) - k_rem + (solo ? 0u : thr.above_pre);
        eq_base = solo ? 0u : gpre[bin];
      }
      TOPK_STOP(2 + 2 * pass)

      if (pass == 0 && spec) {
        // Every element that can still be selected was captured iff the
        // buffer held them all and the real threshold bin is at or above
        // the estimate (kCaptureOnly: checked after pass 0 already).
        if (kCaptureOnly || (ctl->spec_overflow == 0 && bin >= spec_bin)) {
          buffered = true;
          buffer_all_match = false;
        } else {
          spec = false;
          if (threadIdx.x == 0) ctl->buf_n = 0;
          __syncthreads();
        }
      }
      if (pass == 0 && S > 0 && !buffered) {
        if (kClustered && thr.count <= static_cast<u32>(S)) {
          gather = true;  // the whole bin fits the leader's buffer
        } else if (kClustered) {
          // Buffer locally only if every CTA's share of the bin fits.
          if (threadIdx.x < static_cast<unsigned>(C))
            atomicMax(&ctl->max_local, Cl::load(Cl::map(hist + bin, threadIdx.x)));
          __syncthreads();
          buffering = ctl->max_local <= static_cast<u32>(S);
        } else {
          buffering = thr.count <= static_cast<u32>(S);
        }
      }

      if (pass == 0) TOPK_MARK(20)
      const bool last = pass == kPasses - 1;
      if (thr.count == need) {
        action = kSelectAll;
        if constexpr (kClustered) sel_base += eq_base;  // the bin is selected too
        if (pass == 0)
          scan<true>(buffered);
        else
          scan<false>(buffered);
        break;
      }
      // Uniform-bin check. A threshold bin too large for the buffer costs
      // another scan of the row per remaining digit. When it holds a large
      // share of the row (all-equal rows, few distinct values), one of its
      // keys is sampled and the bin is checked for holding only that key (a
      // scan that stops at the first other key, so it costs little when the
      // bin is mixed). If it does, any `need` of its elements complete the
      // top-k, and the ties scan below finishes here. 128 x 131072 with
      // 8-bit digits read its row four times on such rows (3.1x its normal
      // time). Only where it saves a scan (two or more digits left) and in
      // the kernels whose registers allow it: one CTA per row, 32-bit keys,
      // exact first digit (16-bit keys have two digits; the check spilled
      // in the 1024-thread 16-bit and coarse-first-pass kernels).
      bool uniform = false;
      if constexpr (kUniformCheck)
        uniform = pass + 2 < kPasses && !buffered && !buffering && thr.count > static_cast<u32>(S) &&
                  16ull * thr.count >= static_cast<unsigned long long>(len) && bin_is_uniform();
      if (last || uniform) {
        // With nothing above the threshold left to write (all-equal rows, few
        // distinct values), the scan ends once the ties are taken instead of
        // reading the rest of the row.
        action = kTies;
        ties_only = thr.above == 0;
        scan<false>(buffered);
        break;
      }
      if (rank_ok && buffered && pass >= a.rounds && thr.count <= static_cast<u32>(TOPK_RANK_CAP)) {
        action = kRankList;
        scan<false>(true);
        sync_row();
        rank_finish();
        break;
      }
      action = kFilter;
      // The gathered candidates' bytes: the leader's mbarrier completes when
      // all have arrived (stores that land first count all the same).
      if constexpr (kClustered)
        if (gather && rank == 0 && threadIdx.x == 0) mbar_expect_arrive(&ctl->gather_bar, 8u * thr.count);
      if (pass == 0)
        scan<true>(buffered);
      else
        scan<false>(buffered);
      if (pass == 0) TOPK_MARK(21)
      if (kClustered && gather) {
        // The leader goes on alone once every candidate is in its buffer.
        // The others leave at a barrier the leader passes once they are
        // there (it keeps their shared memory alive while any CTA may still
        // read it: the merge's loads, or stores yet to land).
        if (rank != 0) {
          Cl::arrive_relaxed();
          Cl::wait();
          return;
        }
        if constexpr (kClustered) mbar_wait(&ctl->gather_bar, 0);
        Cl::arrive_relaxed();
        TOPK_MARK(22)
        solo = true;
        gather = false;
        C = 1;
        // The CTAs wrote the bin's elements to [0, thr.count) of the buffer.
        const u32 n = thr.count;
        if (threadIdx.x == 0) ctl->buf_n = n;
        for (u32 base = (threadIdx.x >> 5) * 32; base < n; base += T) {
          const u32 i = base + lane_id();
          u32 d[1] = {i < n ? digit(buf_key[i], pass + 1) : 0u};
          hist_add(hist_next, d, i < n ? 1u : 0u);
        }
        buffered = true;
      }
      buffered = buffered || buffering;
      buffering = false;
      if (kCoarse && pass == 0) {
        coarse_bin = bin;
      } else {
        const DigitBits b = digit_bits(pass);
        mask |= b.ones << b.lo;
        prefix |= bin << b.lo;
      }
      k_rem = need;
      cur = nxt;
      ++pass;
    }
    TOPK_MARK(31)
    if (kClustered && !solo) Cl::sync();  // peers may still read this CTA's shared memory
    if (kClustered && solo) Cl::wait();   // pairs the arrive after the gather
  }
};

}  // namespace topk
