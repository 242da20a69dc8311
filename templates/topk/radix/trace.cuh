// Phase marks of the radix drivers (development aids): trace_mark(i) notes
// the time of trace slot i, trace_boundary(n) that of phase boundary n, and
// stop_at(n) says whether the kernel is to leave run() at boundary n. The
// call site returns itself (`if (stop_at(n)) { leave_at_stop(); return; }`),
// so that every exit of run() is visible where it happens. Without
// TOPK_TRACE and TOPK_STOP_AT the marks are empty and stop_at is a constant
// false: the compiler keeps nothing of them.
#pragma once

// Development aids, never defined by the generator (topk-probe --define):
// TOPK_STOP_AT makes the kernel return at phase boundary TOPK_STOP_AT, so
// that timing each prefix of the phases tells where a row's time goes (its
// output is wrong by design); TOPK_TRACE has thread 0 of CTA 0 note clock64()
// at every boundary in topk_trace[1 + boundary] (entry in [0], exit in [31]).
// Boundaries: 0 after the setup; 1 after pass 0's read of the row; 2 + 2p
// after pass p's threshold search; 3 + 2p after pass p's scan. Trace only:
// [20] pass 0's scan starts, [21] it ends, [22] the gather's barrier is past,
// [23] pass 0's barrier before the merge is past, [24] the merge is done.
#ifdef TOPK_TRACE
extern "C" {
__device__ unsigned long long topk_trace[32];
}
#endif

namespace topk {

// Notes clock64() in topk_trace[i] (thread 0 of CTA 0) under TOPK_TRACE.
__device__ __forceinline__ void trace_mark(int i) {
#ifdef TOPK_TRACE
  if (blockIdx.x == 0 && threadIdx.x == 0 && i < 32) topk_trace[i] = clock64();
#else
  (void)i;
#endif
}

// Notes phase boundary n (topk_trace[1 + n]).
__device__ __forceinline__ void trace_boundary(int n) { trace_mark(1 + n); }

// Whether the kernel leaves at phase boundary `boundary`: only under
// TOPK_STOP_AT, at that boundary.
__device__ constexpr bool stop_at(int boundary) {
#ifdef TOPK_STOP_AT
  return boundary == (TOPK_STOP_AT);
#else
  (void)boundary;
  return false;
#endif
}

}  // namespace topk
