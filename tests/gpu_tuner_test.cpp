// The tuner against a real GPU: the worker process, fault isolation with the
// test-only crashing / hanging / wrong kernels, a tune that stores winners,
// and a second tune that resumes instead of redoing work. Needs a GPU.
#include <gtest/gtest.h>

#include <map>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "cache/cache.hpp"
#include "cache/jit_adapter.hpp"
#include "generator/source.hpp"
#include "jit/device.hpp"
#include "jit/kernel_store.hpp"
#include "support/test_support.hpp"
#include "tuner/tuner.hpp"
#include "tuner/worker.hpp"

namespace topk::tuner {
namespace {

std::string WorkerPath() {
  const char* w = std::getenv("TOPK_WORKER");
  if (w && *w) return w;
  return testing::BinDir() + "/topk-tune-worker";
}

Problem Small() {
  Problem p;
  p.dtype = DType::kF32;
  p.batch = 4;
  p.n = 20000;
  p.k = 500;
  p.ranges = true;
  return p;
}

class GpuTunerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TOPK_REQUIRE_GPU();
    auto d = jit::QueryDevice(0);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    info_ = *d;
    compiler_ = jit::MakeNvrtcCompiler();
    dir_ = testing::TempPath("tuner");
    std::filesystem::create_directories(dir_);
  }

  // Compiles `src` and writes its cubin for the worker.
  std::pair<std::string, std::string> Cubin(const gen::KernelSource& src) {
    jit::CompileOptions o;
    o.arch = info_.ArchName();
    auto k = compiler_->Compile(src, o);
    EXPECT_TRUE(k.ok()) << k.status().ToString();
    const std::string path = dir_ + "/" + src.hash + ".cubin";
    std::ofstream(path, std::ios::binary).write(k->cubin.data(), static_cast<std::streamsize>(k->cubin.size()));
    return {path, k->lowered_name};
  }

  EvalRequest Request(const gen::Config& c, const gen::KernelSource& src, const std::string& id) {
    EvalRequest r;
    r.config = c;
    r.variant_id = id;
    r.problem = Small();
    r.measure.min_time_ms = 2;
    r.measure.min_samples = 5;
    auto [path, name] = Cubin(src);
    r.cubin_path = path;
    r.lowered_name = name;
    return r;
  }

  // A new cache file under the test's folder with this device recorded.
  StatusOr<std::unique_ptr<cache::Cache>> FreshCache(const std::string& name) const {
    auto c = cache::Cache::Open(dir_ + "/" + name);
    if (!c.ok()) return c.status();
    TOPK_RETURN_IF_ERROR((*c)->PutDevice(Record()));
    return c;
  }
  // Six candidates, exhaustively, with short timing.
  TuneOptions ShortTune() const {
    TuneOptions o;
    o.strategy = "exhaustive";
    o.max_candidates = 6;
    o.measure.min_time_ms = 2;
    o.measure.min_samples = 5;
    o.workdir = dir_ + "/work";
    return o;
  }
  cache::DeviceRecord Record() const { return cache::RecordOf(info_); }

  jit::DeviceInfo info_;
  std::unique_ptr<jit::Compiler> compiler_;
  std::string dir_;
};

TEST_F(GpuTunerTest, WorkerVerifiesAndTimesAVariant) {
  WorkerClient w(WorkerPath(), 0, 60);
  auto hello = w.Hello();
  ASSERT_TRUE(hello.ok()) << hello.status().ToString();
  EXPECT_NE(hello->find(info_.name), std::string::npos);
  const gen::Config c = gen::DefaultConfig(Small(), info_.ToArch());
  auto r = w.Evaluate(Request(c, gen::GenerateSource(c), c.Id()));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->outcome, cache::Outcome::kOk) << r->message;
  EXPECT_TRUE(r->verified);
  EXPECT_GT(r->samples.median, 0);
  EXPECT_LE(r->samples.p10, r->samples.median);
  EXPECT_GE(r->samples.p90, r->samples.median);
  EXPECT_GE(r->samples.us.size(), 5u);
}

// A crash, a hang and a wrong answer each cost only the worker: the client
// reports the failure kind, starts a fresh worker and the next variant runs.
TEST_F(GpuTunerTest, FaultyKernelsAreIsolatedAndClassified) {
  WorkerClient w(WorkerPath(), 0, /*timeout_s=*/8);
  const gen::Config good = gen::DefaultConfig(Small(), info_.ToArch());
  const EvalRequest ok_req = Request(good, gen::GenerateSource(good), good.Id());
  struct Case {
    const char* kind;
    cache::Outcome want;
  };
  for (const Case& f : {Case{"crash", cache::Outcome::kCrash}, Case{"hang", cache::Outcome::kTimeout},
                        Case{"wrong", cache::Outcome::kWrongResult}}) {
    auto src = gen::FaultSource(f.kind);
    ASSERT_TRUE(src.ok());
    const auto t0 = std::chrono::steady_clock::now();
    auto r = w.Evaluate(Request(good, *src, std::string("test_fault_") + f.kind));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->outcome, f.want) << f.kind << ": " << r->message;
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60) << f.kind;
    auto after = w.Evaluate(ok_req);
    ASSERT_TRUE(after.ok()) << after.status().ToString();
    EXPECT_EQ(after->outcome, cache::Outcome::kOk) << "after " << f.kind << ": " << after->message;
  }
  EXPECT_GE(w.restarts(), 2);  // crash and hang each cost one worker
}

