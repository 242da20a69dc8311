// The persistent kernel stores (jit/kernel_store.hpp) and the runtime's
// lookup order over them (runtime/kernels.hpp): no GPU, a fake compiler.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "cache/cache.hpp"
#include "cache/jit_adapter.hpp"
#include "generator/family.hpp"
#include "jit/compiler.hpp"
#include "jit/device.hpp"
#include "jit/kernel_store.hpp"
#include "runtime/kernels.hpp"
#include "support/fake_compiler.hpp"
#include "support/test_support.hpp"
#include "topk/topk.hpp"

namespace topk {
namespace {

namespace fs = std::filesystem;

jit::CompiledKernel Kernel(const std::string& hash, size_t cubin_bytes = 4096) {
  jit::CompiledKernel k;
  k.key = "kernel_" + hash;
  k.source_hash = hash;
  k.arch = "sm_90";
  k.options = jit::CompileOptions{}.Key();
  k.compiler_version = "fake 1.0";
  k.lowered_name = "_Z6kernel" + hash;
  k.log = "ptxas info    : Used 40 registers";
  for (size_t i = 0; i < cubin_bytes; ++i) k.cubin.push_back(static_cast<char>(i * 7 + hash.size()));
  return k;
}

std::optional<jit::CompiledKernel> Find(jit::BinaryStore& s, const jit::CompiledKernel& k) {
  auto f = s.Find(k.source_hash, k.arch, k.options, k.compiler_version);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? *f : std::nullopt;
}

std::vector<fs::path> Files(const std::string& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path());
  return out;
}

// The log of a stored binary comes from a cache or a kernel directory, not
// only from ptxas: a number too large for an int leaves the usage unknown
// instead of throwing (which crossed the C API and aborted the process).
TEST(KernelStoreTest, PtxasLogParsesAndRejectsNumbersTooLarge) {
  const jit::ResourceUsage u = jit::ParsePtxasLog(
      "ptxas info    : Used 64 registers, used 1 barriers, 2048 bytes smem\n"
      "ptxas info    : 48 bytes stack frame, 44 bytes spill stores, 40 bytes spill loads\n");
  EXPECT_TRUE(u.known);
  EXPECT_EQ(u.registers, 64);
  EXPECT_EQ(u.stack_bytes, 48);
  EXPECT_EQ(u.spill_stores, 44);
  EXPECT_EQ(u.spill_loads, 40);
  EXPECT_EQ(u.static_smem, 2048);
  for (const char* log : {"ptxas info    : Used 99999999999 registers",
                          "Used 12 registers\n99999999999 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
                          "Used 12 registers, 3000000000 bytes smem"}) {
    jit::ResourceUsage bad;
    ASSERT_NO_THROW(bad = jit::ParsePtxasLog(log)) << log;
    EXPECT_FALSE(bad.known) << log;
    EXPECT_EQ(bad.registers, 0) << log;
  }
  EXPECT_FALSE(jit::ParsePtxasLog("no ptxas lines").known);
}

TEST(KernelStoreTest, SerializedKernelRoundTripsAndEveryTruncationIsRejected) {
  const jit::CompiledKernel k = Kernel("00112233aabbccdd", 300);
  const std::string bytes = jit::SerializeKernel(k);
  auto back = jit::ParseKernel(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->cubin, k.cubin);
  EXPECT_EQ(back->lowered_name, k.lowered_name);
  EXPECT_EQ(back->key, k.key);
  EXPECT_EQ(back->usage.registers, 40);
  for (size_t n = 0; n < bytes.size(); ++n) EXPECT_FALSE(jit::ParseKernel(bytes.substr(0, n)).ok()) << n;
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 1;
  EXPECT_FALSE(jit::ParseKernel(flipped).ok());
}

TEST(KernelStoreTest, DirectoryStoreIgnoresTornFilesAndReplacesThem) {
  const std::string dir = testing::TempPath("kernels");
  auto store = jit::MakeDirectoryStore(dir);
  const jit::CompiledKernel k = Kernel("0123456789abcdef");
  ASSERT_TRUE(store->Put(k).ok());
  ASSERT_TRUE(Find(*store, k).has_value());
  auto files = Files(dir);
  ASSERT_EQ(files.size(), 1u);  // no temporaries left behind
  // Torn (a writer killed mid-way on a file system without atomic rename),
  // empty and foreign files are misses, not errors.
  const auto size = fs::file_size(files[0]);
  for (uintmax_t keep : {uintmax_t{0}, uintmax_t{5}, size / 2, size - 1}) {
    fs::resize_file(files[0], keep);
    EXPECT_FALSE(Find(*store, k).has_value()) << keep;
  }
  std::ofstream(files[0], std::ios::trunc) << "not a kernel";
  EXPECT_FALSE(Find(*store, k).has_value());
  ASSERT_TRUE(store->Put(k).ok());
  auto again = Find(*store, k);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->cubin, k.cubin);
  // Another compiler version or arch is another entry.
  jit::CompiledKernel other = k;
  other.compiler_version = "fake 2.0";
  EXPECT_FALSE(Find(*store, other).has_value());
}

