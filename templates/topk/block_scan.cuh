// Block-wide search for the histogram bin that holds the k-th largest key.
#pragma once
#include "topk/types.cuh"

namespace topk {

struct ThresholdResult {
  u32 bin;        // the bin holding the k-th key
  u32 above;      // elements in bins above it
  u32 count;      // elements in the bin itself
  u32 above_pre;  // with a second histogram: its sum over the bins above
};

// The threads that search together and their barrier: the whole CTA.
struct CtaSync {
  __device__ __forceinline__ unsigned tid() const { return threadIdx.x; }
  __device__ __forceinline__ void bar() const { __syncthreads(); }
};

// Finds the bin b with above(b) < k_rem <= above(b) + g[b], where above(b)
// sums the bins over b. Requires sum(g) >= k_rem. Every thread of the block
// (or of the T threads `sync` names: their index and barrier) calls it and
// gets the result; `out` and `scratch` (64 words) are shared.
// Two barriers: after the per-warp sums, every warp scans the warp totals
// itself instead of waiting for one warp to publish them. `clear` (NB words,
// or null) is zeroed on the way, which saves the next pass its own barrier.
// With `pre` (NB words), the same suffix sum over `pre` at the found bin comes
// back in above_pre, at no extra barrier.
template <int T, int NB, bool kPre = false, class Sync = CtaSync>
__device__ __forceinline__ ThresholdResult find_threshold(const u32* g, u32 k_rem, ThresholdResult* out,
                                                          u32* scratch, u32* clear, const u32* pre = nullptr,
                                                          Sync sync = Sync()) {
  constexpr int PER = (NB + T - 1) / T;
  constexpr int NW = T / 32;
  const int warp = sync.tid() >> 5;
  const u32 lane = lane_id();
  const int b0 = sync.tid() * PER;
  u32 v[PER], pv[PER];
  u32 sum = 0, psum = 0;
#pragma unroll
  for (int q = 0; q < PER; ++q) {
    v[q] = b0 + q < NB ? g[b0 + q] : 0u;
    sum += v[q];
    pv[q] = kPre && b0 + q < NB ? pre[b0 + q] : 0u;
    psum += pv[q];
  }
  if (clear)
    for (int i = sync.tid(); i < NB; i += T) clear[i] = 0;
  const u32 incl = warp_inclusive_suffix(sum);
  const u32 pincl = kPre ? warp_inclusive_suffix(psum) : 0u;
  if (lane == 0) {
    scratch[warp] = incl;
    if (kPre) scratch[32 + warp] = pincl;
  }
  sync.bar();
  // Warps above this one, summed by every warp on its own.
  const bool up = lane < static_cast<u32>(NW) && static_cast<int>(lane) > warp;
  const u32 above_warp = __reduce_add_sync(kFullMask, up ? scratch[lane] : 0u);
  u32 run = above_warp + (incl - sum);
  u32 prun = 0;
  if (kPre) prun = __reduce_add_sync(kFullMask, up ? scratch[32 + lane] : 0u) + (pincl - psum);
#pragma unroll
  for (int q = PER - 1; q >= 0; --q) {
    if (run < k_rem && run + v[q] >= k_rem) {
      out->bin = b0 + q;
      out->above = run;
      out->count = v[q];
      if (kPre) out->above_pre = prun;
    }
    run += v[q];
    prun += pv[q];
  }
  sync.bar();
  return *out;
}

}  // namespace topk
