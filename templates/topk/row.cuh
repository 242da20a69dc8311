// The per-row contract every kernel family honours (docs/DESIGN.md, "The
// per-row contract"), written once: which columns a row covers, and how the
// output positions past its elements are padded.
#pragma once
#include "topk/args.h"

namespace topk {

// Columns [start, end) of row `row`: the whole row, or its pair from
// `ranges` clamped to [0, n) (an inverted pair is empty).
struct RowRange {
  int start;
  int end;
};

__device__ __forceinline__ RowRange row_range(const TopkArgs& a, int row) {
  int start = 0, end = a.n;
  if (a.flags & TOPK_FLAG_RANGES) {
    start = a.ranges[2 * row];
    end = a.ranges[2 * row + 1];
    start = start < 0 ? 0 : (start > a.n ? a.n : start);
    end = end < start ? start : (end > a.n ? a.n : end);
  }
  return {start, end};
}

// The same for the tie pass of deterministic mode (ties.cuh). Kept apart
// from the TopkArgs form on purpose: routing that one through this changed
// the register allocation of the selection kernels, and one of them
// (kernel_f32_b1024_r8_cN, which spills) then failed on an H100 with a
// misaligned mbarrier address in its cluster gather (docs/PERFORMANCE.md).
__device__ __forceinline__ RowRange row_range(const int* ranges, int n, unsigned flags, int row) {
  int start = 0, end = n;
  if (flags & TOPK_FLAG_RANGES) {
    start = ranges[2 * row];
    end = ranges[2 * row + 1];
    start = start < 0 ? 0 : (start > n ? n : start);
    end = end < start ? start : (end > n ? n : end);
  }
  return {start, end};
}

// Output positions first, first + step, ... below k get index -1 and, when
// `out_val` is set, the dtype's lowest finite value (`lowest`, raw bits).
template <class Raw>
__device__ __forceinline__ void pad_output(int* out_idx, Raw* out_val, int first, int k, int step, Raw lowest) {
  for (int pos = first; pos < k; pos += step) {
    out_idx[pos] = -1;
    if (out_val) out_val[pos] = lowest;
  }
}

// A range of at most k elements is selected whole: positions first, first +
// step, ... below its length get its columns (and values when `out_val` is
// set), the rest padding.
template <class Raw>
__device__ __forceinline__ void take_whole_range(const Raw* row, RowRange range, int* out_idx, Raw* out_val, int first,
                                                 int step, int k, Raw lowest) {
  const int L = range.end - range.start;
  for (int j = first; j < L; j += step) {
    out_idx[j] = range.start + j;
    if (out_val) out_val[j] = row[range.start + j];
  }
  pad_output(out_idx, out_val, L + first, k, step, lowest);
}

}  // namespace topk
