// The tuning cache seen from the jit layer: the cache as a store of
// compiled kernels, and a device as the cache records it. Kept here so that
// jit/ never depends on the cache.
#pragma once

#include <memory>

#include "cache/cache.hpp"
#include "jit/device.hpp"
#include "jit/kernel_store.hpp"

namespace topk::cache {

// Binaries in the cache's `binaries` table. The cache must outlive the store.
std::unique_ptr<jit::BinaryStore> MakeBinaryStore(Cache* cache);

// The device as the tuning cache records it.
DeviceRecord RecordOf(const jit::DeviceInfo& d);

}  // namespace topk::cache
