// Every variant of the kernel family, every dtype, on adversarial inputs:
// zero wrong results allowed. Needs a GPU (ctest label "gpu").
//
// TOPK_TEST_SUBSET=sanitizer runs a small representative subset (CTA,
// clusters of 2 and 8, warp mode, the coarse first pass, partial row
// cache, buffer overflow, ranking) for compute-sanitizer; TOPK_TEST_SUBSET=warp
// runs only the warp-per-row kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include "generator/config.hpp"
#include "generator/grid.hpp"
#include "generator/radix.hpp"
#include "generator/resident.hpp"
#include "generator/source.hpp"
#include "jit/driver.hpp"
#include "jit/kernel_store.hpp"
#include "jit/variant.hpp"
#include "support/test_support.hpp"
#include "support/toy_family.hpp"
#include "tuner/runner.hpp"

namespace topk {
namespace {

using gen::Config;
using tuner::DeviceCase;
using tuner::Dist;

struct CaseSpec {
  int64_t batch, n, k;
  Dist dist;
  bool largest = true, ranges = false, values = false, sorted = false, deterministic = false;
};

Problem ToProblem(DType dt, const CaseSpec& s) {
  Problem p;
  p.dtype = dt;
  p.batch = s.batch;
  p.n = s.n;
  p.k = s.k;
  p.largest = s.largest;
  p.ranges = s.ranges;
  p.values = s.values;
  p.sorted = s.sorted;
  p.deterministic = s.deterministic;
  return p;
}

std::vector<CaseSpec> BlockCases(bool subset) {
  std::vector<CaseSpec> v = {
      {4, 20011, 2048, Dist::kNormal, true, false, true},
      {4, 20011, 2048, Dist::kUniform, false},
      {3, 7001, 100, Dist::kAllEqual, true, false, true},
      {3, 7001, 700, Dist::kFewDistinct},
      {3, 9000, 1000, Dist::kTiesAtK},
      {3, 6007, 300, Dist::kSpecial, true, false, true},
      {3, 6007, 300, Dist::kSpecial, false, false, true},
      {2, 8192, 512, Dist::kSorted},
      {2, 8193, 512, Dist::kReversed, false},
      {16, 4099, 77, Dist::kNormal, true, true, true},
      {16, 5003, 600, Dist::kFewDistinct, true, true},
      {2, 3001, 3001, Dist::kNormal},
      {2, 3001, 4000, Dist::kNormal, true, false, true},
      {2, 5000, 1, Dist::kNormal},
      {3, 5000, 300, Dist::kTiesAtK, true, false, true, true},
      {1, 200003, 64, Dist::kFewDistinct, true, false, true},
      {1, 131075, 2048, Dist::kLogits},
      // Inputs whose keys share their top bits or few values: a running
      // threshold must not care.
      {4, 40009, 2048, Dist::kShifted, true, true, true},
      {3, 30011, 1000, Dist::kDistinct16, false, false, true},
      {3, 30011, 700, Dist::kPlateau, true, true},
      // Short rows, several to a CTA in the filter family: the last CTA's
      // groups past the last row, an unaligned row length.
      {37, 2053, 40, Dist::kPlateau, true, true, true},
  };
  if (subset) return {v[0], v[2], v[5], v[9], v[14], v[15], v[17], v[20]};
  return v;
}

std::vector<CaseSpec> WarpCases(int items) {
  const int64_t m = 32LL * items;
  return {
      {37, m, 8, Dist::kNormal, true, false, true},
      {37, m - 3, 1, Dist::kAllEqual},
      {37, m - 5, m - 5, Dist::kNormal},
      {5, m, m + 3, Dist::kNormal, true, false, true},
      {16, m, 8, Dist::kSpecial, true, false, true},
      {16, m - 1, 5, Dist::kTiesAtK, false},
      {64, m, 8, Dist::kFewDistinct, true, true, true},
      {9, m, 8, Dist::kNormal, true, false, true, true},
      {33, m - 7, 3, Dist::kUniform, false, true, false},
      // Whole rows (the vector-load path) at the tournament's edges: k = 16
      // on all-equal rows, k = 17 (the bit search), the winners all in the
      // last lane (sorted) or the first (reversed), NaNs ranked last with
      // short random ranges (a threshold of key 0).
      {37, m, 16, Dist::kAllEqual, false, false, true},
      {37, m, 17, Dist::kFewDistinct, true, false, true},
      {37, m, 8, Dist::kSorted},
      {37, m, 12, Dist::kReversed, false},
      {41, m, 16, Dist::kSpecial, false, true, true},
      {41, m, 2, Dist::kSpecial, false, true},
      // The bound kernels (fp32, rounds 1): whole rows in vector loads and
      // small_k for k <= 8: drops below the lane-maximum bound, ties at the
      // threshold, all-equal rows, many CTAs, and k = 9 (the tournament
      // over the vector map).
      {37, m, 8, Dist::kTiesAtK, false, false, true},
      {37, m, 8, Dist::kAllEqual, true},
      {4098, m, 7, Dist::kFewDistinct},
      {4096, m, 8, Dist::kNormal, true, false, true},
      {37, m, 9, Dist::kTiesAtK, true, false, true},
  };
}

// Rows a resident kernel's group holds (m = group x items keys): full and
// part-full groups, k at 1, mid and >= the row, every adversarial input,
// ranges, values, smallest, sorted, and batches that leave the last CTA's
// groups without a row.
std::vector<CaseSpec> ResidentCases(int64_t m) {
  const int64_t k = std::min<int64_t>(m - 1, 100);
  std::vector<CaseSpec> cases = {
      {37, m, m / 32, Dist::kNormal, true, false, true},
      {5, m - 3, 1, Dist::kAllEqual},
      {9, m, m / 2, Dist::kShifted, false, false, true},
      {9, m - 5, m - 5, Dist::kNormal},
      {5, m, m + 3, Dist::kNormal, true, false, true},
      {16, m, k, Dist::kSpecial, true, false, true},
      {16, m, k, Dist::kSpecial, false, true, true},
      {16, m - 1, k - 23, Dist::kTiesAtK, false},
      {33, m, 64, Dist::kFewDistinct, true, true, true},
      {9, m, 50, Dist::kNormal, true, false, true, true},
      {8, m, k, Dist::kPlateau, true, true},
      {8, m, m / 3, Dist::kDistinct16, false, false, true},
      {4, m, k, Dist::kSorted},
      {4, m, k, Dist::kReversed, false},
      {6, m / 2 + 1, 10, Dist::kUniform},
      {301, m, 8, Dist::kShifted, true, false, true},
      // k at most m / 32 on a row of normal + 100 (one CTA): the window
      // over the keys' span, and on the longer rows its bin of more than
      // 32 keys ranked by the passes below it, smallest and deterministic.
      {9, m, m / 32, Dist::kShifted, true, true, true},
      {9, m, m / 40, Dist::kShifted, false, false, false, false, true},
      // A narrow span crowded at its top: the window's bin holds more than
      // 32 distinct keys, which the passes below the window rank.
      {9, m, m / 32, Dist::kDenseTop, true, true, true},
      {9, m, m / 40, Dist::kDenseTop, true, false, false, false, true},
      // Deterministic mode in the kernel (the second search over the ties'
      // positions): the checker wants the lowest-index ties.
      {9, m, m / 3, Dist::kTiesAtK, true, false, true, false, true},
      {9, m - 7, 50, Dist::kFewDistinct, false, true, false, false, true},
      {5, m, k, Dist::kAllEqual, true, false, false, true, true},
      {8, m, k, Dist::kPlateau, false, true, true, false, true},
      {8, m, m / 5, Dist::kDistinct16, true, false, false, false, true},
  };
  // Rows past 65536 (clusters, shared keys): an eighth of the rows, at least
  // two, so a kernel's cases stay within a few hundred million keys.
  if (m > 65536)
    for (CaseSpec& c : cases) c.batch = std::max<int64_t>(2, c.batch / 8);
  return cases;
}

// Rows a grid kernel's CTAs hold (m keys, at most 524288 here), as many rows
// as the SMs run at once (up to 3; with two CTAs an SM more CTAs than SMs
// where the CTAs a row allow it): full and part-full slices, unaligned
// lengths and ranges, k at 1, mid, equal to and beyond the row, every
// adversarial input, values, smallest, sorted, deterministic.
// With `ties` 1 (deterministic mode in the kernel) every case is
// deterministic: the checker wants the lowest-index ties of each.
std::vector<CaseSpec> GridCases(const gen::GridParams& g, int sm_count) {
  const int64_t m = std::min<int64_t>(g.capacity(), 524288);
  const int64_t rows = std::max(1, std::min(3, sm_count * g.per_sm / g.ctas));
  const int64_t k = std::min<int64_t>(m / 4, 2048);
  std::vector<CaseSpec> cases = {
      {rows, m, k, Dist::kNormal, true, false, true},
      {rows, m - 3, 1, Dist::kAllEqual},
      {rows, m, m / 2, Dist::kShifted, false, false, true},
      {rows, m - 5, m - 5, Dist::kNormal},
      {rows, m, m + 3, Dist::kNormal, true, false, true},
      {rows, m, k, Dist::kSpecial, true, false, true},
      {rows, m, k, Dist::kSpecial, false, true, true},
      {rows, m - 1, k - 23, Dist::kTiesAtK, false},
      {rows, m, 64, Dist::kFewDistinct, true, true, true},
      {rows, m, k, Dist::kPlateau, true, true},
      {rows, m, m / 3, Dist::kDistinct16, false, false, true},
      {rows, m, k, Dist::kSorted},
      {rows, m, k, Dist::kReversed, false},
      {rows, m / 2 + 1, 10, Dist::kUniform},
      {rows, m, k, Dist::kLogits, true, false, false, true},
      {rows, m - 7, 50, Dist::kFewDistinct, false, true, false, false, true},
      {rows, m, k, Dist::kShifted, true, true, true, false, true},
  };
  if (g.ties)
    for (CaseSpec& c : cases) c.deterministic = true;
  return cases;
}

// Launch-argument settings tried for every block / cluster kernel.
struct Knobs {
  const char* name;
  int buffer;
  bool rank;       // rounds = 1 (rank allowed) instead of passes - 1
  int cache;       // -1 = as many as fit, 0 = none, >0 = at most this many keys
};
const Knobs kKnobs[] = {
    {"buffer4096_radix_cache", 4096, false, -1},
    {"nobuffer_nocache", 0, false, 0},
    {"buffer256_rank_partialcache", 256, true, 1000},
    {"buffer1024_rank_cache", 1024, true, -1},
    {"buffer8192_radix_cache", 8192, false, -1},  // one CTA per row only, as in the space
};

struct Tally {
  int kernels = 0, variants = 0, launches = 0, wrong = 0, resource_limited = 0, errors = 0;
  std::vector<std::string> failures;
};

class GpuKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TOPK_REQUIRE_GPU();
    auto ctx = jit::Context::Primary(0);  // first: the device query reuses it
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    ctx_ = *ctx;
    auto info = jit::QueryDevice(0);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    info_ = *info;
    ASSERT_TRUE(ctx_->MakeCurrent().ok());
    compiler_ = jit::MakeNvrtcCompiler();
    const char* tmp = std::getenv("TOPK_TEST_TMP");
    store_ = jit::MakeDirectoryStore(std::string(tmp && *tmp ? tmp : "/tmp/topk-tests") + "/cubins");
    jit::CompileOptions o;
    o.arch = info_.ArchName();
    // Line info for compute-sanitizer reports (a separate cache key).
    o.line_info = std::getenv("TOPK_TEST_LINEINFO") != nullptr;
    kernels_ = std::make_unique<jit::KernelStore>(compiler_.get(), store_.get(), o);
    // "sanitizer": a small representative subset; "warp": every warp-per-row
    // kernel and nothing else (kernel work on the short-row path).
    const char* subset = std::getenv("TOPK_TEST_SUBSET");
    subset_ = subset && std::string(subset) == "sanitizer";
    warp_only_ = subset && std::string(subset) == "warp";
  }

