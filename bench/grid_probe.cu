// topk-grid-probe: measures a top-k design the library's families cannot
// express yet, one that spreads a row over many CTAs of the grid (not of a
// thread-block cluster, which stops at 16) and so needs a global workspace.
// The question it answers: what would a workspace in Args buy on the
// latency-bound DSA shapes (docs/PERFORMANCE.md, "A row over the grid")?
//
// Per row (blockIdx.y), G CTAs (blockIdx.x):
//   1. every CTA reads the same sample of the row (--sample evenly spaced
//      16-byte vectors) and selects its rank-r key exactly (8-bit digit
//      passes in shared memory, a bin of at most 32 keys ranked by one
//      warp), r = 4kS/n (4S sample keys) plus --sigmas standard deviations
//      plus 3: all CTAs
//      find the same threshold t without talking to each other;
//   2. each CTA reads its slice of the row once into registers, keeps the
//      keys > t and counts those == t;
//   3. grid_topk: the slices' keys > t and ties go to the workspace (one
//      global atomic per CTA each) and the CTA that takes the last ticket
//      selects the k-th among them and writes the row; grid_topk_sync
//      (--sync 1): the CTAs histogram their keys > t into the row's 256
//      bins, meet at a grid barrier, each writes its keys above the k-th
//      key's bin and gathers those in it, and the last CTA ranks that bin.
//      The last CTA zeroes the row's counters, so the workspace stays ready
//      for the next call.
// A guess too high (fewer than k keys at or above t) or more keys than the
// workspace holds sets the row's `miss` flag, and the last CTA then selects
// over the whole row alone (row_fallback: exact, slow); --sigmas -100 forces
// it.
//
// fp32, largest, whole rows of a multiple of 4 elements, indices only: the
// DSA indexer's case. Checked exact against a host reference before and
// after timing (normal, shifted, plateau, 16 values, ascending); every CUDA
// runtime call's result is checked (launches through cudaGetLastError or
// the capture's end).
//
//   topk-grid-probe --batch 1 --n 524288 --k 2048 --ctas 128 --block 256 --sample 256 --sync 1
#include <cuda_runtime.h>

#include <cuda/atomic>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

#define CHECK(x)                                                                             \
  do {                                                                                       \
    cudaError_t e_ = (x);                                                                    \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

constexpr int kSampleVecs = 1024;  // 4096 sample keys
constexpr int kDigit = 8;           // digit bits of a select pass (11 measured slower: the scan)
constexpr int kBins = 1 << kDigit;
constexpr int kShWords = 128;       // scalars (0..15, 48..49), the small bin's list (16..47), warp sums (64..127)

// Per row: counters (zero between calls) then the candidates and ties.
struct RowCounters {
  unsigned ticket;
  unsigned above;  // keys > t (all counted, the first `cap` stored)
  unsigned eq;     // keys == t (all counted, the first `eq_cap` stored)
  unsigned miss;   // the last call's guess failed on this row
  // grid_topk_sync only:
  unsigned arrive;  // the grid barrier's count
  unsigned out_n;   // output slots taken by keys above the k-th key's bin
  unsigned tie_n;   // output slots taken by ties with t (fewer than k above t)
  unsigned bin_n;   // keys of the k-th key's bin gathered for the last CTA
  unsigned hist[kBins];  // digits of the keys above t over the sample's span
};

struct Params {
  const float* in;
  int* out;
  RowCounters* ctr;    // [batch]
  unsigned* cand_key;  // [batch][cap]
  int* cand_idx;       // [batch][cap]
  int* eq_idx;         // [batch][eq_cap]
  long long stride;
  int n, k, cap, eq_cap, rank;
  int stop;    // phase timings: 1 returns after the sample's select, 2 after the slice (output incomplete)
  int sample_vecs;  // 16-byte vectors in the sample, at most kSampleVecs
  int early;        // 1: the slice's loads go out before the sample's select
  int sample_stop;  // grid_topk_sync: the low bits of the threshold left unresolved (0, 8, 16, 24)
  unsigned long long* trace;  // null, or 16 words a CTA: clock64 at phase ends, globaltimer, role
};

#define MARK(i)                                                                                  \
  do {                                                                                           \
    if (p.trace && threadIdx.x == 0) p.trace[(blockIdx.y * gridDim.x + blockIdx.x) * 16 + (i)] = clock64(); \
  } while (0)
#define MARK_GLOBAL(i)                                                                           \
  do {                                                                                           \
    if (p.trace && threadIdx.x == 0) {                                                           \
      unsigned long long g_;                                                                     \
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g_));                                     \
      p.trace[(blockIdx.y * gridDim.x + blockIdx.x) * 16 + (i)] = g_;                            \
    }                                                                                            \
  } while (0)

__device__ __forceinline__ unsigned key_of(float f) {
  unsigned b = __float_as_uint(f);
  if (f != f) return 0xffffffffu;  // every NaN above +inf
  if (b == 0x80000000u) b = 0;     // -0.0 equals +0.0
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// A slot from counter *c for each lane with `take`: one atomic a warp.
// Every lane calls it.
__device__ __forceinline__ unsigned warp_slot(unsigned* c, bool take) {
  const unsigned m = __ballot_sync(0xffffffffu, take);
  const int lane = threadIdx.x & 31;
  unsigned base = 0;
  if (m != 0 && lane == __ffs(m) - 1) base = atomicAdd(c, __popc(m));
  base = __shfl_sync(0xffffffffu, base, m != 0 ? __ffs(m) - 1 : 0);
  return base + __popc(m & ((1u << lane) - 1u));
}

// The histogram of one digit pass: kBins counters, digits of up to kDigit
// bits. (Copies of it, warp w counting into copy w % 8 against a normal
// row's few top digits, were slower: the scan then sums eight copies.)
struct Hist {
  unsigned* h;
  __device__ void clear() const {
    for (int i = threadIdx.x; i < kBins; i += blockDim.x) h[i] = 0;
  }
  __device__ __forceinline__ void add(unsigned bin) const { atomicAdd(&h[bin], 1u); }
  // Warp 0: the bin holding rank *rank (1 = largest) among the first
  // `bins` counters, scanning from the top; writes it to *bin, its count to
  // *in_bin, and leaves in *rank the rank within the bin. The caller puts a
  // barrier after.
  __device__ void find(int bins, unsigned* rank, unsigned* bin, unsigned* in_bin) const {
    if (threadIdx.x >= 32) return;
    constexpr int kPer = kBins / 32;
    const int lane = threadIdx.x;
    const int top = bins - 1 - lane * kPer;  // this lane's bins: top, top - 1, ... (those >= 0)
    unsigned sum = 0;
#pragma unroll 8
    for (int j = 0; j < kPer; ++j) sum += top - j >= 0 ? h[top - j] : 0u;
    unsigned incl = sum;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const unsigned o = __shfl_up_sync(0xffffffffu, incl, d);
      if (lane >= d) incl += o;
    }
    const unsigned r = *rank;
    const unsigned excl = incl - sum;
    const unsigned ballot = __ballot_sync(0xffffffffu, excl < r && r <= incl);
    if (ballot != 0 && lane == __ffs(ballot) - 1) {
      unsigned above = excl;
      for (int j = 0; j < kPer; ++j) {
        const unsigned c = h[top - j];
        if (above + c >= r) {
          *bin = top - j;
          *in_bin = c;
          *rank = r - above;
          break;
        }
        above += c;
      }
    }
    __syncwarp();
  }
};

