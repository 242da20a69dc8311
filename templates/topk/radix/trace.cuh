// Phase marks of the radix drivers (development aids): TOPK_MARK(i) notes the
// time of boundary i, TOPK_STOP(n) marks boundary n and, under TOPK_STOP_AT,
// returns from run() there. Both expand to nothing the compiler keeps unless
// the source defines TOPK_TRACE or TOPK_STOP_AT.
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
#define TOPK_MARK(i) \
  {                  \
    if (blockIdx.x == 0 && threadIdx.x == 0 && (i) < 32) topk_trace[i] = clock64(); \
  }
#else
#define TOPK_MARK(i) {}
#endif
#ifdef TOPK_STOP_AT
#define TOPK_STOP(n)                          \
  TOPK_MARK(1 + (n))                          \
  if (TOPK_STOP_AT == (n)) {                  \
    if (kClustered && !solo) Cl::sync();      \
    return;                                   \
  }
#else
#define TOPK_STOP(n) TOPK_MARK(1 + (n))
#endif
