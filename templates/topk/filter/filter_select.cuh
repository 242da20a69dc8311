// The filter family: one CTA per row reads the row once, keeping in shared
// memory every element whose key is above a running threshold; when the
// candidate list would overflow, an exact select cuts it back to k and the
// threshold rises to the k-th key. A last exact select leaves the top k.
//
// The threshold is a key, not a digit of it, so a shifted distribution or
// a few distinct values cost what normal data costs: the expected number of
// elements that enter the list is about k ln(n / k) whatever the values
// (the running-threshold idea of DeepSeek's DeepSelect, in our own code).
// Exact always: the list holds every element seen with a key above the
// threshold and, since the last cut, exactly k at or above it; ties at the
// k-th key are cut by arrival, which any valid top-k allows.
#pragma once
#include "topk/args.h"
#include "topk/block_scan.cuh"
#include "topk/keys.cuh"
#include "topk/row.cuh"
#include "topk/types.cuh"

namespace topk {
namespace filter {

// A variant's code shape. The candidate capacity is a launch argument
// (TopkArgs::buffer); the host checks k + kTile <= capacity <= kMaxItems * BLOCK.
template <int DTYPE, int BLOCK, int UNROLL, int RADIX>
struct Policy {
  static constexpr int kDtype = DTYPE;
  static constexpr int kBlock = BLOCK;
  static constexpr int kUnroll = UNROLL;     // 16-byte loads per thread per tile
  static constexpr int kRadix = RADIX;      // digit width of the in-list select
  static constexpr int kVec = Keys<DTYPE>::kVec;
  static constexpr int kTile = BLOCK * kVec * UNROLL;  // elements per step of the row
  static constexpr int kKeyBits = Keys<DTYPE>::kBits;
  static constexpr int kBins = 1 << RADIX;
  static constexpr int kPasses = (kKeyBits + RADIX - 1) / RADIX;
  // Candidates each thread holds in registers while the list is cut.
  static constexpr int kMaxItems = TOPK_FILTER_MAX_ITEMS;
  // Dynamic shared memory before the candidate list: the histogram.
  static constexpr int kHistSmem = kBins * 4;
  static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "block size");
  static_assert(RADIX == 8 || RADIX == 11, "digit width");
};

// Dynamic shared memory of a launch with `capacity` candidates (the host
// computes the same, generator/filter.cpp).
__host__ __device__ constexpr int smem_bytes(int hist_bytes, int capacity) { return hist_bytes + capacity * 8; }

struct Control {
  int count;       // candidates in the list
  u32 threshold;   // keys above it enter the list (once `open` is 0)
  int open;        // 1 until the first cut: every key enters
  int taken;       // ties taken by the current cut
  int placed;      // keys above the k-th placed by the current cut
  ThresholdResult res;
  u32 scratch[64];
};

// Element e of the elements in a 16-byte load's four words (raw bits): a
// word each for 32-bit keys, two per word for 16-bit ones.
template <int KB>
__device__ __forceinline__ u32 unpack_raw(const u32 (&w)[4], int e) {
  return KB == 32 ? w[e] : (w[e / 2] >> (16 * (e % 2))) & 0xffffu;
}

// The key of rank `rank` (1 = largest) among `count` keys held N per thread
// (entry threadIdx.x + j * block), digit by digit from the top, and in *need
// how many keys equal to it rank at or above `rank`. Requires 1 <= rank <=
// count. With fewer `passes` than the key needs, the lowest key of the
// rank's bin at that depth (its low bits zero). Every thread calls it.
template <class P, int N>
__device__ u32 select_rank(const u32 (&key)[N], int count, u32 rank, u32* hist, ThresholdResult* res, u32* scratch,
                           u32* need_out, int passes = P::kPasses) {
  constexpr int T = P::kBlock, NB = P::kBins, KB = P::kKeyBits;
  u32 prefix = 0;
  u32 need = rank;
#pragma unroll 1
  for (int pass = 0; pass < passes; ++pass) {
    const int hi = KB - pass * P::kRadix;
    const int lo = hi - P::kRadix > 0 ? hi - P::kRadix : 0;
    const u32 mask = (1u << (hi - lo)) - 1u;
    for (int b = threadIdx.x; b < NB; b += T) hist[b] = 0;
    __syncthreads();
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const int i = static_cast<int>(threadIdx.x) + j * T;
      const bool same = hi >= 32 || (key[j] >> hi) == (prefix >> hi);
      if (i < count && same) atomicAdd(&hist[(key[j] >> lo) & mask], 1u);
    }
    __syncthreads();
    const ThresholdResult r = find_threshold<T, NB>(hist, need, res, scratch, nullptr);
    need -= r.above;
    prefix |= r.bin << lo;
  }
  *need_out = need;
  return prefix;
}

