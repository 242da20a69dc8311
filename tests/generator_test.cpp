// Config, constraints, enumeration, ids and generated source: no GPU.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "generator/config.hpp"
#include "generator/source.hpp"
#include "jit/device.hpp"

namespace topk::gen {
namespace {

Config Block() {
  Config c;
  c.dtype = DType::kF32;
  c.block_threads = 512;
  c.radix_bits = 11;
  c.smem_buffer = 4096;
  c.cluster = 8;
  c.rounds = 1;
  c.row_cache = true;
  return c;
}

Config Warp() {
  Config c;
  c.dtype = DType::kBF16;
  c.block_threads = 256;
  c.radix_bits = 1;
  c.cluster = 0;
  c.items = 8;
  c.smem_buffer = 0;
  c.rounds = 0;
  c.row_cache = false;
  return c;
}

Problem Prob(DType dt, int64_t batch, int64_t n, int64_t k) {
  Problem p;
  p.dtype = dt;
  p.batch = batch;
  p.n = n;
  p.k = k;
  return p;
}

TEST(ConfigTest, IdNamesEveryParameterAndRoundTrips) {
  const Config c = Block();
  EXPECT_EQ(c.Id(), "radix_f32_b512_r11_s4096_c8_t1_m1_i0");
  Config h = c;
  h.half_first = true;
  EXPECT_EQ(h.Id(), "radix_f32_b512_r11h_s4096_c8_t1_m1_i0");
  for (const Config& x : {c, h, Warp()}) {
    auto back = Config::FromId(x.Id());
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, x);
  }
}

TEST(ConfigTest, FromIdRejectsMalformedIds) {
  for (const char* bad : {"", "radix_", "topk_f32_b512_r11_s4096_c8_t1_m1_i0", "radix_f64_b512_r11_s4096_c8_t1_m1_i0",
                          "radix_f32_b512_r11_s4096_c8_t1_m2_i0", "radix_f32_bx_r11_s4096_c8_t1_m1_i0",
                          "radix_f32_b512_r11_s4096_c8_t1_m1"}) {
    auto r = Config::FromId(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  }
}

TEST(ConfigTest, JsonRoundTripAndErrors) {
  const Config c = Block();
  auto back = Config::FromJson(c.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, c);
  nlohmann::json j = c.ToJson();
  j.erase("block_threads");
  EXPECT_FALSE(Config::FromJson(j).ok());
  j = c.ToJson();
  j["radix_bits"] = "eleven";
  EXPECT_FALSE(Config::FromJson(j).ok());
  EXPECT_FALSE(Config::FromJson(nlohmann::json::array()).ok());
  j = c.ToJson();
  j["dtype"] = "f64";
  EXPECT_FALSE(Config::FromJson(j).ok());
}

TEST(ConfigTest, PrintingUsesTheId) {
  std::ostringstream s;
  s << Block();
  EXPECT_EQ(s.str(), Block().Id());
}

TEST(ConfigTest, PassesFollowKeyWidthRadixAndFirstPass) {
  Config c = Block();
  EXPECT_EQ(c.passes(), 3);  // 11 + 11 + 10
  c.radix_bits = 8;
  EXPECT_EQ(c.passes(), 4);
  c.half_first = true;
  EXPECT_EQ(c.passes(), 5);
  c.dtype = DType::kF16;
  c.half_first = false;
  EXPECT_EQ(c.passes(), 2);
  c.radix_bits = 11;
  EXPECT_EQ(c.passes(), 2);  // 11 + 5
}

// Table of broken constraints and the constraint name the message must carry.
TEST(ConstraintTest, RejectsEachBrokenConstraintByName) {
  struct Row {
    const char* constraint;
    Config c;
  };
  std::vector<Row> rows;
  auto with = [](auto f) {
    Config c = Block();
    f(c);
    return c;
  };
  rows.push_back({"block", with([](Config& c) { c.block_threads = 500; })});
  rows.push_back({"block", with([](Config& c) { c.block_threads = 2048; })});
  rows.push_back({"radix", with([](Config& c) { c.radix_bits = 9; })});
  rows.push_back({"first-pass", with([](Config& c) {
                    c.dtype = DType::kBF16;
                    c.half_first = true;
                  })});
  rows.push_back({"cluster", with([](Config& c) { c.cluster = 3; })});
  rows.push_back({"cluster", with([](Config& c) { c.cluster = 32; })});
  rows.push_back({"buffer", with([](Config& c) { c.smem_buffer = 100; })});
  rows.push_back({"rounds", with([](Config& c) { c.rounds = 0; })});
  rows.push_back({"rounds", with([](Config& c) { c.rounds = 3; })});  // 3 passes: at most 2
  rows.push_back({"items", with([](Config& c) { c.items = 4; })});
  rows.push_back({"radix", with([](Config& c) {
                    c = Warp();
                    c.radix_bits = 8;
                  })});
  rows.push_back({"warp-knobs", with([](Config& c) {
                    c = Warp();
                    c.smem_buffer = 1024;
                  })});
  rows.push_back({"items", with([](Config& c) {
                    c = Warp();
                    c.items = 0;
                  })});
  // The warp-mode bound: rounds 0 or 1, and 1 only for 32-bit keys and at
  // most 16 items per lane.
  rows.push_back({"rounds", with([](Config& c) {
                    c = Warp();
                    c.rounds = 2;
                  })});
  rows.push_back({"rounds", with([](Config& c) {
                    c = Warp();  // bf16
                    c.rounds = 1;
                  })});
  rows.push_back({"rounds", with([](Config& c) {
                    c = Warp();
                    c.dtype = DType::kF32;
                    c.items = 32;
                    c.rounds = 1;
                  })});
  for (const Row& r : rows) {
    Status s = Validate(r.c, Arch::Sm90());
    ASSERT_FALSE(s.ok()) << r.c.Id();
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.where().find(std::string("constraint ") + r.constraint), std::string::npos)
        << r.c.Id() << " -> " << s.ToString();
  }
}

TEST(ConstraintTest, RejectsOversizedSharedMemory) {
  Config c = Block();
  c.smem_buffer = 16384;  // 128 KB of candidates + 24 KB histograms fits sm_90...
  EXPECT_TRUE(Validate(c, Arch::Sm90()).ok());
  c.cluster = 1;
  EXPECT_FALSE(Validate(c, Arch::Sm80()).ok() && c.fixed_smem_bytes() > Arch::Sm80().max_smem_optin);
  Arch small = Arch::Sm90();
  small.max_smem_optin = 100 * 1024;
  Status s = Validate(c, small);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.where().find("constraint smem"), std::string::npos) << s.ToString();
}