  // Compiles every source on all cores first (the GPU then only runs).
  void CompileAll(const std::vector<gen::KernelSource>& srcs) {
    std::atomic<size_t> next{0};
    std::atomic<int> failed{0};
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&] {
        for (size_t i = next++; i < srcs.size(); i = next++) {
          auto b = kernels_->Binary(srcs[i]);
          if (!b.ok()) {
            ++failed;
            ADD_FAILURE() << b.status().ToString();
          }
        }
      });
    for (auto& th : pool) th.join();
    std::printf("compiled or loaded %zu kernels in %.1f s (%d failed)\n", srcs.size(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), failed.load());
  }

  void RunVariant(const Config& c, const Knobs* knobs, const std::vector<CaseSpec>& cases,
                  std::map<std::string, DeviceCase>* case_cache, Tally* t) {
    ++t->variants;
    for (const CaseSpec& s : cases) {
      const Problem p = ToProblem(c.dtype, s);
      if (!gen::ValidateFor(c, info_.ToArch(), p).ok()) continue;  // outside the family's reach (row, k)
      const std::string key = p.ToString() + "/" + tuner::DistName(s.dist);
      auto it = case_cache->find(key);
      if (it == case_cache->end()) {
        auto dc = DeviceCase::Make(p, s.dist, 1234 + case_cache->size());
        ASSERT_TRUE(dc.ok()) << dc.status().ToString();
        it = case_cache->emplace(key, std::move(*dc)).first;
      }
      auto v = jit::LoadVariant(*kernels_, c, p, info_.ToArch(), nullptr,
                                knobs && knobs->cache > 0 ? knobs->cache : -1);
      if (!v.ok()) {
        // A grid kernel compiled for several CTAs an SM must hold them: its
        // cases put up to per_sm x SMs CTAs on the grid (GridCases), and an
        // occupancy refusal would mean the kernel fits fewer an SM than it
        // claims (memory running out stays "resource-limited").
        const bool occupancy = v.status().where() == "cuOccupancyMaxActiveBlocksPerMultiprocessor";
        const bool several_an_sm = c.family == "grid" && gen::GridParams::Of(c).per_sm > 1 && occupancy;
        if (v.status().code() == Code::kResourceExhausted && !several_an_sm) {
          ++t->resource_limited;
          return;
        }
        ++t->errors;
        t->failures.push_back(c.Id() + " " + key + ": " + v.status().ToString());
        continue;
      }
      ++t->launches;
      Status st = tuner::RunAndCheck(*v, &it->second, nullptr);
      if (st.ok() && v->own_workspace()) {
        // Every launch leaves the workspace zero for the next one.
        std::vector<uint32_t> ws(v->workspace_bytes() / 4);
        auto d = jit::GetDriver();
        ASSERT_TRUE(d.ok());
        ASSERT_EQ((*d)->cuMemcpyDtoH(ws.data(), v->own_workspace(), ws.size() * 4), CUDA_SUCCESS);
        const auto nz = std::find_if(ws.begin(), ws.end(), [](uint32_t w) { return w != 0; });
        if (nz != ws.end())
          st = Status(Code::kWrongResult, c.Id() + " " + key,
                      "workspace word " + std::to_string(nz - ws.begin()) + " left nonzero");
      }
      if (st.code() == Code::kWrongResult) {
        ++t->wrong;
        if (t->failures.size() < 40) t->failures.push_back(st.ToString() + " [" + (knobs ? knobs->name : c.Id()) + "]");
      } else if (!st.ok()) {
        ++t->errors;
        t->failures.push_back(c.Id() + " " + key + ": " + st.ToString());
        // A sticky error poisons the context: nothing after it is trustworthy.
        FAIL() << "CUDA error, stopping: " << c.Id() << " " << key << " [" << (knobs ? knobs->name : "") << "]: "
               << st.ToString();
      }
    }
  }

  // The launch-argument variants of one kernel: every knob setting, and for
  // the clustered kernel every cluster size (one binary serves them all).
  std::vector<Config> Variants(const Config& kernel, std::vector<const Knobs*>* knobs_out) {
    std::vector<Config> out;
    if (kernel.family != "radix") {
      const gen::Family* f = kernel.family_ptr();
      const std::vector<gen::ParamSpec> specs = f ? f->params() : std::vector<gen::ParamSpec>{};
      // A clustered binary serves every cluster size: each size as it is,
      // and at 16 (the shortest slices) every launch-argument value.
      std::vector<int> sizes = {0};
      auto has = [&](const char* name) {
        return std::any_of(specs.begin(), specs.end(), [&](const gen::ParamSpec& ps) { return ps.name == name; });
      };
      const bool clustered = has("cluster") && kernel.Get("cluster") > 1;
      if (clustered) sizes = subset_ ? std::vector<int>{2, 8} : std::vector<int>{2, 4, 8, 16};
      for (int size : sizes) {
        Config base = kernel;
        if (size) base.Set("cluster", size);
        out.push_back(base);
        knobs_out->push_back(nullptr);
        if (size != sizes.back()) continue;
        // Every value of every launch-argument parameter, one at a time; the
        // cluster mode's margin also at -50 (every guess too high) and 1000
        // (too low for large k): both recovery directions.
        for (const gen::ParamSpec& ps : specs)
          if (!ps.code) {
            std::vector<int> values = ps.values;
            if (clustered && ps.name == "margin") values.insert(values.end(), {-50, 1000});
            for (int v : values) {
              Config c = base;
              c.Set(ps.name, v);
              if (c == base || !gen::Validate(c, info_.ToArch()).ok()) continue;
              out.push_back(c);
              knobs_out->push_back(nullptr);
            }
          }
        // The grid family's recovery: a one-vector sample (the guess too
        // high or too low) and room for 32 candidates (the k-th key's bin
        // overflows); 129 (bins of 33 to 129 keys ranked by digits, not
        // directly; an odd room, which the rows' workspace stride rounds up
        // to keep every row 16-byte aligned).
        if (has("candidates") && has("sample"))
          for (auto [knob, value] : {std::pair<const char*, int>{"sample", 1}, {"candidates", 32}, {"candidates", 129}}) {
            Config c = base;
            c.Set(knob, value);
            if (!gen::Validate(c, info_.ToArch()).ok()) continue;
            out.push_back(c);
            knobs_out->push_back(nullptr);
          }
        // Both retry directions under each recovery: pure halving (0) and
        // the most steps along the sample (4), where the family has both.
        if (clustered && has("margin") && has("recovery"))
          for (int margin : {-50, 1000})
            for (int recovery : {0, 4}) {
              Config c = base;
              c.Set("margin", margin);
              c.Set("recovery", recovery);
              if (!gen::Validate(c, info_.ToArch()).ok()) continue;
              out.push_back(c);
              knobs_out->push_back(nullptr);
            }
      }
      return out;
    }
    const gen::RadixParams rk = gen::RadixParams::Of(kernel);
    std::vector<int> sizes = {rk.cluster};
    if (rk.cluster > 1) sizes = subset_ ? std::vector<int>{2, 8} : std::vector<int>{2, 4, 8, 16};
    for (int cl : sizes)
      for (const Knobs& kn : kKnobs) {
        if (subset_ && &kn != &kKnobs[0] && &kn != &kKnobs[2]) continue;
        if (kn.buffer == 8192 && cl != 1) continue;
        gen::RadixParams c = rk;
        c.cluster = cl;
        c.smem_buffer = kn.buffer;
        c.rounds = kn.rank ? 1 : c.passes() - 1;
        c.row_cache = kn.cache != 0;
        if (!gen::Validate(c, info_.ToArch()).ok()) continue;
        out.push_back(c);
        knobs_out->push_back(&kn);
      }
    return out;
  }

  void RunDtype(DType dt) {
    std::vector<Config> kernels = gen::EnumerateKernels(dt, info_.ToArch());
    if (subset_) {
      std::vector<Config> keep;
      for (const Config& c : kernels) {
        const bool warp = c.family == "warp", radix = c.family == "radix";
        const gen::RadixParams r = gen::RadixParams::Of(c);
        bool pick = (warp && c.Get("block_threads") == 256 && c.Get("items") == 8) ||
                          (radix && r.block_threads == 512 && r.radix_bits == 11 && !r.half_first) ||
                          (radix && r.block_threads == 256 && r.radix_bits == 8 && r.half_first && r.cluster == 1) ||
                          (!warp && !radix);
        // One clustered filter binary (its sizes 2 and 8 in Variants).
        if (c.family == "filter" && c.Get("cluster") > 1)
          pick = c.Get("block_threads") == 512 && c.Get("unroll") == 1 && c.Get("radix_bits") == 11;
        // Resident kernels of 8 keys per thread (one row or several per CTA)
        // and of 16 more in shared memory.
        if (c.family == "resident") pick = c.Get("items") == 8 || c.Get("shared") == 16;
        if (pick) keep.push_back(c);
      }
      kernels = keep;
    }
    // TOPK_TEST_VARIANT=TEXT: only kernels whose id contains TEXT (debugging).
    if (const char* only = std::getenv("TOPK_TEST_VARIANT"); only && *only) {
      std::vector<Config> keep;
      for (const Config& c : kernels)
        if (c.Id().find(only) != std::string::npos) keep.push_back(c);
      kernels = keep;
    }
    if (warp_only_) {
      std::vector<Config> keep;
      for (const Config& c : kernels)
        if (c.family == "warp") keep.push_back(c);
      kernels = keep;
    }
    std::vector<gen::KernelSource> srcs;
    for (const Config& c : kernels)
      for (gen::KernelSource& src : gen::GenerateSources(c)) srcs.push_back(std::move(src));
    srcs.push_back(gen::SortSource(dt));
    CompileAll(srcs);
    Tally t;
    std::map<std::string, DeviceCase> cases;
    const auto t0 = std::chrono::steady_clock::now();
    for (const Config& k : kernels) {
      ++t.kernels;
      std::vector<const Knobs*> knobs;
      std::vector<Config> vs = Variants(k, &knobs);
      for (size_t i = 0; i < vs.size(); ++i) {
        // Resident rows sized to the variant: its cluster multiplies what a
        // group holds in registers and shared memory.
        RunVariant(vs[i], knobs[i],
                   k.family == "warp"       ? WarpCases(k.Get("items"))
                   : k.family == "resident" ? ResidentCases(gen::ResidentParams::Of(vs[i]).capacity())
                   : k.family == "grid"     ? GridCases(gen::GridParams::Of(vs[i]), info_.sm_count)
                                            : BlockCases(subset_),
                   &cases, &t);
        if (HasFatalFailure()) return;
      }
    }
    std::printf(
        "[%s] kernels %d, variants %d, checked launches %d, wrong %d, resource-limited %d, errors %d (%.1f s)\n",
        DTypeName(dt), t.kernels, t.variants, t.launches, t.wrong, t.resource_limited, t.errors,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    for (const auto& f : t.failures) std::printf("  FAIL %s\n", f.c_str());
    EXPECT_EQ(t.wrong, 0);
    EXPECT_EQ(t.errors, 0);
    EXPECT_GT(t.launches, 0);
  }

  jit::DeviceInfo info_;
  std::shared_ptr<jit::Context> ctx_;
  std::unique_ptr<jit::Compiler> compiler_;
  std::unique_ptr<jit::BinaryStore> store_;
  std::unique_ptr<jit::KernelStore> kernels_;
  bool subset_ = false;
  bool warp_only_ = false;
};

