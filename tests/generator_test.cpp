// Config, constraints, enumeration, ids and generated source: no GPU.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <sstream>

#include "generator/config.hpp"
#include "generator/family.hpp"
#include "generator/filter.hpp"
#include "generator/grid.hpp"
#include "generator/resident.hpp"
#include "generator/radix.hpp"
#include "generator/source.hpp"
#include "generator/warp.hpp"
#include "jit/device.hpp"

namespace topk::gen {
namespace {

RadixParams Block() {
  RadixParams c;
  c.dtype = DType::kF32;
  c.block_threads = 512;
  c.radix_bits = 11;
  c.smem_buffer = 4096;
  c.cluster = 8;
  c.rounds = 1;
  c.row_cache = true;
  return c;
}

WarpParams Warp() { return WarpParams{DType::kBF16, 256, 8, 0}; }

RadixParams R(const Config& c) { return RadixParams::Of(c); }

Problem Prob(DType dt, int64_t batch, int64_t n, int64_t k) {
  Problem p;
  p.dtype = dt;
  p.batch = batch;
  p.n = n;
  p.k = k;
  return p;
}

// Where Validate finds `p` broken once f has changed a copy of it ("" when
// it still validates).
template <class Params, class F>
std::string BrokenWhere(Params p, const Arch& arch, F f) {
  f(p);
  return Validate(p, arch).where();
}

TEST(ConfigTest, IdNamesEveryParameterAndRoundTrips) {
  const Config c = Block();
  EXPECT_EQ(c.Id(), "radix_f32_b512_r11_h0_s4096_c8_t1_m1");
  RadixParams hp = Block();
  hp.half_first = true;
  const Config h = hp;
  EXPECT_EQ(h.Id(), "radix_f32_b512_r11_h1_s4096_c8_t1_m1");
  EXPECT_EQ(Config(Warp()).Id(), "warp_bf16_b256_i8_l0");
  for (const Config& x : {c, h, Config(Warp())}) {
    auto back = Config::FromId(x.Id());
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, x);
  }
}

TEST(ConfigTest, FromIdRejectsMalformedIds) {
  for (const char* bad : {"", "radix_", "_f32", "topk_f32_b512_r11_s4096_c8_t1_m1_i0",
                          "radix_f64_b512_r11_s4096_c8_t1_m1_i0", "radix_f32_b512_r11_s4096_c8_t1_m2_i0",
                          "radix_f32_bx_r11_s4096_c8_t1_m1_i0", "radix_f32_b512_r11_s4096_c8_t1_m1",
                          "radix_f32_b512_r11_h0_s4096_c8_t1_mx", "radix_f32_b512_r11_h0_s4096_c8_t1_m1_z3",
                          "warp_f32_b128_i8", "warp_f32_b128_i8_lx", "warp_f32_b128_i8_l99999999999"}) {
    auto r = Config::FromId(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  }
}

// Ids and JSON stored by earlier releases (one "radix" family whose cluster 0
// meant one warp per row) still parse, into today's families.
TEST(ConfigTest, EarlierReleasesIdsAndJsonStillParse) {
  auto r = Config::FromId("radix_f32_b512_r11_s4096_c8_t1_m1_i0");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, Config(Block()));
  auto h = Config::FromId("radix_f32_b1024_r11h_s4096_c16_t2_m0_i0");
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(R(*h).half_first);
  EXPECT_EQ(R(*h).cluster, 16);
  EXPECT_FALSE(R(*h).row_cache);
  auto w = Config::FromId("radix_f32_b128_r1_s0_c0_t1_m0_i8");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->Id(), "warp_f32_b128_i8_l1");
  const nlohmann::json old = {{"dtype", "bf16"},   {"block_threads", 256}, {"radix_bits", 1}, {"half_first", false},
                              {"smem_buffer", 0},  {"cluster", 0},         {"rounds", 0},     {"row_cache", false},
                              {"items", 8}};
  auto j = Config::FromJson(old);
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(*j, Config(Warp()));
  nlohmann::json old_radix = old;
  old_radix["cluster"] = 8;
  old_radix["radix_bits"] = 11;
  old_radix["smem_buffer"] = 4096;
  old_radix["rounds"] = 1;
  old_radix["row_cache"] = true;
  old_radix["dtype"] = "f32";
  old_radix["block_threads"] = 512;
  old_radix["items"] = 0;
  auto jr = Config::FromJson(old_radix);
  ASSERT_TRUE(jr.ok());
  EXPECT_EQ(*jr, Config(Block()));
}

// Found by fuzz_variant_id (fuzz/regressions/fuzz_variant_id/): a
// configuration object of an earlier release whose integer fields hold a
// float beyond int (1e300) or a fraction was converted with json::get<int>,
// undefined behaviour (UBSan: "1e+300 is outside the range of representable
// values of type 'int'"). Such an object is not a legacy configuration.
TEST(ConfigTest, LegacyJsonWithNonIntegerFieldIsRejected) {
  const nlohmann::json good = {{"dtype", "f32"}, {"block_threads", 128}, {"cluster", 0}, {"rounds", 1}, {"items", 8}};
  ASSERT_TRUE(Config::FromJson(good).ok());
  for (const char* key : {"cluster", "block_threads", "rounds", "items"}) {
    for (const nlohmann::json& bad : {nlohmann::json(1e300), nlohmann::json(-1e300), nlohmann::json(128.5),
                                      nlohmann::json(uint64_t{1} << 40), nlohmann::json(int64_t{-1} << 40)}) {
      nlohmann::json j = good;
      j[key] = bad;
      EXPECT_FALSE(Config::FromJson(j).ok()) << key << " = " << bad.dump();
    }
  }
  nlohmann::json radix = {{"dtype", "f32"}, {"block_threads", 512}, {"radix_bits", 11}, {"smem_buffer", 4096},
                          {"cluster", 1},   {"rounds", 2}};
  ASSERT_TRUE(Config::FromJson(radix).ok());
  for (const char* key : {"cluster", "block_threads", "radix_bits", "smem_buffer", "rounds"}) {
    nlohmann::json j = radix;
    j[key] = 1e300;
    EXPECT_FALSE(Config::FromJson(j).ok()) << key;
  }
  // The ids of earlier releases go through the same path.
  EXPECT_FALSE(Config::FromId("radix_f32_b512_r11_s4096_c99999999999_t2_m1_i0").ok());
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
  j = c.ToJson();
  j["family"] = "nope";
  EXPECT_NE(Config::FromJson(j).status().message().find("unknown family 'nope'"), std::string::npos);
  j = c.ToJson();
  j["items"] = 8;  // a warp parameter on a radix config
  EXPECT_NE(Config::FromJson(j).status().message().find("unknown field \"items\""), std::string::npos);
}

// The radix strategy switches are parameters with an implicit -1 (the
// automatic rule): ids and JSON leave them out there, so the ids users have
// stored, and the kernels of untuned variants, are as they were.
TEST(StrategySwitchTest, AutomaticSwitchesLeaveIdsJsonAndSourcesAsTheyWere) {
  const char* stored = "radix_f32_b1024_r11_h0_s1024_c2_t1_m1";
  auto c = Config::FromId(stored);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->Id(), stored);
  RadixParams d;
  d.block_threads = 1024;
  d.smem_buffer = 1024;
  d.cluster = 2;
  EXPECT_EQ(Config(d).Id(), stored);
  EXPECT_EQ(*c, Config(d));
  EXPECT_EQ(c->Get("lane_atomics"), -1);
  EXPECT_EQ(c->Get("prefetch"), -1);
  EXPECT_EQ(c->KernelKey(), "kernel_f32_b1024_r11_cN_i0");
  // JSON: no switch fields written, none needed.
  const nlohmann::json j = c->ToJson();
  EXPECT_FALSE(j.contains("lane_atomics")) << j.dump();
  EXPECT_FALSE(j.contains("prefetch")) << j.dump();
  auto back = Config::FromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, *c);
  // The source is the plain policy's, byte for byte (what the generator
  // wrote before the switches were parameters).
  const KernelSource src = GenerateSource(*c);
  EXPECT_EQ(src.name_expression, "topk::topk_kernel<topk::Policy<0, 1024, 11, 0, 2, 0>>");
  EXPECT_EQ(src.text,
            "// Generated by topk-tune: kernel kernel_f32_b1024_r11_cN_i0.\n"
            "// Variants sharing this code shape differ only in launch arguments.\n"
            "#include \"topk/kernels.cuh\"\n\n"
            "namespace topk_generated {\n"
            "using P = topk::Policy<0, 1024, 11, 0, 2, 0>;\n"
            "static_assert(P::kHistSmem == 32768, \"host and template disagree on the histogram shared memory\");\n"
            "static_assert(P::kPasses == 3, \"host and template disagree on the digit passes\");\n"
            "static_assert(sizeof(TopkArgs) == " +
                std::to_string(TOPK_ARGS_SIZE) +
                ", \"TopkArgs layout\");\n"
                "}  // namespace topk_generated\n\n"
                "template __global__ void topk::topk_kernel<topk::Policy<0, 1024, 11, 0, 2, 0>>(TopkArgs);\n");
  EXPECT_EQ(src.hash, TopkKernelSource(src.key, "topk::Policy<0, 1024, 11, 0, 2, 0>", 32768, 3).hash);
}

TEST(StrategySwitchTest, SetSwitchesAreInTheIdKeyAndSource) {
  auto c = Config::FromId("radix_f32_b512_r11_h0_s4096_c1_t1_m1_la0_pf1");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->Id(), "radix_f32_b512_r11_h0_s4096_c1_t1_m1_la0_pf1");
  const RadixParams r = RadixParams::Of(*c);
  EXPECT_EQ(r.lane_atomics, 0);
  EXPECT_EQ(r.branch_free, -1);
  EXPECT_EQ(r.capture_only, -1);
  EXPECT_EQ(r.uniform_check, -1);
  EXPECT_EQ(r.prefetch, 1);
  EXPECT_FALSE(r.automatic_strategy());
  EXPECT_TRUE(Validate(*c, Arch::Sm90()).ok());
  EXPECT_EQ(c->KernelKey(), "kernel_f32_b512_r11_c1_i0_la0_pf1");
  auto j = Config::FromJson(c->ToJson());
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(*j, *c);
  EXPECT_EQ(c->ToJson()["lane_atomics"], 0);
  const KernelSource src = GenerateSource(*c);
  EXPECT_EQ(src.name_expression,
            "topk::topk_kernel<topk::Strategy<topk::Policy<0, 512, 11, 0, 1, 0>, 0, -1, -1, -1, 1>>");
  // The host's effective switches, asserted against the template's.
  EXPECT_NE(src.text.find("static_assert(P::kLaneAtomics == false"), std::string::npos) << src.text;
  EXPECT_NE(src.text.find("static_assert(P::kBranchFree == true"), std::string::npos) << src.text;
  EXPECT_NE(src.text.find("static_assert(P::kUniformCheck == true"), std::string::npos) << src.text;
  EXPECT_NE(src.text.find("static_assert(P::kPrefetch == true"), std::string::npos) << src.text;
  EXPECT_NE(src.hash, GenerateSource(Config::FromId("radix_f32_b512_r11_h0_s4096_c1_t1_m1").value()).hash);
  // Negative values parse (and -1 is left out of the id again).
  auto m = Config::FromId("radix_f32_b512_r11_h0_s4096_c1_t1_m1_bf-1_uc0");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->Id(), "radix_f32_b512_r11_h0_s4096_c1_t1_m1_uc0");
}

