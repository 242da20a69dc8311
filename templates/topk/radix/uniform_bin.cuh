// Uniform-bin check (one CTA per row, 32-bit exact digits): whether every
// element of the threshold bin has the same key, so that any `need` of
// them finish the row. Block-wide; returns the same answer to every thread.
#pragma once
#include "topk/radix/row_select.cuh"

namespace topk {

// Whether every element of the threshold bin (digit `pass` equal to `bin`
// under the resolved prefix) has one key: a key of the bin is sampled
// (one strided element per thread), then the slice is read until an
// element of the bin with another key turns up. Block-wide; only in the
// kernels of kUniformCheck.
template <class P>
__device__ __forceinline__ bool RowSelect<P>::bin_is_uniform() {
  static_assert(kUniformCheck, "one CTA per row, exact 32-bit digits");
  if (threadIdx.x == 0) {
    ctl->rep_ok = 0;
    ctl->differ = 0;
  }
  // An element is in the bin iff its key matches the resolved prefix
  // extended by this pass's digit: one mask and one compare.
  const DigitBits b = digit_bits(pass);
  const u32 bmask = mask | (b.ones << b.lo);
  const u32 bprefix = prefix | (bin << b.lo);
  const auto in_bin = [&](u32 key) { return (key & bmask) == bprefix; };
  __syncthreads();
  const int tid = static_cast<int>(threadIdx.x);
  const int js = static_cast<int>(static_cast<long long>(tid) * len / T);  // spread: sorted rows too
  if (js < len) {
    const u32 key = K::key_flip(row[s0 + js], flip);
    if (in_bin(key)) {
      atomicExch(&ctl->rep, key);  // any key of the bin will do
      atomicOr(&ctl->rep_ok, 1u);
    }
  }
  __syncthreads();
  if (ctl->rep_ok == 0) return false;
  const u32 rep = ctl->rep;
  const u32 lane = lane_id();
  // Head and tail elements (outside the 16-byte-aligned body).
  const int ntail = len - (head + nvec * V);
  if (tid < head + ntail) {
    const int j = tid < head ? tid : len - ntail + (tid - head);
    const u32 key = K::key_flip(row[s0 + j], flip);
    if (in_bin(key) && key != rep) atomicOr(&ctl->differ, 1u);
  }
  constexpr int U = T >= 1024 ? 1 : 2;  // vectors in flight per thread (more spill at 1024)
  const uint4* body = reinterpret_cast<const uint4*>(row + s0 + head);
  for (int base = (tid >> 5) * 32; base < nvec; base += T * U) {
    if (__any_sync(kFullMask, ctl->differ != 0)) break;  // the warp leaves together
    uint4 q[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int v = base + u * T + static_cast<int>(lane);
      if (v < nvec) q[u] = body[v];
    }
    bool d = false;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int v = base + u * T + static_cast<int>(lane);
      if (v >= nvec) continue;
      u32 raw[V];
      unpack(q[u], raw);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const u32 key = K::key_flip(raw[i], flip);
        d |= in_bin(key) & (key != rep);
      }
    }
    if (__any_sync(kFullMask, d)) {
      if (lane == 0) atomicOr(&ctl->differ, 1u);
      break;
    }
  }
  __syncthreads();
  return ctl->differ == 0;
}

}  // namespace topk