TEST_F(GpuKernelsTest, EveryF32VariantIsExact) { RunDtype(DType::kF32); }
TEST_F(GpuKernelsTest, EveryF16VariantIsExact) { RunDtype(DType::kF16); }
TEST_F(GpuKernelsTest, EveryBF16VariantIsExact) { RunDtype(DType::kBF16); }

// The same variant on the same input twice must give the same multiset; run
// many seeds of one shape to catch races that only show sometimes.
TEST_F(GpuKernelsTest, RepeatedRunsOnFreshInputsStayExact) {
  gen::RadixParams c;
  c.dtype = DType::kF32;
  c.block_threads = 512;
  c.radix_bits = 11;
  c.cluster = info_.cc_major >= 9 ? 4 : 1;
  c.smem_buffer = 1024;
  c.rounds = 1;
  c.row_cache = true;
  int wrong = 0;
  for (int seed = 0; seed < (subset_ ? 3 : 40); ++seed) {
    Problem p;
    p.batch = 8;
    p.n = 30011 + seed;
    p.k = 1 + (seed * 97) % 3000;
    p.ranges = seed % 2 == 1;
    auto dc = DeviceCase::Make(p, seed % 3 == 0 ? Dist::kTiesAtK : Dist::kNormal, 99 + seed);
    ASSERT_TRUE(dc.ok());
    auto v = jit::LoadVariant(*kernels_, c, p, info_.ToArch());
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    for (int rep = 0; rep < 3; ++rep) {
      Status st = tuner::RunAndCheck(*v, &*dc, nullptr);
      if (!st.ok()) {
        ++wrong;
        ADD_FAILURE() << st.ToString();
      }
    }
  }
  EXPECT_EQ(wrong, 0);
}

