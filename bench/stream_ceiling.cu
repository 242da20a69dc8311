// topk-stream-ceiling: what a bare stream over a top-k input reaches, to put
// a one-CTA-a-row kernel's read beside (docs/PERFORMANCE.md, "Two CTAs of
// 512 threads an SM"). Each CTA reads its share of the rows as U 16-byte
// loads a thread a step, the next step's loads in registers while this one
// is worked, in the shape of the filter family's stream
// (templates/topk/filter/filter_select.cuh), and does one of three amounts of
// work on each element:
//   loads   an XOR of the words, so that the loads stay;
//   test    the fp32 order-preserving key and a threshold test;
//   append  the key, the test, and the filter's append of the survivors to a
//           shared-memory list (a warp's inclusive scan of its counts, one
//           shared atomic, the stores).
// A fourth version reads the same bytes with no registers in flight: a ring
// of shared-memory stages that one thread fills with bulk copies
// (cp.async.bulk, completion on an mbarrier; sm_90), every thread XORing
// its vectors of a stage once it lands and one CTA barrier before the stage
// is refilled; the bytes in flight are the ring's, not the registers'.
// The input is normal-like (a sum of four uniforms, unit variance) with the
// threshold at 2.15, about 1 in 50 elements passing. Each configuration is
// timed with CUDA events over 20 back-to-back launches after 3 warm-up ones,
// median and least of 5 such rounds; the bytes read over the median give
// TB/s. Needs a GPU; every CUDA call is checked.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

using u32 = unsigned;

#define STREAM_CHECK(call)                                                                            \
  do {                                                                                                \
    const cudaError_t err_ = (call);                                                                  \
    if (err_ != cudaSuccess) {                                                                        \
      std::fprintf(stderr, "topk-stream-ceiling: %s failed: %s\n", #call, cudaGetErrorString(err_)); \
      std::exit(1);                                                                                   \
    }                                                                                                 \
  } while (0)

enum Work { kLoads = 0, kTest = 1, kAppend = 2 };
constexpr int kListSlots = 8192;  // the append's list, wrapped (its contents are not read)

__global__ void fill_normal_like(float* p, long long n, u32 seed) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    u32 h = static_cast<u32>(i) * 2654435761u ^ seed;
    float sum = 0.f;
    for (int j = 0; j < 4; ++j) {
      h ^= h >> 13;
      h *= 0x5bd1e995u;
      h ^= h >> 15;
      sum += static_cast<float>(h & 0xffffffu) / 16777216.f;
    }
    p[i] = (sum - 2.f) * 1.7320508f;  // four uniforms: mean 2, variance 1/3
  }
}

template <int B, int U, int W>
__global__ void __launch_bounds__(B, 1) stream_kernel(const uint4* in, long long per_cta, u32 threshold, u32* sink) {
  __shared__ u32 list[kListSlots];
  __shared__ int count;
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  const uint4* p = in + blockIdx.x * per_cta;
  constexpr int kStep = B * U;
  const long long steps = (per_cta + kStep - 1) / kStep;
  const u32 lane = threadIdx.x & 31u;
  u32 acc = 0;
  auto load = [&](uint4 (&q)[U], long long s) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long v = s * kStep + u * B + threadIdx.x;
      q[u] = v < per_cta ? p[v] : make_uint4(0u, 0u, 0u, 0u);
    }
  };
  auto work = [&](const uint4 (&q)[U]) {
    if (W == kLoads) {
#pragma unroll
      for (int u = 0; u < U; ++u) acc ^= q[u].x ^ q[u].y ^ q[u].z ^ q[u].w;
      return;
    }
    u32 key[4 * U];
    u32 mine = 0;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const u32 w[4] = {q[u].x, q[u].y, q[u].z, q[u].w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        key[4 * u + e] = w[e] ^ (static_cast<u32>(static_cast<int>(w[e]) >> 31) | 0x80000000u);
        mine += key[4 * u + e] > threshold ? 1u : 0u;
      }
    }
    if (W == kTest) {
      acc += mine;
      return;
    }
    if (__ballot_sync(0xffffffffu, mine != 0) == 0) return;
    u32 incl = mine;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const u32 t = __shfl_up_sync(0xffffffffu, incl, d);
      if (lane >= static_cast<u32>(d)) incl += t;
    }
    const u32 total = __shfl_sync(0xffffffffu, incl, 31);
    int base = 0;
    if (lane == 31) base = atomicAdd(&count, static_cast<int>(total));
    base = __shfl_sync(0xffffffffu, base, 31);
    int pos = base + static_cast<int>(incl - mine);
#pragma unroll
    for (int e = 0; e < 4 * U; ++e)
      if (key[e] > threshold) list[pos++ & (kListSlots - 1)] = key[e];
  };
  uint4 qa[U], qb[U];
  load(qa, 0);
  for (long long s = 0; s < steps; s += 2) {
    if (s + 1 < steps) load(qb, s + 1);
    work(qa);
    if (s + 1 >= steps) break;
    if (s + 2 < steps) load(qa, s + 2);
    work(qb);
  }
  __syncthreads();
  if (W == kAppend) acc += list[threadIdx.x % kListSlots] + static_cast<u32>(count);
  if (acc == 0x9e3779b9u) sink[blockIdx.x] = acc;  // keeps the work; never true in practice
}

