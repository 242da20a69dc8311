// Basic types and warp-level building blocks. Self-contained: NVRTC compiles
// these templates without any CUDA header, so nothing here includes one.
#pragma once

namespace topk {

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;

constexpr u32 kFullMask = 0xffffffffu;

// Programmatic dependent launch (sm_90 and later have it; jit::Launch sets the
// launch attribute on sm_90, gen::Arch::programmatic). Every kernel calls this first: it waits until the
// grids before it on the stream have completed and their writes are visible
// (a no-op for a launch without the attribute), then lets the next grid on
// the stream launch, so its CTAs are scheduled while this one runs and wait
// here in turn. Nothing in a kernel may read or write global memory before.
__device__ __forceinline__ void await_prior_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ u32 lane_id() { return threadIdx.x & 31u; }

__device__ __forceinline__ u32 lanemask_lt() {
  u32 m;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
  return m;
}

// Exclusive prefix over the warp of small per-lane counts (0 <= v < 2^BITS),
// built from one ballot per bit: cheaper than a shuffle scan when BITS <= 4.
template <int BITS>
__device__ __forceinline__ u32 warp_exclusive_small(u32 v, u32* total) {
  const u32 lt = lanemask_lt();
  u32 prefix = 0, sum = 0;
#pragma unroll
  for (int b = 0; b < BITS; ++b) {
    const u32 m = __ballot_sync(kFullMask, (v >> b) & 1u);
    prefix += static_cast<u32>(__popc(m & lt)) << b;
    sum += static_cast<u32>(__popc(m)) << b;
  }
  *total = sum;
  return prefix;
}

// Inclusive suffix sum over the warp (lane i gets the sum of lanes i..31).
__device__ __forceinline__ u32 warp_inclusive_suffix(u32 v) {
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const u32 o = __shfl_down_sync(kFullMask, v, d);
    if (lane_id() + d < 32) v += o;
  }
  return v;
}

// Inclusive prefix sum over the warp.
__device__ __forceinline__ u32 warp_inclusive_prefix(u32 v) {
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const u32 o = __shfl_up_sync(kFullMask, v, d);
    if (lane_id() >= static_cast<u32>(d)) v += o;
  }
  return v;
}

// A warp's scan of 256 bins for the one that holds rank `need` (1 =
// largest): lane l holds the counts of bins 255 - 8 l down to 248 - 8 l
// in c (the resident and grid families' bin searches). The lane whose bins hold the rank returns true with the
// bin, its count and the rank within it; every lane calls it. With `above`
// (256 words of shared memory), every lane also writes each of its bins'
// count of the keys in the bins above it (the grid family's output places).
__device__ __forceinline__ bool rank_bin(const u32 (&c)[8], u32 lane, u32 need, u32* bin, u32* cnt, u32* left,
                                         u32* above = nullptr) {
  u32 sum = 0;
#pragma unroll
  for (int e = 0; e < 8; ++e) sum += c[e];
  const u32 incl = warp_inclusive_prefix(sum);
  u32 cum = incl - sum;
  if (above != nullptr) {
    u32 a = cum;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      above[255u - 8u * lane - static_cast<u32>(e)] = a;
      a += c[e];
    }
  }
  if (!(cum < need && need <= incl)) return false;
  bool found = false;
  *bin = 0, *cnt = 0, *left = 0;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    if (!found && cum + c[e] >= need) {
      found = true;
      *bin = 255u - 8u * lane - static_cast<u32>(e);
      *cnt = c[e];
      *left = need - cum;
    }
    if (!found) cum += c[e];
  }
  return true;
}

// The keys v of lanes 0..n-1 of a warp (n <= 32), each ranked among them:
// how many are greater than the lane's, equal to it, and equal to it at a
// lower lane. Every lane of the warp calls it with the same n; the counts of
// lanes at or past n are not meaningful. kRolled keeps the loop rolled (the
// filter kernels' registers); otherwise the compiler unrolls it, so that
// several shuffles are in flight at once.
struct WarpRank {
  u32 above, equal, equal_before;
};
template <bool kRolled = false>
__device__ __forceinline__ WarpRank warp_rank(u32 v, u32 n) {
  const u32 lane = lane_id();
  WarpRank r{0u, 0u, 0u};
  auto take = [&](u32 j) {
    const u32 o = __shfl_sync(kFullMask, v, static_cast<int>(j));
    r.above += o > v ? 1u : 0u;
    r.equal += o == v ? 1u : 0u;
    r.equal_before += o == v && j < lane ? 1u : 0u;
  };
  if constexpr (kRolled) {
#pragma unroll 1
    for (u32 j = 0; j < n; ++j) take(j);
  } else {
    for (u32 j = 0; j < n; ++j) take(j);
  }
  return r;
}

template <int A, int B>
struct Max {
  static constexpr int value = A > B ? A : B;
};

__host__ __device__ constexpr int ceil_div(long long a, long long b) {
  return static_cast<int>((a + b - 1) / b);
}

}  // namespace topk
