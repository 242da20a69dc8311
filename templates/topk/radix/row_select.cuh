// RowSelect: the state of one row's radix select (one CTA per row, or one
// CTA of the row's cluster) and the declarations of the units that act on
// it. Each unit's members are defined in a header of its own under
// topk/radix/; radix_select.cuh includes them all.
#pragma once
#include "topk/args.h"
#include "topk/block_scan.cuh"
#include "topk/radix/cluster.cuh"
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
  // The strategy switches are the policy's (RadixStrategy in policy.cuh:
  // automatic unless a tuned variant sets them); below, what each
  // automatic rule rests on.
  // Slots in this CTA's buffer or output are reserved by each lane with its
  // own shared-memory atomic rather than by a warp-wide prefix sum (four
  // ballots and their popcounts): fewer instructions where few lanes have
  // something to place, and pass 0 of the one-CTA kernels is
  // instruction-bound (Nsight Compute on 128 x 131072: issue slots 70%
  // busy, DRAM 37%). 16-bit keys keep the prefix sum: their 1024-thread
  // kernels spilled with per-lane atomics.
  static constexpr bool kLaneAtomics = P::kLaneAtomics;
  // process() classifies elements without a branch per element: a branch
  // around each element's digit cost a divergence-region setup and a jump
  // per element in every scan step (Nsight Compute, 64 x 32768 c2 pass 0:
  // 55 instructions per element). Same-run H100 probe: cluster kernels 1-5%
  // faster (1 x 524288 b1024 c16 20.39 -> 19.88 us, 64 x 32768 c2 b512
  // 15.23 -> 14.71); the 1024-thread one-CTA kernels spilled with it and ran
  // 1-2% slower (256 x 128256 75.97 -> 77.54), and the 1024-thread 16-bit
  // cluster kernels spilled more (bf16 128 x 201088 c2 64.87 -> 68.20), so
  // those keep the branches (here and in the cache scan's valid mask).
  static constexpr bool kBranchFree = P::kBranchFree;
  // A speculative pass 0 of 16-bit keys histograms only its sample and takes
  // the rest of the histogram from the captured elements (run()). Same-run
  // H100 probe: bf16 128 x 201088 k64 b1024 40.49 -> 39.35 us, on
  // all-equal rows 86.55 -> 77.46; for fp32 keys it was 3-4% slower
  // (128 x 131072 36.49 -> 37.80, 256 x 128256 76.16 -> 79.01; 7 distinct
  // values 63.57 -> 69.73), so they histogram the whole row.
  static constexpr bool kCaptureOnly = P::kCaptureOnly;
  // The uniform-bin check (driver.cuh, at its use, says where it pays).
  static constexpr bool kUniformCheck = P::kUniformCheck;
  // Loads in flight per thread in the row scans.
  // Software prefetch of the next step in global scans (the next step's
  // loads are in flight while this one is processed): at 512 threads two
  // vectors per step and two more prefetched (128 registers at one CTA per
  // SM); at 1024 threads, at the 64-register cap, and for 16-bit keys at 512
  // (two and two spilled on sm_80), one and one. Measured on
  // H100: 512-thread kernels 6-16% faster on batched rows; 256 threads
  // 2-4% slower (registers), so smaller blocks load two steps' worth at once
  // without prefetch, as before.
  static constexpr bool kPrefetch = P::kPrefetch;
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

  // Where exact digit `p` sits in the key (p counts the coarse pass too;
  // not for the coarse digit itself): its lowest bit and its all-ones value.
  struct DigitBits {
    int lo;
    u32 ones;
  };

  // Digit extraction (radix/digits.cuh).
  __device__ __forceinline__ u32 coarse_digit(u32 key) const;
  __device__ __forceinline__ u32 digit0(u32 key) const;
  __device__ __forceinline__ static DigitBits digit_bits(int p);
  __device__ __forceinline__ u32 digit(u32 key, int p) const;
  __device__ __forceinline__ bool matches(u32 key, bool from_buffer) const;
  // Output slots (radix/output.cuh).
  __device__ __forceinline__ void write(u32 pos, u32 col) const;
  __device__ __forceinline__ u32 reserve(u32 addr, u32 cnt, bool cluster_wide) const;
  __device__ __forceinline__ u32 take_local(u32* c, u32 n) const;
  // Block histogram (radix/histogram.cuh).
  template <int N>
  __device__ __forceinline__ void hist_add(u32* h, const u32 (&d)[N], u32 m) const;
  template <int N>
  __device__ __forceinline__ void hist_add_full(u32* h, const u32 (&d)[N]) const;
  template <bool kHist>
  struct Pass0Op;
  // Speculation (radix/speculation.cuh).
  template <int N>
  __device__ __forceinline__ void capture(const u32 (&key)[N], const u32 (&col)[N], const u32 (&d)[N],
                                          u32 valid);
  struct CaptureOp;
  __device__ __forceinline__ void speculative_pass0();
  // Row scan (radix/row_scan.cuh).
  __device__ __forceinline__ static void unpack(const uint4& q, u32 (&raw)[V]);
  __device__ __forceinline__ bool ties_taken() const;
  __device__ __forceinline__ bool leave_early() const;
  template <class F>
  __device__ __forceinline__ void visit_range(int v0, int v1, bool do_head, bool do_tail, const F& f) const;
  __device__ __forceinline__ static void load_step(const uint4* body, int base, int v1, uint4 (&q)[kUnroll]);
  template <class F>
  __device__ __forceinline__ void visit_step(const uint4 (&q)[kUnroll], int base, int v1, const F& f) const;
  template <class F>
  __device__ __forceinline__ void visit_global(int g0, const F& f) const;
  // Candidate scan (radix/candidate_scan.cuh).
  template <int N, bool P0>
  __device__ __forceinline__ void process(const u32 (&key)[N], const u32 (&col)[N], u32 valid,
                                          bool from_buffer);
  template <bool P0>
  struct ScanOp;
  template <bool P0>
  __device__ __forceinline__ void scan(bool from_buffer);
  // Uniform-bin check (radix/uniform_bin.cuh).
  __device__ __forceinline__ bool bin_is_uniform();
  // Ranking (radix/ranking.cuh).
  __device__ __forceinline__ void rank_finish();
  // Cluster merge (radix/cluster_merge.cuh).
  __device__ __forceinline__ bool reduce_scatter() const;
  __device__ __forceinline__ void merge_all_gather(int cur, u32 rank);
  __device__ __forceinline__ void merge_reduce_scatter(int cur, u32 rank);
  __device__ __forceinline__ void merge_histograms(int cur, u32 rank);
  // Cluster driver steps (radix/cluster_driver.cuh).
  __device__ __forceinline__ void lead_alone(u32 count);
  // Drivers (radix/driver.cuh).
  __device__ __forceinline__ void sync_row();
  __device__ __forceinline__ void leave_at_stop();
  __device__ void run(const TopkArgs& a, unsigned char* smem, RowControl* control);
};

}  // namespace topk
