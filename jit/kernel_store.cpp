#include "jit/kernel_store.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "jit/driver.hpp"

namespace topk::jit {
namespace {

class DirectoryStore final : public BinaryStore {
 public:
  explicit DirectoryStore(std::string dir) : dir_(std::move(dir)) {}
  StatusOr<std::optional<CompiledKernel>> Find(const std::string& hash, const std::string& arch,
                                               const std::string& options, const std::string& version) override {
    const std::string base = Base(hash, arch, options, version);
    std::ifstream bin(base + ".cubin", std::ios::binary), name(base + ".name"), log(base + ".log");
    if (!bin || !name) return std::optional<CompiledKernel>();
    CompiledKernel k;
    k.cubin.assign(std::istreambuf_iterator<char>(bin), std::istreambuf_iterator<char>());
    std::getline(name, k.lowered_name);
    std::getline(name, k.key);
    std::stringstream ls;
    ls << log.rdbuf();
    k.log = ls.str();
    k.usage = ParsePtxasLog(k.log);
    k.source_hash = hash;
    k.arch = arch;
    k.options = options;
    k.compiler_version = version;
    if (k.cubin.empty() || k.lowered_name.empty()) return std::optional<CompiledKernel>();
    return std::optional<CompiledKernel>(std::move(k));
  }
  Status Put(const CompiledKernel& k) override {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    const std::string base = Base(k.source_hash, k.arch, k.options, k.compiler_version);
    // Write to temporaries and rename, so a reader never sees half a file.
    {
      std::ofstream(base + ".log.tmp") << k.log;
      std::ofstream(base + ".name.tmp") << k.lowered_name << '\n' << k.key << '\n';
      std::ofstream bin(base + ".cubin.tmp", std::ios::binary);
      bin.write(k.cubin.data(), static_cast<std::streamsize>(k.cubin.size()));
      if (!bin) return Status(Code::kUnavailable, "DirectoryStore", "cannot write " + base + ".cubin.tmp");
    }
    for (const char* ext : {".log", ".name", ".cubin"}) std::filesystem::rename(base + ext + ".tmp", base + ext, ec);
    return Status::Ok();
  }

 private:
  std::string Base(const std::string& hash, const std::string& arch, const std::string& options,
                   const std::string& version) const {
    return dir_ + "/" + hash + "_" + arch + "_" + gen::HashHex(options + version).substr(0, 8);
  }
  std::string dir_;
};

}  // namespace

std::unique_ptr<BinaryStore> MakeDirectoryStore(const std::string& dir) { return std::make_unique<DirectoryStore>(dir); }

KernelStore::KernelStore(Compiler* compiler, BinaryStore* store, CompileOptions options)
    : compiler_(compiler), store_(store), options_(std::move(options)) {}

StatusOr<std::shared_ptr<const CompiledKernel>> KernelStore::Binary(const gen::KernelSource& src, bool* from_store) {
  if (from_store) *from_store = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = binaries_.find(src.hash);
    if (it != binaries_.end()) {
      if (from_store) *from_store = true;
      return it->second;
    }
  }
  const std::string version = compiler_->Version();
  if (store_) {
    std::optional<CompiledKernel> found;
    {
      std::lock_guard<std::mutex> lock(mu_);  // stores need not be thread-safe
      auto f = store_->Find(src.hash, options_.arch, options_.Key(), version);
      if (f.ok()) found = std::move(*f);
    }
    if (found) {
      auto k = std::make_shared<const CompiledKernel>(std::move(*found));
      std::lock_guard<std::mutex> lock(mu_);
      binaries_[src.hash] = k;
      if (from_store) *from_store = true;
      return k;
    }
  }
  auto compiled = compiler_->Compile(src, options_);  // outside the lock: compiles run in parallel
  if (!compiled.ok()) return compiled.status();
  auto k = std::make_shared<const CompiledKernel>(std::move(*compiled));
  std::lock_guard<std::mutex> lock(mu_);
  if (store_) (void)store_->Put(*k);  // best effort: a read-only cache still runs
  binaries_[src.hash] = k;
  return k;
}

StatusOr<CUfunction> KernelStore::Function(const gen::KernelSource& src, bool* from_store) {
  CUcontext ctx = nullptr;
  auto drv = GetDriver();
  if (!drv.ok()) return drv.status();
  (*drv)->cuCtxGetCurrent(&ctx);
  std::ostringstream key;
  key << src.hash << '@' << static_cast<const void*>(ctx);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = modules_.find(key.str());
    if (it != modules_.end()) {
      if (from_store) *from_store = true;
      return it->second->function();
    }
  }
  auto bin = Binary(src, from_store);
  if (!bin.ok()) return bin.status();
  auto mod = Module::Load((*bin)->cubin, (*bin)->lowered_name);
  if (!mod.ok()) return mod.status().WithContext("loading " + src.key);
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = modules_[key.str()];
  if (!slot) slot = std::move(*mod);
  return slot->function();
}

}  // namespace topk::jit
