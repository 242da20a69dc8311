// Kernel argument block shared by the device templates and the host launcher.
// Plain C layout (no CUDA types) so the host includes this exact header; the
// generated source and the host both static_assert its size.
#pragma once

#define TOPK_FLAG_SMALLEST 1u  // select the k smallest instead of the k largest
#define TOPK_FLAG_RANGES 2u    // `ranges` holds one [start, end) int32 pair per row
#define TOPK_FLAG_VALUES 4u    // write the selected values to `out_val`
// Deterministic mode in the kernel itself: the ties at the k-th value are the
// lowest-index ones (only for families whose TakesLowestIndexTies says so;
// the others get the tie pass after them instead).
#define TOPK_FLAG_DETERMINISTIC 8u

#define TOPK_ARGS_SIZE 80

// Capacity of the rank list (candidates ranked directly in the last step).
#define TOPK_RANK_CAP 256

// Largest k of sorted output: the row sort's shared memory holds a power of
// two >= k of 8-byte entries (sort_rows.cuh), opting in to 128 KB.
#define TOPK_MAX_SORTED_K 16384

// Candidates per thread the filter family's list may hold
// (templates/topk/filter/filter_select.cuh): its capacity is at most this
// many times the block size.
#define TOPK_FILTER_MAX_ITEMS 16

// The filter family's cluster mode packs three knobs into TopkArgs::rounds:
// the over-selection margin in percent (-1000..3095, stored plus 1000, bits
// 0-11), the merged sample's size (split evenly over the cluster's CTAs, bits
// 12-26) and the recovery: how many retries move along the sample before the
// key interval halves (0-15, bits 27-30).
#define TOPK_FILTER_ROUNDS(margin, sample, recovery) \
  (((margin) + 1000) | ((sample) << 12) | ((recovery) << 27))

// Whether a one-CTA kernel's first pass captures candidates speculatively
// (RowSelect, radix/driver.cuh): a buffer of at least 512 with room for
// k + k/4 + 64 of them. The runtime's buffer adaptation uses the same rule.
#define TOPK_SPECULATES(buffer, k) ((buffer) >= 512 && (k) + (k) / 4 + 64 <= (buffer))

struct TopkArgs {
  const void* input;     // [batch, row_stride] elements of the variant's dtype
  const int* ranges;     // [batch][2] or null
  int* out_idx;          // [batch, k] column indices, -1 for padding
  void* out_val;         // [batch, k] values (same dtype as input) or null
  long long row_stride;  // elements between row starts, >= n
  int batch;
  int n;
  int k;
  unsigned flags;        // TOPK_FLAG_*
  // Knobs that are launch arguments rather than template parameters (they
  // change no code shape, so one binary serves every value):
  int buffer;            // candidate-buffer capacity in elements (0: re-read the row)
  int rounds;            // refinement passes before candidates may be ranked directly
  int cache_cap;         // per-CTA row-cache capacity in keys (0: no cache)
  int smem_bytes;        // dynamic shared memory the launch provides
  // Global scratch of the families whose plan asks for it (LaunchPlan::
  // workspace_bytes > 0), else null: zero before the launch, and every
  // launch leaves it zero again.
  void* workspace;
};

// Arguments of the row-sorting kernel that orders a finished top-k.
struct SortArgs {
  const void* input;     // the same input the top-k ran on
  int* idx;              // [batch, k] in/out
  void* val;             // [batch, k] out or null
  long long row_stride;
  int batch;
  int k;
  unsigned flags;        // TOPK_FLAG_SMALLEST | TOPK_FLAG_VALUES
  int cap;               // power of two >= k; shared memory holds cap 64-bit entries
};

// Most threads per CTA of the tie pass (one CTA per row).
#define TOPK_TIE_MAX_BLOCK 1024

// Arguments of the tie pass of deterministic mode (ties.cuh), which runs
// after any family's kernel and before the row sort.
struct TieArgs {
  const void* input;     // the same input the top-k ran on
  const int* ranges;     // as in TopkArgs
  int* idx;              // [batch, k] in/out
  void* val;             // [batch, k] out or null
  long long row_stride;
  int batch;
  int n;
  int k;
  unsigned flags;        // TOPK_FLAG_SMALLEST | TOPK_FLAG_RANGES | TOPK_FLAG_VALUES
};
