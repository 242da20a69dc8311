// The driver: run() takes one row (one CTA per row) or one CTA's slice of it
// (a cluster per row): setup, pass 0, then one round per digit of threshold
// search, scan and hand-over, until the row's k outputs are written. The two
// shapes share the rounds (if constexpr on kClustered, so that a change to a
// round reaches both); the steps only one of them takes are units of their
// own: the speculative pass 0 (speculation.cuh) and the uniform-bin check of
// one CTA per row, the merge (cluster_merge.cuh) and the leader's hand-off
// (cluster_driver.cuh) of a cluster. sync_row() is the barrier over whatever
// works on the row.
#pragma once
#include "topk/radix/row_select.cuh"
#include "topk/radix/trace.cuh"

namespace topk {

// Barrier over everything working on the row.
template <class P>
__device__ __forceinline__ void RowSelect<P>::sync_row() {
  if (kClustered && !solo)
    Cl::sync();
  else
    __syncthreads();
}

// Leaves run() early at a TOPK_STOP_AT boundary (trace.cuh): a cluster's
// CTAs meet first, since peers may still read this CTA's shared memory.
template <class P>
__device__ __forceinline__ void RowSelect<P>::leave_at_stop() {
  if (kClustered && !solo) Cl::sync();
}

template <class P>
__device__ inline void RowSelect<P>::run(const TopkArgs& a, unsigned char* smem, RowControl* control) {
  trace_mark(0);
  C = static_cast<int>(Cl::size());
  const int rowi = blockIdx.x / C;
  const u32 rank = Cl::rank();
  flip = (a.flags & TOPK_FLAG_SMALLEST) ? (KB == 32 ? ~0u : 0xffffu) : 0u;
  values = (a.flags & TOPK_FLAG_VALUES) != 0 && a.out_val != nullptr;
  k = a.k;
  row = static_cast<const Raw*>(a.input) + static_cast<long long>(rowi) * a.row_stride;
  out_idx = a.out_idx + static_cast<long long>(rowi) * k;
  out_val = values ? static_cast<Raw*>(a.out_val) + static_cast<long long>(rowi) * k : nullptr;
  const RowRange range = row_range(a, rowi);
  const int start = range.start, end = range.end;
  const int L = end - start;
  int chunk = (L + C - 1) / C;
  chunk = (chunk + V - 1) / V * V;
  s0 = start + static_cast<int>(rank) * chunk;
  if (s0 > end) s0 = end;
  const int s1 = s0 + chunk < end ? s0 + chunk : end;
  len = s1 - s0;

  if (L <= k) {  // Everything in range is selected; pad the rest.
    const u32 gt = rank * T + threadIdx.x;
    for (int j = threadIdx.x; j < len; j += T) write(s0 - start + j, s0 + j);
    pad_output(out_idx, out_val, L + static_cast<int>(gt), k, C * T, static_cast<Raw>(K::kLowest));
    return;
  }

  S = a.buffer > 0 ? a.buffer : 0;
  const bool rank_ok = a.rounds < kPasses - 1;
  {
    // The launch must provide the layout the host computed; a mismatch is
    // a host bug, and trapping beats corrupting shared memory.
    u32 dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
    const int want = smem_layout_bytes(P::kHistSmem, S, rank_ok, a.cache_cap / V * V, sizeof(Cached));
    if (static_cast<int>(dyn) < want || a.smem_bytes != static_cast<int>(dyn)) __trap();
  }
  const unsigned long long addr = reinterpret_cast<unsigned long long>(row + s0);
  head = static_cast<int>(((16u - (addr & 15u)) & 15u) / sizeof(Raw));
  if (head > len) head = len;
  nvec = (len - head) / V;
  shift = (V - head % V) % V;
  cache_len = 0;
  const int cap = a.cache_cap / V * V;  // whole vectors: the scan reads them whole
  if (cap > shift) {
    const int avail = cap - shift;
    if (avail >= len)
      cache_len = len;
    else if (avail >= head)
      cache_len = head + (avail - head) / V * V;
  }

  ctl = control;
  hist = reinterpret_cast<u32*>(smem);
  ghist = hist + 2 * NB;
  gpre = ghist + NB;
  buf_key = ghist + (kClustered ? 2 * NB : 0);
  buf_idx = buf_key + S;
  list = reinterpret_cast<u64*>(buf_idx + S);
  cache = reinterpret_cast<Cached*>(smem + smem_layout_bytes(P::kHistSmem, S, rank_ok, 0, 0));

  for (int i = threadIdx.x; i < 2 * NB; i += T) hist[i] = 0;
  if (threadIdx.x == 0) {
    if constexpr (kClustered)
      if (rank == 0) mbar_init(&ctl->gather_bar);  // before the first cluster barrier
    ctl->out = 0;
    ctl->tie = 0;
    ctl->buf_n = 0;
    ctl->list_n = 0;
    ctl->max_local = 0;
    ctl->spec_overflow = 0;
  }
  pass = 0;
  action = kFilter;
  bin = 0;
  mask = 0;
  prefix = 0;
  coarse_bin = 0;
  buffering = false;
  gather = false;
  solo = false;
  spec = false;
  ties_only = false;
  stop_on_overflow = false;
  buffer_all_match = true;
  spec_bin = 0;
  bool buffered = false;
  u32 k_rem = static_cast<u32>(k);
  __syncthreads();
  trace_boundary(0);
  if (stop_at(0)) {
    leave_at_stop();
    return;
  }

  // Pass 0: the first digit's histogram over the slice; one CTA per row
  // with a buffer that can hold ~1.25 k speculates (speculative_pass0()).
  const bool try_spec = !kClustered && TOPK_SPECULATES(S, k) && nvec >= 4 * T;
  if (!try_spec) {
    visit_global(0, Pass0Op<true>{this});
  } else {
    speculative_pass0();
  }
  trace_boundary(1);
  if (stop_at(1)) {
    leave_at_stop();
    return;
  }

  int cur = 0;
  for (;;) {
    sync_row();  // hist[cur] is complete in every CTA working on the row
    if (pass == 0) trace_mark(23);
    const u32* g = hist + cur * NB;
    // The counters of the previous pass are no longer read (barrier
    // above); the barriers below order this before the next scan.
    if (kClustered && threadIdx.x == 0) {
      ctl->sel_n = 0;
      ctl->eq_n = 0;
    }
    if (kClustered && !solo) {
      merge_histograms(cur, rank);
      g = ghist;
    }
    if (pass == 0) trace_mark(24);
    // The other histogram is free once every CTA passed the barrier above
    // (its last readers were the previous round's merges): zero it during
    // the threshold search for the next pass to fill.
    const int nxt = cur ^ 1;
    hist_next = hist + nxt * NB;
    const ThresholdResult thr =
        find_threshold<T, NB, kClustered>(g, k_rem, &ctl->thr, ctl->scan_scratch, hist_next, gpre);
    bin = thr.bin;
    need = k_rem - thr.above;
    if constexpr (kClustered) {
      // Every CTA scans what it histogrammed: the pass's elements above the
      // threshold bin of the CTAs ranked below this one come first (their
      // number is thr.above_pre), and likewise within the bin.
      sel_base = static_cast<u32>(k) - k_rem + (solo ? 0u : thr.above_pre);
      eq_base = solo ? 0u : gpre[bin];
    }
    trace_boundary(2 + 2 * pass);
    if (stop_at(2 + 2 * pass)) {
      leave_at_stop();
      return;
    }

    if (pass == 0 && spec) {
      // Every element that can still be selected was captured iff the
      // buffer held them all and the real threshold bin is at or above
      // the estimate (kCaptureOnly: checked after pass 0 already).
      if (kCaptureOnly || (ctl->spec_overflow == 0 && bin >= spec_bin)) {
        buffered = true;
        buffer_all_match = false;
      } else {
        spec = false;
        if (threadIdx.x == 0) ctl->buf_n = 0;
        __syncthreads();
      }
    }
    if (pass == 0 && S > 0 && !buffered) {
      if (kClustered && thr.count <= static_cast<u32>(S)) {
        gather = true;  // the whole bin fits the leader's buffer
      } else if (kClustered) {
        // Buffer locally only if every CTA's share of the bin fits.
        if (threadIdx.x < static_cast<unsigned>(C))
          atomicMax(&ctl->max_local, Cl::load(Cl::map(hist + bin, threadIdx.x)));
        __syncthreads();
        buffering = ctl->max_local <= static_cast<u32>(S);
      } else {
        buffering = thr.count <= static_cast<u32>(S);
      }
    }

    if (pass == 0) trace_mark(20);
    const bool last = pass == kPasses - 1;
    if (thr.count == need) {
      action = kSelectAll;
      if constexpr (kClustered) sel_base += eq_base;  // the bin is selected too
      if (pass == 0)
        scan<true>(buffered);
      else
        scan<false>(buffered);
      break;
    }
    // Uniform-bin check. A threshold bin too large for the buffer costs
    // another scan of the row per remaining digit. When it holds a large
    // share of the row (all-equal rows, few distinct values), one of its
    // keys is sampled and the bin is checked for holding only that key (a
    // scan that stops at the first other key, so it costs little when the
    // bin is mixed). If it does, any `need` of its elements complete the
    // top-k, and the ties scan below finishes here. 128 x 131072 with
    // 8-bit digits read its row four times on such rows (3.1x its normal
    // time). Only where it saves a scan (two or more digits left) and in
    // the kernels whose registers allow it: one CTA per row, 32-bit keys,
    // exact first digit (16-bit keys have two digits; the check spilled
    // in the 1024-thread 16-bit and coarse-first-pass kernels).
    bool uniform = false;
    if constexpr (kUniformCheck)
      uniform = pass + 2 < kPasses && !buffered && !buffering && thr.count > static_cast<u32>(S) &&
                16ull * thr.count >= static_cast<unsigned long long>(len) && bin_is_uniform();
    if (last || uniform) {
      // With nothing above the threshold left to write (all-equal rows, few
      // distinct values), the scan ends once the ties are taken instead of
      // reading the rest of the row.
      action = kTies;
      ties_only = thr.above == 0;
      scan<false>(buffered);
      break;
    }
    if (rank_ok && buffered && pass >= a.rounds && thr.count <= static_cast<u32>(TOPK_RANK_CAP)) {
      action = kRankList;
      scan<false>(true);
      sync_row();
      rank_finish();
      break;
    }
    action = kFilter;
    // The gathered candidates' bytes: the leader's mbarrier completes when
    // all have arrived (stores that land first count all the same).
    if constexpr (kClustered)
      if (gather && rank == 0 && threadIdx.x == 0) mbar_expect_arrive(&ctl->gather_bar, 8u * thr.count);
    if (pass == 0)
      scan<true>(buffered);
    else
      scan<false>(buffered);
    if (pass == 0) trace_mark(21);
    if (kClustered && gather) {
      // The leader goes on alone once every candidate is in its buffer.
      // The others leave at a barrier the leader passes once they are
      // there (it keeps their shared memory alive while any CTA may still
      // read it: the merge's loads, or stores yet to land).
      if (rank != 0) {
        Cl::arrive_relaxed();
        Cl::wait();
        return;
      }
      lead_alone(thr.count);
      buffered = true;
    }
    buffered = buffered || buffering;
    buffering = false;
    if (kCoarse && pass == 0) {
      coarse_bin = bin;
    } else {
      const DigitBits b = digit_bits(pass);
      mask |= b.ones << b.lo;
      prefix |= bin << b.lo;
    }
    k_rem = need;
    cur = nxt;
    ++pass;
  }
  trace_mark(31);
  if (kClustered && !solo) Cl::sync();  // peers may still read this CTA's shared memory
  if (kClustered && solo) Cl::wait();   // pairs the arrive after the gather
}

}  // namespace topk
