// Entry points of the kernel family. A variant is topk_kernel instantiated
// with one Policy (see generator/source.cpp); sort_rows_kernel orders a
// finished result on request.
#pragma once
#include "topk/args.h"
#include "topk/policy.cuh"
#include "topk/radix/radix_select.cuh"
#include "topk/sort_rows.cuh"
#include "topk/warp/warp_select.cuh"

namespace topk {

static_assert(sizeof(TopkArgs) == TOPK_ARGS_SIZE, "TopkArgs layout");

template <class P>
__global__ void __launch_bounds__(P::kBlock, P::kMinBlocks) topk_kernel(TopkArgs a) {
  await_prior_grids();
  if constexpr (P::kCluster == 0) {
    warp_topk<P>(a);
  } else {
    extern __shared__ __align__(16) unsigned char topk_smem[];
    __shared__ RowControl control;
    RowSelect<P> s;
    s.run(a, topk_smem, &control);
  }
}

}  // namespace topk