TEST(KernelStoreTest, DirectoryStoreSurvivesConcurrentThreads) {
  const std::string dir = testing::TempPath("kernels");
  const jit::CompiledKernel k = Kernel("feedfacecafebeef", 256 * 1024);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      auto store = jit::MakeDirectoryStore(dir);  // one per thread, as separate processes have
      for (int i = 0; i < 20; ++i) {
        if (!store->Put(k).ok()) ++bad;
        auto f = store->Find(k.source_hash, k.arch, k.options, k.compiler_version);
        // Readers see the whole kernel or nothing, never a part.
        if (!f.ok() || (f->has_value() && (*f)->cubin != k.cubin)) ++bad;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(Files(dir).size(), 1u);
  auto store = jit::MakeDirectoryStore(dir);
  EXPECT_TRUE(Find(*store, k).has_value());
}

TEST(KernelStoreTest, DirectoryStoreSurvivesConcurrentProcesses) {
  const std::string dir = testing::TempPath("kernels");
  const jit::CompiledKernel k = Kernel("0badc0dedeadbeef", 256 * 1024);
  std::vector<pid_t> children;
  for (int c = 0; c < 4; ++c) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Only async-signal-safe exits from here: no gtest assertions.
      auto store = jit::MakeDirectoryStore(dir);
      int bad = 0;
      for (int i = 0; i < 20; ++i) {
        if (!store->Put(k).ok()) ++bad;
        auto f = store->Find(k.source_hash, k.arch, k.options, k.compiler_version);
        if (!f.ok() || (f->has_value() && (*f)->cubin != k.cubin)) ++bad;
      }
      _exit(bad == 0 ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  EXPECT_EQ(Files(dir).size(), 1u);
  auto store = jit::MakeDirectoryStore(dir);
  EXPECT_TRUE(Find(*store, k).has_value());
}

TEST(KernelStoreTest, DirectoryStoreReportsAWriteItCannotMake) {
  const std::string file = testing::TempPath("not-a-dir");
  std::ofstream(file) << "x";
  auto store = jit::MakeDirectoryStore(file + "/kernels");
  EXPECT_FALSE(store->Put(Kernel("1111222233334444")).ok());
  EXPECT_FALSE(Find(*store, Kernel("1111222233334444")).has_value());
}

TEST(KernelStoreTest, BlobStoreMatchesAnyCompilerVersionAndIgnoresACorruptBlob) {
  const jit::CompiledKernel a = Kernel("aaaaaaaaaaaaaaaa"), b = Kernel("bbbbbbbbbbbbbbbb");
  const std::string blob = jit::WriteKernelBlob({a, b});
  auto all = jit::ReadKernelBlob(blob);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 2u);
  auto store = jit::MakeBlobStore(blob);
  auto f = store->Find(a.source_hash, a.arch, a.options, "nvrtc 99.9");
  ASSERT_TRUE(f.ok() && f->has_value());
  EXPECT_EQ((*f)->cubin, a.cubin);
  EXPECT_FALSE(Find(*store, Kernel("cccccccccccccccc")).has_value());
  const std::string torn_blob = blob.substr(0, blob.size() - 3);  // the store keeps views into it
  auto torn = jit::MakeBlobStore(torn_blob);
  EXPECT_FALSE(Find(*torn, a).has_value());
  // A damaged kernel is a miss; the others still serve.
  std::string damaged = blob;
  damaged[damaged.size() - 100] ^= 1;  // inside b's cubin, the last entry
  auto partly = jit::MakeBlobStore(damaged);
  EXPECT_TRUE(Find(*partly, a).has_value());
  EXPECT_FALSE(Find(*partly, b).has_value());
  EXPECT_FALSE(jit::ReadKernelBlob(blob.substr(0, blob.size() - 3)).ok());
}

// Shipped sm_X0 kernels serve every GPU of major version X with a higher
// minor version (binary compatibility of cubins), nothing across majors.
TEST(KernelStoreTest, BlobStoreServesLaterMinorVersionsOfTheSameMajor) {
  auto at = [](const jit::CompiledKernel& base, const std::string& arch) {
    jit::CompiledKernel k = base;
    k.arch = arch;
    jit::CompileOptions o;
    o.arch = arch;
    k.options = o.Key();
    return k;
  };
  const jit::CompiledKernel k = Kernel("abababababababab");
  const std::string blob = jit::WriteKernelBlob({at(k, "sm_80"), at(k, "sm_100")});
  auto store = jit::MakeBlobStore(blob);
  for (const char* arch : {"sm_80", "sm_86", "sm_87", "sm_89", "sm_100", "sm_103"}) {
    auto f = Find(*store, at(k, arch));
    ASSERT_TRUE(f.has_value()) << arch;
    EXPECT_EQ(f->arch.substr(0, 4), std::string(arch).substr(0, 4)) << arch;  // sm_8x from sm_80, sm_10x from sm_100
    EXPECT_EQ(f->cubin, k.cubin) << arch;
  }
  for (const char* arch : {"sm_90", "sm_90a", "sm_75", "sm_120", "sm_121", "sm_100a"})
    EXPECT_FALSE(Find(*store, at(k, arch)).has_value()) << arch;
}

std::vector<std::string> ShippedArchs() {
  std::vector<std::string> out;
  std::stringstream s(TOPK_TEST_SHIP_ARCHS);
  std::string a;
  while (std::getline(s, a, ';'))
    if (!a.empty()) out.push_back(a);
  return out;
}

TEST(ShippedKernelsTest, BlobHoldsEveryDefaultKernelOfEveryShippedArch) {
  const std::string_view blob = runtime::ShippedKernelBlob();
  if (blob.empty()) GTEST_SKIP() << "built with TOPK_SHIP_KERNELS=OFF";
  auto all = jit::ReadKernelBlob(blob);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  auto store = jit::MakeBlobStore(blob);
  size_t expected = 0;
  for (const std::string& name : ShippedArchs()) {
    auto arch = gen::Arch::FromName(name);
    ASSERT_TRUE(arch.ok());
    jit::CompileOptions o;
    o.arch = name;
    for (const gen::KernelSource& src : gen::DefaultKernelSources(*arch)) {
      ++expected;
      auto f = store->Find(src.hash, name, o.Key(), jit::NvrtcVersion());
      ASSERT_TRUE(f.ok());
      ASSERT_TRUE(f->has_value()) << src.key << " for " << name << " is not shipped";
      EXPECT_EQ((*f)->key, src.key);
      EXPECT_FALSE((*f)->cubin.empty());
    }
  }
  EXPECT_EQ(all->size(), expected) << "the blob holds kernels the defaults do not use";
}

// The runtime's order: shipped, then the tuning cache, then the kernel
// directory, then the compiler; what is compiled lands in the cache and the
// directory, and a directory hit fills a cache that lacks the binary.
TEST(RuntimeKernelsTest, LookupOrderIsShippedThenCacheThenDirectoryThenCompiler) {
  Problem p;
  p.n = 65536;
  p.k = 64;
  const gen::Arch arch = gen::Arch::Sm90();
  const std::vector<gen::KernelSource> srcs = gen::GenerateSources(gen::DefaultConfig(p, arch));
  ASSERT_EQ(srcs.size(), 1u);
  const gen::KernelSource shipped_src = srcs[0];
  const gen::KernelSource other_src = gen::SortSource(DType::kF16);
  jit::CompileOptions o;
  o.arch = "sm_90";

  testing::FakeCompiler fake;
  auto shipped = fake.Compile(shipped_src, o);
  ASSERT_TRUE(shipped.ok());
  shipped->compiler_version = "nvrtc of the build";  // shipped kernels match any version
  const std::string blob = jit::WriteKernelBlob({*shipped});
  const std::string dir = testing::TempPath("kernels");
  auto db = cache::Cache::Open(testing::TempPath("tuning.db"));
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  auto cache_store = cache::MakeBinaryStore(db->get());

  {
    runtime::KernelStores stores(cache_store.get(), blob, dir);
    jit::KernelStore ks(&fake, stores.store(), o);
    bool from_store = false;
    ASSERT_TRUE(ks.Binary(shipped_src, &from_store).ok());
    EXPECT_TRUE(from_store);
    EXPECT_EQ(fake.compiles.load(), 1);  // the one above, for the blob
    EXPECT_TRUE(Files(dir).empty());     // shipped kernels are not copied
    ASSERT_TRUE(ks.Binary(other_src, &from_store).ok());
    EXPECT_FALSE(from_store);
    EXPECT_EQ(fake.compiles.load(), 2);
    EXPECT_EQ(Files(dir).size(), 1u);
    auto in_cache = (*db)->FindBinary(other_src.hash, "sm_90", o.Key(), fake.Version());
    ASSERT_TRUE(in_cache.ok());
    EXPECT_TRUE(in_cache->has_value());
  }
  {
    // A later process with a fresh tuning cache: the directory serves the
    // kernel and fills the cache once.
    auto db2 = cache::Cache::Open(testing::TempPath("tuning.db"));
    ASSERT_TRUE(db2.ok());
    auto cache2 = cache::MakeBinaryStore(db2->get());
    runtime::KernelStores stores(cache2.get(), blob, dir);
    jit::KernelStore ks(&fake, stores.store(), o);
    bool from_store = false;
    ASSERT_TRUE(ks.Binary(other_src, &from_store).ok());
    EXPECT_TRUE(from_store);
    EXPECT_EQ(fake.compiles.load(), 2);
    auto filled = (*db2)->FindBinary(other_src.hash, "sm_90", o.Key(), fake.Version());
    ASSERT_TRUE(filled.ok());
    EXPECT_TRUE(filled->has_value());
  }
  {
    // No tuning cache, no shipped kernels, a torn directory entry: compiled
    // again and the entry replaced.
    fs::resize_file(Files(dir)[0], 10);
    runtime::KernelStores stores(nullptr, {}, dir);
    jit::KernelStore ks(&fake, stores.store(), o);
    bool from_store = true;
    ASSERT_TRUE(ks.Binary(other_src, &from_store).ok());
    EXPECT_FALSE(from_store);
    EXPECT_EQ(fake.compiles.load(), 3);
    ASSERT_TRUE(ks.Binary(shipped_src, &from_store).ok());
    EXPECT_EQ(fake.compiles.load(), 4);
    runtime::KernelStores later(nullptr, {}, dir);
    jit::KernelStore ks2(&fake, later.store(), o);
    ASSERT_TRUE(ks2.Binary(other_src, &from_store).ok());
    EXPECT_TRUE(from_store);
    EXPECT_EQ(fake.compiles.load(), 4);
  }
}

TEST(RuntimeKernelsTest, KernelDirFollowsTheOptionAndTheEnvironment) {
  const char* saved[] = {std::getenv("TOPK_TUNE_KERNEL_DIR"), std::getenv("XDG_CACHE_HOME"), std::getenv("HOME")};
  const std::string keep[] = {saved[0] ? saved[0] : "", saved[1] ? saved[1] : "", saved[2] ? saved[2] : ""};
  setenv("HOME", "/home/u", 1);
  unsetenv("TOPK_TUNE_KERNEL_DIR");
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(DefaultKernelDir(), "/home/u/.cache/topk-tune/kernels");
  setenv("XDG_CACHE_HOME", "relative", 1);
  EXPECT_EQ(DefaultKernelDir(), "/home/u/.cache/topk-tune/kernels");
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(DefaultKernelDir(), "/xdg/topk-tune/kernels");
  EXPECT_EQ(runtime::ResolveKernelDir(""), "/xdg/topk-tune/kernels");
  EXPECT_EQ(runtime::ResolveKernelDir("off"), "");
  EXPECT_EQ(runtime::ResolveKernelDir("/k"), "/k");
  setenv("TOPK_TUNE_KERNEL_DIR", "/env", 1);
  EXPECT_EQ(DefaultKernelDir(), "/env");
  setenv("TOPK_TUNE_KERNEL_DIR", "off", 1);
  EXPECT_EQ(DefaultKernelDir(), "");
  EXPECT_EQ(runtime::ResolveKernelDir(""), "");
  const char* names[] = {"TOPK_TUNE_KERNEL_DIR", "XDG_CACHE_HOME", "HOME"};
  for (int i = 0; i < 3; ++i) {
    if (saved[i])
      setenv(names[i], keep[i].c_str(), 1);
    else
      unsetenv(names[i]);
  }
}

// The device record's cluster counts survive JSON (the worker's hello, the
// devices command) and read leniently: a record without them, or with a
// malformed list, has none ("not asked": the defaults fall back to the fit).
TEST(DeviceInfoTest, ClusterCountsRoundTripThroughJsonAndReadLeniently) {
  jit::DeviceInfo d;
  d.name = "GPU";
  d.cc_major = 9;
  d.sm_count = 132;
  d.resident_clusters = {132, 66, 30, 15, 0};
  d.cluster_query_error = "";
  auto back = jit::DeviceInfo::FromJson(d.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->resident_clusters, d.resident_clusters);
  EXPECT_EQ(back->ToArch().max_resident_clusters(8), 15);
  EXPECT_EQ(back->ToArch().max_resident_clusters(16), 0);  // answered: none run
  const std::array<int, 5> none{-1, -1, -1, -1, -1};
  for (const char* text : {R"({"name": "GPU", "cc_major": 9, "cc_minor": 0})",
                           R"({"name": "GPU", "cc_major": 9, "cc_minor": 0, "resident_clusters": [1, 2]})",
                           R"({"name": "GPU", "cc_major": 9, "cc_minor": 0, "resident_clusters": null})"}) {
    auto j = jit::DeviceInfo::FromJson(nlohmann::json::parse(text));
    ASSERT_TRUE(j.ok()) << text << ": " << j.status().ToString();
    EXPECT_EQ(j->resident_clusters, none) << text;
    EXPECT_EQ(j->ToArch().max_resident_clusters(16), 132 * 7 / 132) << text;  // the fit
  }
  d.resident_clusters = none;
  d.cluster_query_error = "probe failed";
  back = jit::DeviceInfo::FromJson(d.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->cluster_query_error, "probe failed");
}

}  // namespace
}  // namespace topk