// The bulk-copy ring (sm_90): STAGES stages of STAGE_BYTES bytes in dynamic
// shared memory, stage s + STAGES issued once every thread has read stage s.
template <int B, int STAGE_BYTES, int STAGES>
__global__ void __launch_bounds__(B, 1) bulk_kernel(const uint4* in, long long per_cta, u32* sink) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char ring[];
  __shared__ __align__(8) unsigned long long full[STAGES];
  constexpr int kVecs = STAGE_BYTES / 16;
  const uint4* p = in + blockIdx.x * per_cta;
  const long long steps = (per_cta + kVecs - 1) / kVecs;
  if (threadIdx.x == 0)
    for (int s = 0; s < STAGES; ++s) {
      const u32 bar = static_cast<u32>(__cvta_generic_to_shared(&full[s]));
      asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(bar) : "memory");
    }
  __syncthreads();
  auto issue = [&](long long s) {
    const int slot = static_cast<int>(s % STAGES);
    const long long v0 = s * kVecs;
    const u32 bytes = static_cast<u32>(min(static_cast<long long>(kVecs), per_cta - v0) * 16);
    const u32 bar = static_cast<u32>(__cvta_generic_to_shared(&full[slot]));
    const u32 dst = static_cast<u32>(__cvta_generic_to_shared(ring + slot * STAGE_BYTES));
    asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
                 "l"(p + v0), "r"(bytes), "r"(bar)
                 : "memory");
  };
  if (threadIdx.x == 0)
    for (long long s = 0; s < STAGES && s < steps; ++s) issue(s);
  u32 acc = 0;
  for (long long s = 0; s < steps; ++s) {
    const int slot = static_cast<int>(s % STAGES);
    const u32 parity = static_cast<u32>((s / STAGES) & 1);
    const u32 bar = static_cast<u32>(__cvta_generic_to_shared(&full[slot]));
    u32 done = 0;
    while (!done)
      asm volatile(
          "{ .reg .pred p; mbarrier.try_wait.parity.shared.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
          : "=r"(done)
          : "r"(bar), "r"(parity)
          : "memory");
    const long long n = min(static_cast<long long>(kVecs), per_cta - s * kVecs);
    const uint4* st = reinterpret_cast<const uint4*>(ring + slot * STAGE_BYTES);
    for (int i = threadIdx.x; i < n; i += B) {
      const uint4 q = st[i];
      acc ^= q.x ^ q.y ^ q.z ^ q.w;
    }
    __syncthreads();  // every thread has read the stage
    if (threadIdx.x == 0 && s + STAGES < steps) issue(s + STAGES);
  }
  if (acc == 0x9e3779b9u) sink[blockIdx.x] = acc;  // keeps the work; never true in practice
#endif
}

struct Timing {
  float median_us, min_us;
};

// Median and least of 5 rounds of 20 launches of `launch` (after 3).
template <class F>
Timing time_launches(F launch) {
  cudaEvent_t start, stop;
  STREAM_CHECK(cudaEventCreate(&start));
  STREAM_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) launch();
  STREAM_CHECK(cudaGetLastError());
  STREAM_CHECK(cudaDeviceSynchronize());
  float us[5];
  for (float& r : us) {
    STREAM_CHECK(cudaEventRecord(start));
    for (int i = 0; i < 20; ++i) launch();
    STREAM_CHECK(cudaGetLastError());
    STREAM_CHECK(cudaEventRecord(stop));
    STREAM_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    STREAM_CHECK(cudaEventElapsedTime(&ms, start, stop));
    r = ms * 1000.f / 20.f;
  }
  STREAM_CHECK(cudaEventDestroy(start));
  STREAM_CHECK(cudaEventDestroy(stop));
  std::sort(us, us + 5);
  return {us[2], us[0]};
}

template <int B, int U, int W>
Timing time_config(const float* data, long long elements, int ctas, u32* sink) {
  float t;
  const float threshold = 2.15f;
  std::memcpy(&t, &threshold, sizeof t);
  u32 key;
  std::memcpy(&key, &t, sizeof key);
  key ^= 0x80000000u;  // a positive float's order-preserving key
  const long long per_cta = elements / 4 / ctas;
  const uint4* in = reinterpret_cast<const uint4*>(data);
  return time_launches([&] { stream_kernel<B, U, W><<<ctas, B>>>(in, per_cta, key, sink); });
}

template <int B, int U, int W>
void row(const char* rows, const float* data, long long elements, int ctas, u32* sink) {
  static const char* kWork[] = {"loads", "test", "append"};
  const Timing t = time_config<B, U, W>(data, elements, ctas, sink);
  const long long bytes = elements / 4 / ctas * ctas * 16;
  std::printf("| %s | %d | %d, %d | %s | %.2f | %.2f | %.2f |\n", rows, ctas, B, U, kWork[W], t.median_us, t.min_us,
              static_cast<double>(bytes) / (t.median_us * 1e-6) / 1e12);
}