// A family that lives only in the tests (support/toy_family.cpp) runs
// through the same loader and checker as the built-in ones, and is exact on
// the adversarial inputs in every dtype, with ranges, values, smallest and
// padding (k beyond the row).
TEST_F(GpuKernelsTest, TestOnlyFamilyRunsThroughTheGenericLoaderAndIsExact) {
  testing::ScopedToyFamily toy;
  ASSERT_TRUE(toy.status().ok()) << toy.status().ToString();
  int checked = 0;
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
    for (int block : {64, 128})
      for (tuner::Dist dist : {tuner::Dist::kNormal, tuner::Dist::kTiesAtK, tuner::Dist::kSpecial,
                               tuner::Dist::kAllEqual})
        for (int variant = 0; variant < 3; ++variant) {
          Problem p;
          p.dtype = dt;
          p.batch = 5;
          p.n = variant == 2 ? 40 : 777;
          p.k = variant == 2 ? 64 : 33;  // 64 > 40: padded with -1
          p.ranges = variant == 1;
          p.values = variant != 0;
          p.largest = variant != 1;
          const gen::Config c = testing::ToyConfig(dt, block);
          auto v = jit::LoadVariant(*kernels_, c, p, info_.ToArch());
          ASSERT_TRUE(v.ok()) << c.Id() << ": " << v.status().ToString();
          auto dc = DeviceCase::Make(p, dist, 7 + checked);
          ASSERT_TRUE(dc.ok()) << dc.status().ToString();
          Status st = tuner::RunAndCheck(*v, &*dc, nullptr);
          EXPECT_TRUE(st.ok()) << c.Id() << " " << p.ToString() << " " << tuner::DistName(dist) << ": "
                               << st.ToString();
          ++checked;
        }
  std::printf("test-only family: %d checked launches\n", checked);
  EXPECT_EQ(checked, 3 * 2 * 4 * 3);
}

