// The tie pass of deterministic mode. Runs after any family's kernel (and
// before the row sort) on its finished output: among the row's elements
// equal to the k-th value, the lowest indices are the ones taken, so one
// input gives one index set on every call, stream and GPU.
//
// Equal means equal under the exactness rules (DESIGN.md): -0.0 equals
// +0.0 and every NaN equals every other, whatever bits the selection keys
// gave them. Per row, one CTA:
//   1. the k-th key: the least key in the output;
//   2. the entries above it move to the front of the output, in order;
//   3. the row is read in index order until enough elements equal to the
//      k-th key are found; they fill the rest of the output, ascending.
// A row whose range holds at most k elements is left as it is: all of them
// are taken. Cost: k keys read twice, plus the row up to the last tie taken
// (for distinct values, up to the k-th value's position).
#pragma once
#include "topk/args.h"
#include "topk/keys.cuh"
#include "topk/row.cuh"

namespace topk {

constexpr int kTieBlock = TOPK_TIE_BLOCK;
constexpr int kTieItems = 4;  // consecutive elements per thread per step of the row scan

// The selection key of `raw` with the rules' equality: canonical NaN and zero.
template <int DTYPE>
__device__ __forceinline__ u32 tie_key(u32 raw, bool smallest) {
  return Keys<DTYPE>::key(Keys<DTYPE>::canonical(raw), smallest);
}

// Block-wide exclusive prefix of per-thread counts below 8, with the total.
// `scratch` holds 32 shared words; two barriers.
__device__ __forceinline__ u32 tie_block_exclusive(u32 v, u32* scratch, u32* total) {
  constexpr int kWarps = kTieBlock / 32;
  u32 warp_total;
  const u32 pre = warp_exclusive_small<3>(v, &warp_total);
  const u32 lane = lane_id();
  const u32 warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = warp_total;
  __syncthreads();
  const u32 sum = lane < static_cast<u32>(kWarps) ? scratch[lane] : 0u;
  const u32 before = __reduce_add_sync(kFullMask, lane < warp ? sum : 0u);
  *total = __reduce_add_sync(kFullMask, sum);
  __syncthreads();
  return before + pre;
}

template <int DTYPE>
__global__ void __launch_bounds__(kTieBlock) tie_rows_kernel(TieArgs a) {
  using K = Keys<DTYPE>;
  using Raw = typename K::Raw;
  constexpr int kWarps = kTieBlock / 32;
  __shared__ u32 scratch[32];
  const int rowi = blockIdx.x;
  const RowRange range = row_range(a.ranges, a.n, a.flags, rowi);
  if (range.end - range.start <= a.k) return;
  const bool smallest = (a.flags & TOPK_FLAG_SMALLEST) != 0;
  const bool values = (a.flags & TOPK_FLAG_VALUES) != 0 && a.val != nullptr;
  const Raw* in = static_cast<const Raw*>(a.input) + static_cast<long long>(rowi) * a.row_stride;
  int* idx = a.idx + static_cast<long long>(rowi) * a.k;
  Raw* val = values ? static_cast<Raw*>(a.val) + static_cast<long long>(rowi) * a.k : nullptr;
  const u32 lane = lane_id();

  // 1. The k-th key. The row holds more than k elements, so every output
  // entry is a real index.
  u32 kth = ~0u;
  for (int i = threadIdx.x; i < a.k; i += kTieBlock) {
    const u32 key = tie_key<DTYPE>(in[idx[i]], smallest);
    kth = key < kth ? key : kth;
  }
  kth = __reduce_min_sync(kFullMask, kth);
  if (lane == 0) scratch[threadIdx.x >> 5] = kth;
  __syncthreads();
  kth = __reduce_min_sync(kFullMask, lane < static_cast<u32>(kWarps) ? scratch[lane] : ~0u);
  __syncthreads();

  // 2. Entries above the k-th key to the front. Each step reads its entries
  // before the scan's barrier and writes at or below them after it, so no
  // entry is overwritten before it is read.
  u32 kept = 0;
  for (int base = 0; base < a.k; base += kTieBlock) {
    const int i = base + static_cast<int>(threadIdx.x);
    int c = -1;
    bool keep = false;
    if (i < a.k) {
      c = idx[i];
      keep = tie_key<DTYPE>(in[c], smallest) > kth;
    }
    u32 total;
    const u32 pos = kept + tie_block_exclusive(keep ? 1u : 0u, scratch, &total);
    if (keep) {
      idx[pos] = c;
      if (val) val[pos] = in[c];
    }
    kept += total;
  }

  // 3. The lowest-index elements equal to the k-th key fill [kept, k).
  const u32 need = static_cast<u32>(a.k) - kept;
  u32 found = 0;
  for (int base = range.start; base < range.end && found < need; base += kTieBlock * kTieItems) {
    const int e0 = base + static_cast<int>(threadIdx.x) * kTieItems;
    u32 mask = 0;
#pragma unroll
    for (int q = 0; q < kTieItems; ++q)
      if (e0 + q < range.end && tie_key<DTYPE>(in[e0 + q], smallest) == kth) mask |= 1u << q;
    u32 total;
    u32 pos = found + tie_block_exclusive(static_cast<u32>(__popc(mask)), scratch, &total);
    while (mask != 0) {
      const int e = e0 + __ffs(mask) - 1;
      mask &= mask - 1;
      if (pos < need) {
        idx[kept + pos] = e;
        if (val) val[kept + pos] = in[e];
      }
      ++pos;
    }
    found += total;
  }
}

}  // namespace topk
