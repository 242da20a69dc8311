// The families' kernels compile with NVRTC, with no GPU, for sm_90 and (the
// ones without clusters) sm_80, for fp32, fp16 and bf16. Which of them
// (TOPK_COMPILE_ALL): unset or "cover" (CI), the shipped defaults (taken
// from the build's blob) and then, greedily, more kernels until every knob
// value that a family enumerates has been compiled; "pairs", until every
// pair of two knobs' values has (sm_90; sm_80 as "cover"); "full", every
// enumerated kernel (655, about 15 minutes on 2 cores). The GPU kernel suite
// compiles and runs every sm_90 kernel on the GPU machine. Prints the counts,
// the compile time and the register / spill report, and keeps the sm_90
// cubins in $TOPK_TEST_TMP/cubins for the GPU tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "generator/config.hpp"
#include "generator/family.hpp"
#include "generator/radix.hpp"
#include "generator/source.hpp"
#include "jit/compiler.hpp"
#include "jit/kernel_store.hpp"
#include "runtime/kernels.hpp"
#include "support/kernel_cover.hpp"
#include "support/test_support.hpp"

namespace topk {
namespace {

std::string CubinDir() {
  const char* tmp = std::getenv("TOPK_TEST_TMP");
  return std::string(tmp && *tmp ? tmp : "/tmp/topk-tests") + "/cubins";
}

struct Compiled {
  std::string key;
  std::string arch;
  jit::ResourceUsage usage;
  double ms = 0;
  bool stored = false;  // compiled before: by the build (the shipped kernels) or an earlier run
};

// NVRTC on every kernel of `srcs` for `arch`, but for those the build
// already compiled with the same NVRTC, source hash and options: the
// default kernels shipped in libtopk (runtime::ShippedKernelBlob), whose
// entries keep NVRTC's log, so their registers and spills are the build's
// report. That is 147 of the 683 kernels, about 13% of NVRTC's time here
// (194 of 1455 s of compiles on a 2-core machine). `store` (may be null) is
// consulted first (an earlier run's binaries) and receives every binary.
std::vector<Compiled> CompileMany(const std::vector<gen::KernelSource>& srcs, const std::string& arch,
                                  jit::BinaryStore* store, int* failures) {
  auto compiler = jit::MakeNvrtcCompiler();
  jit::CompileOptions o;
  o.arch = arch;
  auto shipped = jit::MakeBlobStore(runtime::ShippedKernelBlob());
  auto chain = jit::MakeChainStore({store, shipped.get()});
  jit::KernelStore ks(compiler.get(), chain.get(), o);
  std::vector<Compiled> out(srcs.size());
  std::atomic<size_t> next{0};
  std::atomic<int> failed{0};
  std::mutex mu;
  std::vector<std::thread> pool;
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (size_t i = next++; i < srcs.size(); i = next++) {
        bool found = false;
        auto b = ks.Binary(srcs[i], &found);
        if (!b.ok()) {
          ++failed;
          std::lock_guard<std::mutex> l(mu);
          ADD_FAILURE() << srcs[i].key << " for " << arch << ": " << b.status().ToString();
          continue;
        }
        out[i] = {srcs[i].key, arch, (*b)->usage, (*b)->compile_ms, found};
      }
    });
  for (auto& th : pool) th.join();
  *failures = failed;
  return out;
}

// TOPK_COMPILE_ALL: 0 for "full" (every kernel), else the cover's order on
// sm_90: 1 for unset, "" or "cover", 2 for "pairs"; an error for anything
// else.
StatusOr<int> CoverOrder() {
  const char* v = std::getenv("TOPK_COMPILE_ALL");
  const std::string mode = v ? v : "";
  if (mode.empty() || mode == "cover") return 1;
  if (mode == "pairs") return 2;
  if (mode == "full") return 0;
  return InvalidArgument("TOPK_COMPILE_ALL", "must be \"cover\", \"pairs\" or \"full\", not \"" + mode + "\"");
}