// Deterministic mode behind each family's kernel: the tie pass must leave
// the lowest-index ties of the k-th value (the checker's deterministic rule)
// on the adversarial inputs, in every dtype, with ranges, values, smallest,
// sorted and padding, and 20 calls on one input must give one index set per
// row (with sorted output: the same output).
TEST_F(GpuKernelsTest, DeterministicModeTakesTheLowestIndexTiesInEveryFamily) {
  const gen::Arch arch = info_.ToArch();
  const std::vector<CaseSpec> cases = {
      {4, 20011, 2048, Dist::kTiesAtK},
      {3, 7001, 100, Dist::kAllEqual, true, false, true},
      {3, 7001, 700, Dist::kFewDistinct, false},
      {3, 6007, 300, Dist::kSpecial, true, false, true},
      {3, 6007, 300, Dist::kSpecial, false, true, true},
      {16, 5003, 600, Dist::kFewDistinct, true, true, true},
      {3, 30011, 1000, Dist::kDistinct16},
      {3, 30011, 700, Dist::kPlateau, true, true},
      {4, 40009, 2048, Dist::kShifted},
      {2, 9000, 1000, Dist::kTiesAtK, true, false, true, true},
      {37, 256, 8, Dist::kFewDistinct},
      {37, 256, 8, Dist::kAllEqual, true, false, false, true},
      {64, 255, 5, Dist::kTiesAtK, false, true},
      {40, 1024, 16, Dist::kDistinct16, true, false, true},
      {5, 100, 200, Dist::kAllEqual, true, false, true},
      {2, 200003, 64, Dist::kDistinct16},
      {1, 131075, 2048, Dist::kPlateau},
      // Many short rows: the filter default's 4 and 8 rows per CTA (on GPUs
      // of 75 to 150 SMs).
      {600, 4096, 64, Dist::kFewDistinct, true, true, true},
      {1200, 4096, 16, Dist::kTiesAtK, false},
  };
  int checked = 0, wrong = 0, repeats = 0;
  std::map<std::string, int> per_family;
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
    for (const gen::Family* f : gen::Families())
      for (size_t ci = 0; ci < cases.size(); ++ci) {
        if (subset_ && ci % 3 != 0) continue;
        Problem p = ToProblem(dt, cases[ci]);
        p.deterministic = true;
        std::optional<Config> c = f->Default(p, arch);
        if (!c) {
          const std::vector<Config> all = f->Enumerate(p, arch, gen::SpaceOptions{});
          if (all.empty()) continue;
          c = all.front();
        }
        if (!gen::ValidateFor(*c, arch, p).ok()) continue;
        auto v = jit::LoadVariant(*kernels_, *c, p, arch);
        ASSERT_TRUE(v.ok()) << c->Id() << " " << p.ToString() << ": " << v.status().ToString();
        auto dc = DeviceCase::Make(p, cases[ci].dist, 500 + ci);
        ASSERT_TRUE(dc.ok()) << dc.status().ToString();
        const std::string what = c->Id() + " " + p.ToString() + " " + tuner::DistName(cases[ci].dist);
        // One index set per row, whatever order the kernel wrote it in.
        auto sets = [&](std::vector<int32_t> idx) {
          if (!p.sorted)
            for (int64_t r = 0; r < p.batch; ++r) std::sort(idx.begin() + r * p.k, idx.begin() + (r + 1) * p.k);
          return idx;
        };
        std::vector<int32_t> first, again;
        Status st = tuner::RunAndCheck(*v, &*dc, nullptr, &first);
        ++checked;
        ++per_family[f->name()];
        if (!st.ok()) {
          ++wrong;
          ADD_FAILURE() << what << ": " << st.ToString();
          if (st.code() != Code::kWrongResult) return;  // a CUDA error: the context is gone
          continue;
        }
        first = sets(first);
        for (int rep = 1; rep < (subset_ ? 3 : 20); ++rep) {
          st = tuner::RunAndCheck(*v, &*dc, nullptr, &again);
          ++repeats;
          if (!st.ok() || sets(again) != first) {
            ++wrong;
            ADD_FAILURE() << what << ": call " << rep << " differs from the first: " << st.ToString();
            break;
          }
        }
      }
  std::printf("deterministic mode: %d cases checked, %d repeated calls, %d wrong;", checked, repeats, wrong);
  for (const auto& [name, n] : per_family) std::printf(" %s %d", name.c_str(), n);
  std::printf("\n");
  EXPECT_EQ(wrong, 0);
  for (const char* name : {"radix", "warp", "filter", "resident", "grid"}) EXPECT_GT(per_family[name], 0) << name;
}

