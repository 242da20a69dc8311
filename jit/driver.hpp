// The CUDA driver API, loaded at run time with dlopen. Linking libcuda
// directly would make every binary (tests, the CLI, libtopk) fail to start on
// a machine without a GPU driver, such as CI; loading it lazily turns "no
// driver" into a Status the caller can act on.
#pragma once

#include <cuda.h>

#include <string>

#include "topk/status.hpp"

namespace topk::jit {

#define TOPK_DRIVER_FUNCTIONS(X)                                                                           \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount) X(cuDeviceGet) \
  X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDeviceGetUuid)                        \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxGetCurrent) X(cuCtxSetCurrent)           \
  X(cuCtxPushCurrent) X(cuCtxPopCurrent) X(cuCtxSynchronize) X(cuCtxGetDevice) X(cuModuleLoadData)          \
  X(cuModuleUnload) X(cuModuleGetFunction) X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuLaunchKernel)    \
  X(cuLaunchKernelEx) X(cuOccupancyMaxActiveClusters) X(cuOccupancyMaxActiveBlocksPerMultiprocessor)        \
  X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoD) X(cuMemsetD8) X(cuMemsetD32)   \
  X(cuMemsetD8Async)                                                                                      \
  X(cuMemGetInfo) X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamBeginCapture)      \
  X(cuStreamEndCapture) X(cuStreamIsCapturing) X(cuGraphInstantiate) X(cuGraphLaunch) X(cuGraphExecDestroy) \
  X(cuGraphDestroy) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventSynchronize)               \
  X(cuEventElapsedTime) X(cuPointerGetAttribute) X(cuStreamWaitEvent)

// Function pointers of the driver; each member has the name of the API
// function (cuda.h's versioned macros pick the right symbol).
struct Driver {
#define TOPK_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  TOPK_DRIVER_FUNCTIONS(TOPK_DRIVER_MEMBER)
#undef TOPK_DRIVER_MEMBER
};

// The driver, loaded and cuInit-ed once per process. kUnavailable (with the
// reason) when libcuda cannot be loaded or initialised, e.g. on a machine
// without a GPU. Thread-safe.
StatusOr<const Driver*> GetDriver();

// Status for a failed driver call: "cuModuleLoadData: CUDA_ERROR_...: text".
Status CudaStatus(CUresult r, const char* call, const char* file, int line);

}  // namespace topk::jit

// Calls a driver function through GetDriver() and returns its Status on
// failure; keeps the expression, file and line.
#define TOPK_CU(call_name, ...)                                                                 \
  do {                                                                                          \
    auto topk_drv_ = ::topk::jit::GetDriver();                                                  \
    if (!topk_drv_.ok()) return topk_drv_.status();                                             \
    CUresult topk_r_ = (*topk_drv_)->call_name(__VA_ARGS__);                                    \
    if (topk_r_ != CUDA_SUCCESS) return ::topk::jit::CudaStatus(topk_r_, #call_name, __FILE__, __LINE__); \
  } while (0)