TEST(CompileAllTest, KernelsCompileForSm90AndSm80) {
  const auto cover = CoverOrder();
  ASSERT_TRUE(cover.ok()) << cover.status().ToString();
  const bool full = *cover == 0;
  auto store = jit::MakeDirectoryStore(CubinDir());
  int total = 0, enumerated = 0, failures = 0, spilling = 0, stored = 0;
  const auto t0 = std::chrono::steady_clock::now();
  std::filesystem::create_directories(CubinDir());  // the report sits beside it
  const std::string report_path = CubinDir() + "/../compile_report.tsv";
  std::ofstream report(report_path);
  ASSERT_TRUE(report) << "cannot write " << report_path;
  // compiled_before: 1 where the binary came from the shipped blob or an
  // earlier run (compile_ms is then 0: stored kernels keep no time).
  report << "arch\tkernel\tregisters\tstack_bytes\tspill_stores\tspill_loads\tcompile_ms\tcompiled_before\n";
  for (const char* arch : {"sm_90", "sm_80"}) {
    auto a = gen::Arch::FromName(arch);
    ASSERT_TRUE(a.ok());
    std::vector<gen::KernelSource> srcs;
    const int order = std::string(arch) == "sm_90" ? *cover : 1;
    const std::vector<gen::Config> defaults = full ? std::vector<gen::Config>{} : gen::DefaultKernelConfigs(*a);
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
      const std::vector<gen::Config> all = gen::EnumerateKernels(dt, *a);
      enumerated += static_cast<int>(all.size());
      const std::vector<gen::Config> picked = full ? all : testing::CoveringKernels(all, defaults, order);
      if (!full) {
        EXPECT_EQ(testing::KnobFeatures(picked, order), testing::KnobFeatures(all, order)) << arch << " " << DTypeName(dt);
        EXPECT_LT(picked.size(), all.size()) << arch << " " << DTypeName(dt);
      }
      for (const gen::Config& c : picked) srcs.push_back(gen::GenerateSource(c));
      srcs.push_back(gen::SortSource(dt));
      srcs.push_back(gen::TieSource(dt));
      // topk::Strategy<> kernels (a tuned strategy switch): each switch
      // flipped from its automatic rule on a one-CTA default, and one on a
      // cluster default; their sources assert the host's rules.
      if (std::string(arch) == "sm_90")
        for (int64_t batch : {256, 8}) {
          Problem p;
          p.dtype = dt;
          p.batch = batch;
          p.n = batch == 256 ? 32768 : 524288;
          p.k = batch == 256 ? 8192 : 2048;  // k above n / 8, or few long rows: the radix default
          const gen::Config def = gen::DefaultConfig(p, *a);
          std::vector<gen::Config> refined = gen::RadixFamily().Refinements(def, p, *a);
          EXPECT_GE(refined.size(), 4u) << def.Id();
          if (batch == 8 && refined.size() > 1) refined.resize(1);
          for (const gen::Config& c : refined) srcs.push_back(gen::GenerateSource(c));
        }
    }
    int f = 0;
    // sm_90 binaries go to the shared directory for the GPU tests.
    const auto res = CompileMany(srcs, arch, std::string(arch) == "sm_90" ? store.get() : nullptr, &f);
    failures += f;
    total += static_cast<int>(srcs.size());
    for (const Compiled& c : res) {
      if (c.key.empty()) continue;
      EXPECT_TRUE(c.usage.known) << c.key << " has no ptxas report";
      if (c.usage.spills()) ++spilling;
      if (c.stored) ++stored;
      report << c.arch << '\t' << c.key << '\t' << c.usage.registers << '\t' << c.usage.stack_bytes << '\t'
             << c.usage.spill_stores << '\t' << c.usage.spill_loads << '\t' << c.ms << '\t' << c.stored << '\n';
    }
    std::printf("%s: %zu kernels\n", arch, srcs.size());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("compiled %d kernels (3 dtypes, sm_90 + sm_80; %s of %d enumerated) in %.1f s: %d errors, "
              "%d with local-memory spills; %d of them compiled before (the build's shipped kernels, an earlier "
              "run's directory)\n",
              total,
              full          ? "TOPK_COMPILE_ALL=full: all"
              : *cover == 2 ? "the defaults and a cover of the knob values' pairs (sm_90) / the values (sm_80)"
                            : "the defaults and a cover of the knob values",
              enumerated, secs, failures, spilling, stored);
  std::printf("registers and spills of every kernel: %s\n", report_path.c_str());
  EXPECT_EQ(failures, 0);
  EXPECT_GT(total, 100);
}

