// Speculation (one CTA per row): pass 0 copies every element whose first
// digit reaches spec_bin into the candidate buffer, noting an overflow
// instead of writing past the buffer. The driver decides from the overflow
// flag and the threshold whether the buffer then holds every candidate.
#pragma once
#include "topk/radix/row_select.cuh"

namespace topk {

// Speculative capture: copies the elements whose first digit reaches
// spec_bin into the buffer; beyond its capacity it only notes the
// overflow (the speculation then fails and the exact path runs). Few
// elements qualify (about 1.25 k of the row): see kLaneAtomics (this
// change alone: 128 x 131072 45.7 -> 40.6 us, 256 x 128256 89.3 -> 80.6).
template <class P>
template <int N>
__device__ __forceinline__ void RowSelect<P>::capture(const u32 (&key)[N], const u32 (&col)[N],
                                                     const u32 (&d)[N], u32 valid) {
  u32 m = 0;
#pragma unroll
  for (int i = 0; i < N; ++i)
    if (((valid >> i) & 1u) && d[i] >= spec_bin) m |= 1u << i;
  u32 pos;
  const u32 cnt = static_cast<u32>(__popc(m));
  if constexpr (kLaneAtomics) {
    if (m == 0) return;
    pos = atomicAdd(&ctl->buf_n, cnt);
  } else {
    if (!__any_sync(kFullMask, m != 0)) return;
    pos = reserve(smem_addr(&ctl->buf_n), cnt, false);
  }
  // One overflow test per lane, not per element: an overflow fails the
  // speculation, and the buffer's contents are then dropped, so a lane
  // that overflows stores nothing. (Per element, the test and the flag's
  // store ran for every warp step of pass 0, predicated off or not: 14% of
  // the instructions of 64 x 32768 c1, Nsight Compute source counters.)
  if (pos + cnt > static_cast<u32>(S)) {
    // An atomic: leave_early() reads the flag while other lanes set it.
    atomicOr(&ctl->spec_overflow, 1u);
    return;
  }
#pragma unroll
  for (int i = 0; i < N; ++i)
    if ((m >> i) & 1u) {
      buf_key[pos] = key[i];
      buf_idx[pos] = col[i];
      ++pos;
    }
}

template <class P>
struct RowSelect<P>::CaptureOp {
  RowSelect* self;
  template <int N>
  __device__ __forceinline__ void operator()(const u32 (&raw)[N], const u32 (&col)[N], u32 valid, int,
                                             bool) const {
    u32 key[N], d[N];
#pragma unroll
    for (int i = 0; i < N; ++i) {
      key[i] = K::key_flip(raw[i], self->flip);
      d[i] = self->digit0(key[i]);
    }
    self->capture(key, col, d, valid);
  }
};

// Pass 0. One CTA per row with a buffer that can hold ~1.25 k: histogram
// a sample of the slice first (a quarter or an eighth), take the highest
// bin whose suffix in that sample reaches k scaled to the sample plus
// three standard deviations of that count (and 2), capture the sample's
// elements at or above it, then histogram and capture the rest in one
// pass. The margin decides how
// often a row falls back to a second scan: with an eighth of the row and
// a 1.25 k + 64 target, about 1% of normal rows of 131072 (k = 2048,
// buffer 4096) picked a bin too low, overflowed the buffer and took 2.5x
// as long; with 128 rows one such row sets the kernel's time (measured
// over 8 random inputs: 57-115 us, now 60.3-60.7 us). A larger margin is
// no safer: for k = 64 of 201088 bf16 logits the bin one lower overflows
// a 1024 buffer (+16 made that shape 1.9x slower).
template <class P>
__device__ __forceinline__ void RowSelect<P>::speculative_pass0() {
  // A quarter of the row only when the buffer leaves little room above k
  // (re-reading the sample for the capture costs an eighth of a row
  // more; measured 5% on 256 x 128256 k1024, where an eighth suffices).
  const int frac = 2 * (k + k / 4 + 64) > S ? 4 : 8;
  const int nA = nvec / frac > T ? nvec / frac : T;
  visit_range(0, nA, true, true, Pass0Op<true>{this});
  __syncthreads();
  const long long sampled = len - (nvec - nA) * static_cast<long long>(V);
  const float ks = static_cast<float>(k) * static_cast<float>(sampled) / static_cast<float>(len);
  const long long target = static_cast<long long>(ks + 3.0f * __fsqrt_rn(ks)) + 2;
  if (target < sampled) {
    spec_bin = find_threshold<T, NB>(hist, static_cast<u32>(target), &ctl->thr, ctl->scan_scratch, nullptr).bin;
    spec = true;
    visit_range(0, nA, true, true, CaptureOp{this});
  }
  if (!spec || !kCaptureOnly) {
    visit_range(nA, nvec, false, false, Pass0Op<true>{this});
  } else {
    // The rest of the row is only captured, not histogrammed: the
    // buffer then holds every element whose first digit reaches
    // spec_bin, and when there are k of them the threshold bin is one of
    // those digits, so their histogram, taken from the buffer, is all
    // the threshold search needs. When the speculation fails (the
    // buffer overflowed, or fewer than k reached spec_bin), the row is
    // read again with a full histogram. See kCaptureOnly.
    stop_on_overflow = true;
    visit_range(nA, nvec, false, false, Pass0Op<false>{this});
    stop_on_overflow = false;
    __syncthreads();
    const bool hit = ctl->spec_overflow == 0 && ctl->buf_n >= static_cast<u32>(k);
    for (int i = threadIdx.x; i < NB; i += T) hist[i] = 0;
    __syncthreads();
    if (hit) {
      const u32 n = ctl->buf_n;
      for (u32 base = (threadIdx.x >> 5) * 32; base < n; base += T) {
        const u32 i = base + lane_id();
        u32 d[1] = {i < n ? digit0(buf_key[i]) : 0u};
        hist_add(hist, d, i < n ? 1u : 0u);
      }
    } else {
      spec = false;
      if (threadIdx.x == 0) ctl->buf_n = 0;  // read again only after the loop's barrier
      visit_global(0, Pass0Op<true>{this});
    }
  }
}

}  // namespace topk
