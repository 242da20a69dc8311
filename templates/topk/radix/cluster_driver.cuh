// Cluster driver steps: what only a row's cluster does between the shared
// rounds of run(), the histogram merge aside (cluster_merge.cuh). After a
// gathering pass-0 scan, the CTAs hand the row to the leader, which goes on
// alone with every candidate of the threshold bin in its buffer.
#pragma once
#include "topk/radix/row_select.cuh"
#include "topk/radix/trace.cuh"

namespace topk {

// The leader's side of the hand-off after the gathering scan (the other
// CTAs have left run() at the cluster barrier): it waits for every gathered
// candidate (`count` of them), becomes the row's only CTA and histograms
// the next digit of its buffer.
template <class P>
__device__ __forceinline__ void RowSelect<P>::lead_alone(u32 count) {
  if constexpr (kClustered) mbar_wait(&ctl->gather_bar, 0);
  Cl::arrive_relaxed();
  trace_mark(22);
  solo = true;
  gather = false;
  C = 1;
  // The CTAs wrote the bin's elements to [0, count) of the buffer.
  const u32 n = count;
  if (threadIdx.x == 0) ctl->buf_n = n;
  for (u32 base = (threadIdx.x >> 5) * 32; base < n; base += T) {
    const u32 i = base + lane_id();
    u32 d[1] = {i < n ? digit(buf_key[i], pass + 1) : 0u};
    hist_add(hist_next, d, i < n ? 1u : 0u);
  }
}

}  // namespace topk
