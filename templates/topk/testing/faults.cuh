// Test-only kernels with the signature of a top-k variant that fail on
// purpose, so that tests can prove the tuner survives a crashing or hanging
// candidate. Never part of a tuning space.
#pragma once
#include "topk/args.h"
#include "topk/types.cuh"

namespace topk {

// MODE 0: illegal address. MODE 1: never returns. MODE 2: wrong answer
// (every index 0).
template <int MODE>
__global__ void fault_kernel(TopkArgs a) {
  await_prior_grids();
  if (MODE == 0) {
    volatile int* bad = reinterpret_cast<volatile int*>(a.out_idx) - (1ll << 40);
    *bad = 1;
  } else if (MODE == 1) {
    volatile int* p = a.out_idx;
    for (;;) {
      if (*p == 0x5eed5eed && a.k == -7) break;
      __nanosleep(1000);
    }
  } else {
    for (long long i = threadIdx.x; i < static_cast<long long>(a.batch) * a.k; i += blockDim.x)
      a.out_idx[i] = 0;
  }
}

}  // namespace topk
