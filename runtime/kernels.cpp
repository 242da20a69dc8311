#include "runtime/kernels.hpp"

#include "topk/topk.hpp"

namespace topk::runtime {

std::string ResolveKernelDir(const std::string& option) {
  if (option == "off") return "";
  if (option.empty()) return DefaultKernelDir();
  return option;
}

KernelStores::KernelStores(jit::BinaryStore* tuning_cache, std::string_view shipped_blob,
                           const std::string& kernel_dir) {
  if (!shipped_blob.empty()) shipped_ = jit::MakeBlobStore(shipped_blob);
  if (!kernel_dir.empty()) dir_ = jit::MakeDirectoryStore(kernel_dir);
  // Shipped first (in memory, always current for this build); the tuning
  // cache before the directory so that a hit in the directory fills the
  // cache once (the chain writes hits back to earlier stores) and the cache
  // file stays complete for the devices it was tuned on.
  chain_ = jit::MakeChainStore({shipped_.get(), tuning_cache, dir_.get()});
}

}  // namespace topk::runtime
