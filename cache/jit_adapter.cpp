#include "cache/jit_adapter.hpp"

#include <nlohmann/json.hpp>

namespace topk::cache {
namespace {

class CacheStore final : public jit::BinaryStore {
 public:
  explicit CacheStore(Cache* c) : cache_(c) {}
  StatusOr<std::optional<jit::CompiledKernel>> Find(const std::string& hash, const std::string& arch,
                                               const std::string& options, const std::string& version) override {
    auto b = cache_->FindBinary(hash, arch, options, version);
    if (!b.ok()) return b.status();
    if (!b->has_value()) return std::optional<jit::CompiledKernel>();
    const BinaryRecord& r = **b;
    jit::CompiledKernel k;
    k.key = r.kernel_key;
    k.source_hash = r.source_hash;
    k.arch = r.arch;
    k.options = r.options;
    k.compiler_version = r.compiler_version;
    k.lowered_name = r.lowered_name;
    k.cubin = r.cubin;
    k.log = r.log;
    k.usage = jit::ParsePtxasLog(r.log);
    k.compile_ms = r.compile_ms;
    return std::optional<jit::CompiledKernel>(std::move(k));
  }
  Status Put(const jit::CompiledKernel& k) override {
    BinaryRecord r;
    r.source_hash = k.source_hash;
    r.arch = k.arch;
    r.options = k.options;
    r.compiler_version = k.compiler_version;
    r.kernel_key = k.key;
    r.lowered_name = k.lowered_name;
    r.cubin = k.cubin;
    r.registers = k.usage.known ? k.usage.registers : -1;
    r.spill_stores = k.usage.spill_stores;
    r.spill_loads = k.usage.spill_loads;
    r.stack_bytes = k.usage.stack_bytes;
    r.compile_ms = k.compile_ms;
    r.log = k.log;
    return cache_->PutBinary(r);
  }

 private:
  Cache* cache_;
};

}  // namespace

std::unique_ptr<jit::BinaryStore> MakeBinaryStore(Cache* cache) { return std::make_unique<CacheStore>(cache); }

DeviceRecord RecordOf(const jit::DeviceInfo& d) {
  DeviceRecord r;
  r.fingerprint = d.Fingerprint();
  r.name = d.name;
  r.cc_major = d.cc_major;
  r.cc_minor = d.cc_minor;
  r.sm_count = d.sm_count;
  r.l2_bytes = d.l2_bytes;
  r.driver_version = d.driver_version;
  r.compiler_version = d.compiler_version;
  r.info_json = d.ToJson().dump();
  return r;
}

}  // namespace topk::cache
