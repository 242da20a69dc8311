// The compile-time policy of one variant. The host mirrors these formulas in
// generator/config.cpp; every generated source static_asserts that both agree.
#pragma once
#include "topk/args.h"
#include "topk/keys.cuh"

namespace topk {

// A strategy switch of the radix kernel: -1 = automatic (the rule measured
// for the policy's shape), 0 = off, 1 = on.
__host__ __device__ constexpr bool strategy_on(int set, bool automatic) { return set < 0 ? automatic : set != 0; }

// The radix kernel's strategy switches (RowSelect reads them from its
// policy). Each trades one cost for another and was measured per shape; the
// automatic rules are those measurements (see RowSelect for the numbers).
// Kept out of Policy's own template parameters so that an untuned variant's
// kernel keeps its symbol name and code: Policy takes every switch
// automatic, Strategy<P, ...> sets them (what a tuner parameter emits).
template <int KEY_BITS, int BLOCK, int FIRST, int CLUSTER, int PASSES, int LANE_ATOMICS = -1, int BRANCH_FREE = -1,
          int CAPTURE_ONLY = -1, int UNIFORM_CHECK = -1, int PREFETCH = -1>
struct RadixStrategy {
  // Enumerators, not static data members: NVRTC writes every static data
  // member of an instantiated policy into the PTX as a global, so members
  // would change an untuned kernel's PTX; enumerators leave no trace.
  enum : bool {
    // Per-lane shared-memory atomics reserve output/buffer slots instead of a
    // warp prefix sum: fewer instructions, more registers (16-bit keys spilled).
    kLaneAtomics = strategy_on(LANE_ATOMICS, KEY_BITS == 32),
    // Branch-free classification of each element: no divergence per element,
    // more registers (the 1024-thread one-CTA and 16-bit cluster kernels spilled).
    kBranchFree = strategy_on(BRANCH_FREE, BLOCK < 1024 || (CLUSTER > 1 && KEY_BITS == 32)),
    // A speculative pass 0 histograms only its sample and counts the rest from
    // the capture: less work per element, a second read when the capture fails.
    kCaptureOnly = strategy_on(CAPTURE_ONLY, KEY_BITS == 16),
    // A check that a large threshold bin holds one key, ending the row early:
    // saves scans on few-valued rows, costs registers and a partial scan.
    kUniformCheck = strategy_on(UNIFORM_CHECK, CLUSTER == 1 && FIRST == 0 && KEY_BITS == 32 && PASSES >= 3),
    // Software prefetch of the next step in the row scans: loads in flight
    // during the processing, at the cost of registers (256 threads lost).
    kPrefetch = strategy_on(PREFETCH, BLOCK >= 512)
  };