// The rank-th largest (1 = largest) of the values x the threads hold, all
// below 2^bits, exactly: digit passes of up to kDigit bits from the top
// (stop_left > 0: the passes stop with that many low bits left, and the
// result is the low end of the bin holding the rank-th value, a lower bound
// of it, unless a small bin resolved it first).
// for_each(f) calls f(x) on each of this thread's values. Returns x; in
// sh[0] the rank within its ties (with stop_left > 0 and no small bin, the
// rank within the bin). sh[0..1], sh[10..11], sh[16..47]: scratch. `pass_clock`: null, or
// where thread 0 notes the clock in the second pass after its clear, its
// counts and its scan.
template <class ForEach>
__device__ unsigned select_digits(const ForEach& for_each, int bits, unsigned rank, const Hist& hist, unsigned* sh,
                                  unsigned long long* pass_clock, int stop_left = 0) {
  if (threadIdx.x == 0) sh[0] = rank;
  unsigned prefix = 0;
  int pass = 0;
#pragma unroll 1
  for (int left = bits; left > stop_left; ++pass) {
    const int width = min(kDigit, left), shift = left - width;
    const unsigned high = shift + width >= 32 ? 0u : ~0u << (shift + width);  // the digits already fixed
    const unsigned mask = (1u << width) - 1u;
    hist.clear();
    if (threadIdx.x == 0) sh[10] = 0;  // the small bin's gather count
    __syncthreads();
    if (pass_clock && threadIdx.x == 0 && pass == 1) pass_clock[0] = clock64();
    for_each([&](unsigned x) {
      if (((x ^ prefix) & high) == 0) hist.add((x >> shift) & mask);
    });
    __syncthreads();
    if (pass_clock && threadIdx.x == 0 && pass == 1) pass_clock[1] = clock64();
    hist.find(1 << width, &sh[0], &sh[1], &sh[11]);
    __syncthreads();
    if (pass_clock && threadIdx.x == 0 && pass == 1) pass_clock[2] = clock64();
    const unsigned in_bin = sh[11];  // not hist: the next pass clears it while others read
    prefix |= sh[1] << shift;
    left = shift;
    if (left > stop_left && in_bin <= 32) {
      // A bin of at most 32 values: gathered and ranked among themselves by
      // one warp instead of more passes.
      unsigned* list = sh + 16;
      for_each([&](unsigned x) {
        if (((x ^ prefix) >> shift) == 0) list[atomicAdd(&sh[10], 1u)] = x;
      });
      __syncthreads();
      if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        const unsigned v = lane < static_cast<int>(in_bin) ? list[lane] : 0u;
        unsigned gt = 0, before = 0;
        for (int j = 0; j < static_cast<int>(in_bin); ++j) {
          const unsigned o = __shfl_sync(0xffffffffu, v, j);
          gt += o > v;
          before += o == v && j < lane;
        }
        const unsigned r = sh[0];
        if (lane < static_cast<int>(in_bin) && gt + before + 1 == r) sh[1] = v, sh[0] = r - gt;
      }
      __syncthreads();
      return sh[1];
    }
  }
  return prefix;
}

// The rank-th largest of the sample keys this thread holds in key[0..cnt)
// (stop_left: see select_digits).
template <int N>
__device__ unsigned select_sample(const unsigned (&key)[N], int cnt, unsigned rank, const Hist& hist, unsigned* sh,
                                  unsigned long long* pass_clock, int stop_left = 0) {
  return select_digits(
      [&](auto f) {
#pragma unroll
        for (int i = 0; i < N; ++i)
          if (i < cnt) f(key[i]);
      },
      32, rank, hist, sh, pass_clock, stop_left);
}

// The rank-th largest of the `count` keys in key[] (shared memory), all at
// least lo: digits of the key's offset over [lo, the greatest key], so the
// passes follow the candidates' own span (a normal row's candidates above
// its threshold share their top bits). sh[0], sh[1], sh[7]: scratch.
__device__ unsigned select_span(const unsigned* key, unsigned count, unsigned rank, unsigned lo, const Hist& hist,
                                unsigned* sh) {
  unsigned m = 0;
  for (unsigned i = threadIdx.x; i < count; i += blockDim.x) m = max(m, key[i] - lo);
  m = __reduce_max_sync(0xffffffffu, m);
  if (threadIdx.x == 0) sh[7] = 0;
  __syncthreads();
  if ((threadIdx.x & 31) == 0) atomicMax(&sh[7], m);
  __syncthreads();
  const unsigned span = sh[7];
  const int bits = span == 0 ? 1 : 32 - __clz(span);
  return lo + select_digits(
                  [&](auto f) {
                    for (unsigned i = threadIdx.x; i < count; i += blockDim.x) f(key[i] - lo);
                  },
                  bits, rank, hist, sh, nullptr);
}

