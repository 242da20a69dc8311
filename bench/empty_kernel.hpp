// An empty kernel, launched by topk-runtime-cost as the floor of what any
// kernel launch costs the host.
#pragma once
#include <cuda_runtime.h>

namespace topk::bench {
cudaError_t LaunchEmptyKernel(cudaStream_t stream);
}  // namespace topk::bench