TEST(StrategySwitchTest, BadSwitchesAreClearErrors) {
  // Out of range: parses, and Validate names the constraint.
  auto c = Config::FromId("radix_f32_b512_r11_h0_s4096_c1_t1_m1_la2");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Status s = Validate(*c, Arch::Sm90());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.where().find("constraint strategy"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("lane_atomics"), std::string::npos) << s.ToString();
  // The uniform-bin check only where the template allows it.
  for (const char* bad : {"radix_f32_b512_r11_h0_s4096_c2_t1_m1_uc1", "radix_f32_b512_r11_h1_s4096_c1_t1_m1_uc1",
                          "radix_bf16_b512_r11_h0_s4096_c1_t1_m1_uc1"}) {
    auto u = Config::FromId(bad);
    ASSERT_TRUE(u.ok()) << bad;
    EXPECT_NE(Validate(*u, Arch::Sm90()).where().find("constraint strategy"), std::string::npos) << bad;
  }
  EXPECT_TRUE(Validate(Config::FromId("radix_f32_b512_r8_h0_s4096_c1_t1_m1_uc1").value(), Arch::Sm90()).ok());
  // Out of order, unknown or repeated fields are malformed ids naming what
  // was expected.
  for (const char* bad : {"radix_f32_b512_r11_h0_s4096_c1_t1_m1_pf1_la0", "radix_f32_b512_r11_h0_s4096_c1_t1_m1_zz1",
                          "radix_f32_b512_r11_h0_s4096_c1_t1_m1_la0_la1", "radix_f32_b512_r11_h0_s4096_c1_t1_m1_la",
                          "radix_f32_b512_r11_h0_s4096_c1_t1_m1_lax"}) {
    auto r = Config::FromId(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("expected"), std::string::npos) << r.status().ToString();
  }
  EXPECT_NE(Config::FromId("radix_f32_b512_r11_h0_s4096_c1_t1_m1_zz1").status().message().find("'la<lane_atomics>'"),
            std::string::npos)
      << Config::FromId("radix_f32_b512_r11_h0_s4096_c1_t1_m1_zz1").status().ToString();
  // A required field still names itself.
  EXPECT_NE(Config::FromId("radix_f32_b512_r11_h0_s4096_c1_t1_mx").status().message().find("'m<row_cache>'"),
            std::string::npos);
  // JSON with a mistyped switch is refused.
  nlohmann::json j = Config(Block()).ToJson();
  j["prefetch"] = "on";
  EXPECT_FALSE(Config::FromJson(j).ok());
}

// Refinements of a default config: valid, each one switch away from it and
// flipped from the automatic rule.
TEST(StrategySwitchTest, RefinementsFlipOneAutomaticSwitchEach) {
  const char* sw[] = {"lane_atomics", "branch_free", "capture_only", "uniform_check", "prefetch"};
  // Problems the radix default keeps: more than 7 rows over 131072, k below
  // 64 there, or k above n / 8.
  for (const Problem& p : {Prob(DType::kF32, 8, 524288, 2048), Prob(DType::kBF16, 128, 65536, 16384),
                           Prob(DType::kF32, 1, 524288, 32)}) {
    const Config def = DefaultConfig(p, Arch::Sm90());
    ASSERT_EQ(def.family, "radix") << p.ToString();
    const RadixParams d = RadixParams::Of(def);
    const bool automatic[] = {d.auto_lane_atomics(), d.auto_branch_free(), d.auto_capture_only(),
                              d.auto_uniform_check(), d.auto_prefetch()};
    const std::vector<Config> refined = RadixFamily().Refinements(def, p, Arch::Sm90());
    EXPECT_GE(refined.size(), 4u) << p.ToString();
    std::set<std::string> ids;
    for (const Config& r : refined) {
      EXPECT_TRUE(ValidateFor(r, Arch::Sm90(), p).ok()) << r.Id();
      EXPECT_TRUE(ids.insert(r.Id()).second) << r.Id();
      int differ = 0;
      for (size_t i = 0; i < r.params.size(); ++i) differ += r.params[i] != def.params[i];
      EXPECT_EQ(differ, 1) << r.Id();
      for (size_t i = 0; i < 5; ++i)
        if (r.Get(sw[i]) != -1) {
          EXPECT_EQ(r.Get(sw[i]), automatic[i] ? 0 : 1) << r.Id() << " " << sw[i];
        }
      EXPECT_NE(r.KernelKey(), def.KernelKey());
    }
  }
  // A switch already set is not refined again; other families have none.
  Config set = Config(Block());
  set.Set("prefetch", 0);
  for (const Config& r : RadixFamily().Refinements(set, Prob(DType::kF32, 64, 32768, 2048), Arch::Sm90()))
    EXPECT_EQ(r.Get("prefetch"), 0);
  EXPECT_TRUE(FindFamily("warp")->Refinements(Config(Warp()), Prob(DType::kBF16, 4096, 256, 8), Arch::Sm90()).empty());
}

TEST(FamilyTest, RegistryListsBothFamiliesAndTheirParameters) {
  ASSERT_NE(FindFamily("radix"), nullptr);
  ASSERT_NE(FindFamily("warp"), nullptr);
  EXPECT_EQ(FindFamily("nope"), nullptr);
  for (const Family* f : Families()) {
    EXPECT_FALSE(f->summary().empty());
    std::set<std::string> tags;
    for (const ParamSpec& p : f->params()) {
      EXPECT_TRUE(tags.insert(p.tag).second) << f->name() << " " << p.tag;
      EXPECT_FALSE(p.meaning.empty()) << p.name;
      EXPECT_FALSE(p.values.empty()) << p.name;
    }
    EXPECT_TRUE(FamilyOf(f->Blank(DType::kF32)).ok());
  }
  // A taken name, a name with '_' and repeated tags are refused.
  EXPECT_FALSE(RegisterFamily(MakeRadixFamily()).ok());
  Config broken = Block();
  broken.params.pop_back();
  Status s = Validate(broken, Arch::Sm90());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.where().find("constraint family"), std::string::npos) << s.ToString();
  broken.family = "nope";
  EXPECT_NE(Validate(broken, Arch::Sm90()).message().find("unknown kernel family 'nope'"), std::string::npos);
}

TEST(ConfigTest, PrintingUsesTheId) {
  std::ostringstream s;
  s << Config(Block());
  EXPECT_EQ(s.str(), Config(Block()).Id());
}

TEST(ConfigTest, PassesFollowKeyWidthRadixAndFirstPass) {
  RadixParams c = Block();
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
  auto with = [](auto f) -> Config {
    RadixParams c = Block();
    f(c);
    return c;
  };
  auto warp = [](auto f) -> Config {
    WarpParams c = Warp();
    f(c);
    return c;
  };
  auto raw = [](const char* name, int v) {
    Config c = Block();
    c.Set(name, v);
    return c;
  };
  rows.push_back({"block", with([](RadixParams& c) { c.block_threads = 500; })});
  rows.push_back({"block", with([](RadixParams& c) { c.block_threads = 2048; })});
  rows.push_back({"radix", with([](RadixParams& c) { c.radix_bits = 9; })});
  rows.push_back({"first-pass", with([](RadixParams& c) {
                    c.dtype = DType::kBF16;
                    c.half_first = true;
                  })});
  rows.push_back({"first-pass", raw("half_first", 2)});
  rows.push_back({"row-cache", raw("row_cache", -1)});
  rows.push_back({"cluster", with([](RadixParams& c) { c.cluster = 3; })});
  rows.push_back({"cluster", with([](RadixParams& c) { c.cluster = 32; })});
  rows.push_back({"cluster", with([](RadixParams& c) { c.cluster = 0; })});  // one warp per row is a family now
  rows.push_back({"buffer", with([](RadixParams& c) { c.smem_buffer = 100; })});
  rows.push_back({"rounds", with([](RadixParams& c) { c.rounds = 0; })});
  rows.push_back({"rounds", with([](RadixParams& c) { c.rounds = 3; })});  // 3 passes: at most 2
  rows.push_back({"block", warp([](WarpParams& c) { c.block_threads = 48; })});
  rows.push_back({"items", warp([](WarpParams& c) { c.items = 0; })});
  rows.push_back({"items", warp([](WarpParams& c) { c.items = 64; })});
  // The lane-maximum bound: 0 or 1, and 1 only for 32-bit keys and at most
  // 16 items per lane.
  rows.push_back({"lane-bound", warp([](WarpParams& c) { c.lane_bound = 2; })});
  rows.push_back({"lane-bound", warp([](WarpParams& c) { c.lane_bound = 1; })});  // bf16
  rows.push_back({"lane-bound", warp([](WarpParams& c) {
                    c.dtype = DType::kF32;
                    c.items = 32;
                    c.lane_bound = 1;
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
  RadixParams c = Block();
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
  RadixParams c = Block();
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
  EXPECT_NE(ValidateFor(c, Arch::Sm90(), Prob(DType::kF32, 16, 256, 8)).where().find("constraint dtype"),
            std::string::npos);
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
  EXPECT_TRUE(has(moe, [](const Config& c) { return c.family == "warp" && c.Get("items") == 8; }));
  const auto dsa = Enumerate(Prob(DType::kF32, 1, 524288, 2048), Arch::Sm90());
  EXPECT_TRUE(has(dsa, [](const Config& c) { return c.family == "radix" && R(c).cluster == 16; }));
  EXPECT_FALSE(has(dsa, [](const Config& c) { return c.family == "warp"; }));
  // The 8192-candidate buffer: one CTA per row and k >= 1024 only.
  const auto big = Enumerate(Prob(DType::kF32, 128, 131072, 2048), Arch::Sm90());
  EXPECT_TRUE(has(big, [](const Config& c) { return R(c).smem_buffer == 8192 && R(c).cluster == 1; }));
  EXPECT_FALSE(has(big, [](const Config& c) { return R(c).smem_buffer == 8192 && R(c).cluster != 1; }));
  EXPECT_FALSE(has(Enumerate(Prob(DType::kF32, 64, 32768, 512), Arch::Sm90()),
                   [](const Config& c) { return R(c).smem_buffer == 8192; }));
  // No clusters on sm_80.
  const auto a100 = Enumerate(Prob(DType::kF32, 1, 524288, 2048), Arch::Sm80());
  EXPECT_FALSE(has(a100, [](const Config& c) { return c.family == "radix" && R(c).cluster > 1; }));
  // A family filter.
  SpaceOptions only_radix;
  only_radix.families = {"radix"};
  EXPECT_FALSE(has(Enumerate(Prob(DType::kF32, 4096, 256, 8), Arch::Sm90(), only_radix),
                   [](const Config& c) { return c.family != "radix"; }));
}

TEST(SpaceTest, WarpBoundIsItsOwnKernelForFp32Only) {
  WarpParams wp = Warp();
  wp.dtype = DType::kF32;
  const Config w = wp;
  EXPECT_TRUE(Validate(w, Arch::Sm90()).ok());
  wp.lane_bound = 1;
  const Config b = wp;
  ASSERT_TRUE(Validate(b, Arch::Sm90()).ok()) << Validate(b, Arch::Sm90()).ToString();
  EXPECT_EQ(b.Id(), "warp_f32_b256_i8_l1");
  // Kernel keys (and so source hashes) are those of earlier releases: their
  // stored binaries stay valid.
  EXPECT_EQ(w.KernelKey(), "kernel_f32_b256_r1_c0_i8");
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
    for (const Config& c : v) n += c.family == "warp" && c.Get("lane_bound") == rounds;
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
    for (const Config& c : k80) EXPECT_LE(c.Get("cluster", 1), 1) << c.Id();
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
  auto bound = [](const Config& c) { return c.family == "warp" && c.Get("lane_bound") == 1; };
  EXPECT_TRUE(bound(DefaultConfig(Prob(DType::kF32, 4096, 256, 8), Arch::Sm90())));
  EXPECT_TRUE(bound(DefaultConfig(Prob(DType::kF32, 16384, 200, 2), Arch::Sm80())));
  EXPECT_FALSE(bound(DefaultConfig(Prob(DType::kF32, 1024, 256, 8), Arch::Sm90())));
  EXPECT_FALSE(bound(DefaultConfig(Prob(DType::kF32, 4096, 256, 16), Arch::Sm90())));
  EXPECT_FALSE(bound(DefaultConfig(Prob(DType::kBF16, 16384, 256, 8), Arch::Sm90())));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 4096, 1024, 8), Arch::Sm90()).family, "resident");
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 4096, 512, 8), Arch::Sm90()).family, "warp");
}

