// Output slots: writing a selected element (index, and value on request)
// and reserving consecutive slots in a counter, per warp or per lane. The
// callers pick the counter; these only keep the slots disjoint.
#pragma once
#include "topk/radix/row_select.cuh"

namespace topk {

template <class P>
__device__ __forceinline__ void RowSelect<P>::write(u32 pos, u32 col) const {
  out_idx[pos] = static_cast<int>(col);
  if (values) out_val[pos] = row[col];
}

// Reserves `cnt` consecutive slots per lane from the counter at `addr`
// (one atomic per warp) and returns this lane's first slot.
template <class P>
__device__ __forceinline__ u32 RowSelect<P>::reserve(u32 addr, u32 cnt, bool cluster_wide) const {
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
template <class P>
__device__ __forceinline__ u32 RowSelect<P>::take_local(u32* c, u32 n) const {
  if constexpr (kLaneAtomics) return n != 0 ? atomicAdd(c, n) : 0u;
  return reserve(smem_addr(c), n, false);
}

}  // namespace topk