// Programmatic dependent launch: a call's kernels are scheduled while the
// previous kernel on the stream still runs, and must wait for it before
// reading. A chain of two plans with no host wait between calls, the second
// reading the first's values, on inputs that change every call: a kernel that
// read before its producer finished would see the previous call's values.
// The first plans are the defaults of four shapes (on an H100 the grid,
// filter, resident and warp families); one second plan is sorted and
// deterministic, so the tie pass and the row sort follow it, launched
// programmatically too.
TEST_F(GpuKernelsTest, ProgrammaticLaunchesWaitForTheKernelBefore) {
  const gen::Arch arch = info_.ToArch();
  if (!arch.programmatic()) GTEST_SKIP() << info_.ArchName() << " has no programmatic dependent launch";
  auto d = jit::GetDriver();
  ASSERT_TRUE(d.ok());
  struct Chain {
    int64_t batch, n, k, k2;
    bool sorted_deterministic = false;
  };
  std::map<std::string, int> families;
  for (const Chain ch : {Chain{1, 262144, 2048, 64}, Chain{128, 32768, 2048, 64, true}, Chain{64, 4096, 128, 16},
                         Chain{4096, 256, 8, 4}}) {
    Problem p1;
    p1.batch = ch.batch;
    p1.n = ch.n;
    p1.k = ch.k;
    p1.values = true;
    Problem p2 = p1;
    p2.n = ch.k;
    p2.k = ch.k2;
    p2.sorted = p2.deterministic = ch.sorted_deterministic;
    const Config c1 = gen::DefaultConfig(p1, arch), c2 = gen::DefaultConfig(p2, arch);
    ++families[c1.family];
    auto v1 = jit::LoadVariant(*kernels_, c1, p1, arch);
    ASSERT_TRUE(v1.ok()) << c1.Id() << ": " << v1.status().ToString();
    auto v2 = jit::LoadVariant(*kernels_, c2, p2, arch);
    ASSERT_TRUE(v2.ok()) << c2.Id() << ": " << v2.status().ToString();
    EXPECT_TRUE(v1->shape().programmatic) << c1.Id();
    EXPECT_TRUE(v2->shape().programmatic) << c2.Id();
    constexpr int kInputs = 3, kCalls = 12;
    const size_t in_elems = static_cast<size_t>(ch.batch * ch.n);
    std::vector<std::vector<float>> xs(kInputs, std::vector<float>(in_elems));
    std::mt19937 rng(static_cast<unsigned>(ch.n + ch.batch));
    std::normal_distribution<float> normal;
    for (auto& x : xs)
      for (float& e : x) e = normal(rng);
    std::vector<jit::DeviceBuffer> in;
    for (const auto& x : xs) {
      auto b = jit::DeviceBuffer::Alloc(in_elems * 4);
      ASSERT_TRUE(b.ok());
      ASSERT_EQ((*d)->cuMemcpyHtoD(b->get(), x.data(), in_elems * 4), CUDA_SUCCESS);
      in.push_back(std::move(*b));
    }
    const size_t mid = static_cast<size_t>(ch.batch * ch.k), out = static_cast<size_t>(ch.batch * ch.k2);
    auto idx1 = jit::DeviceBuffer::Alloc(mid * 4), val1 = jit::DeviceBuffer::Alloc(mid * 4);
    auto idx2 = jit::DeviceBuffer::Alloc(kCalls * out * 4), val2 = jit::DeviceBuffer::Alloc(kCalls * out * 4);
    ASSERT_TRUE(idx1.ok() && val1.ok() && idx2.ok() && val2.ok());
    ASSERT_EQ((*d)->cuCtxSynchronize(), CUDA_SUCCESS);
    for (int call = 0; call < kCalls; ++call) {
      ASSERT_TRUE(v1->Launch(in[call % kInputs].ptr(), nullptr, static_cast<int32_t*>(idx1->ptr()), val1->ptr(),
                             ch.batch, nullptr)
                      .ok());
      ASSERT_TRUE(v2->Launch(val1->ptr(), nullptr, static_cast<int32_t*>(idx2->ptr()) + call * out,
                             static_cast<float*>(val2->ptr()) + call * out, ch.batch, nullptr)
                      .ok());
    }
    ASSERT_EQ((*d)->cuCtxSynchronize(), CUDA_SUCCESS);
    std::vector<float> got(kCalls * out);
    ASSERT_EQ((*d)->cuMemcpyDtoH(got.data(), val2->get(), got.size() * 4), CUDA_SUCCESS);
    int wrong_rows = 0;
    for (int call = 0; call < kCalls; ++call)
      for (int64_t r = 0; r < ch.batch; ++r) {
        std::vector<float> want(xs[call % kInputs].begin() + r * ch.n, xs[call % kInputs].begin() + (r + 1) * ch.n);
        std::partial_sort(want.begin(), want.begin() + ch.k2, want.end(), std::greater<float>());
        want.resize(ch.k2);
        std::vector<float> row(got.begin() + call * out + r * ch.k2, got.begin() + call * out + (r + 1) * ch.k2);
        if (!ch.sorted_deterministic) std::sort(row.begin(), row.end(), std::greater<float>());
        if (row != want) ++wrong_rows;  // sorted output: in order as written
      }
    std::printf("%s then %s%s, %d calls of %ld rows: %d wrong rows\n", c1.Id().c_str(), c2.Id().c_str(),
                ch.sorted_deterministic ? " (sorted, deterministic)" : "", kCalls, static_cast<long>(ch.batch),
                wrong_rows);
    EXPECT_EQ(wrong_rows, 0) << c1.Id() << " then " << c2.Id();
  }
  EXPECT_GT(families["grid"], 0);
  EXPECT_GT(families["warp"], 0);
}