TEST(ConstraintTest, ClustersOnlyFromSm90) {
  Config c = Block();
  EXPECT_TRUE(Validate(c, Arch::Sm90()).ok());
  Status s = Validate(c, Arch::Sm80());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("sm_90"), std::string::npos);
  c.cluster = 1;
  EXPECT_TRUE(Validate(c, Arch::Sm80()).ok());
}

TEST(ConstraintTest, WarpModeMustHoldTheRow) {
  const Config c = Warp();
  EXPECT_TRUE(ValidateFor(c, Arch::Sm90(), Prob(DType::kBF16, 16, 256, 8)).ok());
  Status s = ValidateFor(c, Arch::Sm90(), Prob(DType::kBF16, 16, 257, 8));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.where().find("constraint items"), std::string::npos);
  EXPECT_FALSE(ValidateFor(c, Arch::Sm90(), Prob(DType::kF32, 16, 256, 8)).ok());  // dtype mismatch
}

TEST(SpaceTest, EnumerationIsValidUniqueAndStable) {
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
    for (const Problem& p : {Prob(dt, 64, 32768, 2048), Prob(dt, 1, 524288, 2048), Prob(dt, 4096, 256, 8),
                             Prob(dt, 128, 131072, 2048), Prob(dt, 3, 100, 5)}) {
      const auto a = Enumerate(p, Arch::Sm90());
      const auto b = Enumerate(p, Arch::Sm90());
      ASSERT_FALSE(a.empty()) << p.ToString();
      EXPECT_EQ(a, b);
      std::set<std::string> ids;
      for (const Config& c : a) {
        EXPECT_TRUE(ValidateFor(c, Arch::Sm90(), p).ok()) << c.Id();
        EXPECT_TRUE(ids.insert(c.Id()).second) << "duplicate " << c.Id();
      }
    }
}