TEST_F(GpuTunerTest, TuneStoresAWinnerAndResumes) {
  auto cache = FreshCache("tune.db");
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  WorkerClient w(WorkerPath(), 0, 60);
  TuneOptions o = ShortTune();
  o.inject_faults = {"crash", "wrong"};
  o.objective = "normal";  // counts below are of one input; the robust objective is tested on its own
  Problem p = Small();
  p.batch = 16;  // 16 rows with k above n / 8 keep the radix default, whose refinements follow the search
  p.k = 2600;
  ShapeSummary first;
  {
    Tuner t(cache->get(), compiler_.get(), &w, Record(), info_.ToArch(), o);
    auto s = t.TuneShape(p, 0, 1, nullptr);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    first = *s;
  }
  EXPECT_TRUE(first.has_winner) << first.message;
  // Six candidates of the space, then the refinements of the best one
  // (gen::Family::Refinements: a radix strategy switch flipped each).
  const int refined = first.evaluated - 6;
  EXPECT_GE(refined, 1);
  EXPECT_EQ(first.outcomes["crash"], 1);
  EXPECT_EQ(first.outcomes["wrong_result"], 1);
  auto win = (*cache)->FindWinner(Record().fingerprint, p);
  ASSERT_TRUE(win.ok() && win->has_value());
  EXPECT_EQ((*win)->variant_id, first.winner_id);
  EXPECT_GT((*win)->default_us, 0);
  // Whichever family won (the resident cluster mode and radix are close at
  // this shape), the stored id names a config valid for the problem.
  auto won = gen::Config::FromId((*win)->variant_id);
  ASSERT_TRUE(won.ok()) << won.status().ToString();
  EXPECT_TRUE(gen::ValidateFor(*won, info_.ToArch(), p).ok()) << (*win)->variant_id;

  // Again, further: the six finished candidates are skipped, four new ones
  // are measured (exhaustive order is stable).
  o.inject_faults.clear();
  o.max_candidates = 10;
  Tuner t2(cache->get(), compiler_.get(), &w, Record(), info_.ToArch(), o);
  auto s2 = t2.TuneShape(p, 0, 1, nullptr);
  ASSERT_TRUE(s2.ok()) << s2.status().ToString();
  EXPECT_EQ(s2->resumed, 6);
  EXPECT_EQ(s2->evaluated, 4);
  auto ms = (*cache)->Measurements(Record().fingerprint, &p);
  ASSERT_TRUE(ms.ok());
  // Ten variants of the space, the two injected faults and the refinements.
  EXPECT_EQ(ms->size(), 10u + 2u + static_cast<size_t>(refined));
  int switched = 0;
  for (const auto& m : *ms)
    for (const char* tag : {"_la", "_bf", "_co", "_uc", "_pf"})
      if (m.variant_id.find(tag) != std::string::npos) {
        ++switched;
        EXPECT_EQ(m.outcome, cache::Outcome::kOk) << m.variant_id << ": " << m.message;
      }
  EXPECT_EQ(switched, refined);
  EXPECT_TRUE((*cache)->IntegrityCheck().ok());
}

// The robust objective on a real GPU: the candidates are verified and timed
// on the shifted, plateau and 16-valued inputs too, and those measurements
// are stored with their input.
TEST_F(GpuTunerTest, RobustObjectiveTimesTheCandidatesOnAdversarialInputs) {
  auto cache = FreshCache("robust.db");
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  WorkerClient w(WorkerPath(), 0, 60);
  TuneOptions o = ShortTune();
  o.retime_top = 2;
  o.objective = "robust";
  const Problem p = Small();
  Tuner t(cache->get(), compiler_.get(), &w, Record(), info_.ToArch(), o);
  auto s = t.TuneShape(p, 0, 1, nullptr);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE(s->has_winner) << s->message;
  auto ms = (*cache)->Measurements(Record().fingerprint, &p);
  ASSERT_TRUE(ms.ok());
  std::map<std::string, int> ok_by_dist;
  for (const auto& m : *ms)
    if (m.outcome == cache::Outcome::kOk && m.verified) ++ok_by_dist[m.input_dist];
  for (const char* d : {"shifted", "plateau", "distinct16"}) EXPECT_GE(ok_by_dist[d], 1) << d;
}

}  // namespace
}  // namespace topk::tuner