// `elements` counts 4-byte words (a bf16 shape passes half its elements).
template <int B, int STAGE_BYTES, int STAGES>
void bulk_row(const char* rows, const float* data, long long elements, int ctas, u32* sink) {
  const long long per_cta = elements / 4 / ctas;
  const int smem = STAGE_BYTES * STAGES;
  STREAM_CHECK(cudaFuncSetAttribute(bulk_kernel<B, STAGE_BYTES, STAGES>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const uint4* in = reinterpret_cast<const uint4*>(data);
  const Timing t =
      time_launches([&] { bulk_kernel<B, STAGE_BYTES, STAGES><<<ctas, B, smem>>>(in, per_cta, sink); });
  const long long bytes = per_cta * ctas * 16;
  std::printf("| %s | %d | %d, bulk %d x %d KB | loads | %.2f | %.2f | %.2f |\n", rows, ctas, B, STAGES,
              STAGE_BYTES / 1024, t.median_us, t.min_us, static_cast<double>(bytes) / (t.median_us * 1e-6) / 1e12);
}

}  // namespace

int main() {
  int device = 0;
  STREAM_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop;
  STREAM_CHECK(cudaGetDeviceProperties(&prop, device));
  std::printf("device: %s, %d SMs\n\n", prop.name, prop.multiProcessorCount);
  const long long largest = 256LL * 128256;
  float* data = nullptr;
  u32* sink = nullptr;
  STREAM_CHECK(cudaMalloc(&data, largest * sizeof(float)));
  STREAM_CHECK(cudaMalloc(&sink, 4096 * sizeof(u32)));
  fill_normal_like<<<1024, 256>>>(data, largest, 7u);
  STREAM_CHECK(cudaGetLastError());
  STREAM_CHECK(cudaDeviceSynchronize());

  std::printf("| rows | CTAs | threads, loads a step | work | median us | least us | TB/s |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- |\n");
  const long long a = 128LL * 131072, c = 64LL * 32768;
  row<1024, 2, kLoads>("128 x 131072", data, a, 128, sink);
  row<1024, 2, kTest>("128 x 131072", data, a, 128, sink);
  row<1024, 2, kAppend>("128 x 131072", data, a, 128, sink);
  row<1024, 4, kAppend>("128 x 131072", data, a, 128, sink);
  row<512, 2, kAppend>("128 x 131072", data, a, 128, sink);
  row<512, 2, kAppend>("128 x 131072, half a row a CTA", data, a, 256, sink);
  row<256, 2, kLoads>("256 x 128256", data, largest, 256, sink);
  row<256, 2, kAppend>("256 x 128256", data, largest, 256, sink);
  row<256, 4, kAppend>("256 x 128256", data, largest, 256, sink);
  row<512, 2, kAppend>("256 x 128256", data, largest, 256, sink);
  row<1024, 2, kAppend>("256 x 128256", data, largest, 256, sink);
  row<512, 2, kLoads>("64 x 32768 (from L2)", data, c, 64, sink);
  row<512, 2, kAppend>("64 x 32768 (from L2)", data, c, 64, sink);
  row<1024, 2, kAppend>("64 x 32768 (from L2)", data, c, 64, sink);
  row<512, 2, kAppend>("64 x 32768 (from L2), half a row a CTA", data, c, 128, sink);
  // The bf16 sampling shape's bytes (128 x 201088 x 2), the registers in
  // flight against a bulk-copy ring; and 128 x 131072's.
  const long long bf = 128LL * 201088 / 2;
  row<1024, 1, kLoads>("bf16 128 x 201088", data, bf, 128, sink);
  row<1024, 2, kLoads>("bf16 128 x 201088", data, bf, 128, sink);
  row<1024, 4, kLoads>("bf16 128 x 201088", data, bf, 128, sink);
  if (prop.major >= 9) {
    bulk_row<1024, 16384, 4>("bf16 128 x 201088", data, bf, 128, sink);
    bulk_row<1024, 16384, 6>("bf16 128 x 201088", data, bf, 128, sink);
    bulk_row<1024, 32768, 4>("bf16 128 x 201088", data, bf, 128, sink);
    bulk_row<1024, 16384, 4>("128 x 131072", data, a, 128, sink);
    bulk_row<1024, 16384, 6>("128 x 131072", data, a, 128, sink);
    bulk_row<1024, 32768, 4>("128 x 131072", data, a, 128, sink);
    bulk_row<1024, 8192, 4>("64 x 32768 (from L2)", data, c, 64, sink);
    bulk_row<1024, 16384, 4>("64 x 32768 (from L2)", data, c, 64, sink);
  }

  STREAM_CHECK(cudaFree(data));
  STREAM_CHECK(cudaFree(sink));
  return 0;
}