TEST(SpaceTest, ShortRowsGetWarpModeLongSingleRowsGetClusters) {
  auto has = [](const std::vector<Config>& v, auto pred) {
    for (const Config& c : v)
      if (pred(c)) return true;
    return false;
  };
  const auto moe = Enumerate(Prob(DType::kF32, 4096, 256, 8), Arch::Sm90());
  EXPECT_TRUE(has(moe, [](const Config& c) { return c.warp_mode() && c.items == 8; }));
  const auto dsa = Enumerate(Prob(DType::kF32, 1, 524288, 2048), Arch::Sm90());
  EXPECT_TRUE(has(dsa, [](const Config& c) { return c.cluster == 16; }));
  EXPECT_FALSE(has(dsa, [](const Config& c) { return c.warp_mode(); }));
  // The 8192-candidate buffer: one CTA per row and k >= 1024 only.
  const auto big = Enumerate(Prob(DType::kF32, 128, 131072, 2048), Arch::Sm90());
  EXPECT_TRUE(has(big, [](const Config& c) { return c.smem_buffer == 8192 && c.cluster == 1; }));
  EXPECT_FALSE(has(big, [](const Config& c) { return c.smem_buffer == 8192 && c.cluster != 1; }));
  EXPECT_FALSE(has(Enumerate(Prob(DType::kF32, 64, 32768, 512), Arch::Sm90()),
                   [](const Config& c) { return c.smem_buffer == 8192; }));
  // No clusters on sm_80.
  const auto a100 = Enumerate(Prob(DType::kF32, 1, 524288, 2048), Arch::Sm80());
  EXPECT_FALSE(has(a100, [](const Config& c) { return c.cluster > 1; }));
}

TEST(SpaceTest, WarpBoundIsItsOwnKernelForFp32Only) {
  Config w = Warp();
  w.dtype = DType::kF32;
  EXPECT_TRUE(Validate(w, Arch::Sm90()).ok());
  Config b = w;
  b.rounds = 1;
  ASSERT_TRUE(Validate(b, Arch::Sm90()).ok()) << Validate(b, Arch::Sm90()).ToString();
  EXPECT_TRUE(b.warp_bound());
  EXPECT_FALSE(w.warp_bound());
  EXPECT_EQ(b.Id(), "radix_f32_b256_r1_s0_c0_t1_m0_i8");
  EXPECT_EQ(b.KernelKey(), w.KernelKey() + "_t1");
  EXPECT_NE(GenerateSource(b).hash, GenerateSource(w).hash);
  EXPECT_EQ(GenerateSource(b).name_expression, "topk::topk_kernel<topk::Policy<0, 256, 1, 0, 0, 8, 1>>");
  EXPECT_EQ(GenerateSource(w).name_expression, "topk::topk_kernel<topk::Policy<0, 256, 1, 0, 0, 8>>");
  auto back = Config::FromId(b.Id());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, b);
  // The tuner sees both warp bodies for fp32 rows, only the first for 16-bit keys.
  auto count = [](const std::vector<Config>& v, int rounds) {
    int n = 0;
    for (const Config& c : v) n += c.warp_mode() && c.rounds == rounds;
    return n;
  };
  const auto f32 = Enumerate(Prob(DType::kF32, 4096, 256, 8), Arch::Sm90());
  EXPECT_EQ(count(f32, 0), 3);
  EXPECT_EQ(count(f32, 1), 3);
  const auto bf16 = Enumerate(Prob(DType::kBF16, 16384, 256, 8), Arch::Sm90());
  EXPECT_EQ(count(bf16, 0), 3);
  EXPECT_EQ(count(bf16, 1), 0);
  EXPECT_EQ(count(EnumerateKernels(DType::kF32, Arch::Sm80()), 1), 12);  // 3 blocks x items 2..16
  EXPECT_EQ(count(EnumerateKernels(DType::kF16, Arch::Sm90()), 1), 0);
}