// The default's cluster rule reads the architecture's SM count: a GPU with
// fewer SMs splits fewer rows over clusters, and every cluster must run at
// once (Arch::max_resident_clusters: the device's answer, else a fit of 15
// clusters of 8 CTAs and 7 of 16 on 132 SMs).
TEST(SpaceTest, DefaultClustersFollowTheSmCount) {
  Arch big = Arch::Sm90(), small = Arch::Sm90();
  small.sm_count = 16;
  EXPECT_EQ(big.max_resident_clusters(1), 132);
  EXPECT_EQ(big.max_resident_clusters(2), 66);
  EXPECT_EQ(big.max_resident_clusters(4), 30);
  EXPECT_EQ(big.max_resident_clusters(8), 15);
  EXPECT_EQ(big.max_resident_clusters(16), 7);
  EXPECT_EQ(small.max_resident_clusters(4), 3);
  const Problem p = Prob(DType::kF32, 8, 262144, 8);  // fp32 k < 64: past the resident family's clusters
  EXPECT_EQ(R(DefaultConfig(p, big)).cluster, 8);  // 8 clusters of 16 CTAs would run in two waves
  EXPECT_EQ(R(DefaultConfig(p, small)).cluster, 2);  // 8 rows x 4 CTAs > 16
  EXPECT_EQ(R(DefaultConfig(Prob(DType::kF32, 7, 262144, 8), big)).cluster, 16);  // k 8: not the resident family's
  EXPECT_EQ(R(DefaultConfig(Prob(DType::kF32, 15, 262144, 8), big)).cluster, 8);
  // The device's answer wins over the fit: a GPU whose GPCs hold 6 clusters
  // of 16 CTAs and 14 of 8 gets smaller clusters and fewer resident rows.
  Arch answered = big;
  answered.resident_clusters = {132, 66, 33, 14, 6};
  EXPECT_EQ(answered.max_resident_clusters(4), 33);
  EXPECT_EQ(answered.max_resident_clusters(16), 6);
  EXPECT_EQ(R(DefaultConfig(Prob(DType::kF32, 7, 262144, 8), answered)).cluster, 8);
  EXPECT_EQ(R(DefaultConfig(Prob(DType::kF32, 15, 262144, 8), answered)).cluster, 4);
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 7, 524288, 2048), big).family, "resident");
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 7, 524288, 2048), answered).family, "radix");
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 15, 65536, 8), big).family, "resident");
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 15, 65536, 8), answered).family, "radix");
  // An answer of 0 (no cluster of that size runs) is kept, not replaced by
  // the fit; -1 (not asked) is; nothing past 16 CTAs runs.
  answered.resident_clusters = {132, 66, 30, 15, 0};
  EXPECT_EQ(answered.max_resident_clusters(16), 0);
  // (k 128: one row with k from 256 goes to the grid family.)
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 1, 524288, 128), answered).family, "radix");
  EXPECT_EQ(R(DefaultConfig(Prob(DType::kF32, 1, 524288, 128), answered)).cluster, 8);
  ResidentParams eight{DType::kF32, 1024, 1024, 16};  // 16-CTA clusters do not run: 8 of 1024 threads
  eight.cluster = 8;
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 1, 131072, 128), answered), eight.ToConfig());
  answered.resident_clusters = {-1, -1, -1, 9, -1};
  EXPECT_EQ(answered.max_resident_clusters(8), 9);
  EXPECT_EQ(answered.max_resident_clusters(16), 7);  // the fit
  EXPECT_EQ(answered.max_resident_clusters(32), 0);
  EXPECT_EQ(big.max_resident_clusters(32), 0);
}

TEST(ArchTest, FromName) {
  EXPECT_EQ(Arch::FromName("sm_90")->Name(), "sm_90");
  EXPECT_EQ(Arch::FromName("80")->Name(), "sm_80");
  EXPECT_FALSE(Arch::FromName("sm_70").ok());
  EXPECT_FALSE(Arch::FromName("hopper").ok());
}

TEST(ArchTest, ThreadsAnSmByArchitecture) {
  for (const char* n : {"sm_80", "sm_90", "sm_100"}) EXPECT_EQ(Arch::FromName(n)->max_threads_per_sm(), 2048) << n;
  for (const char* n : {"sm_86", "sm_89", "sm_120"}) EXPECT_EQ(Arch::FromName(n)->max_threads_per_sm(), 1536) << n;
}

TEST(SourceTest, OneIncludeOneInstantiationAndStaticAsserts) {
  const KernelSource s = GenerateSource(Block());
  EXPECT_EQ(s.key, Config(Block()).KernelKey());
  EXPECT_NE(s.text.find("#include \"topk/kernels.cuh\""), std::string::npos);
  EXPECT_NE(s.text.find("template __global__ void " + s.name_expression), std::string::npos);
  EXPECT_NE(s.text.find("static_assert(P::kHistSmem == " + std::to_string(Block().hist_smem_bytes())),
            std::string::npos);
  EXPECT_EQ(s.name_expression, "topk::topk_kernel<topk::Policy<0, 512, 11, 0, 2, 0>>");
  EXPECT_EQ(s.hash.size(), 16u);
}

TEST(SourceTest, LaunchKnobsShareOneBinary) {
  RadixParams a = Block(), b = Block();
  b.smem_buffer = 1024;
  b.rounds = 2;
  b.row_cache = false;
  EXPECT_NE(Config(a).Id(), Config(b).Id());
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

TEST(LaunchTest, PlanFillsKnobsAndFitsSharedMemory) {
  const Arch arch = Arch::Sm90();
  const Problem p = Prob(DType::kF32, 64, 32768, 2048);
  RadixParams c = Block();
  c.cluster = 2;
  const LaunchPlan plan = PlanLaunch(c, p, arch);
  ASSERT_EQ(plan.stages.size(), 1u);
  const Stage& s = plan.stages[0];
  const TopkArgs& a = s.args;
  EXPECT_EQ(s.Grid(p.batch), 128u);
  EXPECT_EQ(s.cluster, 2u);
  EXPECT_EQ(s.block, 512u);
  EXPECT_EQ(a.buffer, 4096);
  EXPECT_EQ(a.rounds, 1);
  EXPECT_GE(a.cache_cap, 16384 + 4);  // half a row plus alignment slack
  EXPECT_EQ(a.cache_cap % 4, 0);
  EXPECT_EQ(s.smem_bytes, c.fixed_smem_bytes() + a.cache_cap * 4);
  EXPECT_EQ(a.smem_bytes, s.smem_bytes);
  EXPECT_LE(s.smem_bytes + arch.static_smem_reserve, arch.max_smem_optin);
  // A row too long for shared memory caches as much as fits.
  const Stage big = PlanLaunch(c, Prob(DType::kF32, 1, 1 << 22, 2048), arch).stages.at(0);
  EXPECT_LE(big.smem_bytes + arch.static_smem_reserve, arch.max_smem_optin);
  EXPECT_EQ(big.args.cache_cap, (arch.max_smem_optin - arch.static_smem_reserve - c.fixed_smem_bytes()) / 4 / 4 * 4);
  EXPECT_GT(big.args.cache_cap, 16384);
  // max_cache_keys caps the cache.
  EXPECT_EQ(PlanLaunch(c, p, arch, 1000).stages.at(0).args.cache_cap, 1000);
  // Warp family: rows per CTA = warps per CTA.
  const Stage w = PlanLaunch(Warp(), Prob(DType::kBF16, 1000, 256, 8), arch).stages.at(0);
  EXPECT_EQ(w.Grid(1000), 125u);
  EXPECT_EQ(w.Grid(7), 1u);
  EXPECT_EQ(w.smem_bytes, 0);
  EXPECT_TRUE(PlanLaunch(Config(), Prob(DType::kBF16, 1, 256, 8), arch).stages.empty());
}

// The filter family: the candidate list must hold k plus one step of the row,
// and fit shared memory; rows a warp holds are left to the warp family.
TEST(FilterFamilyTest, ConstraintsEnumerationAndPlan) {
  const Arch arch = Arch::Sm90();
  const FilterParams c{DType::kF32, 512, 2, 11, 2};
  EXPECT_EQ(Config(c).Id(), "filter_f32_b512_u2_r11_s2");
  EXPECT_EQ(Config(c).KernelKey(), "filter_f32_b512_u2_r11");
  EXPECT_EQ(c.tile(), 4096);
  EXPECT_EQ(FilterParams({DType::kF32, 512, 2, 11, 1}).capacity(100), 100 + 4096);
  EXPECT_EQ(c.capacity(2048), 8192);  // capped at 16 per thread
  EXPECT_TRUE(ValidateFor(c, arch, Prob(DType::kF32, 64, 32768, 2048)).ok());
  // k + a step beyond what the threads hold.
  EXPECT_EQ(c.room(), c.tile());
  EXPECT_NE(ValidateFor(c, arch, Prob(DType::kF32, 64, 32768, 5000)).where().find("constraint capacity"),
            std::string::npos);
  // 16-bit keys, 1024 threads, two loads a thread: a step (16384) is the
  // whole list, so room is made a load a thread (8192) at a time.
  const FilterParams h{DType::kBF16, 1024, 2, 8, 1};
  EXPECT_EQ(h.tile(), 16384);
  EXPECT_EQ(h.room(), 8192);
  EXPECT_EQ(h.capacity(64), 64 + 8192);  // k + slack x room, as one load a thread
  EXPECT_TRUE(ValidateFor(h, arch, Prob(DType::kBF16, 128, 201088, 64)).ok());
  const Status too_big = ValidateFor(h, arch, Prob(DType::kBF16, 128, 201088, 8193));
  EXPECT_EQ(too_big.where(), "constraint capacity");
  EXPECT_NE(too_big.ToString().find("one 16-byte load a thread (8192 elements; a step of 16384 is the whole list)"),
            std::string::npos)
      << too_big.ToString();
  auto broken = [&](auto f) { return BrokenWhere<FilterParams>(c, arch, f); };
  EXPECT_EQ(broken([](FilterParams& x) { x.radix_bits = 9; }), "constraint radix");
  EXPECT_EQ(broken([](FilterParams& x) { x.unroll = 5; }), "constraint unroll");
  EXPECT_EQ(broken([](FilterParams& x) { x.slack = 0; }), "constraint slack");
  EXPECT_EQ(broken([](FilterParams& x) { x.block_threads = 32; }), "constraint block");
  EXPECT_EQ(broken([](FilterParams& x) { x.guess = 4; }), "constraint guess");
  EXPECT_EQ(broken([](FilterParams& x) { x.guess = 3; }), "");
  EXPECT_EQ(broken([](FilterParams& x) { x.guess = -1; }), "constraint guess");
  EXPECT_EQ(broken([](FilterParams& x) { x.guess = 1, x.cluster = 2; }), "constraint guess");
  // The guessed start: its own id, the launch argument the kernel reads, the
  // same binary; enumeration offers 0 and 1 (2 is the tests' miss).
  FilterParams g = c;
  g.guess = 1;
  EXPECT_EQ(Config(g).Id(), "filter_f32_b512_u2_r11_s2_g1");
  EXPECT_EQ(Config(g).KernelKey(), Config(c).KernelKey());
  EXPECT_EQ(FilterParams::Of(Config(g)).guess, 1);
  ASSERT_TRUE(Config::FromId("filter_f32_b512_u2_r11_s2_g1").ok());
  EXPECT_EQ(*Config::FromId("filter_f32_b512_u2_r11_s2_g1"), Config(g));
  EXPECT_EQ(PlanLaunch(g, Prob(DType::kF32, 64, 32768, 2048), arch).stages.at(0).args.rounds, 1);
  EXPECT_EQ(PlanLaunch(c, Prob(DType::kF32, 64, 32768, 2048), arch).stages.at(0).args.rounds, 0);
  {
    SpaceOptions filter_only;
    filter_only.families = {"filter"};
    std::set<int> guesses;
    for (const Config& x : Enumerate(Prob(DType::kF32, 128, 131072, 2048), arch, filter_only))
      if (x.Get("cluster") == 1) guesses.insert(x.Get("guess"));
    EXPECT_EQ(guesses, (std::set<int>{0, 1}));
  }
  Arch small = arch;
  small.max_smem_optin = 48 * 1024;
  EXPECT_EQ(ValidateFor(FilterParams{DType::kF32, 1024, 2, 11, 2}, small, Prob(DType::kF32, 4, 65536, 2048)).where(),
            "constraint smem");
  // Enumeration and the plan.
  SpaceOptions only;
  only.families = {"filter"};
  EXPECT_FALSE(Enumerate(Prob(DType::kBF16, 128, 201088, 64), arch, only).empty());
  EXPECT_TRUE(Enumerate(Prob(DType::kF32, 4096, 256, 8), arch, only).empty());
  for (const Config& x : Enumerate(Prob(DType::kF32, 128, 131072, 2048), arch, only))
    EXPECT_TRUE(ValidateFor(x, arch, Prob(DType::kF32, 128, 131072, 2048)).ok()) << x.Id();
  const Stage s = PlanLaunch(c, Prob(DType::kF32, 64, 32768, 2048), arch).stages.at(0);
  EXPECT_EQ(s.Grid(64), 64u);
  EXPECT_EQ(s.block, 512u);
  EXPECT_EQ(s.args.buffer, 8192);
  EXPECT_EQ(s.smem_bytes, 2048 * 4 + s.args.buffer * 8);
  EXPECT_EQ(s.args.smem_bytes, s.smem_bytes);
  // The default for many long rows with k at most n / 8 (a guessed start).
  auto filter_default = [](DType dt, int b, int u, int r, int sl) {
    FilterParams f{dt, b, u, r, sl};
    f.guess = 1;
    return f.ToConfig();
  };
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 128, 131072, 2048), arch), filter_default(DType::kF32, 1024, 2, 11, 1));
  // (Up to 66 rows of 32768 the grid family's default takes them: two CTAs an SM.)
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 67, 32768, 2048), arch), filter_default(DType::kF32, 1024, 2, 11, 1));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 64, 32767, 2048), arch), filter_default(DType::kF32, 512, 2, 11, 2));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 67, 32768, 511), arch), filter_default(DType::kF32, 512, 2, 11, 2));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 16, 16384, 8), arch), filter_default(DType::kF32, 512, 2, 11, 2));
  // Rows that outnumber the SMs: two 512-thread CTAs an SM.
  FilterParams two = FilterParams{DType::kF32, 512, 2, 8, 1};
  two.guess = 1;
  two.ctas = 2;
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 256, 65536, 2048), arch), Config(two));
  EXPECT_EQ(Config(two).Id(), "filter_f32_b512_u2_r8_s1_g1_o2");
  // Past 65536, three loads a thread a step.
  FilterParams three = two;
  three.unroll = 3;
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 256, 65537, 1024), arch), Config(three));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 256, 131072, 1024), arch), Config(three));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 256, 128256, 1024), arch).Id(), "filter_f32_b512_u3_r8_s1_g1_o2");
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 256, 131072, 2048), arch), filter_default(DType::kF32, 1024, 2, 11, 1));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 256, 131073, 8), arch), filter_default(DType::kF32, 1024, 2, 11, 1));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 131, 32768, 8), arch), filter_default(DType::kF32, 512, 2, 11, 2));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 256, 65536, 4096), arch), filter_default(DType::kF32, 1024, 2, 11, 1));
  EXPECT_EQ(DefaultConfig(Prob(DType::kBF16, 128, 201088, 64), arch), filter_default(DType::kBF16, 1024, 2, 8, 1));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF16, 1024, 32768, 4096), arch), filter_default(DType::kF16, 1024, 2, 8, 1));
  // Declined: fewer than 16 rows (clusters spread them), k above n / 8 or
  // beyond the list, rows the resident family holds.
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 15, 131072, 2048), arch).family, "grid");  // two CTAs an SM
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 15, 131072, 4097), arch).family, "resident");
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 15, 1 << 20, 2048), arch).family, "radix");
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 128, 16384, 2049), arch).family, "radix");
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 128, 1 << 20, 16384), arch).family, "radix");
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 128, 8192, 8), arch).family, "resident");
  // More SMs want more rows: one for every 8 SMs.
  Arch big = arch;
  big.sm_count = 512;
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 63, 262144, 2048), big).family, "radix");
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 64, 262144, 2048), big).family, "filter");
  const KernelSource src = GenerateSource(c);
  EXPECT_EQ(src.name_expression, "topk::filter_kernel<topk::filter::Policy<0, 512, 2, 11>>");
  EXPECT_NE(src.text.find("#include \"topk/filter/filter_select.cuh\""), std::string::npos);
}

