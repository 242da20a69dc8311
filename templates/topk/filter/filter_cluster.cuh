// The filter family's cluster mode: a thread-block cluster per row. Each CTA
// copies its slice of the row into shared memory (the row is read from
// memory once), sends a sample of it to every CTA, and every CTA selects the
// same threshold guess from the merged sample: the key whose rank in the
// sample stands for about k (1 + margin) elements of the row. One scan of the
// slices counts the keys above the guess and equal to it, appending those
// above to the leader's candidate list through distributed shared memory.
// Then, with G keys above and E equal:
//
//   k <= G <= capacity   the leader selects the top k of its list exactly;
//   G < k <= G + E       the guess is the k-th key: the list is output whole
//                        and k - G of the ties fill the rest;
//   otherwise            the guess was too high (G + E < k) or too low
//                        (G > capacity): the k-th key lies strictly between
//                        the bounds found so far; the next guess moves along
//                        the sample (twice or half the rank, `recovery`
//                        times at most, 0-4), then halves the interval (at
//                        most 1 + recovery + key bits rounds, each a scan of
//                        shared memory).
//
// The guess is a key, not a digit of it, so a shifted or few-valued row costs
// what a normal one does: a plateau or a few distinct values end in the
// second case. Exact always: the list holds every key above the guess; ties
// at the k-th key are taken by arrival (deterministic mode orders them
// afterwards, ties.cuh).
#pragma once
#include "topk/filter/filter_select.cuh"
#include "topk/radix/cluster.cuh"

