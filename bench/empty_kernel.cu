#include "bench/empty_kernel.hpp"

namespace topk::bench {
namespace {
__global__ void EmptyKernel() {}
}  // namespace

cudaError_t LaunchEmptyKernel(cudaStream_t stream) {
  EmptyKernel<<<1, 32, 0, stream>>>();
  return cudaGetLastError();
}
}  // namespace topk::bench