// The cover CI compiles: a subset of the enumeration, in its order, that has
// every knob value (order 1) or value pair (order 2) the enumeration has, and
// every seed.
TEST(KernelCoverTest, CoversEveryKnobValueAndPairWithFewerKernels) {
  const gen::Arch sm90 = gen::Arch::Sm90();
  const std::vector<gen::Config> all = gen::EnumerateKernels(DType::kF32, sm90);
  ASSERT_GT(all.size(), 50u);
  const std::vector<gen::Config> seeds = {all[3], all[all.size() / 2]};
  for (int order : {1, 2}) {
    const std::vector<gen::Config> picked = testing::CoveringKernels(all, seeds, order);
    EXPECT_EQ(testing::KnobFeatures(picked, order), testing::KnobFeatures(all, order)) << order;
    EXPECT_LT(picked.size(), all.size() / 2) << order;
    EXPECT_EQ(picked, testing::CoveringKernels(all, seeds, order)) << "not deterministic";
    size_t at = 0;  // a subsequence of `all`
    for (const gen::Config& c : picked) {
      while (at < all.size() && !(all[at] == c)) ++at;
      ASSERT_LT(at, all.size()) << c.Id() << " is not in the enumeration's order";
    }
    for (const gen::Config& s : seeds)
      EXPECT_NE(std::find(picked.begin(), picked.end(), s), picked.end()) << s.Id() << " seed left out";
  }
  // Pairs need more kernels than values; each family keeps its own values
  // (a knob value of one family does not cover another's).
  EXPECT_GT(testing::CoveringKernels(all, {}, 2).size(), testing::CoveringKernels(all, {}, 1).size());
  std::set<std::string> families;
  for (const gen::Config& c : testing::CoveringKernels(all, {}, 1)) families.insert(c.family);
  std::set<std::string> all_families;
  for (const gen::Config& c : all) all_families.insert(c.family);
  EXPECT_EQ(families, all_families);
}

// The variant count behind the kernels: launch knobs multiply each kernel.
TEST(CompileAllTest, PrintsTheVariantSpaceOfThePresets) {
  size_t variants = 0, kernels = 0;
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int64_t n : {256LL, 4096LL, 32768LL, 131072LL, 524288LL}) {
      Problem p;
      p.dtype = dt;
      p.batch = n <= 256 ? 4096 : 64;
      p.n = n;
      p.k = n <= 256 ? 8 : 2048;
      const auto v = gen::Enumerate(p, gen::Arch::Sm90());
      std::set<std::string> keys;
      for (const auto& c : v) keys.insert(c.KernelKey());
      std::printf("%-36s %4zu variants over %3zu kernels\n", p.ToString().c_str(), v.size(), keys.size());
      variants += v.size();
      kernels += keys.size();
      EXPECT_FALSE(v.empty());
    }
  }
  EXPECT_GT(variants, kernels);
}

// The defaults do not spill, but for the filter family's 1024-thread ones
// and the resident family's 1024-thread clusters: at the 64-register cap they
// spill a few words (the filter's up to 48 bytes, the clusters' 16 keys a
// thread up to 80) and were measured the fastest nonetheless
// (docs/PERFORMANCE.md, "The defaults for rows over 8192"); their stack
// stays small.
TEST(CompileAllTest, DefaultConfigurationsHaveNoSpills) {
  for (const char* arch_name : {"sm_90", "sm_80"}) {
    auto arch = gen::Arch::FromName(arch_name);
    ASSERT_TRUE(arch.ok());
    std::vector<gen::KernelSource> srcs;
    std::vector<std::string> what;
    std::vector<int> stack_limit;  // bytes; 0 where no spill is allowed
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
      // 64 rows, one row of 16384 to 524288 (the clustered defaults), and
      // many short rows.
      for (auto [batch, n] : std::vector<std::pair<int64_t, int64_t>>{
               {64, 64}, {64, 256}, {64, 512}, {64, 4096}, {64, 32768}, {64, 131072}, {64, 524288}, {1, 16384},
               {1, 131072}, {1, 262144}, {1, 524288}, {1056, 4096}, {600, 8192}}) {
        Problem p;
        p.dtype = dt;
        p.batch = batch;
        p.n = n;
        p.k = std::min<int64_t>(n / 4, 2048);
        // Many short rows with k <= n / 8: the filter family's several rows
        // per CTA (8 from 8 rows per SM, else 4).
        if (batch > 64) p.k = n / 32;
        const gen::Config c = gen::DefaultConfig(p, *arch);
        srcs.push_back(gen::GenerateSource(c));
        what.push_back(std::string(arch_name) + " " + p.ToString() + " -> " + c.Id());
        const bool wide = c.Get("block_threads") == 1024;
        // Spills measured the fastest nonetheless (docs/DESIGN.md): the
        // filter's 1024-thread kernels at the 64-register cap, 8 rows per CTA
        // of them most (112-152 bytes; 4 rows of 512 threads spill none and
        // were 1.05-1.2x slower), the 16-bit ones with two loads a thread 80
        // (1.1-1.2x faster than one load's 40, docs/PERFORMANCE.md), the
        // resident 1024-thread clusters, and the grid's two CTAs an SM of 4
        // vectors a thread (8 bytes; 64 x 32768 k2048 12.20 us against the
        // filter default's 13.34 on an H200, "Two grid CTAs an SM").
        const bool rows = c.family == "filter" && c.Get("rows") > 1;
        const bool grid_two = c.family == "grid" && c.Get("per_sm") > 1;
        stack_limit.push_back(c.family == "filter" && wide && rows                      ? 160
                              : c.family == "filter" && wide && c.dtype != DType::kF32 ? 80
                              : c.family == "filter" && wide                              ? 64
                              : c.family == "resident" && wide && c.Get("cluster") > 1 ? 96
                              : grid_two                                                ? 16
                                                                                       : 0);
      }
    auto store = jit::MakeDirectoryStore(CubinDir());
    int f = 0;
    const auto res = CompileMany(srcs, arch_name, std::string(arch_name) == "sm_90" ? store.get() : nullptr, &f);
    EXPECT_EQ(f, 0);
    for (size_t i = 0; i < res.size(); ++i) {
      std::printf("default %-68s regs %3d stack %3d spill stores %d loads %d\n", what[i].c_str(),
                  res[i].usage.registers, res[i].usage.stack_bytes, res[i].usage.spill_stores,
                  res[i].usage.spill_loads);
      if (stack_limit[i] > 0)
        EXPECT_LE(res[i].usage.stack_bytes, stack_limit[i]) << what[i];
      else
        EXPECT_FALSE(res[i].usage.spills()) << what[i];
    }
  }
}