// The device's cluster counts (jit::QueryDevice: an empty kernel asking for a
// CTA's whole shared memory) are what the defaults' cluster kernels get, one
// of whose CTAs fills an SM's registers.
TEST_F(GpuKernelsTest, DeviceClusterCountsMatchTheDefaultClusterKernels) {
  if (info_.cc_major < 9) GTEST_SKIP() << info_.ArchName() << " has no thread-block clusters";
  EXPECT_EQ(info_.cluster_query_error, "");  // the probe ran
  const std::array<int, 5>& n = info_.resident_clusters;
  std::printf("clusters of 1, 2, 4, 8, 16 CTAs at once on %s: %d %d %d %d %d\n", info_.name.c_str(), n[0], n[1],
              n[2], n[3], n[4]);
  EXPECT_EQ(n[0], info_.sm_count);
  for (int i = 1; i < 5; ++i) {
    EXPECT_GE(n[i], 1) << i;
    EXPECT_LE(n[i], info_.sm_count >> i) << i;
    EXPECT_LE(n[i], n[i - 1]) << i;
  }
  for (const char* id : {"resident_f32_b1024_g1024_i16_s16_c16", "resident_f32_b512_g512_i16_c16",
                         "resident_bf16_b1024_g1024_i16_c8"}) {
    auto c = gen::Config::FromId(id);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    auto fn = kernels_->Function(gen::GenerateSource(*c));
    ASSERT_TRUE(fn.ok()) << fn.status().ToString();
    const gen::ResidentParams r = gen::ResidentParams::Of(*c);
    for (int i = 1; i < 5; ++i) {
      jit::LaunchShape s;
      s.cluster = 1u << i;
      s.grid = s.cluster;
      s.block = static_cast<unsigned>(r.block_threads);
      s.smem_bytes = r.shared_bytes();
      ASSERT_TRUE(jit::PrepareFunction(*fn, s, info_.max_smem_optin).ok());
      auto got = jit::ResidentClusters(*fn, s);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(*got, n[i]) << id << ", clusters of " << s.cluster;
    }
  }
}

}  // namespace
}  // namespace topk