// Two CTAs an SM: the knob is code (its own binary, a launch bound in the
// source), applies to one row per CTA of at most 512 threads whose two
// CTAs' shared memory fits an SM, and is enumerated only where the rows
// outnumber the SMs.
TEST(FilterFamilyTest, TwoCtasAnSm) {
  const Arch arch = Arch::Sm90();
  FilterParams c{DType::kF32, 512, 2, 8, 1};
  c.ctas = 2;
  EXPECT_EQ(Config(c).Id(), "filter_f32_b512_u2_r8_s1_o2");
  EXPECT_EQ(Config(c).KernelKey(), "filter_f32_b512_u2_r8_o2");
  ASSERT_TRUE(Config::FromId("filter_f32_b512_u2_r8_s1_g1_o2").ok());
  EXPECT_EQ(FilterParams::Of(*Config::FromId("filter_f32_b512_u2_r8_s1_g1_o2")).ctas, 2);
  const KernelSource src = GenerateSource(c);
  EXPECT_EQ(src.name_expression, "topk::filter_kernel<topk::filter::Policy<0, 512, 2, 8, 1, 2>>");
  EXPECT_TRUE(ValidateFor(c, arch, Prob(DType::kF32, 256, 128256, 1024)).ok());
  auto broken = [&](auto f) { return BrokenWhere<FilterParams>(c, arch, f); };
  EXPECT_EQ(broken([](FilterParams& x) { x.ctas = 3; }), "constraint ctas");
  EXPECT_EQ(broken([](FilterParams& x) { x.ctas = 0; }), "constraint ctas");
  EXPECT_EQ(broken([](FilterParams& x) { x.block_threads = 1024; }), "constraint ctas");
  EXPECT_EQ(broken([](FilterParams& x) { x.block_threads = 256, x.rows = 2; }), "constraint ctas");
  EXPECT_EQ(broken([](FilterParams& x) { x.cluster = 2; }), "constraint ctas");
  EXPECT_EQ(broken([](FilterParams& x) { x.block_threads = 256; }), "");
  // Two CTAs' shared memory past what an SM holds.
  Arch small = arch;
  small.max_smem_optin = 96 * 1024;
  EXPECT_EQ(ValidateFor(c, small, Prob(DType::kF32, 256, 128256, 2048)).where(), "constraint ctas");
  EXPECT_TRUE(ValidateFor(c, small, Prob(DType::kF32, 256, 128256, 64)).ok());
  // Enumerated where the rows outnumber the SMs, not below.
  SpaceOptions only;
  only.families = {"filter"};
  auto count_two = [&](int64_t batch) {
    int n = 0;
    for (const Config& x : Enumerate(Prob(DType::kF32, batch, 131072, 1024), arch, only)) n += x.Get("ctas") == 2;
    return n;
  };
  EXPECT_EQ(count_two(arch.sm_count), 0);
  EXPECT_GT(count_two(arch.sm_count + 1), 0);
  bool kernel = false, three = false;
  for (const Config& x : EnumerateKernels(DType::kBF16, arch)) kernel |= x.KernelKey() == "filter_bf16_b512_u1_r11_o2";
  for (const Config& x : EnumerateKernels(DType::kF32, arch)) three |= x.KernelKey() == "filter_f32_b512_u3_r8_o2";
  EXPECT_TRUE(kernel);
  EXPECT_TRUE(three);
  // Three loads a step are a two-CTA enumeration only: one CTA an SM keeps 1 and 2.
  int u3_one = 0, u3_two = 0;
  for (const Config& x : Enumerate(Prob(DType::kF32, arch.sm_count + 1, 131072, 1024), arch, only))
    (x.Get("ctas") == 2 ? u3_two : u3_one) += x.Get("unroll") == 3;
  EXPECT_EQ(u3_one, 0);
  EXPECT_GT(u3_two, 0);
}

// The filter family's cluster mode: ids (one-CTA ids unchanged), the one
// clustered binary, constraints that name the broken knob, enumeration for
// long rows only, and a plan that keeps the slices in shared memory when
// they fit.
TEST(FilterFamilyTest, ClusterModeIdsConstraintsAndPlan) {
  const Arch arch = Arch::Sm90();
  FilterParams c{DType::kF32, 1024, 1, 11, 1};
  c.cluster = 16;
  EXPECT_EQ(Config(c).Id(), "filter_f32_b1024_u1_r11_s1_c16");
  EXPECT_EQ(Config(c).KernelKey(), "filter_f32_b1024_u1_r11_cN");
  FilterParams c8 = c;
  c8.cluster = 8;
  c8.sample = 128;
  c8.margin = -50;
  EXPECT_EQ(Config(c8).Id(), "filter_f32_b1024_u1_r11_s1_c8_p128_m-50");
  EXPECT_EQ(Config(c8).KernelKey(), Config(c).KernelKey());  // one binary for every size
  auto back = Config::FromId("filter_f32_b1024_u1_r11_s1_c8_p128_m-50");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, Config(c8));
  // The one-CTA id reads back as cluster 1 with the default sample and margin.
  auto one = Config::FromId("filter_f32_b512_u2_r11_s2");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(FilterParams::Of(*one).cluster, 1);
  EXPECT_EQ(Config(FilterParams::Of(*one)).Id(), "filter_f32_b512_u2_r11_s2");

  auto broken = [&](auto f) { return BrokenWhere<FilterParams>(c, arch, f); };
  EXPECT_EQ(broken([](FilterParams& x) { x.cluster = 3; }), "constraint cluster");
  EXPECT_EQ(broken([](FilterParams& x) { x.cluster = 32; }), "constraint cluster");
  EXPECT_EQ(broken([](FilterParams& x) { x.cluster = 1, x.sample = 128; }), "constraint cluster");
  EXPECT_EQ(broken([](FilterParams& x) { x.sample = 8; }), "constraint sample");
  EXPECT_EQ(broken([](FilterParams& x) { x.block_threads = 256, x.sample = 8192; }), "constraint sample");
  EXPECT_EQ(broken([](FilterParams& x) { x.sample = 3000; }), "constraint sample");
  EXPECT_EQ(broken([](FilterParams& x) { x.margin = -95; }), "constraint margin");
  EXPECT_EQ(broken([](FilterParams& x) { x.recovery = 5; }), "constraint recovery");
  EXPECT_EQ(broken([](FilterParams& x) { x.recovery = -1; }), "constraint recovery");
  EXPECT_EQ(broken([](FilterParams& x) { x.cluster = 1, x.recovery = 0; }), "constraint cluster");
  EXPECT_EQ(Validate(c, Arch::Sm80()).where(), "constraint cluster");

  // A sample too coarse for the list's room beyond k is refused for the
  // problem: 1024 keys of 131072 with 2048 slots beyond k = 2048.
  FilterParams coarse{DType::kF32, 512, 1, 11, 1};
  coarse.cluster = 16;
  coarse.sample = 1024;
  EXPECT_EQ(ValidateFor(coarse, arch, Prob(DType::kF32, 1, 131072, 2048)).where(), "constraint sample");
  coarse.sample = 4096;
  EXPECT_TRUE(ValidateFor(coarse, arch, Prob(DType::kF32, 1, 131072, 2048)).ok());

  // Long single rows get clusters; many rows and short rows do not.
  SpaceOptions only;
  only.families = {"filter"};
  auto clustered = [&](const Problem& p) {
    int n = 0;
    for (const Config& x : Enumerate(p, arch, only)) {
      EXPECT_TRUE(ValidateFor(x, arch, p).ok()) << x.Id();
      n += FilterParams::Of(x).cluster > 1;
    }
    return n;
  };
  EXPECT_GT(clustered(Prob(DType::kF32, 1, 524288, 2048)), 0);
  EXPECT_EQ(clustered(Prob(DType::kF32, 1024, 131072, 2048)), 0);
  EXPECT_EQ(clustered(Prob(DType::kF32, 1, 3000, 128)), 0);
  SpaceOptions no_cluster = only;
  no_cluster.include_cluster = false;
  for (const Config& x : Enumerate(Prob(DType::kF32, 1, 524288, 2048), arch, no_cluster))
    EXPECT_EQ(FilterParams::Of(x).cluster, 1) << x.Id();

  // 1 x 524288 over 16 CTAs: slices of 32768 keys stay in shared memory.
  const Stage s = PlanLaunch(c, Prob(DType::kF32, 1, 524288, 2048), arch).stages.at(0);
  EXPECT_EQ(s.cluster, 16u);
  EXPECT_EQ(s.Grid(1), 16u);
  EXPECT_EQ(s.Grid(3), 48u);
  EXPECT_EQ(s.args.buffer, 2048 + 4096);
  EXPECT_EQ(s.args.cache_cap, 32768);
  EXPECT_EQ(s.args.rounds, TOPK_FILTER_ROUNDS(50, 4096, 2));
  FilterParams bisect = c;
  bisect.recovery = 0;
  EXPECT_EQ(Config(bisect).Id(), "filter_f32_b1024_u1_r11_s1_c16_v0");
  EXPECT_EQ(Config(bisect).KernelKey(), Config(c).KernelKey());  // a launch argument
  EXPECT_EQ(PlanLaunch(bisect, Prob(DType::kF32, 1, 524288, 2048), arch).stages.at(0).args.rounds,
            TOPK_FILTER_ROUNDS(50, 4096, 0));
  EXPECT_EQ((TOPK_FILTER_ROUNDS(1000, 16384, 4) >> 27) & 0xf, 4);  // the fields do not overlap
  EXPECT_EQ((TOPK_FILTER_ROUNDS(1000, 16384, 4) >> 12) & 0x7fff, 16384);
  EXPECT_EQ(s.smem_bytes, c.cluster_base_smem(2048) + 32768 * 4);
  EXPECT_EQ(c.cluster_base_smem(2048), 2048 * 4 + 4096 * 4 + 6144 * 8);
  EXPECT_LE(s.smem_bytes + arch.static_smem_reserve, arch.max_smem_optin);
  // Slices too long for shared memory are scanned from memory.
  const Stage far = PlanLaunch(c, Prob(DType::kF32, 1, 4 << 20, 2048), arch).stages.at(0);
  EXPECT_EQ(far.args.cache_cap, 0);
  EXPECT_EQ(far.smem_bytes, c.cluster_base_smem(2048));
  const KernelSource src = GenerateSource(c);
  EXPECT_EQ(src.name_expression, "topk::filter_cluster_kernel<topk::filter::Policy<0, 1024, 1, 11>>");
  EXPECT_NE(src.text.find("#include \"topk/filter/filter_cluster.cuh\""), std::string::npos);
}

