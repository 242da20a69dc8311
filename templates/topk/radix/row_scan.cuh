// Row scan: visiting the slice's elements in global memory (scalar head and
// tail, 16-byte vectors in between, loads of the next step in flight) and
// handing them, warp-uniformly, to a callback; a scan may leave early once
// the last ties are taken or the speculative capture overflowed.
#pragma once
#include "topk/radix/row_select.cuh"

namespace topk {

template <class P>
__device__ __forceinline__ void RowSelect<P>::unpack(const uint4& q, u32 (&raw)[V]) {
  const u32 w[4] = {q.x, q.y, q.z, q.w};
  if (V == 4) {
#pragma unroll
    for (int i = 0; i < 4; ++i) raw[i] = w[i];
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      raw[(2 * i) % V] = w[i] & 0xffffu;
      raw[(2 * i + 1) % V] = w[i] >> 16;
    }
  }
}

// Whether the still-needed ties are all taken (the leader's counter). The
// loops that stop on it vote, so that a warp leaves together even if its
// lanes read the counter apart (the warp-wide votes after the test need
// every lane).
template <class P>
__device__ __forceinline__ bool RowSelect<P>::ties_taken() const {
  if constexpr (kClustered) return eq_base + Cluster<1>::load(smem_addr(&ctl->eq_n)) >= need;
  return Cl::load(Cl::map(&ctl->tie, 0)) >= need;
}

// Whether a row scan may stop here: the last scan's ties are taken, or the
// speculative capture overflowed. Warp-uniform: the warp votes, so that
// it leaves together even if its lanes read the counters apart.
template <class P>
__device__ __forceinline__ bool RowSelect<P>::leave_early() const {
  if (ties_only) return __any_sync(kFullMask, ties_taken());
  if (stop_on_overflow) return __any_sync(kFullMask, Cluster<1>::load(smem_addr(&ctl->spec_overflow)) != 0);
  return false;
}

// Visits slice elements from global memory: the body vectors [v0, v1)
// and, on request, the head and the tail elements (outside the
// 16-byte-aligned body; through warp 0, one per lane). F(raw[N], col[N],
// valid, j, warp_full) is called warp-uniformly; warp_full says every lane
// holds N valid elements.
template <class P>
template <class F>
__device__ __forceinline__ void RowSelect<P>::visit_range(int v0, int v1, bool do_head, bool do_tail,
                                                         const F& f) const {
  const int warp = threadIdx.x >> 5;
  const u32 lane = lane_id();
  const int nhead = do_head ? head : 0;
  const int ntail = do_tail ? len - (head + nvec * V) : 0;
  if (warp == 0 && (nhead > 0 || ntail > 0)) {
    u32 raw[1] = {0}, col[1] = {0};
    u32 valid = 0;
    int j = -1;
    if (static_cast<int>(lane) < nhead)
      j = lane;
    else if (static_cast<int>(lane) - nhead < ntail)
      j = len - ntail + (lane - nhead);
    if (j >= 0) {
      raw[0] = row[s0 + j];
      col[0] = s0 + j;
      valid = 1;
    }
    f(raw, col, valid, j, false);
  }
  const uint4* body = reinterpret_cast<const uint4*>(row + s0 + head);
  const int b0 = v0 + warp * 32;
  if constexpr (kPrefetch) {
    // The next step's loads are issued before this step's elements are
    // processed, so the memory system works while the SM computes.
    uint4 q[kUnroll] = {}, nq[kUnroll] = {};
    load_step(body, b0, v1, q);
    for (int base = b0; base < v1; base += T * kUnroll) {
      if (leave_early()) break;
      if (base + T * kUnroll < v1) load_step(body, base + T * kUnroll, v1, nq);
      visit_step(q, base, v1, f);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) q[u] = nq[u];
    }
  } else {
    for (int base = b0; base < v1; base += T * kUnroll) {
      if (leave_early()) break;
      uint4 q[kUnroll];
      load_step(body, base, v1, q);
      visit_step(q, base, v1, f);
    }
  }
}

// One step of visit_range: the warp's kUnroll vectors at base, base + T, ...
template <class P>
__device__ __forceinline__ void RowSelect<P>::load_step(const uint4* body, int base, int v1, uint4 (&q)[kUnroll]) {
  const int lane = static_cast<int>(lane_id());
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int v = base + u * T + lane;
    if (v < v1) q[u] = body[v];
  }
}

template <class P>
template <class F>
__device__ __forceinline__ void RowSelect<P>::visit_step(const uint4 (&q)[kUnroll], int base, int v1,
                                                        const F& f) const {
  const int lane = static_cast<int>(lane_id());
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int v = base + u * T + lane;
    if (base + u * T >= v1) break;  // warp-uniform
    u32 raw[V], col[V];
    unpack(q[u], raw);
    const int j = head + v * V;
#pragma unroll
    for (int i = 0; i < V; ++i) col[i] = s0 + j + i;
    f(raw, col, v < v1 ? (1u << V) - 1u : 0u, j, base + u * T + 31 < v1);
  }
}

// Visits the slice elements [g0, len): g0 is 0 or head + m * V.
template <class P>
template <class F>
__device__ __forceinline__ void RowSelect<P>::visit_global(int g0, const F& f) const {
  visit_range(g0 <= head ? 0 : (g0 - head) / V, nvec, g0 == 0, true, f);
}

}  // namespace topk
