// Programmatic dependent launch (sm_90 and newer). A kernel launched with the
// programmatic-stream-serialization attribute may start while the kernel
// before it on the stream is still running; it must then wait for that
// kernel's completion and memory (griddepcontrol.wait) before it reads or
// writes global memory. Every kernel of this library calls pdl_begin() first:
// it lets the next kernel be scheduled once every CTA of this one has started
// (the next one still waits for this one to finish), then waits for the
// previous one. Without the attribute both instructions return at once; before
// sm_90 they are not emitted.
#pragma once

namespace topk {

__device__ __forceinline__ void pdl_begin() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace topk
