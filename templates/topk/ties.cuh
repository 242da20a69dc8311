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
// Rows of a few hundred elements (MoE routing) get a small block, so that
// many rows share an SM.
#pragma once
#include "topk/args.h"
#include "topk/keys.cuh"
#include "topk/row.cuh"

namespace topk {

constexpr int kTieMaxBlock = TOPK_TIE_MAX_BLOCK;
constexpr int kTieItems = 16;  // consecutive elements per thread per step of the row scan

// The selection key of `raw` with the rules' equality: canonical NaN and zero.
template <int DTYPE>
__device__ __forceinline__ u32 tie_key(u32 raw, bool smallest) {
  return Keys<DTYPE>::key(Keys<DTYPE>::canonical(raw), smallest);
}

// Block-wide exclusive prefix of per-thread counts up to kTieItems, with the
// total. `scratch` holds 32 shared words; two barriers.
__device__ __forceinline__ u32 tie_block_exclusive(u32 v, u32* scratch, u32* total) {
  const u32 warps = blockDim.x >> 5;
  u32 warp_total;
  const u32 pre = warp_exclusive_small<5>(v, &warp_total);
  const u32 lane = lane_id();
  const u32 warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = warp_total;
  __syncthreads();
  const u32 sum = lane < warps ? scratch[lane] : 0u;
  const u32 before = __reduce_add_sync(kFullMask, lane < warp ? sum : 0u);
  *total = __reduce_add_sync(kFullMask, sum);
  __syncthreads();
  return before + pre;
}

// Bit q set: element e0 + q of the row is in [start, end) and equal to the
// k-th key. A chunk wholly inside the range is read in 16-byte loads (e0 is
// 16-byte aligned there, see the caller); the chunks at the range's edges
// element by element, never outside it.
template <int DTYPE>
__device__ __forceinline__ u32 tie_mask(const typename Keys<DTYPE>::Raw* in, int e0, int start, int end, u32 kth,
                                        bool smallest) {
  using Raw = typename Keys<DTYPE>::Raw;
  u32 mask = 0;
  if (e0 >= start && e0 + kTieItems <= end) {
    constexpr int kPer = 16 / static_cast<int>(sizeof(Raw));  // elements per 16-byte load
    const uint4* v = reinterpret_cast<const uint4*>(in + e0);
#pragma unroll
    for (int w = 0; w < kTieItems / kPer; ++w) {
      const uint4 x = v[w];
      const u32 words[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (sizeof(Raw) == 4) {
          if (tie_key<DTYPE>(words[j], smallest) == kth) mask |= 1u << (w * kPer + j);
        } else {
          if (tie_key<DTYPE>(words[j] & 0xffffu, smallest) == kth) mask |= 1u << (w * kPer + 2 * j);
          if (tie_key<DTYPE>(words[j] >> 16, smallest) == kth) mask |= 1u << (w * kPer + 2 * j + 1);
        }
      }
    }
  } else {
#pragma unroll
    for (int q = 0; q < kTieItems; ++q) {
      const int e = e0 + q;
      if (e >= start && e < end && tie_key<DTYPE>(in[e], smallest) == kth) mask |= 1u << q;
    }
  }
  return mask;
}

// One CTA per row; any block size that is a multiple of 32 up to
// kTieMaxBlock (the host sizes it to the rows: jit/variant.cpp).
template <int DTYPE>
__global__ void __launch_bounds__(kTieMaxBlock) tie_rows_kernel(TieArgs a) {
  await_prior_grids();
  using K = Keys<DTYPE>;
  using Raw = typename K::Raw;
  __shared__ u32 scratch[32];
  const int T = static_cast<int>(blockDim.x);
  const u32 warps = blockDim.x >> 5;
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
  for (int i = threadIdx.x; i < a.k; i += T) {
    const u32 key = tie_key<DTYPE>(in[idx[i]], smallest);
    kth = key < kth ? key : kth;
  }
  kth = __reduce_min_sync(kFullMask, kth);
  if (lane == 0) scratch[threadIdx.x >> 5] = kth;
  __syncthreads();
  kth = __reduce_min_sync(kFullMask, lane < warps ? scratch[lane] : ~0u);
  __syncthreads();

  // 2. Entries above the k-th key to the front. Each step reads its entries
  // before the scan's barrier and writes at or below them after it, so no
  // entry is overwritten before it is read.
  u32 kept = 0;
  for (int base = 0; base < a.k; base += T) {
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

  // 3. The lowest-index elements equal to the k-th key fill [kept, k), the
  // row read in index order, kTieItems consecutive elements per thread per
  // step. Steps start where the row is 16-byte aligned (the input is
  // element-aligned), so whole chunks load in 16-byte words; a step with no
  // tie costs one barrier.
  const u32 need = static_cast<u32>(a.k) - kept;
  constexpr int kPer = 16 / static_cast<int>(sizeof(Raw));
  const int first =
      range.start - static_cast<int>((reinterpret_cast<unsigned long long>(in + range.start) / sizeof(Raw)) % kPer);
  u32 found = 0;
  for (int base = first; base < range.end && found < need; base += T * kTieItems) {
    const int e0 = base + static_cast<int>(threadIdx.x) * kTieItems;
    u32 mask = tie_mask<DTYPE>(in, e0, range.start, range.end, kth, smallest);
    if (!__syncthreads_or(mask != 0)) continue;
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