TEST(SpaceTest, KernelEnumerationCoversEveryCodeShapeOnce) {
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    const auto k90 = EnumerateKernels(dt, Arch::Sm90());
    const auto k80 = EnumerateKernels(dt, Arch::Sm80());
    std::set<std::string> keys;
    for (const Config& c : k90) {
      EXPECT_TRUE(keys.insert(c.KernelKey()).second);
      EXPECT_TRUE(Validate(c, Arch::Sm90()).ok()) << c.Id();
    }
    for (const Config& c : k80) EXPECT_LE(c.cluster, 1) << c.Id();
    EXPECT_LT(k80.size(), k90.size());
    // Every variant a problem can enumerate has its kernel in the list.
    for (const Config& c : Enumerate(Prob(dt, 8, 65536, 1024), Arch::Sm90()))
      EXPECT_TRUE(keys.count(c.KernelKey())) << c.KernelKey();
  }
}

TEST(SpaceTest, DefaultsAreValid) {
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
    for (const Problem& p : {Prob(dt, 1, 1, 1), Prob(dt, 4096, 256, 8), Prob(dt, 4096, 3, 2), Prob(dt, 64, 4096, 128),
                             Prob(dt, 1, 524288, 2048), Prob(dt, 7, 513, 600)})
      for (const Arch& a : {Arch::Sm80(), Arch::Sm90()}) {
        const Config c = DefaultConfig(p, a);
        EXPECT_TRUE(ValidateFor(c, a, p).ok()) << p.ToString() << " " << c.Id() << " "
                                               << ValidateFor(c, a, p).ToString();
      }
}

TEST(SpaceTest, DefaultTakesTheWarpBoundForManyFp32RowsAndSmallK) {
  EXPECT_TRUE(DefaultConfig(Prob(DType::kF32, 4096, 256, 8), Arch::Sm90()).warp_bound());
  EXPECT_TRUE(DefaultConfig(Prob(DType::kF32, 16384, 200, 2), Arch::Sm80()).warp_bound());
  EXPECT_FALSE(DefaultConfig(Prob(DType::kF32, 1024, 256, 8), Arch::Sm90()).warp_bound());
  EXPECT_FALSE(DefaultConfig(Prob(DType::kF32, 4096, 256, 16), Arch::Sm90()).warp_bound());
  EXPECT_FALSE(DefaultConfig(Prob(DType::kBF16, 16384, 256, 8), Arch::Sm90()).warp_bound());
  EXPECT_FALSE(DefaultConfig(Prob(DType::kF32, 4096, 1024, 8), Arch::Sm90()).warp_mode());
}

TEST(ArchTest, FromName) {
  EXPECT_EQ(Arch::FromName("sm_90")->Name(), "sm_90");
  EXPECT_EQ(Arch::FromName("80")->Name(), "sm_80");
  EXPECT_FALSE(Arch::FromName("sm_70").ok());
  EXPECT_FALSE(Arch::FromName("hopper").ok());
}

TEST(SourceTest, OneIncludeOneInstantiationAndStaticAsserts) {
  const KernelSource s = GenerateSource(Block());
  EXPECT_EQ(s.key, Block().KernelKey());
  EXPECT_NE(s.text.find("#include \"topk/kernels.cuh\""), std::string::npos);
  EXPECT_NE(s.text.find("template __global__ void " + s.name_expression), std::string::npos);
  EXPECT_NE(s.text.find("static_assert(P::kHistSmem == " + std::to_string(Block().hist_smem_bytes())),
            std::string::npos);
  EXPECT_EQ(s.name_expression, "topk::topk_kernel<topk::Policy<0, 512, 11, 0, 2, 0>>");
  EXPECT_EQ(s.hash.size(), 16u);
}

TEST(SourceTest, LaunchKnobsShareOneBinary) {
  Config a = Block(), b = Block();
  b.smem_buffer = 1024;
  b.rounds = 2;
  b.row_cache = false;
  EXPECT_NE(a.Id(), b.Id());
  EXPECT_EQ(GenerateSource(a).hash, GenerateSource(b).hash);
  b.cluster = 16;  // cluster size is a launch attribute too
  EXPECT_EQ(GenerateSource(a).hash, GenerateSource(b).hash);
  b.cluster = 1;
  EXPECT_NE(GenerateSource(a).hash, GenerateSource(b).hash);
  b.block_threads = 256;
  EXPECT_NE(GenerateSource(a).hash, GenerateSource(b).hash);
}