// The filter family's several rows per CTA: each row a group of block /
// rows threads with its own list (capacity, step and shared memory per
// group), its own id and binary, enumerated for short rows while every SM
// keeps a CTA, and a plan whose grid covers the rows in groups.
TEST(FilterFamilyTest, SeveralRowsPerCta) {
  const Arch arch = Arch::Sm90();
  FilterParams c{DType::kF32, 512, 1, 8, 2};
  c.guess = 1;
  c.rows = 4;
  EXPECT_EQ(Config(c).Id(), "filter_f32_b512_u1_r8_s2_g1_w4");
  EXPECT_EQ(Config(c).KernelKey(), "filter_f32_b512_u1_r8_w4");
  auto back = Config::FromId("filter_f32_b512_u1_r8_s2_g1_w4");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, Config(c));
  EXPECT_EQ(FilterParams::Of(*back).rows, 4);
  EXPECT_EQ(c.group(), 128);
  EXPECT_EQ(c.tile(), 128 * 4);
  EXPECT_EQ(c.max_capacity(), 16 * 128);
  EXPECT_EQ(c.capacity(100), 100 + 2 * 512);
  // Each group's histogram and list, rounded to 16 bytes.
  EXPECT_EQ(FilterParams({DType::kF32, 512, 1, 8, 1}).smem_bytes(101), 1024 + (101 + 2048) * 8);  // one row: not rounded
  FilterParams odd = c;
  odd.slack = 1;
  EXPECT_EQ(odd.smem_bytes(101), 4 * ((1024 + (101 + 512) * 8 + 15) / 16 * 16));
  EXPECT_TRUE(ValidateFor(c, arch, Prob(DType::kF32, 4096, 1024, 32)).ok());
  // k plus a step beyond what a group of 128 holds (2048).
  EXPECT_EQ(ValidateFor(c, arch, Prob(DType::kF32, 4096, 4096, 1600)).where(), "constraint capacity");
  auto broken = [&](auto f) { return BrokenWhere<FilterParams>(c, arch, f); };
  EXPECT_EQ(broken([](FilterParams& x) { x.rows = 3; }), "constraint rows");
  EXPECT_EQ(broken([](FilterParams& x) { x.rows = 16; }), "constraint rows");
  EXPECT_EQ(broken([](FilterParams& x) { x.rows = 0; }), "constraint rows");
  EXPECT_EQ(broken([](FilterParams& x) { x.rows = 8; }), "");  // 64 threads a row
  EXPECT_EQ(broken([](FilterParams& x) { x.block_threads = 256, x.rows = 8; }), "constraint rows");  // 32
  EXPECT_EQ(broken([](FilterParams& x) { x.guess = 0, x.cluster = 2; }), "constraint rows");
  {
    FilterParams x = c;
    x.block_threads = 256, x.rows = 8;
    EXPECT_NE(Validate(x, arch).message().find("32 a row"), std::string::npos) << Validate(x, arch).message();
  }
  // The plan: 4 rows a CTA, every group's shared memory.
  const Problem p = Prob(DType::kF32, 4099, 1024, 32);
  const Stage s = PlanLaunch(c, p, arch).stages.at(0);
  EXPECT_EQ(s.rows_per_cta, 4);
  EXPECT_EQ(s.Grid(4099), 1025u);
  EXPECT_EQ(s.block, 512u);
  EXPECT_EQ(s.args.buffer, 32 + 2 * 512);
  EXPECT_EQ(s.smem_bytes, c.smem_bytes(32));
  EXPECT_EQ(s.args.rounds, 1);
  const KernelSource src = GenerateSource(c);
  EXPECT_EQ(src.name_expression, "topk::filter_kernel<topk::filter::Policy<0, 512, 1, 8, 4>>");
  // One row per CTA keeps its source.
  FilterParams one = c;
  one.rows = 1;
  EXPECT_EQ(GenerateSource(one).name_expression, "topk::filter_kernel<topk::filter::Policy<0, 512, 1, 8>>");
  // Enumerated for short rows while ceil(batch / rows) gives every SM a CTA.
  SpaceOptions only;
  only.families = {"filter"};
  auto max_rows = [&](const Problem& q) {
    int most = 0;
    for (const Config& x : Enumerate(q, arch, only)) most = std::max(most, FilterParams::Of(x).rows);
    return most;
  };
  EXPECT_EQ(max_rows(Prob(DType::kF32, 4096, 1024, 32)), 8);
  EXPECT_EQ(max_rows(Prob(DType::kF32, 4 * 132 - 3, 4096, 128)), 4);  // 132 CTAs
  EXPECT_EQ(max_rows(Prob(DType::kF32, 4 * 131, 4096, 128)), 2);      // 131
  EXPECT_EQ(max_rows(Prob(DType::kF32, 64, 4096, 128)), 1);
  EXPECT_EQ(max_rows(Prob(DType::kF32, 4096, 32768, 128)), 1);  // past 16384
  // The guessed start only where a group's sample (512 16-byte vectors) fits the row.
  auto guesses = [&](const Problem& q) {
    std::set<int> g;
    for (const Config& x : Enumerate(q, arch, only))
      if (FilterParams::Of(x).rows > 1) g.insert(FilterParams::Of(x).guess);
    return g;
  };
  EXPECT_EQ(guesses(Prob(DType::kF32, 4096, 2047, 32)), (std::set<int>{0}));
  EXPECT_EQ(guesses(Prob(DType::kF32, 4096, 2048, 32)), (std::set<int>{0, 1}));
  EXPECT_EQ(guesses(Prob(DType::kBF16, 4096, 4095, 32)), (std::set<int>{0}));
  // EnumerateKernels lists their binaries (one 16-byte load a thread a step).
  int kernels = 0;
  for (const Config& x : EnumerateKernels(DType::kBF16, arch))
    if (x.family == "filter" && FilterParams::Of(x).rows > 1) {
      ++kernels;
      EXPECT_EQ(FilterParams::Of(x).unroll, 1) << x.Id();
    }
  EXPECT_EQ(kernels, 10);
}

// Many short rows take the filter family's several rows per CTA by default:
// from 4 rows per SM (8 from 8 per SM), from the length a group's sample
// needs (2048 fp32, 4096 16-bit keys) to 8192, k at most n / 8; the
// resident default keeps the rest.
TEST(FilterFamilyTest, ShortRowDefault) {
  const Arch arch = Arch::Sm90();
  auto rows = [](DType dt, int b, int w) {
    FilterParams f{dt, b, 1, 8, 2};
    f.guess = 1;
    f.rows = w;
    return Config(f);
  };
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 1056, 4096, 128), arch), rows(DType::kF32, 1024, 8));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 1055, 4096, 128), arch), rows(DType::kF32, 512, 4));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 528, 2048, 256), arch), rows(DType::kF32, 512, 4));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 4096, 8192, 1024), arch), rows(DType::kF32, 1024, 8));
  EXPECT_EQ(DefaultConfig(Prob(DType::kBF16, 4096, 4096, 32), arch), rows(DType::kBF16, 1024, 8));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF16, 600, 8192, 8), arch), rows(DType::kF16, 512, 4));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 1056, 4096, 128), arch).Id(), "filter_f32_b1024_u1_r8_s2_g1_w8");
  for (const Problem& p : {Prob(DType::kF32, 527, 2048, 256), Prob(DType::kF32, 4096, 2047, 32),
                           Prob(DType::kF32, 4096, 8192, 1025), Prob(DType::kBF16, 4096, 4095, 32),
                           Prob(DType::kF32, 4096, 1024, 32)})
    EXPECT_EQ(DefaultConfig(p, arch).family, "resident") << p.ToString();
  // Past 8192 the one-CTA filter default (one row per CTA).
  EXPECT_EQ(FilterParams::Of(DefaultConfig(Prob(DType::kF32, 4096, 8193, 32), arch)).rows, 1);
  // The bounds follow the SM count.
  Arch small = arch;
  small.sm_count = 66;
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 528, 4096, 128), small), rows(DType::kF32, 1024, 8));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 264, 4096, 128), small), rows(DType::kF32, 512, 4));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 263, 4096, 128), small).family, "resident");
  // Where the rule takes a problem the default is its config, and where it
  // does not the resident family's: no short row falls through to radix,
  // also on GPUs of 99 KB of shared memory a block, where the 8-row config
  // of 16-bit keys (and of fp32 with a large k) does not fit.
  const Arch ampere = *Arch::FromName("sm_80"), ada = *Arch::FromName("sm_89");
  ASSERT_EQ(ada.max_smem_optin, 101376);
  int taken = 0, declined = 0;
  for (const Arch& a : {arch, ampere, ada})
    for (int64_t b : {527, 528, 1056, 5000})
      for (int64_t n : {2048, 3000, 4096, 8192})
        for (int64_t k : {1, 64, 256, 512})
          for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
            const Problem p = Prob(dt, b, n, k);
            const Config c = DefaultConfig(p, a);
            if (auto rule = FilterShortRowDefault(p, a)) {
              ++taken;
              EXPECT_EQ(c, *rule) << a.Name() << " " << p.ToString();
              EXPECT_GT(FilterParams::Of(c).rows, 1) << a.Name() << " " << p.ToString();
              EXPECT_TRUE(ValidateFor(c, a, p).ok()) << a.Name() << " " << p.ToString();
            } else {
              ++declined;
              EXPECT_EQ(c.family, "resident") << a.Name() << " " << p.ToString() << " " << c.Id();
            }
          }
  EXPECT_GT(taken, 100);
  EXPECT_GT(declined, 100);
  // On 99 KB: 16-bit keys at 8 rows per SM do not fit 8 groups' lists and
  // keep the resident default; 4 rows of 512 threads fit.
  EXPECT_FALSE(FilterShortRowDefault(Prob(DType::kBF16, 8LL * ada.sm_count, 4096, 32), ada));
  EXPECT_EQ(DefaultConfig(Prob(DType::kBF16, 8LL * ada.sm_count, 4096, 32), ada).family, "resident");
  EXPECT_EQ(DefaultConfig(Prob(DType::kBF16, 4LL * ada.sm_count, 4096, 32), ada), rows(DType::kBF16, 512, 4));
}

// A tuned winner of several rows per CTA carries over to nearby shapes only
// while the batch still gives every SM a CTA.
TEST(FilterFamilyTest, SeveralRowsWinnersCarryOverOnlyToBatchesThatFillTheGpu) {
  const Arch arch = Arch::Sm90();
  FilterParams w{DType::kF32, 1024, 1, 8, 2};
  w.guess = 1;
  w.rows = 8;
  const Problem tuned = Prob(DType::kF32, 4096, 4096, 128);
  const Family* f = Config(w).family_ptr();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->Adapt(w, tuned, Prob(DType::kF32, 8 * 132, 4096, 128), arch), std::optional<Config>(Config(w)));
  EXPECT_EQ(f->Adapt(w, tuned, Prob(DType::kF32, 8 * 131, 4096, 128), arch), std::nullopt);
  EXPECT_EQ(f->Adapt(w, tuned, Prob(DType::kF32, 64, 4096, 128), arch), std::nullopt);
  FilterParams one = w;
  one.rows = 1;
  EXPECT_EQ(f->Adapt(one, tuned, Prob(DType::kF32, 64, 4096, 128), arch), std::optional<Config>(Config(one)));
}

