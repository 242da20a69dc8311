// Thread-block cluster primitives (sm_90+) through PTX, so that NVRTC needs no
// cooperative_groups header. Cluster<1> is the single-CTA case: the same calls
// degrade to __syncthreads() and local shared memory, which lets one kernel
// body serve both modes. Cluster<2> means "a cluster of any size": the size
// comes from the launch (size()).
#pragma once
#include "topk/types.cuh"

namespace topk {

__device__ __forceinline__ u32 smem_addr(const void* p) {
  u64 s;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(s) : "l"(reinterpret_cast<u64>(p)));
  return static_cast<u32>(s);
}

template <int C>
struct Cluster {
  __device__ __forceinline__ static u32 rank() {
    if (C == 1) return 0;
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
  }
  // CTAs in the cluster: set by the launch, so one binary serves every size.
  __device__ __forceinline__ static u32 size() {
    if (C == 1) return 1;
    u32 n;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
    return n;
  }
  // Barrier over every thread of every CTA in the cluster, with release /
  // acquire semantics for shared memory (local and distributed).
  __device__ __forceinline__ static void sync() {
    if (C == 1) {
      __syncthreads();
    } else {
      asm volatile(
          "barrier.cluster.arrive.release.aligned;\n\t"
          "barrier.cluster.wait.acquire.aligned;" ::
              : "memory");
    }
  }
  // Address of `p` (a shared variable of this CTA) in CTA `r` of the cluster.
  __device__ __forceinline__ static u32 map(const void* p, u32 r) {
    const u32 a = smem_addr(p);
    if (C == 1) return a;
    u32 out;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(out) : "r"(a), "r"(r));
    return out;
  }
  // Loads carry no "memory" clobber: their ordering comes from sync(),
  // whose acquire does; `volatile` keeps them from being merged or hoisted.
  __device__ __forceinline__ static u32 load(u32 addr) {
    u32 v;
    if (C == 1)
      asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr));
    else
      asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(addr));
    return v;
  }
  __device__ __forceinline__ static u64 load64(u32 addr) {
    u64 v;
    if (C == 1)
      asm volatile("ld.shared.u64 %0, [%1];" : "=l"(v) : "r"(addr));
    else
      asm volatile("ld.shared::cluster.u64 %0, [%1];" : "=l"(v) : "r"(addr));
    return v;
  }
  // Four consecutive words (addr 16-byte aligned): one request instead of four.
  __device__ __forceinline__ static uint4 load4(u32 addr) {
    uint4 v;
    if (C == 1)
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
    else
      asm volatile("ld.shared::cluster.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                   : "r"(addr));
    return v;
  }
  __device__ __forceinline__ static void store4(u32 addr, const uint4& v) {
    if (C == 1)
      asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                   : "memory");
    else
      asm volatile("st.shared::cluster.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z),
                   "r"(v.w)
                   : "memory");
  }
  // Split cluster barrier without memory ordering: arrive() marks this
  // thread as past a point, wait() blocks until every thread of the cluster
  // that has not exited arrived. Neither drains this thread's outstanding
  // stores (sync()'s release does, global ones included).
  __device__ __forceinline__ static void arrive_relaxed() {
    if (C != 1) asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  }
  __device__ __forceinline__ static void wait() {
    if (C != 1) asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
  }
  // Asynchronous store of one word to `addr` in another CTA's shared memory:
  // its completion counts 4 bytes on that CTA's mbarrier at `bar` (both
  // shared::cluster addresses). Clusters only.
  __device__ __forceinline__ static void store_async(u32 addr, u32 v, u32 bar) {
    if (C == 1) __trap();  // one CTA has nobody to store to
    else
      asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(addr), "r"(v),
                 "r"(bar)
                 : "memory");
  }
  __device__ __forceinline__ static u32 atomic_add(u32 addr, u32 v) {
    u32 old;
    if (C == 1)
      asm volatile("atom.shared.add.u32 %0, [%1], %2;" : "=r"(old) : "r"(addr), "r"(v) : "memory");
    else
      asm volatile("atom.shared::cluster.add.u32 %0, [%1], %2;"
                   : "=r"(old)
                   : "r"(addr), "r"(v)
                   : "memory");
    return old;
  }
};

// An mbarrier in this CTA's shared memory that completes one phase after one
// arrival and the bytes announced with it (expect_arrive), however the
// asynchronous stores that bring them and the announcement are ordered.
__device__ __forceinline__ void mbar_init(unsigned long long* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bar)) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbar_expect_arrive(unsigned long long* bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}
// Blocks until phase `parity` of the mbarrier completes; the bytes stored to
// this CTA by others are then visible to the caller.
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, u32 parity) {
  asm volatile(
      "{\n\t.reg .pred done;\n"
      "WAIT_%=:\n\t"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n\t"
      "@!done bra WAIT_%=;\n}" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

}  // namespace topk