TEST(SourceTest, StandaloneInlinesEveryTemplateOnce) {
  const std::string s = Standalone(GenerateSource(Block()));
  EXPECT_EQ(s.find("#include \"topk/"), std::string::npos);
  EXPECT_EQ(s.find("#pragma once"), std::string::npos);
  size_t count = 0;
  for (size_t p = s.find("// ---- topk/keys.cuh ----"); p != std::string::npos;
       p = s.find("// ---- topk/keys.cuh ----", p + 1))
    ++count;
  EXPECT_EQ(count, 1u);
  EXPECT_FALSE(EmbeddedTemplates().empty());
}

TEST(SourceTest, FaultSourcesAreTestOnlyAndNamed) {
  EXPECT_TRUE(FaultSource("crash").ok());
  EXPECT_TRUE(FaultSource("hang").ok());
  EXPECT_TRUE(FaultSource("wrong").ok());
  EXPECT_FALSE(FaultSource("explode").ok());
}

TEST(LaunchTest, ComputeLaunchFillsKnobsAndFitsSharedMemory) {
  const Arch arch = Arch::Sm90();
  const Problem p = Prob(DType::kF32, 64, 32768, 2048);
  Config c = Block();
  c.cluster = 2;
  TopkArgs a = {};
  const jit::LaunchShape s = jit::ComputeLaunch(c, p, p.batch, arch, &a);
  EXPECT_EQ(s.grid, 128u);
  EXPECT_EQ(s.cluster, 2u);
  EXPECT_EQ(s.block, 512u);
  EXPECT_EQ(a.buffer, 4096);
  EXPECT_EQ(a.rounds, 1);
  EXPECT_GE(a.cache_cap, 16384 + 4);  // half a row plus alignment slack
  EXPECT_EQ(a.cache_cap % 4, 0);
  EXPECT_EQ(s.smem_bytes, c.fixed_smem_bytes() + a.cache_cap * 4);
  EXPECT_LE(s.smem_bytes + arch.static_smem_reserve, arch.max_smem_optin);
  // A row too long for shared memory caches as much as fits.
  const jit::LaunchShape big = jit::ComputeLaunch(c, Prob(DType::kF32, 1, 1 << 22, 2048), 1, arch, &a);
  EXPECT_LE(big.smem_bytes + arch.static_smem_reserve, arch.max_smem_optin);
  EXPECT_EQ(a.cache_cap, (arch.max_smem_optin - arch.static_smem_reserve - c.fixed_smem_bytes()) / 4 / 4 * 4);
  EXPECT_GT(a.cache_cap, 16384);
  // Warp mode: rows per CTA = warps per CTA.
  const jit::LaunchShape w = jit::ComputeLaunch(Warp(), Prob(DType::kBF16, 1000, 256, 8), 1000, arch, &a);
  EXPECT_EQ(w.grid, 125u);
  EXPECT_EQ(w.smem_bytes, 0);
}

TEST(ProblemTest, ValidateNamesTheField) {
  Problem p = Prob(DType::kF32, 1, 100, 5);
  EXPECT_TRUE(p.Validate().ok());
  p.k = -1;
  EXPECT_NE(p.Validate().message().find("k must be"), std::string::npos);
  p = Prob(DType::kF32, 1, 100, 5);
  p.row_stride = 99;
  EXPECT_NE(p.Validate().message().find("row_stride"), std::string::npos);
  p = Prob(DType::kF32, -1, 100, 5);
  EXPECT_NE(p.Validate().message().find("batch"), std::string::npos);
  p = Prob(DType::kF32, 1, 0, 5);
  EXPECT_NE(p.Validate().message().find("n must be"), std::string::npos);
  EXPECT_EQ(ParseDType("bfloat16").value(), DType::kBF16);
  EXPECT_FALSE(ParseDType("int8").ok());
}

}  // namespace
}  // namespace topk::gen