// The resident family: ids, each constraint named, enumeration only for rows
// between the warp family's and 16384, several rows per CTA only while every
// SM keeps a CTA, and a plan whose grid covers the rows in groups.
TEST(ResidentFamilyTest, ConstraintsEnumerationAndPlan) {
  const Arch arch = Arch::Sm90();
  const ResidentParams c{DType::kF32, 1024, 256, 16};
  EXPECT_EQ(Config(c).Id(), "resident_f32_b1024_g256_i16");
  EXPECT_EQ(Config(c).KernelKey(), "resident_f32_b1024_g256_i16");
  auto back = Config::FromId("resident_bf16_b512_g128_i8");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, Config(ResidentParams{DType::kBF16, 512, 128, 8}));
  EXPECT_EQ(c.max_row(), 4096);
  EXPECT_TRUE(ValidateFor(c, arch, Prob(DType::kF32, 64, 4096, 128)).ok());
  EXPECT_EQ(ValidateFor(c, arch, Prob(DType::kF32, 64, 4097, 128)).where(), "constraint items");
  auto broken = [&](auto f) { return BrokenWhere<ResidentParams>(c, arch, f); };
  EXPECT_EQ(broken([](ResidentParams& x) { x.group_threads = 48; }), "constraint group");
  EXPECT_EQ(broken([](ResidentParams& x) { x.group_threads = 2048; }), "constraint group");
  EXPECT_EQ(broken([](ResidentParams& x) { x.block_threads = 768, x.group_threads = 512; }), "constraint group");
  EXPECT_EQ(broken([](ResidentParams& x) { x.items = 0; }), "constraint items");
  EXPECT_EQ(broken([](ResidentParams& x) { x.items = 33; }), "constraint items");
  EXPECT_EQ(broken([](ResidentParams& x) { x.group_threads = 64; }), "constraint group");  // 16 rows per CTA
  EXPECT_EQ(broken([](ResidentParams& x) { x.block_threads = 2048; }), "constraint block");
  EXPECT_TRUE(Validate(ResidentParams{DType::kF16, 256, 32, 4}, arch).ok());

  SpaceOptions only;
  only.families = {"resident"};
  EXPECT_TRUE(Enumerate(Prob(DType::kF32, 4096, 256, 8), arch, only).empty());      // the warp family's
  for (const Config& x : Enumerate(Prob(DType::kF32, 64, 32768, 2048), arch, only)) {
    const ResidentParams r = ResidentParams::Of(x);  // too long for one CTA's registers
    EXPECT_TRUE(r.cluster > 1 || r.shared > 0) << x.Id();
  }
  const Problem dsa = Prob(DType::kF32, 64, 4096, 128);
  const std::vector<Config> one = Enumerate(dsa, arch, only);
  ASSERT_FALSE(one.empty());
  for (const Config& x : one) {
    EXPECT_TRUE(ValidateFor(x, arch, dsa).ok()) << x.Id();
    EXPECT_EQ(ResidentParams::Of(x).rows_per_cta(), 1) << x.Id();  // 64 rows: a CTA each
    EXPECT_LT(ResidentParams::Of(x).max_row(), 4 * dsa.n) << x.Id();
  }
  int multi = 0;
  for (const Config& x : Enumerate(Prob(DType::kBF16, 8192, 1024, 32), arch, only)) multi += ResidentParams::Of(x).rows_per_cta() > 1;
  EXPECT_GT(multi, 0);
  EXPECT_EQ(Enumerate(dsa, arch, only), Enumerate(dsa, arch, only));  // stable
  // The default for rows of 513 to 8192: 4 keys per thread while the rows
  // are few, 8 beyond two rows per SM; the group the power of two that holds
  // the row, at most 1024 threads; one row per CTA.
  EXPECT_EQ(DefaultConfig(dsa, arch), Config(ResidentParams{DType::kF32, 1024, 1024, 4}));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 1, 1024, 32), arch), Config(ResidentParams{DType::kF32, 256, 256, 4}));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 4096, 1024, 32), arch), Config(ResidentParams{DType::kF32, 128, 128, 8}));
  EXPECT_EQ(DefaultConfig(Prob(DType::kBF16, 1024, 2048, 16), arch), Config(ResidentParams{DType::kBF16, 256, 256, 8}));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 64, 8192, 256), arch), Config(ResidentParams{DType::kF32, 1024, 1024, 8}));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 1, 513, 8), arch), Config(ResidentParams{DType::kF32, 256, 256, 4}));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 64, 8193, 256), arch).family, "filter");
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 16, 8193, 2048), arch).family, "radix");  // k > n / 8
  // Up to 15 rows of 8193 to 131072 on a GPU with clusters: a cluster a row.
  auto clustered = [](DType dt, int g, int items, int cl) {
    ResidentParams r{dt, g, g, items};
    r.cluster = cl;
    return r.ToConfig();
  };
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 8, 8193, 256), arch), clustered(DType::kF32, 512, 8, 4));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 15, 8193, 256), arch), clustered(DType::kF32, 512, 8, 4));
  EXPECT_EQ(DefaultConfig(Prob(DType::kBF16, 1, 16384, 2048), arch), clustered(DType::kBF16, 512, 8, 4));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 2, 65536, 8), arch), clustered(DType::kF32, 512, 16, 8));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 1, 131072, 128), arch), clustered(DType::kF32, 512, 16, 16));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 1, 131072, 2048), arch).family, "grid");  // one row, k >= 256
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 2, 131072, 128), arch), clustered(DType::kF32, 512, 16, 16));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 3, 131072, 128), arch), clustered(DType::kF32, 1024, 16, 8));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 8, 131072, 8), arch), clustered(DType::kF32, 1024, 16, 8));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 1, 131073, 8), arch).family, "radix");  // fp32 k < 64
  // Up to 7 rows (132 SMs) of 131073 to 524288, fp32 with k >= 64: 16 CTAs of
  // 1024 threads, 16 more keys a thread in shared memory past 262144.
  ResidentParams long_row{DType::kF32, 1024, 1024, 16};
  long_row.cluster = 16;
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 1, 131073, 64), arch), long_row.ToConfig());
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 6, 262144, 128), arch), long_row.ToConfig());
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 1, 131073, 63), arch).family, "radix");
  EXPECT_EQ(DefaultConfig(Prob(DType::kBF16, 1, 131073, 8), arch).family, "resident");  // 16-bit keys: any k
  EXPECT_EQ(DefaultConfig(Prob(DType::kF16, 7, 524288, 1), arch).family, "resident");
  // More rows than 16-CTA clusters run at once (8 on 132 SMs): 8 CTAs with
  // 16 shared keys a thread up to 262144 and k >= 64, else the radix default.
  ResidentParams eight_ctas{DType::kF32, 1024, 1024, 16};
  eight_ctas.cluster = 8;
  eight_ctas.shared = 16;
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 8, 262144, 128), arch), eight_ctas.ToConfig());
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 15, 131073, 64), arch), eight_ctas.ToConfig());
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 8, 262145, 2048), arch).family, "radix");
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 8, 262144, 63), arch).family, "radix");
  EXPECT_EQ(DefaultConfig(Prob(DType::kBF16, 8, 262144, 8), arch).family, "radix");  // k >= 64 here for 16-bit too
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 16, 262144, 2048), arch).family, "filter");
  eight_ctas.dtype = DType::kBF16;
  EXPECT_EQ(DefaultConfig(Prob(DType::kBF16, 15, 262144, 64), arch), eight_ctas.ToConfig());
  long_row.shared = 16;
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 1, 262145, 128), arch), long_row.ToConfig());
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 6, 524288, 64), arch), long_row.ToConfig());
  long_row.dtype = DType::kBF16;
  EXPECT_EQ(DefaultConfig(Prob(DType::kBF16, 1, 524288, 64), arch), long_row.ToConfig());
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 1, 524289, 128), arch).family, "radix");
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 1, 524288, 128), Arch::Sm80()).family, "radix");  // no clusters
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 15, 32768, 8), arch), clustered(DType::kF32, 512, 16, 8));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 16, 32768, 8), arch).family, "filter");
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 1, 32768, 8), Arch::Sm80()).family, "radix");  // no clusters
  Arch few = arch;
  few.sm_count = 16;
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 4, 32768, 8), few).family, "radix");  // 4 x 8 CTAs > 16 SMs
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 64, 512, 8), arch).family, "warp");
  // A winner carries over to rows that fill more than a quarter of its group.
  const Family& fam = *FindFamily("resident");
  EXPECT_TRUE(fam.Adapt(c, dsa, Prob(DType::kF32, 64, 1025, 128), arch).has_value());
  EXPECT_FALSE(fam.Adapt(c, dsa, Prob(DType::kF32, 64, 1024, 128), arch).has_value());
  EXPECT_FALSE(fam.Adapt(c, dsa, Prob(DType::kF32, 64, 4097, 128), arch).has_value());

  const Stage s = PlanLaunch(c, dsa, arch).stages.at(0);
  EXPECT_EQ(s.block, 1024u);
  EXPECT_EQ(s.rows_per_cta, 4);
  EXPECT_EQ(s.Grid(64), 16u);
  EXPECT_EQ(s.Grid(65), 17u);
  EXPECT_EQ(s.smem_bytes, 0);
  const KernelSource src = GenerateSource(c);
  EXPECT_EQ(src.name_expression, "topk::resident_kernel<topk::resident::Policy<0, 1024, 256, 16>>");
  EXPECT_NE(src.text.find("#include \"topk/resident/resident_select.cuh\""), std::string::npos);

  // Cluster mode: one binary for every size, one group per CTA, rows up to
  // cluster x group x items, enumerated only while the clusters fit the SMs.
  ResidentParams cl{DType::kF32, 1024, 1024, 8};
  cl.cluster = 16;
  EXPECT_EQ(Config(cl).Id(), "resident_f32_b1024_g1024_i8_c16");
  EXPECT_EQ(Config(cl).KernelKey(), "resident_f32_b1024_g1024_i8_cN");
  ResidentParams cl2 = cl;
  cl2.cluster = 2;
  EXPECT_EQ(Config(cl2).KernelKey(), Config(cl).KernelKey());
  EXPECT_EQ(cl.capacity(), 131072);
  EXPECT_TRUE(ValidateFor(cl, arch, Prob(DType::kF32, 1, 131072, 2048)).ok());
  EXPECT_EQ(ValidateFor(cl, arch, Prob(DType::kF32, 1, 131073, 2048)).where(), "constraint items");
  auto broken_cl = [&](auto f) { return BrokenWhere<ResidentParams>(cl, arch, f); };
  EXPECT_EQ(broken_cl([](ResidentParams& x) { x.cluster = 3; }), "constraint cluster");
  EXPECT_EQ(broken_cl([](ResidentParams& x) { x.cluster = 32; }), "constraint cluster");
  EXPECT_EQ(broken_cl([](ResidentParams& x) { x.group_threads = 512; }), "constraint cluster");
  EXPECT_EQ(Validate(cl, Arch::Sm80()).where(), "constraint cluster");
  const Stage cs = PlanLaunch(cl, Prob(DType::kF32, 1, 131072, 2048), arch).stages.at(0);
  EXPECT_EQ(cs.cluster, 16u);
  EXPECT_EQ(cs.rows_per_cta, 1);
  EXPECT_EQ(cs.Grid(2), 32u);
  EXPECT_EQ(GenerateSource(cl).name_expression, "topk::resident_cluster_kernel<topk::resident::Policy<0, 1024, 1024, 8>>");
  auto clusters = [&](const Problem& p) {
    int n = 0;
    for (const Config& x : Enumerate(p, arch, only)) {
      EXPECT_TRUE(ValidateFor(x, arch, p).ok()) << x.Id();
      const ResidentParams r = ResidentParams::Of(x);
      if (r.cluster > 1) {
        ++n;
        EXPECT_LE(p.batch * r.cluster, arch.sm_count) << x.Id();
        EXPECT_LT(r.capacity(), 4 * p.n) << x.Id();
        // Shared keys only where 16 keys a thread do not hold the row.
        if (r.shared > 0) {
          EXPECT_LT(int64_t{r.cluster} * r.group_threads * 16, p.n) << x.Id();
        }
      }
    }
    return n;
  };
  EXPECT_GT(clusters(Prob(DType::kF32, 1, 131072, 2048)), 0);
  EXPECT_GT(clusters(Prob(DType::kF32, 64, 32768, 2048)), 0);
  EXPECT_EQ(clusters(Prob(DType::kF32, 128, 131072, 2048)), 0);  // more clusters than SMs
  EXPECT_GT(clusters(Prob(DType::kF32, 1, 524288, 2048)), 0);    // registers and shared memory
  SpaceOptions no_cluster = only;
  no_cluster.include_cluster = false;
  EXPECT_TRUE(Enumerate(Prob(DType::kF32, 1, 131072, 2048), arch, no_cluster).empty());
  // Shared keys: the rest of a row past the registers, in dynamic shared
  // memory (the plan's), in the id and the binary's key.
  ResidentParams sh{DType::kF32, 1024, 1024, 16};
  sh.shared = 16;
  sh.cluster = 16;
  EXPECT_EQ(Config(sh).Id(), "resident_f32_b1024_g1024_i16_s16_c16");
  EXPECT_EQ(Config(sh).KernelKey(), "resident_f32_b1024_g1024_i16_s16_cN");
  auto sh_back = Config::FromId("resident_f32_b1024_g1024_i16_s16_c16");
  ASSERT_TRUE(sh_back.ok()) << sh_back.status().ToString();
  EXPECT_EQ(*sh_back, Config(sh));
  EXPECT_EQ(sh.capacity(), 524288);
  EXPECT_TRUE(ValidateFor(sh, arch, Prob(DType::kF32, 1, 524288, 2048)).ok());
  EXPECT_EQ(ValidateFor(sh, arch, Prob(DType::kF32, 1, 524289, 2048)).where(), "constraint items");
  EXPECT_EQ(PlanLaunch(sh, Prob(DType::kF32, 1, 524288, 2048), arch).stages.at(0).smem_bytes, 1024 * 16 * 4);
  EXPECT_EQ(GenerateSource(sh).name_expression,
            "topk::resident_cluster_kernel<topk::resident::Policy<0, 1024, 1024, 16, 16>>");
  auto broken_sh = [&](auto f) { return BrokenWhere<ResidentParams>(sh, arch, f); };
  EXPECT_EQ(broken_sh([](ResidentParams& x) { x.shared = -1; }), "constraint shared");
  EXPECT_EQ(broken_sh([](ResidentParams& x) { x.shared = 65; }), "constraint shared");
  EXPECT_EQ(broken_sh([](ResidentParams& x) { x.shared = 64; }), "constraint shared");  // 256 KB: past the opt-in
  EXPECT_TRUE(Validate([&] { ResidentParams x = sh; x.shared = 48; return x; }(), arch).ok());
  // One CTA: row positions in 16 bits, so at most 65536 keys.
  EXPECT_EQ(broken_sh([](ResidentParams& x) { x.cluster = 1, x.shared = 56; }), "constraint shared");
  // Enumerated only where no register-only config holds the row: one CTA
  // when the batch leaves no room for clusters, else the largest cluster.
  auto shared_configs = [&](const Problem& p) {
    std::vector<std::string> ids;
    for (const Config& x : Enumerate(p, arch, only))
      if (ResidentParams::Of(x).shared > 0) ids.push_back(x.Id());
    return ids;
  };
  EXPECT_EQ(shared_configs(Prob(DType::kF32, 1024, 32768, 2048)),
            std::vector<std::string>{"resident_f32_b1024_g1024_i16_s16"});
  EXPECT_TRUE(shared_configs(Prob(DType::kF32, 64, 32768, 2048)).empty());  // cluster 2 in registers
  EXPECT_TRUE(shared_configs(Prob(DType::kF32, 1, 131072, 2048)).empty());
  EXPECT_EQ(shared_configs(Prob(DType::kF32, 1, 524288, 2048)),
            std::vector<std::string>{"resident_f32_b1024_g1024_i16_s16_c16"});
  EXPECT_EQ(shared_configs(Prob(DType::kF32, 1, 1048576, 2048)),
            std::vector<std::string>{"resident_f32_b1024_g1024_i16_s48_c16"});
  EXPECT_TRUE(Enumerate(Prob(DType::kF32, 1, 1048577, 2048), arch, only).empty());
  EXPECT_TRUE(Enumerate(Prob(DType::kF32, 64, 65537, 2048), arch, no_cluster).empty());
  // Never the default.
  EXPECT_NE(DefaultConfig(Prob(DType::kF32, 64, 32768, 2048), arch).family, "resident");
  // Deterministic mode without the tie pass: this family and the grid's.
  EXPECT_TRUE(fam.TakesLowestIndexTies(cl));
  EXPECT_TRUE(fam.TakesLowestIndexTies(c));
  for (const char* other : {"radix", "warp", "filter"})
    EXPECT_FALSE(FindFamily(other)->TakesLowestIndexTies(FindFamily(other)->Blank(DType::kF32))) << other;
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

