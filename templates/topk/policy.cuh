// The compile-time policy of one variant. The host mirrors these formulas in
// generator/config.cpp; every generated source static_asserts that both agree.
#pragma once
#include "topk/args.h"
#include "topk/keys.cuh"

namespace topk {

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
struct Policy {
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

// Dynamic shared memory of a block/cluster launch, laid out as: histograms,
// candidate keys [buffer], candidate indices [buffer], rank list (when
// rounds allow ranking), row cache [cache_cap keys]. The host computes the
// same sum (generator/config.cpp) and the kernel checks it.
__host__ __device__ constexpr int smem_layout_bytes(int hist_bytes, int buffer, bool rank, int cache_cap,
                                                    int key_bytes) {
  return (hist_bytes + buffer * 8 + (rank ? TOPK_RANK_CAP * 8 : 0) + 15) / 16 * 16 + cache_cap * key_bytes;
}

}  // namespace topk
