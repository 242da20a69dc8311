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

__device__ __forceinline__ RowRange row_range(const TopkArgs& a, int row) {
  return row_range(a.ranges, a.n, a.flags, row);
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

}  // namespace topk