  static_assert(UNIFORM_CHECK <= 0 || (CLUSTER == 1 && FIRST == 0 && KEY_BITS == 32),
                "the uniform-bin check is block-wide over exact 32-bit digits: one CTA per row");
};

// A variant's code shape; the other knobs (candidate buffer, rounds, row
// cache) are launch arguments, see TopkArgs.
// CLUSTER: 0 = several rows per CTA (one warp per row, keys in registers),
//          1 = one CTA per row, 2 = a thread-block cluster per row (2 to 16
//          CTAs: the size is a launch attribute, read back at run time).
// FIRST:   0 = first pass on the top RADIX bits of the exact key,
//          1 = a coarse 8-bit first digit with fp16's resolution (fp32 only;
//              RowSelect::coarse_digit).
// ITEMS:   warp mode only: elements held per lane (n <= 32 * ITEMS).
// BOUND:   warp mode only (the host's "rounds" knob there): 0 = tournament
//          or bit search over a strided row; 1 = 32-bit keys, vector loads
//          and a lane-maximum bound first for k <= 8 (warp/warp_select.cuh).
template <int DTYPE, int BLOCK, int RADIX, int FIRST, int CLUSTER, int ITEMS, int BOUND = 0>
struct Policy : RadixStrategy<Keys<DTYPE>::kBits, BLOCK, FIRST, CLUSTER,
                              CLUSTER == 0 ? 0 : (Keys<DTYPE>::kBits + RADIX - 1) / RADIX + FIRST> {
  static constexpr int kDtype = DTYPE;
  static constexpr int kBlock = BLOCK;
  static constexpr int kRadix = RADIX;
  static constexpr int kFirst = FIRST;
  static constexpr int kCluster = CLUSTER;
  static constexpr int kItems = ITEMS;
  static constexpr int kBound = BOUND;

  static constexpr int kKeyBits = Keys<DTYPE>::kBits;
  static constexpr int kExactPasses = CLUSTER == 0 ? 0 : (kKeyBits + RADIX - 1) / RADIX;
  static constexpr int kPasses = kExactPasses + FIRST;
  static constexpr int kBins = CLUSTER == 0 ? 0 : (1 << RADIX);
  // Shared memory before the candidate buffer: two histograms and, for a
  // cluster, the cluster-wide sum and this CTA's place in each bin.
  static constexpr int kHistSmem = CLUSTER == 0 ? 0 : (2 + (CLUSTER > 1 ? 2 : 0)) * kBins * 4;
  // Warp mode runs many small CTAs per SM: cap registers at 64 per thread so
  // that occupancy is not register-bound (96 for 16 items per lane, which
  // spill at 64 on sm_80). One CTA per SM is the floor elsewhere (the row
  // cache takes the shared memory anyway).
  static constexpr int kMinBlocks =
      CLUSTER == 0 ? Max<1, 65536 / (BLOCK * (ITEMS >= 16 ? 96 : 64))>::value : 1;

  static_assert(BLOCK % 32 == 0 && BLOCK >= 32 && BLOCK <= 1024, "block size");
  static_assert(CLUSTER == 0 || (RADIX >= 4 && RADIX <= 12), "radix width");
  static_assert(FIRST == 0 || (DTYPE == kF32 && RADIX >= 8), "the coarse first pass is for fp32");
  static_assert(CLUSTER >= 0 && CLUSTER <= 2, "cluster mode: 0 warp, 1 CTA, 2 cluster");
  static_assert(CLUSTER != 0 || ITEMS > 0, "warp mode holds at least one item per lane");
  static_assert(BOUND == 0 || (CLUSTER == 0 && kKeyBits == 32 && ITEMS <= 16),
                "the lane-maximum bound is for warp mode, 32-bit keys, up to 16 items per lane");
};

// A policy with the radix strategy switches set (each -1, 0 or 1, as in
// strategy_on), e.g. topk::Strategy<topk::Policy<0, 512, 11, 0, 1, 0>, -1, 0>
// for branches per element in that kernel.
template <class P, int LANE_ATOMICS = -1, int BRANCH_FREE = -1, int CAPTURE_ONLY = -1, int UNIFORM_CHECK = -1,
          int PREFETCH = -1>
struct Strategy : P {
  using S = RadixStrategy<P::kKeyBits, P::kBlock, P::kFirst, P::kCluster, P::kPasses, LANE_ATOMICS, BRANCH_FREE,
                          CAPTURE_ONLY, UNIFORM_CHECK, PREFETCH>;
  enum : bool {
    kLaneAtomics = S::kLaneAtomics,
    kBranchFree = S::kBranchFree,
    kCaptureOnly = S::kCaptureOnly,
    kUniformCheck = S::kUniformCheck,
    kPrefetch = S::kPrefetch
  };
};

// Dynamic shared memory of a block/cluster launch, laid out as: histograms,
// candidate keys [buffer], candidate indices [buffer], rank list (when
// rounds allow ranking), row cache [cache_cap keys]. The host computes the
// same sum (generator/config.cpp) and the kernel checks it.
__host__ __device__ constexpr int smem_layout_bytes(int hist_bytes, int buffer, bool rank, int cache_cap,
                                                    int key_bytes) {
  return (hist_bytes + buffer * 8 + (rank ? TOPK_RANK_CAP * 8 : 0) + 15) / 16 * 16 + cache_cap * key_bytes;
}

}  // namespace topk
