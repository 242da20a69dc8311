// A kernel family that exists only in this test (support/toy_family.cpp)
// goes through every layer that the built-in families use: the registry,
// ids, constraints, enumeration, NVRTC, tuning (fake evaluator), the cache
// and dispatch. None of those layers names a family, so none needed a change
// for it. Its GPU run (exact results) is in gpu_kernels_test.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "cache/cache.hpp"
#include "generator/config.hpp"
#include "generator/family.hpp"
#include "jit/compiler.hpp"
#include "runtime/dispatch.hpp"
#include "support/fake_compiler.hpp"
#include "support/test_support.hpp"
#include "support/toy_family.hpp"
#include "tuner/search.hpp"
#include "tuner/tuner.hpp"

namespace topk {
namespace {

Problem Rows(int64_t batch, int64_t n, int64_t k) {
  Problem p;
  p.dtype = DType::kF32;
  p.batch = batch;
  p.n = n;
  p.k = k;
  return p;
}

// The toy family is fast, everything else slow: the tuner must find it.
class ToyWinsEvaluator final : public tuner::Evaluator {
 public:
  StatusOr<tuner::EvalResult> Evaluate(const tuner::EvalRequest& r) override {
    ++calls;
    tuner::EvalResult e;
    if (!std::filesystem::exists(r.cubin_path)) {
      e.outcome = cache::Outcome::kCrash;
      e.message = "no cubin file";
      return e;
    }
    e.verified = true;
    const double t = r.config.family == "sorttrunc" ? 3.0 + r.config.Get("block_threads") / 128.0 : 10.0;
    e.samples.median = e.samples.p10 = e.samples.p90 = e.samples.min = t;
    return e;
  }
  int calls = 0;
};

TEST(ToyFamilyTest, RegistryIdsAndConstraints) {
  testing::ScopedToyFamily toy;
  ASSERT_TRUE(toy.status().ok()) << toy.status().ToString();
  ASSERT_NE(gen::FindFamily("sorttrunc"), nullptr);
  // Registered twice: refused by name.
  EXPECT_FALSE(gen::RegisterFamily(testing::MakeToyFamily()).ok());

  const gen::Config c = testing::ToyConfig(DType::kF32, 64);
  EXPECT_EQ(c.Id(), "sorttrunc_f32_b64");
  auto back = gen::Config::FromId("sorttrunc_f32_b64");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, c);
  auto json = gen::Config::FromJson(c.ToJson());
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(*json, c);

  // Its constraints are named like the built-in ones.
  const gen::Arch arch = gen::Arch::Sm90();
  EXPECT_NE(gen::Validate(testing::ToyConfig(DType::kF32, 512), arch).where().find("constraint toy-block"),
            std::string::npos);
  EXPECT_NE(gen::Validate(testing::ToyConfig(DType::kF32, 65), arch).where().find("constraint block"),
            std::string::npos);
  EXPECT_NE(gen::ValidateFor(c, arch, Rows(4, 5000, 8)).where().find("constraint toy-rows"), std::string::npos);
  EXPECT_NE(gen::ValidateFor(c, arch, Rows(4, 1000, 8)).ok(), false);

  // Enumeration: beside the built-in families where rows are short enough,
  // alone with a family filter, absent where rows are too long.
  auto count = [](const std::vector<gen::Config>& v) {
    int n = 0;
    for (const gen::Config& x : v) n += x.family == "sorttrunc";
    return n;
  };
  const auto all = gen::Enumerate(Rows(16, 1000, 32), arch);
  EXPECT_EQ(count(all), 2);
  EXPECT_GT(all.size(), 2u);
  gen::SpaceOptions only;
  only.families = {"sorttrunc"};
  EXPECT_EQ(gen::Enumerate(Rows(16, 1000, 32), arch, only).size(), 2u);
  EXPECT_EQ(count(gen::Enumerate(Rows(16, 5000, 32), arch)), 0);
  // Never the default.
  EXPECT_NE(gen::DefaultConfig(Rows(16, 1000, 32), arch).family, "sorttrunc");
  // Local search sees configs of two families as far apart.
  EXPECT_GT(tuner::KnobDistance(c, gen::DefaultConfig(Rows(16, 1000, 32), arch)), 1);
}

TEST(ToyFamilyTest, UnregisteredFamilyIsAClearError) {
  {
    testing::ScopedToyFamily toy;
    ASSERT_TRUE(toy.status().ok());
  }
  auto r = gen::Config::FromId("sorttrunc_f32_b64");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown family 'sorttrunc'"), std::string::npos) << r.status().ToString();
  EXPECT_FALSE(gen::Validate(testing::ToyConfig(DType::kF32, 64), gen::Arch::Sm90()).ok());
  EXPECT_TRUE(gen::GenerateSources(testing::ToyConfig(DType::kF32, 64)).empty());
}

// NVRTC compiles the toy family's source like any other (no GPU needed).
TEST(ToyFamilyTest, NvrtcCompilesItsSource) {
  testing::ScopedToyFamily toy;
  ASSERT_TRUE(toy.status().ok());
  auto compiler = jit::MakeNvrtcCompiler();
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const std::vector<gen::KernelSource> srcs = gen::GenerateSources(testing::ToyConfig(dt, 128));
    ASSERT_EQ(srcs.size(), 1u);
    jit::CompileOptions o;
    o.arch = "sm_90";
    auto k = compiler->Compile(srcs[0], o);
    if (!k.ok() && k.status().code() == Code::kUnavailable) GTEST_SKIP() << k.status().ToString();
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    EXPECT_GT(k->cubin.size(), 1000u);
    EXPECT_NE(k->lowered_name.find("sort_truncate"), std::string::npos) << k->lowered_name;
  }
}