template <class P>
struct RowFilter {
  using K = Keys<P::kDtype>;
  using Raw = typename K::Raw;
  static constexpr int T = P::kBlock;
  static constexpr int V = P::kVec;
  static constexpr int NB = P::kBins;
  static constexpr int KB = P::kKeyBits;

  Control* ctl;
  u32* hist;
  u32* keys;
  int* idx;
  int capacity;
  u32 flip;

  // Cuts the list (ctl->count > k entries) to exactly its k largest keys and
  // sets the threshold to the k-th key. Every thread calls it.
  __device__ void cut(int k) {
    const int count = ctl->count;
    // The list moves through registers: every read happens before any write.
    u32 key[P::kMaxItems];
    int id[P::kMaxItems];
#pragma unroll
    for (int j = 0; j < P::kMaxItems; ++j) {
      const int i = static_cast<int>(threadIdx.x) + j * T;
      key[j] = i < count ? keys[i] : 0u;
      id[j] = i < count ? idx[i] : -1;
    }
    // The k-th key; `need` of the keys equal to it are kept.
    u32 need;
    const u32 prefix = select_rank<P>(key, count, static_cast<u32>(k), hist, &ctl->res, ctl->scratch, &need);
    if (threadIdx.x == 0) {
      ctl->taken = 0;
      ctl->placed = 0;
    }
    __syncthreads();
    const int above = k - static_cast<int>(need);
#pragma unroll
    for (int j = 0; j < P::kMaxItems; ++j) {
      const int i = static_cast<int>(threadIdx.x) + j * T;
      if (i >= count) continue;
      int pos = -1;
      if (key[j] > prefix) {
        pos = atomicAdd(&ctl->placed, 1);
      } else if (key[j] == prefix) {
        const int t = atomicAdd(&ctl->taken, 1);
        if (t < static_cast<int>(need)) pos = above + t;
      }
      if (pos >= 0) {
        keys[pos] = key[j];
        idx[pos] = id[j];
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      ctl->count = k;
      ctl->threshold = prefix;
      ctl->open = 0;
    }
    __syncthreads();
  }

  // Appends the keys of `n` elements held by this thread (key[e], column
  // col[e]) that pass the threshold; one atomic per warp.
  template <int N>
  __device__ __forceinline__ void append(const u32 (&key)[N], const int (&col)[N], const bool (&valid)[N],
                                         u32 threshold, bool open) {
    bool pass[N];
    u32 mine = 0;
#pragma unroll
    for (int e = 0; e < N; ++e) {
      pass[e] = valid[e] && (open || key[e] > threshold);
      mine += pass[e] ? 1u : 0u;
    }
    const u32 incl = warp_inclusive_prefix(mine);
    const u32 total = __shfl_sync(kFullMask, incl, 31);
    int base = 0;
    if (lane_id() == 31 && total > 0) base = atomicAdd(&ctl->count, static_cast<int>(total));
    base = __shfl_sync(kFullMask, base, 31);
    int pos = base + static_cast<int>(incl - mine);
#pragma unroll
    for (int e = 0; e < N; ++e)
      if (pass[e]) {
        keys[pos] = key[e];
        idx[pos] = col[e];
        ++pos;
      }
  }

  // Before a step that may append `incoming` elements: cut the list when
  // they might not fit. Returns the threshold state for the step.
  // Two barriers: every thread must read the count before any thread of
  // this step appends, or threads could disagree about cutting.
  __device__ __forceinline__ void make_room(int k, int incoming, u32* threshold, bool* open) {
    __syncthreads();  // the last step's appends are in
    if (ctl->count + incoming > capacity) cut(k);  // ends with a barrier
    else __syncthreads();
    *threshold = ctl->threshold;
    *open = ctl->open != 0;
  }

  // This thread's 16-byte loads of the step starting at vector v0.
  __device__ __forceinline__ static void load_step(const uint4* body, int v0, int nvec, uint4 (&q)[P::kUnroll]) {
#pragma unroll
    for (int u = 0; u < P::kUnroll; ++u) {
      const int v = v0 + u * T + static_cast<int>(threadIdx.x);
      q[u] = v < nvec ? body[v] : make_uint4(0u, 0u, 0u, 0u);
    }
  }

  // One step of the row: room in the list, then the survivors appended.
  __device__ __forceinline__ void filter_step(const uint4 (&q)[P::kUnroll], int v0, int nvec, int col0, int k,
                                              u32* threshold, bool* open) {
    make_room(k, P::kTile, threshold, open);
    u32 key[P::kUnroll * V];
    int col[P::kUnroll * V];
    bool valid[P::kUnroll * V];
#pragma unroll
    for (int u = 0; u < P::kUnroll; ++u) {
      const int v = v0 + u * T + static_cast<int>(threadIdx.x);
      const u32 w[4] = {q[u].x, q[u].y, q[u].z, q[u].w};
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const u32 raw = unpack_raw<KB>(w, e);
        key[u * V + e] = K::key_flip(raw, flip);
        col[u * V + e] = col0 + v * V + e;
        valid[u * V + e] = v < nvec;
      }
    }
    append(key, col, valid, *threshold, *open);
  }