// A missed guess: one CTA finds the row's k-th key exactly by digit passes
// over the whole row (each pass a read of it) and writes the keys above it
// and the first of its ties. Slow, and only for the rows whose guess
// missed; every thread of the CTA calls it.
__device__ void row_fallback(const float4* vin, int nvec, unsigned k, int* out, const Hist& hist, unsigned* sh) {
  const unsigned kth = select_digits(
      [&](auto f) {
        for (int v = threadIdx.x; v < nvec; v += blockDim.x) {
          const float4 q = __ldg(vin + v);
          f(key_of(q.x)), f(key_of(q.y)), f(key_of(q.z)), f(key_of(q.w));
        }
      },
      32, k, hist, sh, nullptr);
  const unsigned ties_needed = sh[0], above = k - ties_needed;
  if (threadIdx.x == 0) sh[5] = 0, sh[6] = 0;
  __syncthreads();
  for (int v0 = 0; v0 < nvec; v0 += blockDim.x) {  // every thread to the end: warp-wide slots
    const int v = v0 + threadIdx.x;
    const float4 q = v < nvec ? __ldg(vin + v) : make_float4(0.f, 0.f, 0.f, 0.f);
    const unsigned x[4] = {key_of(q.x), key_of(q.y), key_of(q.z), key_of(q.w)};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const unsigned pa = warp_slot(&sh[5], v < nvec && x[e] > kth);
      const unsigned pe = warp_slot(&sh[6], v < nvec && x[e] == kth);
      if (v < nvec && x[e] > kth) out[pa] = 4 * v + e;
      if (v < nvec && x[e] == kth && pe < ties_needed) out[above + pe] = 4 * v + e;
    }
  }
}

// VPT: the most 16-byte vectors of the slice a thread holds (the host picks
// the smallest that covers n / 4 / G / block).
template <int VPT>
__global__ void __launch_bounds__(1024) grid_topk(Params p) {
  // hist: kBins words; sh: kShWords words; then the finish's keys and indices.
  extern __shared__ unsigned smem[];
  const Hist hist{smem};
  unsigned* sh = smem + kBins;
  unsigned* fin_key = sh + kShWords;
  int* fin_idx = reinterpret_cast<int*>(fin_key + p.cap);
  const int row = blockIdx.y;
  const int G = gridDim.x;
  const float4* vin = reinterpret_cast<const float4*>(p.in + row * p.stride);
  const int nvec = p.n / 4;
  RowCounters* ctr = p.ctr + row;
  MARK_GLOBAL(10);
  MARK(0);

  // 1. The sample and its rank-r key: the same in every CTA. The slice's
  // loads, all at once, go out after the select (p.early: before it).
  const int slice = (nvec + G - 1) / G;
  const int v_begin = blockIdx.x * slice, v_end = min(nvec, v_begin + slice);
  float4 q[VPT];
  auto load_slice = [&] {
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const int v = v_begin + j * blockDim.x + threadIdx.x;
      q[j] = v < v_end ? __ldg(vin + v) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  };
  constexpr int kPer = kSampleVecs / 256;  // at most this many vectors a thread (block >= 256)
  unsigned skey[kPer * 4];
  const int per = (p.sample_vecs - static_cast<int>(threadIdx.x) + blockDim.x - 1) / blockDim.x;  // this thread's
  const long long spacing = nvec / p.sample_vecs;
#pragma unroll
  for (int j = 0; j < kPer; ++j)
    if (j < per) {
      const float4 v = __ldg(vin + (threadIdx.x + j * blockDim.x) * spacing);
      skey[4 * j] = key_of(v.x);
      skey[4 * j + 1] = key_of(v.y);
      skey[4 * j + 2] = key_of(v.z);
      skey[4 * j + 3] = key_of(v.w);
    }
  if (p.early) load_slice();
  MARK(1);
  const unsigned t = select_sample(skey, max(per, 0) * 4, static_cast<unsigned>(p.rank), hist, sh,
                                   p.trace ? p.trace + (blockIdx.y * gridDim.x + blockIdx.x) * 16 + 13 : nullptr);
  MARK(2);
  if (p.stop == 1) {
    if (threadIdx.x == 0 && t == 0x7fffffffu) p.out[0] = 0;  // keeps the select
    return;
  }
  if (!p.early) load_slice();

  // 2. This CTA's slice: keys above t and ties with it.
  unsigned n_above = 0, n_eq = 0;
  unsigned kk[VPT * 4];
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const bool valid = v_begin + j * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x) < v_end;
    kk[4 * j] = key_of(q[j].x), kk[4 * j + 1] = key_of(q[j].y), kk[4 * j + 2] = key_of(q[j].z),
    kk[4 * j + 3] = key_of(q[j].w);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (!valid) kk[4 * j + e] = 0;  // below every threshold: t is a sample key, and no key is below 0
      n_above += kk[4 * j + e] > t;
      n_eq += valid && kk[4 * j + e] == t;
    }
  }
  MARK(3);
  // Block totals and this thread's offsets: warp scans, then warp sums.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  unsigned ia = n_above, ie = n_eq;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const unsigned oa = __shfl_up_sync(0xffffffffu, ia, d), oe = __shfl_up_sync(0xffffffffu, ie, d);
    if (lane >= d) ia += oa, ie += oe;
  }
  unsigned* wsum = hist.h;  // free after the select's last barrier
  if (lane == 31) wsum[warp] = ia, wsum[32 + warp] = ie;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned sa = 0, se = 0;
    for (int w = 0; w < nwarps; ++w) {
      const unsigned a = wsum[w], e = wsum[32 + w];
      wsum[w] = sa, wsum[32 + w] = se;
      sa += a, se += e;
    }
    sh[2] = sa ? atomicAdd(&ctr->above, sa) : 0u;
    sh[3] = se ? atomicAdd(&ctr->eq, se) : 0u;
  }
  __syncthreads();
  MARK(4);
  if (n_above | n_eq) {
    unsigned pa = sh[2] + wsum[warp] + ia - n_above, pe = sh[3] + wsum[32 + warp] + ie - n_eq;
    unsigned* ck = p.cand_key + static_cast<long long>(row) * p.cap;
    int* ci = p.cand_idx + static_cast<long long>(row) * p.cap;
    int* ei = p.eq_idx + static_cast<long long>(row) * p.eq_cap;
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const int v = v_begin + j * blockDim.x + threadIdx.x;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const unsigned x = kk[4 * j + e];
        if (x > t) {
          if (pa < static_cast<unsigned>(p.cap)) ck[pa] = x, ci[pa] = 4 * v + e;
          ++pa;
        } else if (x == t && v < v_end) {
          if (pe < static_cast<unsigned>(p.eq_cap)) ei[pe] = 4 * v + e;
          ++pe;
        }
      }
    }
  }
  MARK(5);
  if (p.stop == 2) return;

  // 3. The last CTA of the row finishes it. The barrier puts every thread's
  // writes before thread 0's release of the ticket; its acquire and the
  // next barrier put the other CTAs' writes before this CTA's reads.
  __syncthreads();
  if (threadIdx.x == 0) {
    cuda::atomic_ref<unsigned, cuda::thread_scope_device> ticket(ctr->ticket);
    sh[4] = ticket.fetch_add(1u, cuda::memory_order_acq_rel) == static_cast<unsigned>(G - 1);
  }
  __syncthreads();
  MARK(6);
  MARK_GLOBAL(11);
  if (!sh[4]) return;
  const unsigned A = __ldcg(&ctr->above), E = __ldcg(&ctr->eq);
  if (p.trace && threadIdx.x == 0) p.trace[(blockIdx.y * gridDim.x + blockIdx.x) * 16 + 12] = 1 + A;
  const unsigned k = p.k;
  int* out = p.out + static_cast<long long>(row) * p.k;
  const unsigned* ck = p.cand_key + static_cast<long long>(row) * p.cap;
  const int* ci = p.cand_idx + static_cast<long long>(row) * p.cap;
  const int* ei = p.eq_idx + static_cast<long long>(row) * p.eq_cap;
  const bool miss = A > static_cast<unsigned>(p.cap) || A + min(E, static_cast<unsigned>(p.eq_cap)) < k;
  if (!miss && A < k) {
    // All candidates, then the first ties.
    for (unsigned i = threadIdx.x; i < A; i += blockDim.x) out[i] = __ldcg(ci + i);
    for (unsigned i = threadIdx.x; i < k - A; i += blockDim.x) out[A + i] = __ldcg(ei + i);
  } else if (!miss) {
    // The k-th largest of the A candidates, exactly, then those above it
    // and the first of its ties.
    for (unsigned base = 0; base < A; base += 8 * blockDim.x) {  // 16 loads in flight a thread
      unsigned kv[8];
      int iv[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const unsigned i = base + u * blockDim.x + threadIdx.x;
        if (i < A) kv[u] = __ldcg(ck + i), iv[u] = __ldcg(ci + i);
      }
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const unsigned i = base + u * blockDim.x + threadIdx.x;
        if (i < A) fin_key[i] = kv[u], fin_idx[i] = iv[u];
      }
    }
    __syncthreads();
    MARK(7);
    const unsigned kth = select_span(fin_key, A, k, t + 1, hist, sh);
    MARK(8);
    const unsigned ties_needed = sh[0];
    if (threadIdx.x == 0) sh[5] = 0, sh[6] = 0;
    __syncthreads();
    const unsigned above_kth = k - ties_needed;
    for (unsigned i0 = 0; i0 < A; i0 += blockDim.x) {  // every thread to the end: warp-wide slots
      const unsigned i = i0 + threadIdx.x;
      const unsigned x = i < A ? fin_key[i] : 0u;
      const unsigned pa = warp_slot(&sh[5], i < A && x > kth);
      const unsigned pe = warp_slot(&sh[6], i < A && x == kth);
      if (i < A && x > kth) out[pa] = fin_idx[i];
      if (i < A && x == kth && pe < ties_needed) out[above_kth + pe] = fin_idx[i];
    }
  } else {
    row_fallback(vin, nvec, k, out, hist, sh);
  }
  __syncthreads();
  MARK(9);
  if (threadIdx.x == 0) {
    ctr->miss = miss ? 1u : 0u;
    ctr->ticket = 0;
    ctr->above = 0;
    ctr->eq = 0;
  }
}