TEST(ArchTest, FromNameAcceptsSm80ToSm120Only) {
  for (const char* ok : {"sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "90"})
    EXPECT_TRUE(Arch::FromName(ok).ok()) << ok;
  for (const char* bad : {"sm_999", "sm_121", "sm_70", "sm_", "sm_90a", "99999999999999999999"}) {
    auto a = Arch::FromName(bad);
    ASSERT_FALSE(a.ok()) << bad;
    EXPECT_NE(a.status().message().find("sm_120"), std::string::npos) << a.status().ToString();
  }
}

TEST(ProblemTest, ValidateRefusesAnOutOfRangeDtype) {
  Problem p = Prob(DType::kF32, 1, 1024, 8);
  EXPECT_TRUE(p.Validate().ok());
  p.dtype = static_cast<DType>(7);
  Status s = p.Validate();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("dtype"), std::string::npos) << s.ToString();
}

TEST(ProblemTest, DtypeNamesAreCaseInsensitive) {
  for (const char* n : {"F32", "Float32", "FLOAT", "fp32"}) EXPECT_EQ(*ParseDType(n), DType::kF32) << n;
  for (const char* n : {"BF16", "BFloat16"}) EXPECT_EQ(*ParseDType(n), DType::kBF16) << n;
  for (const char* n : {"F16", "Half", "FP16"}) EXPECT_EQ(*ParseDType(n), DType::kF16) << n;
  EXPECT_FALSE(ParseDType("f64").ok());
}

// The shipped kernels are DefaultKernelSources: random problems on devices
// of random SM counts must not need a kernel outside it.
TEST(DefaultKernelsTest, EnumerationCoversTheDefaultsOfRandomProblems) {
  std::mt19937_64 rng(7);
  for (const Arch& base : {Arch::Sm80(), Arch::Sm90()}) {
    std::set<std::string> keys;
    const std::vector<Config> defaults = DefaultKernelConfigs(base);
    for (const Config& c : defaults) EXPECT_TRUE(keys.insert(c.KernelKey()).second);
    std::set<std::string> hashes;
    for (const KernelSource& s : DefaultKernelSources(defaults)) hashes.insert(s.hash);
    for (DType d : {DType::kF32, DType::kF16, DType::kBF16}) {
      EXPECT_TRUE(hashes.count(SortSource(d).hash));
      EXPECT_TRUE(hashes.count(TieSource(d).hash));  // deterministic mode works from the shipped kernels
    }
    // A config's sources are generated and checked once (the 20000 draws
    // of an architecture give 60-100 configs).
    std::set<std::string> checked;
    for (int i = 0; i < 20000; ++i) {
      Arch a = base;
      a.sm_count = static_cast<int>(rng() % 200) + 1;
      Problem p;
      p.dtype = static_cast<DType>(rng() % 3);
      p.n = static_cast<int64_t>(std::exp2(std::uniform_real_distribution<double>(0, 31)(rng)));
      p.n = std::min<int64_t>(std::max<int64_t>(p.n, 1), (int64_t{1} << 31) - 1);
      p.k = static_cast<int64_t>(rng() % static_cast<uint64_t>(std::min<int64_t>(p.n, 4096) + 1));
      p.batch = static_cast<int64_t>(std::exp2(std::uniform_real_distribution<double>(0, 20)(rng)));
      const Config c = DefaultConfig(p, a);
      ASSERT_TRUE(keys.count(c.KernelKey())) << c.Id() << " for " << p.batch << " x " << p.n << " k" << p.k
                                             << " on " << a.sm_count << " SMs";
      if (!checked.insert(c.Id()).second) continue;
      for (const KernelSource& s : GenerateSources(c)) ASSERT_TRUE(hashes.count(s.hash)) << s.key;
    }
    EXPECT_GT(checked.size(), 10u);
  }
}

}  // namespace
// The grid family: constraints named, enumeration within the SMs, the
// default's rows, and a plan that asks for a workspace and a cooperative
// grid of batch x ctas CTAs.
TEST(GridFamilyTest, ConstraintsEnumerationDefaultAndPlan) {
  const Arch arch = Arch::Sm90();
  const GridParams g{DType::kF32, 256, 4, 128, 256, 4096};
  EXPECT_EQ(Config(g).Id(), "grid_f32_b256_i4_g128_s256_c4096");
  EXPECT_EQ(Config(g).KernelKey(), "grid_f32_b256_i4");
  EXPECT_TRUE(Validate(g, arch).ok());
  auto broken = [&](auto f) { return BrokenWhere<GridParams>(g, arch, f); };
  EXPECT_EQ(broken([](GridParams& x) { x.block_threads = 32; }), "constraint block");
  EXPECT_EQ(broken([](GridParams& x) { x.block_threads = 2048; }), "constraint block");
  EXPECT_EQ(broken([](GridParams& x) { x.items = 0; }), "constraint items");
  EXPECT_EQ(broken([](GridParams& x) { x.items = 9; }), "constraint items");
  EXPECT_EQ(broken([](GridParams& x) { x.ctas = 0; }), "constraint ctas");
  EXPECT_EQ(broken([](GridParams& x) { x.ctas = 133; }), "constraint ctas");  // more than the SMs
  EXPECT_EQ(broken([](GridParams& x) { x.ties = 2; }), "constraint ties");
  EXPECT_EQ(broken([](GridParams& x) { x.per_sm = 3; }), "constraint per_sm");
  EXPECT_EQ(broken([](GridParams& x) { x.per_sm = 2; }), "");  // 4 items, 256 threads
  EXPECT_EQ(broken([](GridParams& x) { x.per_sm = 2, x.items = 8; }), "constraint per_sm");  // registers
  EXPECT_EQ(broken([](GridParams& x) { x.per_sm = 4, x.items = 2; }), "");
  EXPECT_EQ(broken([](GridParams& x) { x.per_sm = 4, x.block_threads = 1024, x.items = 1; }), "constraint per_sm");
  EXPECT_EQ(broken([](GridParams& x) { x.per_sm = 2, x.candidates = 16384; }), "constraint per_sm");  // 2 x 130 KB
  EXPECT_EQ(broken([](GridParams& x) { x.sample = 1025; }), "constraint sample");
  EXPECT_EQ(broken([](GridParams& x) { x.candidates = 16; }), "constraint candidates");
  EXPECT_EQ(broken([](GridParams& x) { x.candidates = 16385; }), "constraint candidates");
  EXPECT_EQ(broken([](GridParams& x) { x.candidates = 16384; }), "");  // 128 KB: fits
  Arch small = arch;
  small.max_smem_optin = 48 * 1024;
  EXPECT_EQ(Validate(Config(GridParams{DType::kF32, 256, 4, 128, 256, 8192}), small).where(), "constraint candidates");
  // Rows up to ctas x block x items x 4 (fp32) or x 8 (16-bit); batch x ctas
  // within the SMs.
  EXPECT_EQ(g.capacity(), 524288);
  EXPECT_TRUE(ValidateFor(g, arch, Prob(DType::kF32, 1, 524288, 2048)).ok());
  EXPECT_EQ(ValidateFor(g, arch, Prob(DType::kF32, 1, 524289, 2048)).where(), "constraint items");
  EXPECT_EQ(ValidateFor(g, arch, Prob(DType::kF32, 2, 1024, 8)).where(), "constraint ctas");
  {
    // Two CTAs an SM: batch x ctas up to twice the SMs.
    GridParams two{DType::kF32, 512, 4, 4, 256, 4096};
    two.per_sm = 2;
    EXPECT_EQ(Config(two).Id(), "grid_f32_b512_i4_g4_s256_c4096_m2");
    EXPECT_EQ(Config(two).KernelKey(), "grid_f32_b512_i4_m2");
    EXPECT_EQ(Config::FromId("grid_f32_b512_i4_g4_s256_c4096_m2").value(), Config(two));
    EXPECT_EQ(GenerateSource(two).name_expression, "topk::grid_topk_kernel<topk::grid::Policy<0, 512, 4, false, 2>>");
    EXPECT_TRUE(ValidateFor(two, arch, Prob(DType::kF32, 66, 32768, 2048)).ok());
    EXPECT_EQ(ValidateFor(two, arch, Prob(DType::kF32, 67, 32768, 2048)).where(), "constraint ctas");
    two.per_sm = 1;
    EXPECT_EQ(ValidateFor(two, arch, Prob(DType::kF32, 34, 32768, 2048)).where(), "constraint ctas");
    // The JSON names per_sm only away from 1, and a row without it reads 1.
    two.per_sm = 2;
    const nlohmann::json j = Config(two).ToJson();
    EXPECT_EQ(j.dump().find("\"per_sm\":2") != std::string::npos, true) << j.dump();
    EXPECT_EQ(Config::FromJson(j).value(), Config(two));
    nlohmann::json one = j;
    one.erase("per_sm");
    EXPECT_EQ(GridParams::Of(Config::FromJson(one).value()).per_sm, 1);
    EXPECT_EQ(Config(GridParams{DType::kF32, 512, 4, 4}).ToJson().dump().find("per_sm"), std::string::npos);
    // A tuned winner of two an SM keeps it in deterministic mode (its ties 1
    // twin) and carries over only to batches whose CTAs fit twice the SMs.
    Problem d = Prob(DType::kF32, 64, 32768, 2048);
    d.deterministic = true;
    EXPECT_EQ(WithModes(two, d, arch).Id(), "grid_f32_b512_i4_g4_s256_c4096_t1_m2");
    const Family* f = FindFamily("grid");
    const Problem tuned = Prob(DType::kF32, 64, 32768, 2048);
    EXPECT_EQ(f->Adapt(two, tuned, Prob(DType::kF32, 66, 32768, 2048), arch), std::optional<Config>(Config(two)));
    EXPECT_EQ(f->Adapt(two, tuned, Prob(DType::kF32, 67, 32768, 2048), arch), std::nullopt);
    Arch fewer = arch;
    fewer.sm_count = 100;
    EXPECT_EQ(f->Adapt(two, tuned, tuned, fewer), std::nullopt);
    // Threads an SM by architecture: two CTAs of 1024 threads fit sm_90's
    // 2048, not sm_86's 1536.
    GridParams wide{DType::kF32, 1024, 1, 4};
    wide.per_sm = 2;
    EXPECT_TRUE(Validate(wide, arch).ok());
    Arch sm86 = Arch::Sm80();
    sm86.cc_minor = 6;
    EXPECT_EQ(Validate(wide, sm86).where(), "constraint per_sm");
    wide.block_threads = 512;
    EXPECT_TRUE(Validate(wide, sm86).ok());
  }
  EXPECT_EQ((GridParams{DType::kBF16, 256, 4, 128}.capacity()), 1048576);

  SpaceOptions only;
  only.families = {"grid"};
  EXPECT_TRUE(Enumerate(Prob(DType::kF32, 128, 32768, 2048), arch, only).empty());  // 2 CTAs a row hold 16384
  for (const Problem& p : {Prob(DType::kF32, 1, 524288, 2048), Prob(DType::kBF16, 2, 131072, 64),
                           Prob(DType::kF16, 16, 65536, 8), Prob(DType::kF32, 64, 32768, 2048)}) {
    const std::vector<Config> all = Enumerate(p, arch, only);
    ASSERT_FALSE(all.empty()) << p.ToString();
    for (const Config& x : all) {
      EXPECT_TRUE(ValidateFor(x, arch, p).ok()) << x.Id();
      const GridParams gx = GridParams::Of(x);
      EXPECT_LE(p.batch * gx.ctas, arch.sm_count * gx.per_sm) << x.Id();
      // Two an SM only where one an SM does not hold the CTAs.
      if (gx.per_sm == 2) {
        EXPECT_GT(p.batch * gx.ctas, arch.sm_count) << x.Id();
      }
    }
    EXPECT_EQ(Enumerate(p, arch, only), all);  // stable
  }
  // 64 x 32768: 2 CTAs of 8 vectors a thread one an SM, or 4 of 4 two an SM.
  std::set<std::string> ids;
  for (const Config& x : Enumerate(Prob(DType::kF32, 64, 32768, 2048), arch, only)) ids.insert(x.Id());
  EXPECT_EQ(ids, (std::set<std::string>{"grid_f32_b512_i8_g2_s256_c4096", "grid_f32_b512_i8_g2_s1024_c4096",
                                        "grid_f32_b512_i4_g4_s256_c4096_m2", "grid_f32_b512_i4_g4_s1024_c4096_m2"}));
  // 512 threads; 1-8 vectors one an SM and 1-4 two an SM; ties 0-1.
  EXPECT_EQ(FindFamily("grid")->EnumerateKernels(DType::kF32, arch).size(), 14u);

  // The default: fp32 rows of 32768 to 1048576 with k 256 to 4096, 512
  // threads a CTA; a CTA per 2048 elements, up to 128 where the SMs allow,
  // else 64.
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 1, 524288, 2048), arch),
            Config(GridParams{DType::kF32, 512, 2, 128, 256, 4096}));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 1, 131072, 2048), arch),
            Config(GridParams{DType::kF32, 512, 1, 64, 256, 4096}));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 1, 262144, 2048), arch),
            Config(GridParams{DType::kF32, 512, 1, 128, 256, 4096}));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 1, 1048576, 256), arch),
            Config(GridParams{DType::kF32, 512, 4, 128, 256, 4096}));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 1, 524288, 2048), Arch::Sm80()),
            Config(GridParams{DType::kF32, 512, 4, 64, 256, 4096}));  // 108 SMs
  // More rows: the CTAs a row halved until they fit the SMs, down to 16.
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 2, 524288, 2048), arch),
            Config(GridParams{DType::kF32, 512, 4, 64, 256, 4096}));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 4, 262144, 2048), arch),
            Config(GridParams{DType::kF32, 512, 4, 32, 256, 4096}));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 4, 524288, 2048), arch),
            Config(GridParams{DType::kF32, 512, 8, 32, 256, 4096}));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 8, 131072, 2048), arch),
            Config(GridParams{DType::kF32, 512, 4, 16, 256, 4096}));
  // Then two CTAs an SM, down to 4 CTAs a row of at most 4 vectors a thread.
  auto two_an_sm = [](int items, int ctas) {
    GridParams x{DType::kF32, 512, items, ctas, 256, 4096};
    x.per_sm = 2;
    return Config(x);
  };
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 9, 131072, 2048), arch), two_an_sm(4, 16));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 16, 131072, 2048), arch), two_an_sm(4, 16));
  EXPECT_NE(DefaultConfig(Prob(DType::kF32, 17, 131072, 2048), arch).family, "grid");  // 8 CTAs hold 65536
  EXPECT_NE(DefaultConfig(Prob(DType::kF32, 4, 1048576, 2048), arch).family, "grid");  // 32 CTAs hold 524288
  // Rows of 65536 to 131071: a CTA per 2048 elements (a power of two of them).
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 1, 65536, 2048), arch),
            Config(GridParams{DType::kF32, 512, 1, 32, 256, 4096}));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 1, 131071, 2048), arch),
            Config(GridParams{DType::kF32, 512, 2, 32, 256, 4096}));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 8, 65536, 2048), arch),
            Config(GridParams{DType::kF32, 512, 2, 16, 256, 4096}));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 9, 65536, 2048), arch), two_an_sm(2, 16));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 32, 65536, 2048), arch), two_an_sm(4, 8));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 33, 65536, 2048), arch), two_an_sm(4, 8));
  EXPECT_NE(DefaultConfig(Prob(DType::kF32, 34, 65536, 2048), arch).family, "grid");  // 4 CTAs hold 32768
  // Rows of 32768 to 65535: 16 CTAs.
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 1, 65535, 2048), arch),
            Config(GridParams{DType::kF32, 512, 2, 16, 256, 4096}));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 8, 32768, 2048), arch),
            Config(GridParams{DType::kF32, 512, 1, 16, 256, 4096}));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 9, 32768, 2048), arch), two_an_sm(1, 16));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 32, 32768, 2048), arch), two_an_sm(2, 8));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 64, 32768, 2048), arch), two_an_sm(4, 4));
  EXPECT_EQ(DefaultConfig(Prob(DType::kF32, 66, 32768, 2048), arch), two_an_sm(4, 4));
  EXPECT_NE(DefaultConfig(Prob(DType::kF32, 67, 32768, 2048), arch).family, "grid");  // 2 CTAs a row
  EXPECT_NE(DefaultConfig(Prob(DType::kF32, 1, 32767, 2048), arch).family, "grid");
  // Deterministic: the same default, whose kernels take the lowest-index
  // ties themselves (no tie pass over the long row).
  Problem det = Prob(DType::kF32, 1, 524288, 2048);
  det.deterministic = true;
  // The same default with `ties` 1: a kernel of its own, whose id and key
  // say so.
  GridParams gd = GridParams::Of(DefaultConfig(Prob(DType::kF32, 1, 524288, 2048), arch));
  gd.ties = 1;
  EXPECT_EQ(DefaultConfig(det, arch), Config(gd));
  EXPECT_EQ(DefaultConfig(det, arch).Id(), "grid_f32_b512_i2_g128_s256_c4096_t1");
  EXPECT_EQ(DefaultConfig(det, arch).KernelKey(), "grid_f32_b512_i2_t1");
  EXPECT_FALSE(FindFamily("grid")->TakesLowestIndexTies(DefaultConfig(Prob(DType::kF32, 1, 524288, 2048), arch)));
  EXPECT_NE(GenerateSource(DefaultConfig(det, arch)).name_expression.find("Policy<0, 512, 2, true>"), std::string::npos);
  det.n = 65536;
  det.batch = 4;
  EXPECT_EQ(DefaultConfig(det, arch).family, "grid");
  det.n = 1048576;
  det.batch = 1;
  EXPECT_EQ(DefaultConfig(det, arch).family, "grid");
  EXPECT_TRUE(FindFamily("grid")->TakesLowestIndexTies(DefaultConfig(det, arch)));
  EXPECT_NE(DefaultConfig(Prob(DType::kF32, 1, 1048577, 2048), arch).family, "grid");
  EXPECT_NE(DefaultConfig(Prob(DType::kF32, 1, 524288, 255), arch).family, "grid");
  EXPECT_NE(DefaultConfig(Prob(DType::kF32, 1, 524288, 4097), arch).family, "grid");
  EXPECT_NE(DefaultConfig(Prob(DType::kBF16, 1, 524288, 2048), arch).family, "grid");
  // WithModes, what dispatch runs for a tuned winner and verify checks: a
  // grid winner of `ties` 0 takes its `ties` 1 kernel in deterministic mode,
  // and stays as it is otherwise; another family's winner stays as it is.
  {
    const Config tuned = DefaultConfig(Prob(DType::kF32, 1, 524288, 2048), arch);
    Problem d = Prob(DType::kF32, 1, 524288, 2048);
    d.deterministic = true;
    EXPECT_EQ(WithModes(tuned, d, arch), DefaultConfig(d, arch));
    EXPECT_EQ(WithModes(tuned, d, arch).Id(), "grid_f32_b512_i2_g128_s256_c4096_t1");
    EXPECT_EQ(WithModes(tuned, Prob(DType::kF32, 1, 524288, 2048), arch), tuned);
    const Config filter = DefaultConfig(Prob(DType::kF32, 128, 131072, 2048), arch);
    Problem fd = Prob(DType::kF32, 128, 131072, 2048);
    fd.deterministic = true;
    EXPECT_EQ(WithModes(filter, fd, arch), filter);
  }

  const Problem p = Prob(DType::kF32, 1, 524288, 2048);
  const LaunchPlan plan = PlanLaunch(g, p, arch);
  ASSERT_EQ(plan.stages.size(), 1u);
  const Stage& s = plan.stages[0];
  EXPECT_TRUE(s.cooperative);
  EXPECT_EQ(s.ctas_per_row, 128);
  EXPECT_EQ(s.Grid(1), 128u);
  EXPECT_EQ(s.args.buffer, 4096);
  EXPECT_EQ(s.args.rounds, 256);
  EXPECT_EQ(s.args.cache_cap, 128);
  EXPECT_EQ(s.smem_bytes, (2 * 256 + 128 + 2 * 4096) * 4);
  EXPECT_EQ(plan.workspace_bytes, (8 + 2 * (256 + 2) + 256 * 4 + 256 + 2 * 4096) * 4u);
  EXPECT_EQ(PlanLaunch(g, Prob(DType::kF32, 3, 1024, 8), arch).workspace_bytes, 3 * plan.workspace_bytes);
  // An odd room is rounded up to even in the workspace, so that every row
  // starts 16-byte aligned (the kernel's 16-byte loads of the histogram).
  {
    Config odd = g;
    odd.Set("candidates", 129);
    ASSERT_TRUE(Validate(odd, arch).ok());
    const size_t bytes = PlanLaunch(odd, Prob(DType::kF32, 2, 524288, 2048), arch).workspace_bytes;
    EXPECT_EQ(bytes, 2 * (8 + 2 * (256 + 2) + 256 * 4 + 256 + 2 * 130) * 4u);
    EXPECT_EQ(bytes / 2 % 16, 0u);  // each of the two rows' stride
  }
  // Every other family's plan needs no workspace.
  const Problem many = Prob(DType::kF32, 128, 131072, 2048);
  EXPECT_EQ(PlanLaunch(DefaultConfig(many, arch), many, arch).workspace_bytes, 0u);
  const KernelSource src = GenerateSource(g);
  EXPECT_EQ(src.name_expression, "topk::grid_topk_kernel<topk::grid::Policy<0, 256, 4, false>>");
  EXPECT_NE(src.text.find("#include \"topk/grid/grid_select.cuh\""), std::string::npos);
}

}  // namespace topk::gen