  __device__ void run(const TopkArgs& a, unsigned char* smem, Control* control) {
    const int rowi = blockIdx.x;
    const bool values = (a.flags & TOPK_FLAG_VALUES) != 0 && a.out_val != nullptr;
    const int k = a.k;
    flip = (a.flags & TOPK_FLAG_SMALLEST) ? (KB == 32 ? ~0u : 0xffffu) : 0u;
    const Raw* row = static_cast<const Raw*>(a.input) + static_cast<long long>(rowi) * a.row_stride;
    int* out_idx = a.out_idx + static_cast<long long>(rowi) * k;
    Raw* out_val = values ? static_cast<Raw*>(a.out_val) + static_cast<long long>(rowi) * k : nullptr;
    const RowRange range = row_range(a, rowi);
    const int L = range.end - range.start;
    if (L <= k) {
      take_whole_range(row, range, out_idx, out_val, static_cast<int>(threadIdx.x), T, k, static_cast<Raw>(K::kLowest));
      return;
    }
    {
      // The launch must provide the layout the host computed; a mismatch is
      // a host bug, and trapping beats corrupting shared memory.
      u32 dyn;
      asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
      if (static_cast<int>(dyn) < smem_bytes(P::kHistSmem, a.buffer) || a.buffer < k + P::kTile ||
          a.buffer > P::kMaxItems * T)
        __trap();
    }
    ctl = control;
    capacity = a.buffer;
    hist = reinterpret_cast<u32*>(smem);
    keys = hist + NB;
    idx = reinterpret_cast<int*>(keys + capacity);
    if (threadIdx.x == 0) {
      ctl->count = 0;
      ctl->threshold = 0;
      ctl->open = 1;
    }

    // Scalar head up to 16-byte alignment, vector body, scalar tail.
    const unsigned long long addr = reinterpret_cast<unsigned long long>(row + range.start);
    int head = static_cast<int>(((16u - (addr & 15u)) & 15u) / sizeof(Raw));
    if (head > L) head = L;
    const int nvec = (L - head) / V;
    const int body_end = range.start + head + nvec * V;
    u32 threshold = 0;
    bool open = true;
    {
      // Head and tail together: fewer than 2 V elements, one per thread.
      const int extra = head + (range.end - body_end);
      make_room(k, extra, &threshold, &open);
      const int t = threadIdx.x;
      u32 key[1] = {0};
      int col[1] = {0};
      bool valid[1] = {t < extra};
      if (valid[0]) {
        col[0] = t < head ? range.start + t : body_end + (t - head);
        key[0] = K::key_flip(static_cast<u32>(row[col[0]]), flip);
      }
      append(key, col, valid, threshold, open);
    }
    // Two steps in flight: the next step's loads are issued before this
    // step waits at its barriers and appends (one row per SM needs about
    // 32 KB in flight to approach its share of HBM bandwidth).
    const uint4* body = reinterpret_cast<const uint4*>(row + range.start + head);
    constexpr int kStepVecs = T * P::kUnroll;
    const int col0 = range.start + head;
    uint4 qa[P::kUnroll], qb[P::kUnroll];
    load_step(body, 0, nvec, qa);
    for (int v0 = 0; v0 < nvec; v0 += 2 * kStepVecs) {
      const int v1 = v0 + kStepVecs;
      if (v1 < nvec) load_step(body, v1, nvec, qb);
      filter_step(qa, v0, nvec, col0, k, &threshold, &open);
      if (v1 >= nvec) break;
      if (v1 + kStepVecs < nvec) load_step(body, v1 + kStepVecs, nvec, qa);
      filter_step(qb, v1, nvec, col0, k, &threshold, &open);
    }
    __syncthreads();
    if (ctl->count > k) cut(k);
    // The list is the row's top k.
    for (int j = threadIdx.x; j < k; j += T) {
      const int c = idx[j];
      out_idx[j] = c;
      if (values) out_val[j] = row[c];
    }
  }
};

}  // namespace filter

template <class P>
__global__ void __launch_bounds__(P::kBlock, 1) filter_kernel(TopkArgs a) {
  extern __shared__ __align__(16) unsigned char filter_smem[];
  __shared__ filter::Control control;
  filter::RowFilter<P> f;
  f.run(a, filter_smem, &control);
}

}  // namespace topk