// Slots for this thread's m1 and m2 items in global counters *c1 and *c2,
// one atomic per CTA each (a warp's atomics on one word from every CTA
// serialise); returns the first slots. ws: 64 words of shared scratch, base:
// two. Every thread calls it; two barriers.
__device__ uint2 cta_slots(unsigned* c1, unsigned m1, unsigned* c2, unsigned m2, unsigned* ws, unsigned* base) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned i1 = m1, i2 = m2;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const unsigned o1 = __shfl_up_sync(0xffffffffu, i1, d), o2 = __shfl_up_sync(0xffffffffu, i2, d);
    if (lane >= d) i1 += o1, i2 += o2;
  }
  if (lane == 31) ws[warp] = i1, ws[32 + warp] = i2;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned s1 = 0, s2 = 0;
    for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) {
      const unsigned a = ws[w], b = ws[32 + w];
      ws[w] = s1, ws[32 + w] = s2;
      s1 += a, s2 += b;
    }
    base[0] = s1 ? atomicAdd(c1, s1) : 0u;
    base[1] = s2 ? atomicAdd(c2, s2) : 0u;
  }
  __syncthreads();
  return make_uint2(base[0] + ws[warp] + i1 - m1, base[1] + ws[32 + warp] + i2 - m2);
}

