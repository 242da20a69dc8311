#include "jit/kernel_store.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "jit/driver.hpp"

namespace topk::jit {
namespace {

constexpr std::string_view kKernelMagic = "TOPKKRN1";
constexpr std::string_view kBlobMagic = "TOPKBLB1";

void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void PutField(std::string* out, std::string_view f) {
  PutU64(out, f.size());
  out->append(f);
}

// Reads fields off the front of a byte string; every read checks the bounds.
struct Reader {
  std::string_view rest;
  bool U64(uint64_t* v) {
    if (rest.size() < 8) return false;
    *v = 0;
    for (int i = 0; i < 8; ++i) *v |= static_cast<uint64_t>(static_cast<unsigned char>(rest[i])) << (8 * i);
    rest.remove_prefix(8);
    return true;
  }
  bool Field(std::string_view* f) {
    uint64_t n = 0;
    if (!U64(&n) || n > rest.size()) return false;
    *f = rest.substr(0, n);
    rest.remove_prefix(n);
    return true;
  }
};

Status Corrupt(const std::string& what) { return Status(Code::kDataLoss, "ParseKernel", what); }

class DirectoryStore final : public BinaryStore {
 public:
  explicit DirectoryStore(std::string dir) : dir_(std::move(dir)) {}
  StatusOr<std::optional<CompiledKernel>> Find(const std::string& hash, const std::string& arch,
                                               const std::string& options, const std::string& version) override {
    std::ifstream in(Path(hash, arch, options, version), std::ios::binary);
    if (!in) return std::optional<CompiledKernel>();
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto k = ParseKernel(bytes);
    // Torn, foreign or (after a file-name collision) another kernel's: a
    // miss, so that the caller compiles and replaces it.
    if (!k.ok() || k->source_hash != hash || k->arch != arch || k->options != options ||
        k->compiler_version != version)
      return std::optional<CompiledKernel>();
    return std::optional<CompiledKernel>(std::move(*k));
  }
  Status Put(const CompiledKernel& k) override {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) return Status(Code::kUnavailable, "DirectoryStore", "cannot create " + dir_ + ": " + ec.message());
    const std::string path = Path(k.source_hash, k.arch, k.options, k.compiler_version);
    // A temporary of this process and thread alone, renamed over the entry:
    // readers see the old file or the whole new one, and concurrent writers
    // of one kernel (same bytes) never write into each other's file.
    static std::atomic<uint64_t> counter{0};
    std::ostringstream tmp;
    tmp << path << ".tmp." << ::getpid() << '.' << std::hash<std::thread::id>()(std::this_thread::get_id()) << '.'
        << counter++;
    const std::string bytes = SerializeKernel(k);
    {
      std::ofstream out(tmp.str(), std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      out.close();
      if (!out) {
        std::filesystem::remove(tmp.str(), ec);
        return Status(Code::kUnavailable, "DirectoryStore", "cannot write " + tmp.str());
      }
    }
    std::filesystem::rename(tmp.str(), path, ec);
    if (ec) {
      std::error_code ignored;
      std::filesystem::remove(tmp.str(), ignored);
      return Status(Code::kUnavailable, "DirectoryStore", "cannot rename to " + path + ": " + ec.message());
    }
    return Status::Ok();
  }

 private:
  std::string Path(const std::string& hash, const std::string& arch, const std::string& options,
                   const std::string& version) const {
    return dir_ + "/" + hash + "_" + arch + "_" + gen::HashHex(options + '\n' + version) + ".kernel";
  }
  std::string dir_;
};

// "sm_86" -> "sm_80": the first architecture of a major version, or "" when
// `arch` is that architecture already or not a plain "sm_<digits>" name.
std::string FamilyBase(const std::string& arch) {
  if (arch.size() < 5 || arch.compare(0, 3, "sm_") != 0) return "";
  for (size_t i = 3; i < arch.size(); ++i)
    if (arch[i] < '0' || arch[i] > '9') return "";
  if (arch.back() == '0') return "";
  return arch.substr(0, arch.size() - 1) + "0";
}

class BlobStore final : public BinaryStore {
 public:
  // Indexes the blob without copying or checking it: Library::Open builds
  // one per process, and only the kernels a process uses are parsed (and
  // their checksums checked) by Find.
  explicit BlobStore(std::string_view blob) {
    if (blob.substr(0, kBlobMagic.size()) != kBlobMagic) return;
    Reader r{blob.substr(kBlobMagic.size())};
    uint64_t n = 0;
    if (!r.U64(&n)) return;
    std::map<std::string, std::string_view> index;
    for (uint64_t i = 0; i < n; ++i) {
      std::string_view entry, key, hash, arch, options;
      if (!r.Field(&entry) || entry.substr(0, kKernelMagic.size()) != kKernelMagic) return;  // all or nothing
      Reader f{entry.substr(kKernelMagic.size())};
      if (!f.Field(&key) || !f.Field(&hash) || !f.Field(&arch) || !f.Field(&options)) return;
      index.emplace(std::string(hash) + '\n' + std::string(arch) + '\n' + std::string(options), entry);
    }
    index_ = std::move(index);
  }
  StatusOr<std::optional<CompiledKernel>> Find(const std::string& hash, const std::string& arch,
                                               const std::string& options, const std::string& version) override {
    (void)version;
    auto it = index_.find(hash + '\n' + arch + '\n' + options);
    if (it == index_.end()) {
      // A cubin runs on any GPU of its major version with the same or a
      // higher minor one (sm_80 code on sm_86 and sm_89, sm_100 on sm_103,
      // sm_120 on sm_121), so the shipped sm_X0 kernels serve the whole
      // family instead of a first-call NVRTC compile. Arch-specific targets
      // ("sm_90a") carry no such promise and are matched exactly.
      const std::string base = FamilyBase(arch);
      const std::string flag = "-arch=" + arch;
      const size_t at = options.find(flag);
      if (base.empty() || at == std::string::npos) return std::optional<CompiledKernel>();
      std::string base_options = options;
      base_options.replace(at, flag.size(), "-arch=" + base);
      it = index_.find(hash + '\n' + base + '\n' + base_options);
      if (it == index_.end()) return std::optional<CompiledKernel>();
    }
    auto k = ParseKernel(it->second);
    if (!k.ok()) return std::optional<CompiledKernel>();
    return std::optional<CompiledKernel>(std::move(*k));
  }
  Status Put(const CompiledKernel& k) override {
    (void)k;
    return Status::Ok();
  }

