// Where the runtime finds compiled kernels before it compiles one: the
// kernels shipped in the library, then the tuning cache's binaries, then the
// persistent kernel directory; NVRTC only when all three miss (its result
// goes to the tuning cache and the directory). Pure plumbing over
// jit::BinaryStore: tested without a GPU (kernel_store_test).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "jit/kernel_store.hpp"

namespace topk::runtime {

// The blob built by topk_ship_kernels and embedded at build time; empty when
// the library was built with TOPK_SHIP_KERNELS=OFF.
std::string_view ShippedKernelBlob();

// The kernel directory to use for Options::kernel_dir: "" follows
// DefaultKernelDir(), "off" disables (returns ""), anything else is itself.
std::string ResolveKernelDir(const std::string& option);

class KernelStores {
 public:
  // `tuning_cache` (may be null) must outlive this; `shipped_blob` empty and
  // `kernel_dir` "" leave those tiers out.
  KernelStores(jit::BinaryStore* tuning_cache, std::string_view shipped_blob, const std::string& kernel_dir);
  jit::BinaryStore* store() const { return chain_.get(); }

 private:
  std::unique_ptr<jit::BinaryStore> shipped_, dir_, chain_;
};

}  // namespace topk::runtime