// The same first step, then a grid barrier instead of a finishing CTA for
// the whole row: every CTA histograms the digits of its keys above t (the
// sample's span above t, 256 bins, global atomics), waits for the others,
// finds the k-th key's bin in the row's histogram, writes its own keys above
// that bin straight to the output and gathers those in it; the last CTA then
// ranks only that bin. Needs every CTA of the grid resident at once (the
// host checks the occupancy; a library would launch it cooperatively).
template <int VPT>
__global__ void __launch_bounds__(1024) grid_topk_sync(Params p) {
  extern __shared__ unsigned smem[];
  const Hist hist{smem};
  unsigned* sh = smem + kBins;
  unsigned* fin_key = sh + kShWords;
  int* fin_idx = reinterpret_cast<int*>(fin_key + p.cap);
  const int row = blockIdx.y;
  const int G = gridDim.x;
  const float4* vin = reinterpret_cast<const float4*>(p.in + row * p.stride);
  const int nvec = p.n / 4;
  RowCounters* ctr = p.ctr + row;
  const int lane = threadIdx.x & 31;
  MARK_GLOBAL(10);
  MARK(0);
  if (threadIdx.x == 0) sh[12] = 0, sh[13] = 0, sh[14] = 0;  // the sample's span above t, the CTA's counts

  // 1. The sample's rank-r key, as in grid_topk.
  constexpr int kPer = kSampleVecs / 256;
  unsigned skey[kPer * 4];
  const int per = max(0, (p.sample_vecs - static_cast<int>(threadIdx.x) + static_cast<int>(blockDim.x) - 1) /
                             static_cast<int>(blockDim.x));
  const long long spacing = nvec / p.sample_vecs;
#pragma unroll
  for (int j = 0; j < kPer; ++j)
    if (j < per) {
      const float4 v = __ldg(vin + (threadIdx.x + j * blockDim.x) * spacing);
      skey[4 * j] = key_of(v.x), skey[4 * j + 1] = key_of(v.y), skey[4 * j + 2] = key_of(v.z),
      skey[4 * j + 3] = key_of(v.w);
    }
  MARK(1);
  // Only a lower bound of the sample's rank-r key is needed here: the
  // histogram below resolves the k-th key's bin whatever falls above t.
  const unsigned t = select_sample(skey, per * 4, static_cast<unsigned>(p.rank), hist, sh, nullptr, p.sample_stop);
  MARK(2);
  if (p.stop == 1) {
    if (threadIdx.x == 0 && t == 0x7fffffffu) p.out[0] = 0;  // keeps the select
    return;
  }
  const int slice = (nvec + G - 1) / G;
  const int v_begin = blockIdx.x * slice, v_end = min(nvec, v_begin + slice);
  float4 q[VPT];
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const int v = v_begin + j * blockDim.x + threadIdx.x;
    q[j] = v < v_end ? __ldg(vin + v) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  const unsigned lo = t + 1;  // every key above t is at least lo
  unsigned m = 0;
#pragma unroll
  for (int i = 0; i < kPer * 4; ++i)
    if (i < per * 4 && skey[i] > t) m = max(m, skey[i] - lo);
  m = __reduce_max_sync(0xffffffffu, m);
  if (lane == 0 && m != 0) atomicMax(&sh[12], m);

  // 2. The slice: counts and the digit histogram of the keys above t, in
  // shared memory first (its nonzero bins then go to the row's).
  unsigned kk[VPT * 4];
  unsigned n_above = 0, n_eq = 0;
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const bool valid = v_begin + j * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x) < v_end;
    kk[4 * j] = key_of(q[j].x), kk[4 * j + 1] = key_of(q[j].y), kk[4 * j + 2] = key_of(q[j].z),
    kk[4 * j + 3] = key_of(q[j].w);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (!valid) kk[4 * j + e] = 0;  // no key is 0 (a NaN's would be, and NaNs are 0xffffffff), so not above t
      n_above += kk[4 * j + e] > t;
      n_eq += valid && kk[4 * j + e] == t;  // t may be 0 (a bin's low end)
    }
  }
  hist.clear();     // free since the select's last barrier
  __syncthreads();  // sh[12] complete, hist clear
  const unsigned span = sh[12];
  const int shift = max((span == 0 ? 0 : 32 - __clz(span)) - kDigit, 0);
  auto digit = [&](unsigned x) { return min(static_cast<unsigned>(kBins - 1), (x - lo) >> shift); };
#pragma unroll
  for (int i = 0; i < VPT * 4; ++i)
    if (kk[i] > t) hist.add(digit(kk[i]));
  const unsigned wa = __reduce_add_sync(0xffffffffu, n_above), we = __reduce_add_sync(0xffffffffu, n_eq);
  if (lane == 0 && (wa | we)) atomicAdd(&sh[13], wa), atomicAdd(&sh[14], we);
  __syncthreads();
  for (int i = threadIdx.x; i < kBins; i += blockDim.x)
    if (hist.h[i]) atomicAdd(&ctr->hist[i], hist.h[i]);
  if (threadIdx.x == 0) {
    if (sh[13]) atomicAdd(&ctr->above, sh[13]);
    if (sh[14]) atomicAdd(&ctr->eq, sh[14]);
  }
  MARK(3);
  if (p.stop == 2) return;  // before the barrier: a stopped launch leaves `arrive` as it was

  // 3. Grid barrier: after the CTA's barrier (every thread's histogram adds
  // in), thread 0 releases them with its arrival and acquires everyone's.
  __syncthreads();
  if (threadIdx.x == 0) {
    cuda::atomic_ref<unsigned, cuda::thread_scope_device> arrive(ctr->arrive);
    arrive.fetch_add(1u, cuda::memory_order_release);
    while (arrive.load(cuda::memory_order_acquire) < static_cast<unsigned>(G)) {
    }
  }
  __syncthreads();
  MARK(4);
  // The row's counts and histogram in one round of loads.
  for (int i = threadIdx.x; i < kBins; i += blockDim.x) hist.h[i] = __ldcg(&ctr->hist[i]);
  const unsigned A = __ldcg(&ctr->above), E = __ldcg(&ctr->eq), k = p.k;
  int* out = p.out + static_cast<long long>(row) * p.k;
  unsigned* ck = p.cand_key + static_cast<long long>(row) * p.cap;
  int* ci = p.cand_idx + static_cast<long long>(row) * p.cap;
  bool miss = A + E < k;
  unsigned b = 0, rb = 0, cb = 0;
  unsigned* ws = sh + 64;
  if (!miss && A < k) {
    // Every key above t, then ties with t up to k.
    uint2 slot = cta_slots(&ctr->out_n, n_above, &ctr->tie_n, n_eq, ws, &sh[48]);
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const int v = v_begin + j * blockDim.x + threadIdx.x;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const unsigned x = kk[4 * j + e];
        const bool tie = x == t && v < v_end;
        if (x > t) out[slot.x++] = 4 * v + e;
        if (tie && slot.y < k - A) out[A + slot.y] = 4 * v + e;
        if (tie) ++slot.y;
      }
    }
  } else if (!miss) {
    // The k-th key's bin b from the row's histogram; keys above b straight
    // out, those in b gathered.
    if (threadIdx.x == 0) sh[0] = k;
    __syncthreads();
    hist.find(kBins, &sh[0], &sh[1], &sh[11]);
    __syncthreads();
    b = sh[1], rb = sh[0], cb = sh[11];
    miss = cb > static_cast<unsigned>(p.cap);
    if (!miss) {
      unsigned m1 = 0, m2 = 0;
#pragma unroll
      for (int i = 0; i < VPT * 4; ++i) {
        const unsigned d = kk[i] > t ? digit(kk[i]) : 0u;
        m1 += kk[i] > t && d > b;
        m2 += kk[i] > t && d == b;
      }
      uint2 slot = cta_slots(&ctr->out_n, m1, &ctr->bin_n, m2, ws, &sh[48]);
      if (m1 | m2) {
#pragma unroll
        for (int j = 0; j < VPT; ++j) {
          const int v = v_begin + j * blockDim.x + threadIdx.x;
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const unsigned x = kk[4 * j + e];
            const unsigned d = x > t ? digit(x) : 0u;
            if (x > t && d > b) out[slot.x++] = 4 * v + e;
            if (x > t && d == b) ck[slot.y] = x, ci[slot.y] = 4 * v + e, ++slot.y;
          }
        }
      }
    }
  }
  MARK(5);

  // 4. The last CTA ranks the bin.
  __syncthreads();
  if (threadIdx.x == 0) {
    cuda::atomic_ref<unsigned, cuda::thread_scope_device> ticket(ctr->ticket);
    sh[4] = ticket.fetch_add(1u, cuda::memory_order_acq_rel) == static_cast<unsigned>(G - 1);
  }
  __syncthreads();
  MARK(6);
  MARK_GLOBAL(11);
  if (!sh[4]) return;
  if (p.trace && threadIdx.x == 0) p.trace[(blockIdx.y * gridDim.x + blockIdx.x) * 16 + 12] = 1 + cb;
  if (!miss && A >= k) {
    for (unsigned i = threadIdx.x; i < cb; i += blockDim.x) fin_key[i] = __ldcg(ck + i), fin_idx[i] = __ldcg(ci + i);
    __syncthreads();
    MARK(7);
    const unsigned kth = select_span(fin_key, cb, rb, lo + (b << shift), hist, sh);
    MARK(8);
    const unsigned ties_needed = sh[0], base = k - rb;  // base: the keys above the bin
    if (threadIdx.x == 0) sh[5] = 0, sh[6] = 0;
    __syncthreads();
    for (unsigned i0 = 0; i0 < cb; i0 += blockDim.x) {
      const unsigned i = i0 + threadIdx.x;
      const unsigned x = i < cb ? fin_key[i] : 0u;
      const unsigned pa = warp_slot(&sh[5], i < cb && x > kth);
      const unsigned pe = warp_slot(&sh[6], i < cb && x == kth);
      if (i < cb && x > kth) out[base + pa] = fin_idx[i];
      if (i < cb && x == kth && pe < ties_needed) out[base + (rb - ties_needed) + pe] = fin_idx[i];
    }
  } else if (miss) {
    row_fallback(vin, nvec, k, out, hist, sh);  // the other CTAs wrote nothing
  }
  __syncthreads();
  MARK(9);
  for (int i = threadIdx.x; i < kBins; i += blockDim.x) ctr->hist[i] = 0;
  if (threadIdx.x == 0) {
    ctr->miss = miss ? 1u : 0u;
    ctr->ticket = 0, ctr->above = 0, ctr->eq = 0, ctr->arrive = 0;
    ctr->out_n = 0, ctr->tie_n = 0, ctr->bin_n = 0;
  }
}