 private:
  std::map<std::string, std::string_view> index_;
};

class ChainStore final : public BinaryStore {
 public:
  explicit ChainStore(std::vector<BinaryStore*> stores) {
    for (BinaryStore* s : stores)
      if (s) stores_.push_back(s);
  }
  StatusOr<std::optional<CompiledKernel>> Find(const std::string& hash, const std::string& arch,
                                               const std::string& options, const std::string& version) override {
    for (size_t i = 0; i < stores_.size(); ++i) {
      auto f = stores_[i]->Find(hash, arch, options, version);
      if (!f.ok() || !f->has_value()) continue;  // an unreadable store is a miss: the next may have it
      for (size_t j = 0; j < i; ++j) (void)stores_[j]->Put(**f);  // best effort, as KernelStore's own write
      return f;
    }
    return std::optional<CompiledKernel>();
  }
  Status Put(const CompiledKernel& k) override {
    Status first = Status::Ok();
    for (BinaryStore* s : stores_) {
      Status st = s->Put(k);
      if (!st.ok() && first.ok()) first = st;
    }
    return first;
  }

 private:
  std::vector<BinaryStore*> stores_;
};

}  // namespace

std::string SerializeKernel(const CompiledKernel& k) {
  std::string out(kKernelMagic);
  for (std::string_view f : {std::string_view(k.key), std::string_view(k.source_hash), std::string_view(k.arch),
                             std::string_view(k.options), std::string_view(k.compiler_version),
                             std::string_view(k.lowered_name), std::string_view(k.log)})
    PutField(&out, f);
  PutField(&out, std::string_view(k.cubin.data(), k.cubin.size()));
  out += gen::HashHex(out);
  return out;
}

StatusOr<CompiledKernel> ParseKernel(std::string_view bytes) {
  if (bytes.size() < kKernelMagic.size() + 16 || bytes.substr(0, kKernelMagic.size()) != kKernelMagic)
    return Corrupt("not a compiled kernel");
  const std::string_view body = bytes.substr(0, bytes.size() - 16);
  if (gen::HashHex(std::string(body)) != bytes.substr(bytes.size() - 16)) return Corrupt("checksum mismatch");
  Reader r{body.substr(kKernelMagic.size())};
  std::string_view f[8];
  for (std::string_view& x : f)
    if (!r.Field(&x)) return Corrupt("truncated");
  if (!r.rest.empty()) return Corrupt("trailing bytes");
  CompiledKernel k;
  k.key = f[0];
  k.source_hash = f[1];
  k.arch = f[2];
  k.options = f[3];
  k.compiler_version = f[4];
  k.lowered_name = f[5];
  k.log = f[6];
  k.cubin.assign(f[7].begin(), f[7].end());
  if (k.cubin.empty() || k.lowered_name.empty()) return Corrupt("no binary");
  k.usage = ParsePtxasLog(k.log);
  return k;
}

std::string WriteKernelBlob(const std::vector<CompiledKernel>& kernels) {
  std::string out(kBlobMagic);
  PutU64(&out, kernels.size());
  for (const CompiledKernel& k : kernels) PutField(&out, SerializeKernel(k));
  return out;
}

StatusOr<std::vector<CompiledKernel>> ReadKernelBlob(std::string_view blob) {
  if (blob.substr(0, kBlobMagic.size()) != kBlobMagic)
    return Status(Code::kDataLoss, "ReadKernelBlob", "not a kernel blob");
  Reader r{blob.substr(kBlobMagic.size())};
  uint64_t n = 0;
  if (!r.U64(&n)) return Status(Code::kDataLoss, "ReadKernelBlob", "truncated");
  std::vector<CompiledKernel> out;
  for (uint64_t i = 0; i < n; ++i) {
    std::string_view f;
    if (!r.Field(&f)) return Status(Code::kDataLoss, "ReadKernelBlob", "truncated at kernel " + std::to_string(i));
    auto k = ParseKernel(f);
    if (!k.ok()) return k.status().WithContext("kernel " + std::to_string(i) + " of the blob");
    out.push_back(std::move(*k));
  }
  return out;
}

std::unique_ptr<BinaryStore> MakeDirectoryStore(const std::string& dir) { return std::make_unique<DirectoryStore>(dir); }
std::unique_ptr<BinaryStore> MakeBlobStore(std::string_view blob) { return std::make_unique<BlobStore>(blob); }
std::unique_ptr<BinaryStore> MakeChainStore(std::vector<BinaryStore*> stores) {
  return std::make_unique<ChainStore>(std::move(stores));
}

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