// Tuning (fake evaluator), the cache and dispatch with a family they have
// never heard of.
TEST(ToyFamilyTest, TunedCachedAndDispatched) {
  auto toy = std::make_unique<testing::ScopedToyFamily>();
  ASSERT_TRUE(toy->status().ok());
  auto opened = cache::Cache::Open(testing::TempPath("toy.db"));
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<cache::Cache> c = std::move(*opened);
  cache::DeviceRecord dev;
  dev.fingerprint = "Fake GPU|sm_90|132sm|L2=1";
  dev.name = "Fake GPU";
  dev.cc_major = 9;
  ASSERT_TRUE(c->PutDevice(dev).ok());
  testing::FakeCompiler compiler;
  ToyWinsEvaluator eval;
  tuner::TuneOptions opt;
  opt.strategy = "exhaustive";
  opt.workdir = testing::TempPath("toy-work");
  opt.compile_threads = 2;
  opt.families = {"sorttrunc"};
  const gen::Arch arch = gen::Arch::Sm90();
  const Problem p = Rows(64, 1024, 16);
  tuner::Tuner t(c.get(), &compiler, &eval, dev, arch, opt);
  auto s = t.TuneShape(p, 0, 1, nullptr);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE(s->has_winner) << s->message;
  EXPECT_EQ(s->winner_id, "sorttrunc_f32_b64");
  EXPECT_EQ(s->space, 3);  // two toy variants and the default as baseline
  EXPECT_DOUBLE_EQ(s->default_us, 10.0);

  auto w = c->FindWinner(dev.fingerprint, p);
  ASSERT_TRUE(w.ok() && w->has_value());
  EXPECT_EQ((*w)->config, testing::ToyConfig(DType::kF32, 64));

  // Exact shape, then a near one (the family's default Adapt keeps a config
  // that fits), then one it cannot serve (rows too long: the default).
  const auto exact = runtime::Decide(c.get(), dev.fingerprint, {}, false, p, arch);
  EXPECT_EQ(exact.source, DispatchSource::kExact);
  EXPECT_EQ(exact.config.Id(), "sorttrunc_f32_b64");
  const auto near = runtime::Decide(c.get(), dev.fingerprint, {}, false, Rows(32, 2048, 16), arch);
  EXPECT_EQ(near.source, DispatchSource::kNearest);
  EXPECT_EQ(near.config.family, "sorttrunc");
  const auto far = runtime::Decide(c.get(), dev.fingerprint, {}, false, Rows(64, 8192, 32), arch);
  EXPECT_EQ(far.source, DispatchSource::kDefault);
  EXPECT_EQ(far.config, gen::DefaultConfig(Rows(64, 8192, 32), arch));

  // A build without the family: its winner is skipped, not an error, and a
  // winner of a known family in the same group still serves nearby shapes.
  cache::Winner known;
  known.device_fingerprint = dev.fingerprint;
  known.problem = Rows(64, 2048, 64);
  known.config = gen::DefaultConfig(known.problem, arch);
  known.variant_id = known.config.Id();
  known.median_us = 9;
  ASSERT_TRUE(c->PutWinner(known).ok());
  toy.reset();
  ASSERT_EQ(gen::FindFamily("sorttrunc"), nullptr);
  const auto orphan = runtime::Decide(c.get(), dev.fingerprint, {}, false, p, arch);
  EXPECT_EQ(orphan.source, DispatchSource::kNearest);
  EXPECT_EQ(orphan.tuned_shape, cache::ProblemKey(known.problem));
  EXPECT_EQ(orphan.config.family, known.config.family);
}

}  // namespace
}  // namespace topk