__global__ void empty_kernel() {}

struct Opts {
  int batch = 1, n = 524288, k = 2048, ctas = 64, block = 512, cap = 16384, launches = 20, replays = 50;
  int sample = kSampleVecs, trace = 0, early = 0, sync = 0, sample_stop = 0;
  int rotate = 0;  // also time with the input cycling over copies that add up to twice the L2
  double sigmas = 4.5;
};

void Fill(std::vector<float>& x, const std::string& dist, std::mt19937& rng) {
  std::normal_distribution<float> nd;
  std::uniform_int_distribution<int> u16(0, 15);
  for (auto& v : x) {
    if (dist == "normal") v = nd(rng);
    else if (dist == "shifted") v = nd(rng) + 100.0f;
    else if (dist == "plateau") v = std::max(0.0f, nd(rng) - 0.52f);  // about 70% exact zeros
    else if (dist == "distinct16") v = static_cast<float>(u16(rng));
    else if (dist == "ascending") v = 0;  // filled below
  }
  if (dist == "ascending")
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 1000003) * 1e-3f;
}

// Exact: the returned indices are distinct, in the row, and their values are
// the k largest as a multiset (rows whose guess missed too: their fallback).
void Check(const std::vector<float>& x, const std::vector<int>& out, const Opts& o, long long* wrong_rows,
           long long* checked_rows) {
  for (int r = 0; r < o.batch; ++r) {
    ++*checked_rows;
    const float* row = x.data() + static_cast<long long>(r) * o.n;
    std::vector<float> want(row, row + o.n);
    std::nth_element(want.begin(), want.begin() + (o.k - 1), want.end(), std::greater<float>());
    want.resize(o.k);
    std::sort(want.begin(), want.end(), std::greater<float>());
    std::vector<float> got;
    std::vector<int> idx(out.begin() + static_cast<long long>(r) * o.k, out.begin() + static_cast<long long>(r + 1) * o.k);
    bool bad = false;
    for (int i : idx) {
      if (i < 0 || i >= o.n) {
        bad = true;
        break;
      }
      got.push_back(row[i]);
    }
    std::sort(idx.begin(), idx.end());
    if (!bad && std::adjacent_find(idx.begin(), idx.end()) != idx.end()) bad = true;
    if (!bad) {
      std::sort(got.begin(), got.end(), std::greater<float>());
      bad = got != want;
    }
    if (bad) ++*wrong_rows;
  }
}

