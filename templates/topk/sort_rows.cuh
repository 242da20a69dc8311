// Orders a finished top-k: each row's k entries sorted by value (descending
// for largest, ascending for smallest; equal values by index), padding last.
// A bitonic sort of (key, inverted index) pairs in shared memory.
#pragma once
#include "topk/args.h"
#include "topk/keys.cuh"

namespace topk {

template <int DTYPE>
__global__ void __launch_bounds__(512) sort_rows_kernel(SortArgs a) {
  await_prior_grids();
  using K = Keys<DTYPE>;
  using Raw = typename K::Raw;
  extern __shared__ __align__(16) unsigned char sort_smem[];
  u64* e = reinterpret_cast<u64*>(sort_smem);
  const int rowi = blockIdx.x;
  const bool smallest = (a.flags & TOPK_FLAG_SMALLEST) != 0;
  const bool values = (a.flags & TOPK_FLAG_VALUES) != 0 && a.val != nullptr;
  const Raw* in = static_cast<const Raw*>(a.input) + static_cast<long long>(rowi) * a.row_stride;
  int* idx = a.idx + static_cast<long long>(rowi) * a.k;
  Raw* val = values ? static_cast<Raw*>(a.val) + static_cast<long long>(rowi) * a.k : nullptr;
  const int cap = a.cap;
  // 0 sorts last: a real entry's low word is ~index >= 2^31, never 0.
  for (int i = threadIdx.x; i < cap; i += blockDim.x) {
    u64 v = 0;
    if (i < a.k) {
      const int c = idx[i];
      if (c >= 0) v = (static_cast<u64>(K::key(in[c], smallest)) << 32) | (0xffffffffu - static_cast<u32>(c));
    }
    e[i] = v;
  }
  __syncthreads();
  for (int size = 2; size <= cap; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int i = threadIdx.x; i < cap / 2; i += blockDim.x) {
        const int lo = 2 * i - (i & (stride - 1));
        const int hi = lo + stride;
        const bool desc = (lo & size) == 0;
        const u64 x = e[lo], y = e[hi];
        if ((x < y) == desc) {
          e[lo] = y;
          e[hi] = x;
        }
      }
      __syncthreads();
    }
  }
  for (int i = threadIdx.x; i < a.k; i += blockDim.x) {
    const u64 v = e[i];
    if (v == 0) {
      idx[i] = -1;
      if (values) val[i] = static_cast<Raw>(K::kLowest);
    } else {
      const int c = static_cast<int>(0xffffffffu - static_cast<u32>(v));
      idx[i] = c;
      if (values) val[i] = in[c];
    }
  }
}

}  // namespace topk