namespace topk {
namespace filter {

// Launch arguments of the cluster mode (TopkArgs): `buffer` is the leader's
// list capacity, `cache_cap` the slice length kept in shared memory (a longer
// slice is scanned from memory each round), `rounds` packs the merged
// sample's size, the over-selection margin and the recovery
// (TOPK_FILTER_ROUNDS, args.h).
__host__ __device__ constexpr int cluster_smem_bytes(int hist_bytes, int sample_total, int capacity,
                                                     int cache_bytes) {
  return ((hist_bytes + sample_total * 4 + capacity * 8 + 15) & ~15) + cache_bytes;
}

// One guess, at most 4 steps along the sample (the host's recovery bound),
// then at most 33 halvings of a 32-bit key interval.
constexpr int kClusterMaxRecovery = 4;
constexpr int kClusterMaxRounds = 1 + kClusterMaxRecovery + 33;

struct ClusterControl {
  // Leader: per round, keys above the guess (and list slots taken) and keys
  // equal to it, side by side so one 64-bit load reads both.
  struct {
    u32 gt, eq;
  } round[kClusterMaxRounds];
  u32 ties;                   // leader: ties claimed by the final fill
  u32 placed, taken;          // leader: output slots of the final select
  u32 G, E;                   // this CTA's copy of the round's totals
  u32 cta_eq;                 // this CTA's ties of the round, being summed
  u32 my_eq;                  // the same, summed
  u32 base;                   // this CTA's first slot in the leader's list (or tie block)
  u32 local;                  // slots used within it
  ThresholdResult res;
  u32 scratch[64];
};

// Static shared memory stays within the host's reserve (Arch::static_smem_reserve).
static_assert(sizeof(ClusterControl) <= 1024, "cluster control block");

// TOPK_STOP_AT=N (TOPK_FILTER_STOP, filter_select.cuh) in cluster mode: 1
// slice copied, 2 sample merged, 3 guess selected, 4 first round counted, 5
// the leader's select done (no output written).

__device__ __forceinline__ void dsmem_store(u32 addr, u32 v) {
  asm volatile("st.shared::cluster.u32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}

template <class P>
struct ClusterFilter {
  using K = Keys<P::kDtype>;
  using Raw = typename K::Raw;
  using CL = Cluster<2>;
  static constexpr int T = P::kBlock;
  static constexpr int V = P::kVec;
  static constexpr int NB = P::kBins;
  static constexpr int KB = P::kKeyBits;
  static constexpr int kItems = P::kMaxItems;
  static constexpr int kStage = 4;  // survivors a thread keeps in registers during a round's pass (sk0..sk3)

  ClusterControl* ctl;
  u32* hist;
  u32 flip;

  __device__ u32 select(const u32 (&key)[kItems], int count, u32 rank, u32* need_out, int passes = P::kPasses) {
    return select_rank<P>(key, count, rank, hist, &ctl->res, ctl->scratch, need_out, passes);
  }

  // A warp's slots for the lanes with `flag`: one `add(n)` for the warp (an
  // atomic that returns the old count). Returns this lane's slot, or -1.
  // Every lane of the warp calls it.
  template <class Add>
  __device__ __forceinline__ static int claim_with(bool flag, Add add) {
    const u32 mask = __ballot_sync(kFullMask, flag);
    if (mask == 0) return -1;
    const int first = __ffs(mask) - 1;
    u32 base = 0;
    if (static_cast<int>(lane_id()) == first) base = add(static_cast<u32>(__popc(mask)));
    base = __shfl_sync(kFullMask, base, first);
    return flag ? static_cast<int>(base) + __popc(mask & lanemask_lt()) : -1;
  }
  // On the shared counter `c` of this CTA.
  __device__ __forceinline__ static int claim(bool flag, u32* c) {
    return claim_with(flag, [c](u32 n) { return atomicAdd(c, n); });
  }
  // On a counter at a shared::cluster address (the leader's).
  __device__ __forceinline__ static int claim_remote(bool flag, u32 addr) {
    return claim_with(flag, [addr](u32 n) { return CL::atomic_add(addr, n); });
  }

  // Calls f(key, j, ok) for the slice's elements j, a warp's lanes together
  // (ok false past the end). A slice in shared memory is read in 16-byte
  // vectors, and a warp skips a step where no lane's `hit(key)` holds; a slice
  // in memory is read element by element.
  template <class Hit, class F>
  __device__ __forceinline__ void traverse(const Raw* src, bool cached, int len, Hit hit, F f) {
    int done = 0;
    if (cached) {
      const int nvec = len / V;
      const uint4* cv = reinterpret_cast<const uint4*>(src);  // the cache is 16-byte aligned
      for (int v0 = 0; v0 < nvec; v0 += 2 * T) {
        uint4 q[2];
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const int v = v0 + u * T + static_cast<int>(threadIdx.x);
          q[u] = v < nvec ? cv[v] : make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const int v = v0 + u * T + static_cast<int>(threadIdx.x);
          const bool ok = v < nvec;
          const u32 w[4] = {q[u].x, q[u].y, q[u].z, q[u].w};
          u32 key[V];
          bool any = false;
#pragma unroll
          for (int e = 0; e < V; ++e) {
            key[e] = K::key_flip(unpack_raw<KB>(w, e), flip);
            any |= ok && hit(key[e]);
          }
          if (__any_sync(kFullMask, any)) {
#pragma unroll
            for (int e = 0; e < V; ++e) f(key[e], v * V + e, ok);
          }
        }
      }
      done = nvec * V;
    }
    for (int i0 = done; i0 < len; i0 += T) {
      const int j = i0 + static_cast<int>(threadIdx.x);
      const bool ok = j < len;
      f(ok ? K::key_flip(static_cast<u32>(src[j]), flip) : 0u, j, ok);
    }
  }

  // One round: counts this slice's keys above `guess` and equal to it into
  // the leader's totals of `round`, and copies those above to the leader's
  // list. Each thread keeps up to kStage of its survivors in registers; after
  // the pass one remote atomic reserves the CTA's block of the list and every
  // thread stores its survivors there. (A remote atomic per warp with
  // survivors, each waited for, put about ten round trips in a row on every
  // warp: 5.5 of 20 us on 1 x 131072. Survivors beyond kStage in one thread,
  // rare, still take that path.)
  __device__ void scan(const Raw* src, bool cached, int len, int col0, u32 guess, int round, u32 lkeys, u32 lidx,
                       int cap) {
    const u32 gt_addr = CL::map(&ctl->round[round].gt, 0);
    const u32 eq_addr = CL::map(&ctl->round[round].eq, 0);
    u32 eq = 0;
    u32 sk0 = 0, sk1 = 0, sk2 = 0, sk3 = 0;
    int si0 = 0, si1 = 0, si2 = 0, si3 = 0;
    int ns = 0;
    traverse(src, cached, len, [&](u32 key) { return key >= guess; }, [&](u32 key, int j, bool ok) {
      eq += ok && key == guess ? 1u : 0u;
      const bool gt = ok && key > guess;
      const bool kept = gt && ns < kStage;
      if (kept) {
        // Scalars, not an array: an array captured by the lambda stayed in
        // local memory.
        const int c = col0 + j;
        if (ns == 0) sk0 = key, si0 = c;
        else if (ns == 1) sk1 = key, si1 = c;
        else if (ns == 2) sk2 = key, si2 = c;
        else sk3 = key, si3 = c;
        ++ns;
      }
      const int pos = claim_remote(gt && !kept, gt_addr);
      if (pos >= 0 && pos < cap) {
        dsmem_store(lkeys + 4u * static_cast<u32>(pos), key);
        dsmem_store(lidx + 4u * static_cast<u32>(pos), static_cast<u32>(col0 + j));
      }
    });
    // The CTA's kept survivors: an exclusive scan over the threads, one
    // remote atomic for the block.
    constexpr int NW = T / 32;
    const u32 incl = warp_inclusive_prefix(static_cast<u32>(ns));
    eq = __reduce_add_sync(kFullMask, eq);
    const int warp = static_cast<int>(threadIdx.x >> 5);
    if (lane_id() == 31) ctl->scratch[warp] = incl;
    if (lane_id() == 0 && eq) atomicAdd(&ctl->cta_eq, eq);
    __syncthreads();
    u32 before = 0, total = 0;
#pragma unroll
    for (int w = 0; w < NW; ++w) {
      const u32 t = ctl->scratch[w];
      before += w < warp ? t : 0u;
      total += t;
    }
    if (threadIdx.x == 0) {
      ctl->base = total ? CL::atomic_add(gt_addr, total) : 0u;
      ctl->my_eq = ctl->cta_eq;
      ctl->cta_eq = 0;  // for the next round (its sums come after the cluster barrier)
      if (ctl->my_eq) CL::atomic_add(eq_addr, ctl->my_eq);
    }
    __syncthreads();
    const int first = static_cast<int>(ctl->base + before + incl) - ns;
    const u32 sk[kStage] = {sk0, sk1, sk2, sk3};
    const int si[kStage] = {si0, si1, si2, si3};
#pragma unroll
    for (int q = 0; q < kStage; ++q) {
      const int pos = first + q;
      if (q < ns && pos < cap) {
        dsmem_store(lkeys + 4u * static_cast<u32>(pos), sk[q]);
        dsmem_store(lidx + 4u * static_cast<u32>(pos), static_cast<u32>(si[q]));
      }
    }
  }

  // A key near rank *want (clamped to [1, ST]) among the ST keys of
  // `sample`: the lowest key of that rank's bin after two digit passes (22
  // bits of a 32-bit key; 16-bit keys are exact). A guess needs no more, and
  // the last pass cost about a microsecond. Every thread calls it.
  __device__ u32 guess_at(const u32* sample, int ST, int* want) {
    *want = *want < 1 ? 1 : (*want > ST ? ST : *want);
    u32 key[kItems];
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      const int i = static_cast<int>(threadIdx.x) + j * T;
      key[j] = i < ST ? sample[i] : 0u;
    }
    u32 need;
    return select(key, ST, static_cast<u32>(*want), &need, P::kPasses < 2 ? P::kPasses : 2);
  }

  __device__ void run(const TopkArgs& a, unsigned char* smem, ClusterControl* control) {
    const u32 C = CL::size();
    const u32 rank = CL::rank();
    const int rowi = static_cast<int>(blockIdx.x / C);
    const bool values = (a.flags & TOPK_FLAG_VALUES) != 0 && a.out_val != nullptr;
    const int k = a.k;
    flip = (a.flags & TOPK_FLAG_SMALLEST) ? (KB == 32 ? ~0u : 0xffffu) : 0u;
    const Raw* row = static_cast<const Raw*>(a.input) + static_cast<long long>(rowi) * a.row_stride;
    int* out_idx = a.out_idx + static_cast<long long>(rowi) * k;
    Raw* out_val = values ? static_cast<Raw*>(a.out_val) + static_cast<long long>(rowi) * k : nullptr;
    const RowRange range = row_range(a, rowi);
    const int L = range.end - range.start;
    if (L <= k) {  // the whole cluster leaves here
      if (rank == 0)
        take_whole_range(row, range, out_idx, out_val, static_cast<int>(threadIdx.x), T, k, static_cast<Raw>(K::kLowest));
      return;
    }
    // Every CTA of the cluster must have started before any writes to its
    // shared memory: arrive now, wait before the first remote store.
    CL::arrive_relaxed();
    const int cap = a.buffer;
    const int margin = (a.rounds & 0xfff) - 1000;
    const int S = ((a.rounds >> 12) & 0x7fff) / static_cast<int>(C);  // sample per CTA
    const int packed_recovery = (a.rounds >> 27) & 0xf;  // retries along the sample before halving
    const int recovery = packed_recovery < kClusterMaxRecovery ? packed_recovery : kClusterMaxRecovery;
    const int ST = S * static_cast<int>(C);
    {
      // The launch must provide the layout the host computed; a mismatch is
      // a host bug, and trapping beats corrupting shared memory.
      u32 dyn;
      asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
      if (static_cast<int>(dyn) < cluster_smem_bytes(P::kHistSmem, ST, cap, a.cache_cap * static_cast<int>(sizeof(Raw))) ||
          cap < k || cap > kItems * T || S < 1 || ST > kItems * T || a.cache_cap < 0)
        __trap();
    }
    ctl = control;
    hist = reinterpret_cast<u32*>(smem);
    u32* sample = hist + NB;
    u32* lkeys = sample + ST;
    int* lidx = reinterpret_cast<int*>(lkeys + cap);
    Raw* cache = reinterpret_cast<Raw*>(smem + cluster_smem_bytes(P::kHistSmem, ST, cap, 0));
    for (int i = threadIdx.x; i < kClusterMaxRounds; i += T) {
      ctl->round[i].gt = 0;
      ctl->round[i].eq = 0;
    }
    if (threadIdx.x == 0) {
      ctl->ties = 0;
      ctl->placed = 0;
      ctl->taken = 0;
      ctl->cta_eq = 0;
    }

    // This CTA's slice: columns [col0, col0 + len), whole 8-element groups.
    int chunk = (L + static_cast<int>(C) - 1) / static_cast<int>(C);
    chunk = (chunk + 7) & ~7;
    const int s0 = min(L, static_cast<int>(rank) * chunk);
    const int len = min(L, s0 + chunk) - s0;
    const int col0 = range.start + s0;
    const Raw* g = row + col0;
    const bool cached = len <= a.cache_cap;
    if (cached) {
      // Scalar head to 16-byte alignment, a vector body, a scalar tail;
      // 2 x unroll 16-byte loads in flight per thread.
      const unsigned long long addr = reinterpret_cast<unsigned long long>(g);
      int head = static_cast<int>(((16u - (addr & 15u)) & 15u) / sizeof(Raw));
      if (head > len) head = len;
      const int nvec = (len - head) / V;
      for (int j = threadIdx.x; j < head; j += T) cache[j] = g[j];
      const uint4* body = reinterpret_cast<const uint4*>(g + head);
      constexpr int U = 2 * P::kUnroll;
      for (int v0 = 0; v0 < nvec; v0 += U * T) {
        uint4 q[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int v = v0 + u * T + static_cast<int>(threadIdx.x);
          q[u] = v < nvec ? body[v] : make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int v = v0 + u * T + static_cast<int>(threadIdx.x);
          if (v >= nvec) continue;
          const u32 w[4] = {q[u].x, q[u].y, q[u].z, q[u].w};
          Raw* dst = cache + head + v * V;
#pragma unroll
          for (int e = 0; e < V; ++e)
            dst[e] = static_cast<Raw>(unpack_raw<KB>(w, e));
        }
      }
      for (int j = head + nvec * V + static_cast<int>(threadIdx.x); j < len; j += T) cache[j] = g[j];
      __syncthreads();
    }
    const Raw* src = cached ? cache : g;
    TOPK_FILTER_STOP(1);

    CL::wait();
    // The sample: S evenly spaced keys of the slice (a placeholder key 0, which
    // ranks last, from an empty slice), sent to every CTA.
    for (int w = threadIdx.x; w < ST; w += T) {
      const int q = w % S;
      const u32 to = static_cast<u32>(w / S);
      const u32 key = len > 0 ? K::key_flip(static_cast<u32>(src[static_cast<long long>(q) * len / S]), flip) : 0u;
      dsmem_store(CL::map(&sample[static_cast<int>(rank) * S + q], to), key);
    }
    CL::sync();  // every sample in place, every counter zeroed
    TOPK_FILTER_STOP(2);

    // The guess: the sample key that stands for about k (1 + margin) elements,
    // with the sample's noise (about sqrt(rank)) kept below the list's capacity.
    const float per_rank = static_cast<float>(L) / static_cast<float>(ST);  // elements a sample key stands for
    const float expect = static_cast<float>(k) / per_rank;
    int want = static_cast<int>(ceilf(expect * (1.0f + 0.01f * static_cast<float>(margin)) + 2.0f * sqrtf(expect))) + 1;
    if (margin >= 0 && margin <= 400) {
      // At most three standard deviations below a full list; where the
      // list's room cannot hold three on both sides, halfway between k and
      // full (the host's sample constraint keeps that rare). Margins outside
      // [0, 400] are taken as they are: the GPU suite's -50 and 1000 drive
      // rows through both directions of the retry rounds.
      const float full = static_cast<float>(cap) / per_rank;
      const int ceiling = static_cast<int>(full - 3.0f * sqrtf(full));
      const int least = static_cast<int>(ceilf(expect + 3.0f * sqrtf(expect)));
      if (want > ceiling) want = ceiling >= least ? ceiling : static_cast<int>(0.5f * (expect + full));
    }
    u32 guess = guess_at(sample, ST, &want);
    TOPK_FILTER_STOP(3);

    const u32 lkeys_addr = CL::map(lkeys, 0);
    const u32 lidx_addr = CL::map(lidx, 0);
    long long lo = -1, hi = 1LL << KB;  // the k-th key lies in (lo, hi)
    for (int round = 0;; ++round) {
      scan(src, cached, len, col0, guess, round, lkeys_addr, lidx_addr, cap);
      CL::sync();  // the round's totals and list are complete
      TOPK_FILTER_STOP(4);
      if (threadIdx.x == 0) {
        const u64 ge = CL::load64(CL::map(&ctl->round[round], 0));
        ctl->G = static_cast<u32>(ge);
        ctl->E = static_cast<u32>(ge >> 32);
      }
      __syncthreads();
      const int G = static_cast<int>(ctl->G), E = static_cast<int>(ctl->E);
      const u32 my_eq = ctl->my_eq;
      if (G >= k && G <= cap) {
        // The leader selects k of its list; nobody touches another CTA's
        // shared memory any more once every CTA has read the totals.
        CL::arrive_relaxed();
        if (rank == 0) finish_select(G, k, lkeys, lidx, row, out_idx, out_val);
        CL::wait();
        return;
      }
      if (G < k && G + E >= k) {
        // The guess is the k-th key: the list whole, then k - G ties.
        if (rank == 0)
          for (int i = threadIdx.x; i < G; i += T) {
            const int c = lidx[i];
            out_idx[i] = c;
            if (values) out_val[i] = row[c];
          }
        // Each CTA reserves a block of tie slots for all its ties with one
        // remote atomic and fills the part below k - G.
        if (threadIdx.x == 0) {
          ctl->base = my_eq ? CL::atomic_add(CL::map(&ctl->ties, 0), my_eq) : 0u;
          ctl->local = 0;
        }
        __syncthreads();
        const int need = k - G, tbase = static_cast<int>(ctl->base);
        CL::arrive_relaxed();  // the leader's tie counter is not touched after this
        if (my_eq && tbase < need)
          traverse(src, cached, len, [&](u32 key) { return key == guess; }, [&](u32 key, int j, bool ok) {
            const int t = claim(ok && key == guess, &ctl->local);
            if (t >= 0 && tbase + t < need) {
              out_idx[G + tbase + t] = col0 + j;
              if (values) out_val[G + tbase + t] = src[j];
            }
          });
        CL::wait();
        return;
      }
      const bool high = G + E < k;  // too high: fewer than k keys at or above it
      if (high) hi = guess;         // else too low: more keys above it than the list holds
      else lo = guess;
      if (round + 1 >= kClusterMaxRounds) __trap();  // unreachable: the interval halves each round
      // The first `recovery` retries move along the sample (twice or half the
      // rank); then, or when that leaves the interval, the interval halves.
      u32 next = static_cast<u32>((lo + hi) / 2);
      if (round < recovery) {
        want = high ? 2 * want + 2 : want / 2;
        const u32 g2 = guess_at(sample, ST, &want);
        if (static_cast<long long>(g2) > lo && static_cast<long long>(g2) < hi) next = g2;
      }
      guess = next;
    }
  }

  // Leader only: the top k of the list's `count` entries to the output.
  __device__ void finish_select(int count, int k, const u32* lkeys, const int* lidx, const Raw* row, int* out_idx,
                                Raw* out_val) {
    u32 key[kItems];
    int id[kItems];
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      const int i = static_cast<int>(threadIdx.x) + j * T;
      key[j] = i < count ? lkeys[i] : 0u;
      id[j] = i < count ? lidx[i] : -1;
    }
    u32 need;
    const u32 kth = select(key, count, static_cast<u32>(k), &need);
    TOPK_FILTER_STOP(5);
    const int above = k - static_cast<int>(need);
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      const int i = static_cast<int>(threadIdx.x) + j * T;
      const int p = claim(i < count && key[j] > kth, &ctl->placed);
      const int t = claim(i < count && key[j] == kth, &ctl->taken);
      const int pos = p >= 0 ? p : (t >= 0 && t < static_cast<int>(need) ? above + t : -1);
      if (pos >= 0) {
        out_idx[pos] = id[j];
        if (out_val) out_val[pos] = row[id[j]];
      }
    }
  }
};

}  // namespace filter

template <class P>
__global__ void __launch_bounds__(P::kBlock, 1) filter_cluster_kernel(TopkArgs a) {
  await_prior_grids();
  extern __shared__ __align__(16) unsigned char filter_smem[];
  __shared__ filter::ClusterControl control;
  filter::ClusterFilter<P> f;
  f.run(a, filter_smem, &control);
}

}  // namespace topk
