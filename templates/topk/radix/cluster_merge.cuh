// Cluster merge: every CTA of a row's cluster gets the merged histogram
// (ghist) and, per bin, the sum over the CTAs ranked below it (gpre), by an
// all-gather or a reduce-scatter over distributed shared memory. Callers
// have passed a cluster barrier since the histograms were complete.
#pragma once
#include "topk/radix/row_select.cuh"

namespace topk {

// The cluster's histogram merge: every CTA gets the merged histogram
// (ghist) and, per bin, the sum over the CTAs ranked below it (gpre).
// Two ways, chosen by the merge's size (H100, same-run probe): the
// all-gather costs no extra cluster barrier; the reduce-scatter moves C
// times less data through distributed shared memory, for one more barrier.
// 2048 bins over 16 CTAs: 1 x 524288 25.41 -> 20.77 us with the
// reduce-scatter; 256 bins over 16 CTAs (1 x 131072 13.77 -> 14.15) and
// 2048 bins over 2 or 4 CTAs (64 x 32768 15.49 -> 16.12, 28.98 -> 30.09)
// are faster with the all-gather.
template <class P>
__device__ __forceinline__ bool RowSelect<P>::reduce_scatter() const {
  if constexpr (NB < 1024) return false;  // NB C < 16384 for every C <= 16
  return NB * C >= 16384;
}

// All-gather: every CTA loads every CTA's whole histogram, four bins per
// request, kMergeGroup CTAs' loads in flight before any is used (CTAs
// beyond C load nothing), and sums them itself. Ends with a block barrier.
template <class P>
__device__ __forceinline__ void RowSelect<P>::merge_all_gather(int cur, u32 rank) {
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
template <class P>
__device__ __forceinline__ void RowSelect<P>::merge_reduce_scatter(int cur, u32 rank) {
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

// The merge of the current pass: the reduce-scatter or the all-gather, as
// reduce_scatter() chooses.
template <class P>
__device__ __forceinline__ void RowSelect<P>::merge_histograms(int cur, u32 rank) {
  if (reduce_scatter()) merge_reduce_scatter(cur, rank);
  else merge_all_gather(cur, rank);
}

}  // namespace topk