// The release build ships the defaults of sm_100 and sm_120 too, but the
// test build only sm_80's and sm_90's (scripts/test.sh): the target shapes'
// defaults for those two compile here, so that a template that breaks only
// there shows in CI (9 kernels each).
TEST(CompileAllTest, TargetDefaultsCompileForSm100AndSm120) {
  struct Shape {
    DType dt;
    int64_t batch, n, k;
    bool ranges, values;
  };
  const Shape shapes[] = {
      {DType::kF32, 64, 4096, 128, true, false},       {DType::kF32, 64, 32768, 2048, true, false},
      {DType::kF32, 1, 131072, 2048, true, false},     {DType::kF32, 1, 524288, 2048, true, false},
      {DType::kF32, 128, 131072, 2048, true, false},   {DType::kBF16, 128, 201088, 64, false, true},
      {DType::kF32, 256, 128256, 1024, false, true},   {DType::kF32, 4096, 256, 8, false, false},
      {DType::kBF16, 16384, 256, 8, false, false},
  };
  for (const char* arch_name : {"sm_100", "sm_120"}) {
    auto arch = gen::Arch::FromName(arch_name);
    ASSERT_TRUE(arch.ok());
    std::vector<gen::KernelSource> srcs;
    std::set<std::string> keys;
    std::set<std::string> families;
    for (const Shape& sh : shapes) {
      Problem p;
      p.dtype = sh.dt;
      p.batch = sh.batch;
      p.n = sh.n;
      p.k = sh.k;
      p.ranges = sh.ranges;
      p.values = sh.values;
      const gen::Config c = gen::DefaultConfig(p, *arch);
      families.insert(c.family);
      for (gen::KernelSource& src : gen::GenerateSources(c))
        if (keys.insert(src.key).second) srcs.push_back(std::move(src));
    }
    int f = 0;
    CompileMany(srcs, arch_name, nullptr, &f);
    EXPECT_EQ(f, 0) << arch_name;
    // The warp, resident, grid and filter families are each some shape's
    // default, so each family's template is compiled.
    for (const char* family : {"warp", "resident", "grid", "filter"})
      EXPECT_EQ(families.count(family), 1u) << arch_name << " " << family;
    std::printf("%s: %zu kernels of the target shapes' defaults compiled\n", arch_name, srcs.size());
  }
}

// The templates are real CUDA C++: nvcc compiles a generated variant
// offline, both with -I templates and as the standalone (inlined) source.
TEST(CompileAllTest, NvccCompilesGeneratedSourceOffline) {
  const char* home = std::getenv("CUDA_HOME");
  const std::string nvcc = std::string(home && *home ? home : "/usr/local/cuda") + "/bin/nvcc";
  if (!std::filesystem::exists(nvcc)) GTEST_SKIP() << "nvcc not found at " << nvcc;
  gen::RadixParams c;
  c.dtype = DType::kBF16;
  c.block_threads = 256;
  c.radix_bits = 8;
  c.cluster = 2;
  c.smem_buffer = 1024;
  c.rounds = 1;
  const std::string dir = testing::TempPath("nvcc");
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/variant.cu";
  std::ofstream(file) << gen::Standalone(gen::GenerateSource(c));
  const std::string cmd = nvcc + " -std=c++17 -arch=sm_90 -cubin -o " + dir + "/variant.cubin " + file + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_GT(std::filesystem::file_size(dir + "/variant.cubin"), 1000u);
}

}  // namespace
}  // namespace topk