// Every counter of every row back at zero after a call.
bool CountersReset(const std::vector<RowCounters>& ctr) {
  for (const RowCounters& c : ctr) {
    if (c.ticket | c.above | c.eq | c.arrive | c.out_n | c.tie_n | c.bin_n) return false;
    for (unsigned h : c.hist)
      if (h) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  std::vector<std::string> dists = {"normal", "shifted", "plateau", "distinct16", "ascending"};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (a == "--batch") o.batch = v;
    else if (a == "--n") o.n = v;
    else if (a == "--k") o.k = v;
    else if (a == "--ctas") o.ctas = v;
    else if (a == "--block") o.block = v;
    else if (a == "--cap") o.cap = v;
    else if (a == "--sample") o.sample = v;
    else if (a == "--early") o.early = v;
    else if (a == "--sync") o.sync = v;
    else if (a == "--sample-stop") o.sample_stop = v;
    else if (a == "--rotate") o.rotate = v;
    else if (a == "--trace") o.trace = v;
    else if (a == "--sigmas") o.sigmas = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: topk-grid-probe [--batch B] [--n N] [--k K] [--ctas G] [--block T] [--cap C] [--sigmas S] [--sample VECTORS] [--early 0|1] [--sync 0|1] [--sample-stop 0|8|16|24] [--rotate 0|1] [--trace 0|1]\n");
      return 2;
    }
  }
  if (o.k > o.n || (o.sample_stop != 0 && o.sample_stop != 8 && o.sample_stop != 16 && o.sample_stop != 24)) {
    std::fprintf(stderr, "unsupported: k above n, or --sample-stop other than 0, 8, 16 or 24\n");
    return 2;
  }
  if (o.n % 4 != 0 || o.sample < 32 || o.sample > kSampleVecs || o.n / 4 < o.sample || o.block < 256 ||
      o.block > 1024 || o.block % 32 != 0 ||
      o.k < 1 || o.k > o.cap) {
    std::fprintf(stderr, "unsupported: n a multiple of 4 and >= 4 x the sample (%d), sample 32..1024 vectors, block 256..1024, 1 <= k <= cap\n",
                 4 * o.sample);
    return 2;
  }
  // The sample's rank of the threshold: its expected count above the k-th
  // key plus `sigmas` standard deviations plus 3.
  const double c = static_cast<double>(o.k) * 4 * o.sample / o.n;
  const int rank = std::max(1, std::min(4 * o.sample, static_cast<int>(std::ceil(c + o.sigmas * std::sqrt(c) + 3))));
  const int eq_cap = o.k;
  const size_t elems = static_cast<size_t>(o.batch) * o.n;
  float* d_in;
  int *d_out, *d_ci, *d_ei;
  unsigned* d_ck;
  RowCounters* d_ctr;
  CHECK(cudaMalloc(&d_in, elems * 4));
  CHECK(cudaMalloc(&d_out, static_cast<size_t>(o.batch) * o.k * 4));
  CHECK(cudaMalloc(&d_ck, static_cast<size_t>(o.batch) * o.cap * 4));
  CHECK(cudaMalloc(&d_ci, static_cast<size_t>(o.batch) * o.cap * 4));
  CHECK(cudaMalloc(&d_ei, static_cast<size_t>(o.batch) * eq_cap * 4));
  CHECK(cudaMalloc(&d_ctr, o.batch * sizeof(RowCounters)));
  float* d_rot = nullptr;
  int copies = 0;
  if (o.rotate) {
    int l2 = 0;
    CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
    copies = static_cast<int>(std::min<double>(128, std::max<double>(2, std::ceil(2.0 * l2 / (elems * 4.0)))));
    CHECK(cudaMalloc(&d_rot, static_cast<size_t>(copies) * elems * 4));
  }
  CHECK(cudaMemset(d_ctr, 0, o.batch * sizeof(RowCounters)));
  const int smem = (kBins + kShWords) * 4 + o.cap * 8;
  const int slice_vecs = (o.n / 4 + o.ctas - 1) / o.ctas;
  const int vpt = (slice_vecs + o.block - 1) / o.block;
  void (*kern)(Params) = vpt <= 1 ? grid_topk<1> : vpt <= 2 ? grid_topk<2> : vpt <= 4 ? grid_topk<4> : grid_topk<8>;
  if (o.sync)
    kern = vpt <= 1 ? grid_topk_sync<1> : vpt <= 2 ? grid_topk_sync<2> : vpt <= 4 ? grid_topk_sync<4> : grid_topk_sync<8>;
  if (vpt > 8) {
    std::fprintf(stderr, "unsupported: a slice of %d vectors is over 8 a thread\n", slice_vecs);
    return 2;
  }
  CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  if (o.sync) {
    // The grid barrier needs every CTA resident at once.
    int per_sm = 0, sms = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, o.block, smem));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    if (static_cast<long long>(per_sm) * sms < static_cast<long long>(o.ctas) * o.batch) {
      std::fprintf(stderr, "--sync: %d x %d CTAs do not fit at once (%d an SM, %d SMs)\n", o.batch, o.ctas, per_sm, sms);
      return 2;
    }
  }
  Params p{d_in, d_out, d_ctr, d_ck, d_ci, d_ei, o.n, o.n, o.k, o.cap, eq_cap, rank, 0, o.sample, o.early, o.sample_stop, nullptr};
  const dim3 grid(o.ctas, o.batch);
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));  // blocking: ordered with the memsets and copies of the default stream
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s; batch %d n %d k %d ctas/row %d block %d cap %d sample rank %d of %d, "
              "%d vectors a thread%s\n", prop.name, o.batch, o.n, o.k, o.ctas, o.block, o.cap, rank,
              4 * o.sample, vpt <= 1 ? 1 : vpt <= 2 ? 2 : vpt <= 4 ? 4 : 8, o.sync ? ", grid barrier" : "");

  // Launch floor: an empty kernel of the same grid in the same graph shape.
  // A graph of `count` calls (launch(i) captures call i), replayed: the
  // median and spread of a call's time.
  auto time_graph = [&](auto launch, int count) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < count; ++i) launch(i);
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    for (int w = 0; w < 3; ++w) CHECK(cudaGraphLaunch(ge, s));
    std::vector<double> us;
    for (int r = 0; r < o.replays; ++r) {
      CHECK(cudaEventRecord(e0, s));
      CHECK(cudaGraphLaunch(ge, s));
      CHECK(cudaEventRecord(e1, s));
      CHECK(cudaEventSynchronize(e1));
      float ms;
      CHECK(cudaEventElapsedTime(&ms, e0, e1));
      us.push_back(1000.0 * ms / count);
    }
    CHECK(cudaGraphExecDestroy(ge));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaEventDestroy(e0));
    CHECK(cudaEventDestroy(e1));
    std::sort(us.begin(), us.end());
    return std::vector<double>{us[us.size() / 10], us[us.size() / 2], us[us.size() * 9 / 10]};
  };
  const auto floor = time_graph([&](int) { empty_kernel<<<grid, o.block, 0, s>>>(); }, o.launches);
  std::printf("empty kernel, same grid: %.2f us\n", floor[1]);

  std::mt19937 rng(12345);
  std::vector<float> x(elems);
  std::vector<int> out(static_cast<size_t>(o.batch) * o.k);
  std::vector<RowCounters> ctr(o.batch);
  for (const auto& dist : dists) {
    long long wrong = 0, misses = 0, checked = 0;
    // One call on a poisoned output, checked against x: its rows exact (or
    // missed), every counter back at zero.
    auto check_call = [&](const Params& q) {
      CHECK(cudaMemsetAsync(d_out, 0xff, out.size() * 4, s));
      kern<<<grid, o.block, smem, s>>>(q);
      CHECK(cudaGetLastError());
      CHECK(cudaStreamSynchronize(s));
      CHECK(cudaMemcpy(out.data(), d_out, out.size() * 4, cudaMemcpyDeviceToHost));
      CHECK(cudaMemcpy(ctr.data(), d_ctr, ctr.size() * sizeof(RowCounters), cudaMemcpyDeviceToHost));
      if (!CountersReset(ctr)) {
        std::fprintf(stderr, "counters not reset\n");
        std::exit(1);
      }
      for (const RowCounters& c2 : ctr) misses += c2.miss;
      Check(x, out, o, &wrong, &checked);
    };
    // Three fresh inputs, each checked; the last one is then timed.
    for (int trial = 0; trial < 3; ++trial) {
      Fill(x, dist, rng);
      if (dist == "ascending") std::rotate(x.begin(), x.begin() + trial * 4099, x.end());
      CHECK(cudaMemcpy(d_in, x.data(), elems * 4, cudaMemcpyHostToDevice));
      check_call(p);
    }
    if (o.trace && dist == "normal") {
      // One traced launch on the last input: the finishing CTA's phases
      // (clock64 of its thread 0) and the CTAs' spread (globaltimer).
      const size_t words = static_cast<size_t>(o.batch) * o.ctas * 16;
      unsigned long long* d_tr;
      CHECK(cudaMalloc(&d_tr, words * 8));
      CHECK(cudaMemset(d_tr, 0, words * 8));
      Params q = p;
      q.trace = d_tr;
      for (int rep = 0; rep < 2; ++rep) {  // the second launch's trace: warm
        CHECK(cudaMemsetAsync(d_tr, 0, words * 8, s));
        kern<<<grid, o.block, smem, s>>>(q);
        CHECK(cudaGetLastError());
        CHECK(cudaStreamSynchronize(s));
      }
      std::vector<unsigned long long> tr(words);
      CHECK(cudaMemcpy(tr.data(), d_tr, words * 8, cudaMemcpyDeviceToHost));
      CHECK(cudaFree(d_tr));
      int khz = 0;
      CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
      const double cyc_us = khz / 1000.0;  // cycles per microsecond at the rated clock
      unsigned long long g0 = ~0ull, g0max = 0, g1max = 0;
      for (int c2 = 0; c2 < o.ctas; ++c2) {  // row 0
        g0 = std::min(g0, tr[c2 * 16 + 10]);
        g0max = std::max(g0max, tr[c2 * 16 + 10]);
        g1max = std::max(g1max, tr[c2 * 16 + 11]);
      }
      for (int c2 = 0; c2 < o.ctas; ++c2) {
        const unsigned long long* t = &tr[c2 * 16];
        if (!t[12]) continue;
        auto d = [&](int a, int b) { return (static_cast<double>(t[b]) - static_cast<double>(t[a])) / cyc_us; };
        if (o.sync)
          std::printf("trace row 0, finishing CTA %d (keys in the k-th key's bin %llu), us at %.0f MHz: sample %.2f, "
                      "select %.2f, slice and histogram %.2f, grid barrier %.2f, writes %.2f, ticket %.2f, "
                      "load bin %.2f, select %.2f, output %.2f; its start %.2f us after the first CTA's, "
                      "last CTA start +%.2f us, last ticket +%.2f us (globaltimer)\n",
                      c2, t[12] - 1, khz / 1000.0, d(0, 1), d(1, 2), d(2, 3), d(3, 4), d(4, 5), d(5, 6), d(6, 7),
                      d(7, 8), d(8, 9), (t[10] - g0) / 1000.0, (g0max - g0) / 1000.0, (g1max - g0) / 1000.0);
        else
          std::printf("trace row 0, finishing CTA %d (candidates %llu), us at %.0f MHz: sample %.2f, select %.2f "
                      "(second pass: counts %.2f, scan %.2f), "
                      "slice count %.2f, slice atomics %.2f, slice write %.2f, fence+ticket %.2f, "
                      "load candidates %.2f, select %.2f, output %.2f; its start %.2f us after the first CTA's, "
                      "last CTA start +%.2f us, last ticket +%.2f us (globaltimer)\n",
                      c2, t[12] - 1, khz / 1000.0, d(0, 1), d(1, 2), d(13, 14), d(14, 15), d(2, 3), d(3, 4), d(4, 5),
                      d(5, 6), d(6, 7), d(7, 8), d(8, 9), (t[10] - g0) / 1000.0, (g0max - g0) / 1000.0,
                      (g1max - g0) / 1000.0);
      }
    }
    const auto t = time_graph([&](int) { kern<<<grid, o.block, smem, s>>>(p); }, o.launches);
    CHECK(cudaGetLastError());
    check_call(p);  // one more call after the timed ones
    std::printf("%-10s rows checked %lld, wrong %lld, guess missed %lld | median %.2f us [p10 %.2f, p90 %.2f]\n",
                dist.c_str(), checked, wrong, misses, t[1], t[0], t[2]);
    if (wrong) return 1;
    if (d_rot) {
      // The same input from memory: each call of the graph reads its own
      // copy, the copies adding up to twice the L2.
      for (int c2 = 0; c2 < copies; ++c2)
        CHECK(cudaMemcpy(d_rot + c2 * elems, d_in, elems * 4, cudaMemcpyDeviceToDevice));
      const auto tr = time_graph(
          [&](int i) {
            Params q = p;
            q.in = d_rot + (i % copies) * elems;
            kern<<<grid, o.block, smem, s>>>(q);
          },
          copies);
      CHECK(cudaGetLastError());
      Params q = p;
      q.in = d_rot + (copies - 1) * elems;
      const long long wrong0 = wrong, misses0 = misses;
      check_call(q);
      std::printf("           rotated over %d copies: wrong %lld, guess missed %lld | median %.2f us [p10 %.2f, p90 %.2f]\n",
                  copies, wrong - wrong0, misses - misses0, tr[1], tr[0], tr[2]);
      if (wrong) return 1;
    }
    if (dist == "normal") {
      // Phase timings on the same input: up to the sample's threshold, up
      // to the slices read and counted (the last-CTA finish: candidates
      // written; the barrier finish: before the barrier). The output is
      // then incomplete, and the counters are zeroed after.
      double ph[2];
      for (int stop = 1; stop <= 2; ++stop) {
        Params q = p;
        q.stop = stop;
        ph[stop - 1] = time_graph([&](int) { kern<<<grid, o.block, smem, s>>>(q); }, o.launches)[1];
        CHECK(cudaGetLastError());
      }
      CHECK(cudaMemset(d_ctr, 0, o.batch * sizeof(RowCounters)));
      std::printf("           phases: threshold %.2f us, + slices %.2f us, + finish %.2f us\n", ph[0], ph[1], t[1]);
    }
  }
  return 0;
}
