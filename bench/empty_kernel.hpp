// Empty kernels, launched by topk-runtime-cost as the floor of what any
// kernel launch costs the host.
#pragma once
#include <cuda_runtime.h>

namespace topk::bench {
// <<<1, 32>>> of a kernel without parameters (runtime API).
cudaError_t LaunchEmptyKernel(cudaStream_t stream);
// cuLaunchKernel (driver API, as Plan::Run launches) of an empty kernel that
// takes an 80-byte struct like TopkArgs; 0 or a CUresult, -1 when the
// function could not be looked up.
int LaunchEmptyKernelDriver(cudaStream_t stream);
}  // namespace topk::bench
