// Candidate scan: one pass over the current candidates (the buffer, or the
// cached slice then global memory) that classifies each element against the
// threshold bin and acts on it as the round's Action says: write it, keep it
// as a candidate (local buffer or the leader's), histogram its next digit,
// take it as a tie or add it to the rank list.
#pragma once
#include "topk/radix/row_select.cuh"

namespace topk {

// One step of a scan: N elements per lane, all 32 lanes of the warp
// together (valid == 0 for lanes without work). P0: the pass-0 filter,
// where every element is a candidate and the digit shape is known.
template <class P>
template <int N, bool P0>
__device__ __forceinline__ void RowSelect<P>::process(const u32 (&key)[N], const u32 (&col)[N], u32 valid,
                                                     bool from_buffer) {
  u32 sel = 0, eq = 0;
  if constexpr (kBranchFree) {
    const bool all = action == kSelectAll;
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const bool in = ((valid >> i) & 1u) != 0 && (P0 || matches(key[i], from_buffer));
      const u32 d = P0 ? digit0(key[i]) : digit(key[i], pass);
      sel |= static_cast<u32>(in & ((d > bin) | (all & (d == bin)))) << i;
      eq |= static_cast<u32>(in & !all & (d == bin)) << i;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if (((valid >> i) & 1u) && (P0 || matches(key[i], from_buffer))) {
        const u32 d = P0 ? digit0(key[i]) : digit(key[i], pass);
        if (d > bin || (action == kSelectAll && d == bin))
          sel |= 1u << i;
        else if (d == bin)
          eq |= 1u << i;
      }
    }
  }
  if constexpr (kClustered) {
    if (__any_sync(kFullMask, sel != 0)) {
      u32 pos = sel_base + take_local(&ctl->sel_n, __popc(sel));
#pragma unroll
      for (int i = 0; i < N; ++i)
        if ((sel >> i) & 1u) write(pos++, col[i]);
    }
  } else if (kLaneAtomics) {
    if (sel != 0) {
      u32 pos = atomicAdd(&ctl->out, static_cast<u32>(__popc(sel)));
#pragma unroll
      for (int i = 0; i < N; ++i)
        if ((sel >> i) & 1u) write(pos++, col[i]);
    }
  } else if (__any_sync(kFullMask, sel != 0)) {
    u32 pos = reserve(Cl::map(&ctl->out, 0), __popc(sel), true);
#pragma unroll
    for (int i = 0; i < N; ++i)
      if ((sel >> i) & 1u) write(pos++, col[i]);
  }
  if (action == kSelectAll || !__any_sync(kFullMask, eq != 0)) return;
  if (action == kFilter) {
    if (kClustered && gather) {
      // Addresses in the leader's shared memory (mapa is one instruction;
      // keeping them live would cost registers in the hot loop). The
      // stores are asynchronous: the leader's mbarrier counts their bytes,
      // so nobody waits at a cluster barrier for them (whose release would
      // also wait for this CTA's output stores to global memory).
      u32 pos = eq_base + take_local(&ctl->eq_n, __popc(eq));
      const u32 lead_key = Cl::map(buf_key, 0), lead_idx = Cl::map(buf_idx, 0);
      const u32 bar = Cl::map(&ctl->gather_bar, 0);
#pragma unroll
      for (int i = 0; i < N; ++i)
        if ((eq >> i) & 1u) {
          Cl::store_async(lead_key + 4u * pos, key[i], bar);
          Cl::store_async(lead_idx + 4u * pos, col[i], bar);
          ++pos;
        }
      return;  // the leader histograms the gathered buffer itself
    }
    if (buffering) {
      u32 pos = kLaneAtomics ? (eq != 0 ? atomicAdd(&ctl->buf_n, static_cast<u32>(__popc(eq))) : 0u)
                             : reserve(smem_addr(&ctl->buf_n), __popc(eq), false);
#pragma unroll
      for (int i = 0; i < N; ++i)
        if ((eq >> i) & 1u) {
          buf_key[pos] = key[i];
          buf_idx[pos] = col[i];
          ++pos;
        }
    }
    if ((P0 ? 1 : pass + 1) < kPasses) {
      u32 dig[N];
#pragma unroll
      for (int i = 0; i < N; ++i) dig[i] = digit(key[i], P0 ? 1 : pass + 1);
      hist_add(hist_next, dig, eq);
    }
  } else if (action == kTies) {
    u32 t = kClustered ? eq_base + take_local(&ctl->eq_n, __popc(eq))
                       : reserve(Cl::map(&ctl->tie, 0), __popc(eq), true);
#pragma unroll
    for (int i = 0; i < N; ++i)
      if ((eq >> i) & 1u) {
        if (t < need) write(static_cast<u32>(k) - need + t, col[i]);
        ++t;
      }
  } else {  // kRankList
    u32 pos = reserve(smem_addr(&ctl->list_n), __popc(eq), false);
#pragma unroll
    for (int i = 0; i < N; ++i)
      if ((eq >> i) & 1u) {
        list[pos] = (static_cast<u64>(key[i]) << 32) | (0xffffffffu - col[i]);
        ++pos;
      }
  }
}

// Keys of elements read from global memory, handed to process().
template <class P>
template <bool P0>
struct RowSelect<P>::ScanOp {
  RowSelect* self;
  template <int N>
  __device__ __forceinline__ void operator()(const u32 (&raw)[N], const u32 (&col)[N], u32 valid, int,
                                             bool) const {
    u32 key[N];
#pragma unroll
    for (int i = 0; i < N; ++i) key[i] = K::key_flip(raw[i], self->flip);
    self->template process<N, P0>(key, col, valid, false);
  }
};

// Scans the current candidates (buffer, or cached slice then global
// memory) with the current action.
template <class P>
template <bool P0>
__device__ __forceinline__ void RowSelect<P>::scan(bool from_buffer) {
  if (from_buffer) {
    const u32 n = ctl->buf_n;
    for (u32 base = (threadIdx.x >> 5) * 32; base < n; base += T) {
      const u32 i = base + lane_id();
      u32 key[1] = {0}, col[1] = {0};
      if (i < n) {
        key[0] = buf_key[i];
        col[0] = buf_idx[i];
      }
      process<1, P0>(key, col, i < n ? 1u : 0u, true);
    }
    return;
  }
  if (cache_len > 0) {
    const int W = (shift + cache_len + V - 1) / V;
    const uint4* cv = reinterpret_cast<const uint4*>(cache);
    for (int base = (threadIdx.x >> 5) * 32; base < W; base += T) {
      if (ties_only && __any_sync(kFullMask, ties_taken())) return;
      const int w = base + lane_id();
      u32 key[V], col[V];
      u32 valid = 0;
      if (w < W) {
        unpack(cv[w], key);
        const int c0 = w * V;
#pragma unroll
        for (int i = 0; i < V; ++i) col[i] = s0 + c0 + i - shift;
        if (kBranchFree && c0 >= shift && c0 + V <= shift + cache_len) {  // every vector but the first and last
          valid = (1u << V) - 1u;
        } else {
#pragma unroll
          for (int i = 0; i < V; ++i)
            if (c0 + i >= shift && c0 + i < shift + cache_len) valid |= 1u << i;
        }
      } else {
#pragma unroll
        for (int i = 0; i < V; ++i) key[i] = col[i] = 0;
      }
      process<V, P0>(key, col, valid, false);
    }
  }
  if (cache_len < len) visit_global(cache_len, ScanOp<P0>{this});
}

}  // namespace topk
