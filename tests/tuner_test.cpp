// The tuning loop and the search strategies with a fake compiler and a fake
// evaluator behind the real interfaces: no GPU, no NVRTC. The cache is the
// real SQLite one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "cache/cache.hpp"
#include "generator/config.hpp"
#include "jit/compiler.hpp"
#include "support/fake_compiler.hpp"
#include "support/test_support.hpp"
#include "tuner/search.hpp"
#include "generator/radix.hpp"
#include "tuner/tuner.hpp"
#include "tuner/worker.hpp"

namespace topk::tuner {
namespace {

using testing::FakeCompiler;

// Time of a config on a smooth landscape with one minimum; some knob values
// fail in the ways a real GPU fails.
class FakeEvaluator final : public Evaluator {
 public:
  StatusOr<EvalResult> Evaluate(const EvalRequest& r) override {
    if (infra_error) return Status(Code::kUnavailable, "fake", "worker cannot start");
    ++calls[r.variant_id];
    EvalResult e;
    const gen::RadixParams c = gen::RadixParams::Of(r.config);
    if (!std::filesystem::exists(r.cubin_path)) {
      e.outcome = cache::Outcome::kCrash;
      e.message = "no cubin file";
      return e;
    }
    if (r.config.family != "radix") {  // other families: slower, correct, other_adversarial x on adversarial inputs
      e.verified = true;
      e.samples.median = e.samples.p10 = e.samples.p90 = e.samples.min =
          other_us * (r.dist != "normal" ? other_adversarial : 1.0);
      return e;
    }
    if (c.cluster == 4 && c.block_threads == 1024) {  // "does not fit"
      e.outcome = cache::Outcome::kResourceLimit;
      return e;
    }
    if (c.block_threads == 256 && c.radix_bits == 8 && !c.half_first) {
      e.outcome = cache::Outcome::kWrongResult;
      return e;
    }
    // Strategy switches (set only by refinements): prefetch off pays, any
    // other set switch costs.
    const double strategy = (c.prefetch == 0 ? -0.3 : 0) + 0.2 * ((c.lane_atomics >= 0) + (c.branch_free >= 0) +
                                                                  (c.capture_only >= 0) + (c.uniform_check >= 0) +
                                                                  (c.prefetch == 1));
    double t = strategy + 10 + std::abs(std::log2(c.block_threads / 1024.0)) + (c.radix_bits == 11 ? 0 : 2) +
               (c.half_first ? 1 : 0) + std::abs(std::log2(std::max(c.cluster, 1) / 2.0)) +
               (c.smem_buffer == 4096 ? 0 : 0.5) + (c.row_cache ? 0 : 0.7) + 0.1 * c.rounds;
    // One config looks fastest on its first measurement only: noise that
    // re-timing must see through.
    if (r.variant_id == lucky && calls[r.variant_id] == 1) t = 1;
    if (r.dist != "normal") t *= radix_adversarial;  // a radix select on shifted or few-valued rows
    e.verified = true;
    e.samples.median = e.samples.p10 = e.samples.p90 = e.samples.min = t;
    e.samples.us = {t, t};
    e.samples.launches = 20;
    return e;
  }
  std::map<std::string, int> calls;
  std::string lucky;
  bool infra_error = false;
  double other_us = 40;
  double radix_adversarial = 1;
  double other_adversarial = 1;
};

Problem Shape() {
  Problem p;
  p.dtype = DType::kF32;
  // Few long rows: the radix default (the resident family takes up to 15
  // rows of up to 262144 with k >= 64 on 132 SMs, the filter family 16 rows
  // and more).
  p.batch = 8;
  p.n = 524288;
  p.k = 2048;
  p.ranges = true;
  return p;
}

cache::DeviceRecord Device() {
  cache::DeviceRecord d;
  d.fingerprint = "Fake GPU|sm_90|132sm|L2=1";
  d.name = "Fake GPU";
  d.cc_major = 9;
  return d;
}

class TunerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = cache::Cache::Open(testing::TempPath("tuner.db"));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cache_ = std::move(*c);
    ASSERT_TRUE(cache_->PutDevice(Device()).ok());
    opt_.workdir = testing::TempPath("work");
    opt_.compile_threads = 2;
    // The search and re-timing mechanics on one input; the robust objective
    // (more inputs per candidate) and the refinements have tests of their own.
    opt_.objective = "normal";
    opt_.refine = false;
  }

  StatusOr<ShapeSummary> Tune(const TuneOptions& o) {
    Tuner t(cache_.get(), &compiler_, &eval_, Device(), gen::Arch::Sm90(), o);
    return t.TuneShape(Shape(), 0, 1, nullptr);
  }

  // The best config of the landscape among those that do not fail.
  gen::Config Best() const {
    gen::Config best;
    double bt = 1e30;
    FakeEvaluator probe;
    for (const gen::Config& c : gen::Enumerate(Shape(), gen::Arch::Sm90())) {
      EvalRequest r;
      r.config = c;
      r.variant_id = c.Id();
      r.cubin_path = "/proc/self/exe";  // exists
      auto e = probe.Evaluate(r);
      if (e->outcome == cache::Outcome::kOk && e->samples.median < bt) {
        bt = e->samples.median;
        best = c;
      }
    }
    return best;
  }

  std::unique_ptr<cache::Cache> cache_;
  FakeCompiler compiler_;
  FakeEvaluator eval_;
  TuneOptions opt_;
};

TEST_F(TunerTest, ExhaustiveMeasuresEveryVariantOnceAndPicksTheBest) {
  opt_.strategy = "exhaustive";
  auto s = Tune(opt_);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const size_t space = gen::Enumerate(Shape(), gen::Arch::Sm90()).size();
  EXPECT_EQ(static_cast<size_t>(s->space), space);
  EXPECT_EQ(static_cast<size_t>(s->evaluated), space);
  ASSERT_TRUE(s->has_winner);
  EXPECT_EQ(s->winner_id, Best().Id());
  EXPECT_GT(s->outcomes["resource_limit"], 0);
  EXPECT_GT(s->outcomes["wrong_result"], 0);
  auto ms = cache_->Measurements(Device().fingerprint, nullptr);
  ASSERT_TRUE(ms.ok());
  EXPECT_EQ(ms->size(), space);  // failures are recorded too
  auto w = cache_->FindWinner(Device().fingerprint, Shape());
  ASSERT_TRUE(w.ok() && w->has_value());
  EXPECT_EQ((*w)->variant_id, Best().Id());
  EXPECT_GT((*w)->default_us, (*w)->median_us);
  // Kernels compile once each: far fewer compiles than variants.
  EXPECT_LT(compiler_.compiles.load(), static_cast<int>(space) / 4);
}

// After the search, the refinements of each family's best (radix: one
// strategy switch flipped) are measured once and take part in the re-time:
// here prefetch off pays, so the best with pf0 wins.
TEST_F(TunerTest, RefinementsOfTheBestAreMeasuredOnceAfterTheSearch) {
  opt_.strategy = "exhaustive";
  opt_.refine = true;
  std::vector<ProgressEvent> events;
  Tuner t(cache_.get(), &compiler_, &eval_, Device(), gen::Arch::Sm90(), opt_);
  auto s = t.TuneShape(Shape(), 0, 1, [&](const ProgressEvent& e) { events.push_back(e); });
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const size_t space = gen::Enumerate(Shape(), gen::Arch::Sm90()).size();
  const gen::Config best = Best();
  const gen::RadixParams bp = gen::RadixParams::Of(best);
  ASSERT_TRUE(bp.automatic_strategy());
  ASSERT_TRUE(bp.auto_prefetch());  // so that its refinement turns prefetch off
  const std::vector<gen::Config> refined = gen::RadixFamily().Refinements(best, Shape(), gen::Arch::Sm90());
  ASSERT_FALSE(refined.empty());
  // The filter family's best has no refinements; the radix best's are all measured.
  EXPECT_EQ(static_cast<size_t>(s->evaluated), space + refined.size());
  for (const gen::Config& r : refined) EXPECT_GE(eval_.calls[r.Id()], 1) << r.Id();
  gen::Config pf0 = best;
  pf0.Set("prefetch", 0);
  EXPECT_EQ(s->winner_id, pf0.Id());
  EXPECT_NE(s->winner_id.find("_pf0"), std::string::npos);
  // After the search's events: the refinements' come last, before the re-time.
  size_t variants = 0;
  for (const ProgressEvent& e : events) variants += e.kind == ProgressEvent::kVariant;
  EXPECT_EQ(variants, space + refined.size());
  // A second run finds them measured: nothing new, the winner kept.
  const auto calls = eval_.calls;
  Tuner again(cache_.get(), &compiler_, &eval_, Device(), gen::Arch::Sm90(), opt_);
  auto s2 = again.TuneShape(Shape(), 0, 1, nullptr);
  ASSERT_TRUE(s2.ok());
  EXPECT_EQ(s2->evaluated, 0);
  EXPECT_EQ(s2->winner_id, pf0.Id());
  EXPECT_EQ(eval_.calls, calls);
}

TEST_F(TunerTest, NoRefinementsWhenRefineIsOff) {
  opt_.strategy = "exhaustive";
  opt_.refine = false;
  auto s = Tune(opt_);
  ASSERT_TRUE(s.ok());
  const size_t space = gen::Enumerate(Shape(), gen::Arch::Sm90()).size();
  EXPECT_EQ(static_cast<size_t>(s->evaluated), space);
  EXPECT_EQ(s->winner_id, Best().Id());
  for (const auto& [id, n] : eval_.calls) {
    auto c = gen::Config::FromId(id);
    ASSERT_TRUE(c.ok()) << id;
    if (c->family == "radix") {
      EXPECT_TRUE(gen::RadixParams::Of(*c).automatic_strategy()) << id;
    }
  }
}

TEST_F(TunerTest, FailedVariantsNeverWin) {
  opt_.strategy = "exhaustive";
  compiler_.fail_key = Best().KernelKey();  // the best config's kernel does not compile
  auto s = Tune(opt_);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->has_winner);
  EXPECT_NE(s->winner_id, Best().Id());
  EXPECT_GT(s->outcomes["compile_error"], 0);
  auto w = cache_->FindWinner(Device().fingerprint, Shape());
  auto ms = cache_->Measurements(Device().fingerprint, nullptr);
  for (const auto& m : *ms) {
    if (m.variant_id == (*w)->variant_id) {
      EXPECT_EQ(m.outcome, cache::Outcome::kOk);
    }
  }
}

TEST_F(TunerTest, ResumeSkipsFinishedVariants) {
  opt_.strategy = "exhaustive";
  opt_.max_candidates = 20;
  auto first = Tune(opt_);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->evaluated, 20);
  const auto calls_before = eval_.calls;
  opt_.max_candidates = 30;
  auto second = Tune(opt_);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->resumed, 20);
  EXPECT_EQ(second->evaluated, 10);
  // The resumed twenty were not evaluated again (only the final re-timing
  // touches the best few).
  int again = 0;
  for (const auto& [id, n] : calls_before) again += eval_.calls[id] - n;
  EXPECT_LE(again, opt_.retime_top);
  // With nothing new to measure, a third run keeps the winner untouched.
  const auto calls_mid = eval_.calls;
  auto third = Tune(opt_);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->evaluated, 0);
  EXPECT_EQ(third->winner_id, second->winner_id);
  EXPECT_EQ(eval_.calls, calls_mid);
}

// The robust objective times the candidates (the best few and the best of
// each family) on shifted, plateau and 16-valued inputs too: a radix winner
// that collapses there loses to a family that stays flat; the normal
// objective keeps the fastest.
TEST_F(TunerTest, RobustObjectivePrefersWhatDoesNotCollapse) {
  opt_.strategy = "exhaustive";
  eval_.other_us = 15;            // the other families: flat
  eval_.radix_adversarial = 3.0;  // radix: 3x on adversarial inputs
  opt_.objective = "normal";
  auto normal = Tune(opt_);
  ASSERT_TRUE(normal.ok()) << normal.status().ToString();
  EXPECT_EQ(normal->winner_id, Best().Id());
  opt_.objective = "robust";
  opt_.resume = false;
  auto robust = Tune(opt_);
  ASSERT_TRUE(robust.ok()) << robust.status().ToString();
  EXPECT_NE(robust->winner_id.rfind("radix_", 0), 0u) << robust->winner_id;  // a flat family
  EXPECT_DOUBLE_EQ(robust->winner_us, 15.0);
  // The adversarial measurements are stored with their input.
  auto ms = cache_->Measurements(Device().fingerprint, nullptr);
  ASSERT_TRUE(ms.ok());
  std::set<std::string> dists;
  for (const auto& m : *ms) dists.insert(m.input_dist);
  for (const char* d : {"normal", "shifted", "plateau", "distinct16"}) EXPECT_TRUE(dists.count(d)) << d;
  // With nothing collapsing, robust keeps the fastest.
  eval_.radix_adversarial = 1.0;
  auto flat = Tune(opt_);
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(flat->winner_id, Best().Id());
  // A mild collapse (1.4x): the old rule, max(normal, worst / 1.25), would
  // take radix (1.12 b) over a flat family at 1.25 b; radix's worst input
  // (1.4 b) is slower than the flat one's normal time, so the flat one wins.
  eval_.radix_adversarial = 1.4;
  const double b = normal->winner_us;
  eval_.other_us = 1.25 * b;
  auto mild = Tune(opt_);
  ASSERT_TRUE(mild.ok());
  EXPECT_NE(mild->winner_id.rfind("radix_", 0), 0u) << mild->winner_id;
  // A flat family slower (1.5 b) than radix's worst input: radix wins.
  eval_.other_us = 1.5 * b;
  auto slow_flat = Tune(opt_);
  ASSERT_TRUE(slow_flat.ok());
  EXPECT_EQ(slow_flat->winner_id, Best().Id());
  // A flat family (1.2 b, 1.2x on adversarial inputs: 1.44 b) whose worst
  // input is slower than radix's (1.4 b): radix is no worse in the worst
  // case and faster on normal rows, so it wins; with the flat one's worst
  // at 1.38 b (below radix's) the flat one wins.
  eval_.other_us = 1.2 * b;
  eval_.other_adversarial = 1.2;
  auto no_worse = Tune(opt_);
  ASSERT_TRUE(no_worse.ok());
  EXPECT_EQ(no_worse->winner_id, Best().Id());
  eval_.other_us = 1.15 * b;
  auto protects = Tune(opt_);
  ASSERT_TRUE(protects.ok());
  EXPECT_NE(protects->winner_id.rfind("radix_", 0), 0u) << protects->winner_id;
  eval_.other_adversarial = 1.0;
  // A bad objective or input name is an error, not a silent default.
  opt_.objective = "fastest";
  EXPECT_EQ(Tune(opt_).status().code(), Code::kInvalidArgument);
  opt_.objective = "robust";
  opt_.robust_dists = {"nope"};
  EXPECT_EQ(Tune(opt_).status().code(), Code::kInvalidArgument);
}

TEST_F(TunerTest, RetimingSeesThroughALuckySample) {
  opt_.strategy = "exhaustive";
  gen::Config lucky = Best();
  lucky.Set("row_cache", 1 - lucky.Get("row_cache"));  // a worse config, fast only once
  eval_.lucky = lucky.Id();
  auto s = Tune(opt_);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(eval_.calls[lucky.Id()], 2);  // measured, then re-timed
  EXPECT_EQ(s->winner_id, Best().Id());
}

TEST_F(TunerTest, BudgetedLocalSearchFindsTheMinimumWithoutTheWholeSpace) {
  opt_.strategy = "budget";
  opt_.budget_s = 1e9;
  opt_.max_candidates = 150;
  auto s = Tune(opt_);
  ASSERT_TRUE(s.ok());
  EXPECT_LT(static_cast<size_t>(s->evaluated), gen::Enumerate(Shape(), gen::Arch::Sm90()).size());
  EXPECT_EQ(s->winner_id, Best().Id());
}

// Regression: with a small budget the search measured no filter config of
// 128 x 131072, k 2048, so the robust objective never saw the family that
// does not collapse. The search now starts with one config of every family
// (here the resident family's cluster mode comes first, flat like filter).
TEST_F(TunerTest, BudgetedSearchOfTwoCandidatesStillMeasuresTheFlatFamily) {
  opt_.strategy = "budget";
  opt_.budget_s = 1e9;
  opt_.max_candidates = 2;        // the default and one more
  opt_.objective = "robust";
  eval_.other_us = 15;            // the other families: flat
  eval_.radix_adversarial = 3.0;  // radix: 3x on adversarial inputs
  auto s = Tune(opt_);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_NE(s->winner_id.rfind("radix_", 0), 0u) << s->winner_id;
}

TEST_F(TunerTest, InjectedFaultsAreRecordedNotWinners) {
  opt_.strategy = "exhaustive";
  opt_.max_candidates = 5;
  opt_.inject_faults = {"crash", "hang"};
  auto s = Tune(opt_);
  ASSERT_TRUE(s.ok());
  auto ms = cache_->Measurements(Device().fingerprint, nullptr);
  std::set<std::string> ids;
  for (const auto& m : *ms) ids.insert(m.variant_id);
  EXPECT_TRUE(ids.count("test_fault_crash"));
  EXPECT_TRUE(ids.count("test_fault_hang"));
  EXPECT_EQ(s->winner_id.rfind("radix_", 0), 0u);
}

TEST_F(TunerTest, EvaluatorInfrastructureErrorsStopTheShape) {
  eval_.infra_error = true;
  auto s = Tune(opt_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kUnavailable);
}

TEST_F(TunerTest, RejectsUntunableShapes) {
  Tuner t(cache_.get(), &compiler_, &eval_, Device(), gen::Arch::Sm90(), opt_);
  Problem p = Shape();
  p.k = 0;
  EXPECT_EQ(t.TuneShape(p, 0, 1, nullptr).status().code(), Code::kInvalidArgument);
  opt_.strategy = "simulated-annealing";
  EXPECT_EQ(Tune(opt_).status().code(), Code::kInvalidArgument);
}

// A stand-in worker: answers the hello with its own blocked-signal mask
// (/proc/PID/status SigBlk), then waits for input that never comes.
std::string FakeWorker() {
  const std::string path = testing::TempPath("fake-worker.sh");
  std::ofstream(path) << "#!/bin/sh\nread line\n"
                         "blk=$(sed -n 's/^SigBlk:[[:space:]]*//p' /proc/$$/status)\n"
                         "echo \"{\\\"device\\\":{\\\"sigblk\\\":\\\"$blk\\\"}}\"\n"
                         "exec cat >/dev/null\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

// An interrupted tune kills its workers (KillAllWorkers) and blocks SIGINT
// and SIGTERM in every thread; the workers must not inherit that mask.
TEST(WorkerTest, InterruptKillsStartedWorkersWhichStartWithNoSignalBlocked) {
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &block, &old), 0);
  WorkerClient w(FakeWorker(), 0, 10);
  auto hello = w.Hello();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ASSERT_TRUE(hello.ok()) << hello.status().ToString();
  EXPECT_NE(hello->find("\"sigblk\":\"0000000000000000\""), std::string::npos) << *hello;

  EXPECT_EQ(KillAllWorkers(), 1);
  // The next request finds the worker dead and forgets it: stopped, not a
  // crash of what it ran.
  const auto again = w.Hello();
  EXPECT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("interrupted: "), std::string::npos) << again.status().ToString();
  EXPECT_EQ(w.restarts(), 1);
  EXPECT_EQ(KillAllWorkers(), 0);
}

// A worker that dies of SIGINT (a terminal's Ctrl-C reaches the workers) was
// interrupted: the request fails with a status and no crash outcome, so
// that the tuner records nothing for the variant. One that dies of SIGSEGV
// crashed (Hello turns that outcome into its own kUnavailable).
TEST(WorkerTest, AWorkerStoppedByAnInterruptIsNotACrash) {
  for (const char* sig : {"INT", "TERM", "SEGV"}) {
    const std::string path = testing::TempPath(std::string("sig-worker-") + sig + ".sh");
    std::ofstream(path) << "#!/bin/sh\nread line\nkill -" << sig << " $$\nsleep 5\n";
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
    WorkerClient w(path, 0, 10);
    const auto r = w.Hello();  // a crash outcome there reads "did not start: <how it died>"
    ASSERT_FALSE(r.ok()) << sig;
    EXPECT_EQ(r.status().code(), Code::kUnavailable) << r.status().ToString();
    const bool crash = r.status().message().find("did not start: worker killed by signal") != std::string::npos;
    const bool stopped = r.status().message().find("interrupted: worker killed by signal") != std::string::npos;
    EXPECT_EQ(crash, std::string(sig) == "SEGV") << r.status().ToString();
    EXPECT_EQ(stopped, std::string(sig) != "SEGV") << r.status().ToString();
  }
}

TEST(SearchTest, ExhaustiveProposesEveryIndexOnceDefaultFirst) {
  auto s = MakeExhaustive(10, 7);
  std::vector<int> seen;
  for (int i = s->Next(); i >= 0; i = s->Next()) seen.push_back(i);
  ASSERT_EQ(seen.size(), 10u);
  EXPECT_EQ(seen[0], 7);
  EXPECT_EQ(std::set<int>(seen.begin(), seen.end()).size(), 10u);
}

TEST(SearchTest, LocalSearchProposesEachOnceAndMovesTowardsBetterNeighbours) {
  const auto space = gen::Enumerate(Shape(), gen::Arch::Sm90());
  auto s = MakeLocalSearch(space, 0, 42);
  std::set<int> seen;
  int first_improvement_at = -1;
  double best = 1e30;
  for (int i = s->Next(), n = 0; i >= 0; i = s->Next(), ++n) {
    EXPECT_TRUE(seen.insert(i).second) << "proposed twice: " << i;
    const double cost = 1.0 + space[i].Get("block_threads") / 1024.0 + (space[i].Get("cluster") == 2 ? 0 : 1);
    if (cost < best) {
      best = cost;
      first_improvement_at = n;
    }
    s->Report(i, cost);
  }
  EXPECT_EQ(seen.size(), space.size());
  EXPECT_GE(first_improvement_at, 0);
  EXPECT_DOUBLE_EQ(best, 1.0 + 256 / 1024.0);
}

// The default, then one config of every other family, before any random
// start: neighbours never cross families, so a family without a start could
// go unmeasured under a small budget.
TEST(SearchTest, LocalSearchStartsWithOneConfigOfEveryFamily) {
  const gen::Arch arch = gen::Arch::Sm90();
  std::vector<gen::Config> space = gen::Enumerate(Shape(), arch);  // resident (clusters), radix and filter
  // Without the filter family's guessed starts (guess 1), which double its
  // one-CTA configs, and its clusters, which few rows enumerate by the
  // hundred: the case is a large family beside small ones.
  space.erase(std::remove_if(space.begin(), space.end(),
                             [](const gen::Config& c) {
                               return c.Get("guess") > 0 || (c.family == "filter" && c.Get("cluster") > 1);
                             }),
              space.end());
  Problem moe;
  moe.batch = 4096;
  moe.n = 256;
  moe.k = 8;
  gen::SpaceOptions warp_only;
  warp_only.families = {"warp"};
  const auto warp = gen::Enumerate(moe, arch, warp_only);
  ASSERT_FALSE(warp.empty());
  space.insert(space.end(), warp.begin(), warp.end());
  std::map<std::string, int> in_space;
  for (const gen::Config& c : space) ++in_space[c.family];
  ASSERT_EQ(in_space.size(), 4u);
  ASSERT_GT(in_space["radix"], 5 * (in_space["filter"] + in_space["warp"] + in_space["resident"]));  // mostly radix
  const gen::Config def = gen::DefaultConfig(Shape(), arch);
  ASSERT_EQ(def.family, "radix");
  const int start = static_cast<int>(std::find(space.begin(), space.end(), def) - space.begin());
  ASSERT_LT(static_cast<size_t>(start), space.size());
  for (uint64_t seed : {1, 42, 7777}) {
    auto s = MakeLocalSearch(space, start, seed);
    ASSERT_EQ(s->Next(), start);
    std::set<std::string> families = {"radix"};
    for (int n = 0; n < 3; ++n) {
      const int i = s->Next();
      ASSERT_GE(i, 0);
      EXPECT_TRUE(families.insert(space[static_cast<size_t>(i)].family).second) << space[static_cast<size_t>(i)].Id();
      s->Report(i, 1.0);
    }
    EXPECT_EQ(families, (std::set<std::string>{"radix", "filter", "warp", "resident"})) << "seed " << seed;
  }
}

// A family's start is its most central config, whatever the seed; with no
// default every family gets one, in the order they appear.
TEST(SearchTest, LocalSearchFamilyStartIsTheMostCentralConfig) {
  std::vector<gen::Config> space;
  for (int x : {1, 2, 4, 8, 16})
    for (int y : {0, 1, 2}) space.push_back(gen::Config{"a", DType::kF32, {{"x", x}, {"y", y}}});
  for (int z : {32, 64, 128, 256}) space.push_back(gen::Config{"b", DType::kF32, {{"z", z}}});
  for (uint64_t seed : {1, 2, 3}) {
    auto s = MakeLocalSearch(space, 0, seed);
    EXPECT_EQ(s->Next(), 0);
    const int b = s->Next();
    EXPECT_EQ(space[static_cast<size_t>(b)], (gen::Config{"b", DType::kF32, {{"z", 64}}}));  // a tie: the first
    auto none = MakeLocalSearch(space, -1, seed);
    EXPECT_EQ(space[static_cast<size_t>(none->Next())], (gen::Config{"a", DType::kF32, {{"x", 4}, {"y", 1}}}));
    EXPECT_EQ(none->Next(), b);
  }
}

// Where no config of a family lies one knob from another, the nearest ones
// are the neighbours: the search steps from the best to them before any
// random restart (which here would most likely draw the other family).
TEST(SearchTest, LocalSearchStepsToTheNearestConfigsWhenNoneIsOneKnobAway) {
  std::vector<gen::Config> space;
  for (int x = 1; x <= 10; ++x) space.push_back(gen::Config{"a", DType::kF32, {{"x", x}, {"y", x}}});  // two knobs apart
  for (int z = 0; z < 60; ++z) space.push_back(gen::Config{"b", DType::kF32, {{"z", z}}});
  for (uint64_t seed : {1, 2, 3, 4, 5, 6}) {
    auto s = MakeLocalSearch(space, 0, seed, 0);
    ASSERT_EQ(s->Next(), 0);
    s->Report(0, 1.0);
    const int b = s->Next();  // the other family's start
    ASSERT_EQ(space[static_cast<size_t>(b)].family, "b");
    s->Report(b, 5.0);
    for (int n = 0; n < 2; ++n) {
      const int i = s->Next();
      ASSERT_GE(i, 0);
      EXPECT_EQ(space[static_cast<size_t>(i)].family, "a") << "seed " << seed << ", step " << n;
      s->Report(i, 2.0);
    }
  }
}

// A family of at most 8 configs is measured whole right after the family
// starts, before any random start or local step.
TEST(SearchTest, LocalSearchMeasuresSmallFamiliesWhole) {
  std::vector<gen::Config> space;
  for (int z = 0; z < 60; ++z) space.push_back(gen::Config{"b", DType::kF32, {{"z", z}}});
  for (int x : {1, 2, 4}) space.push_back(gen::Config{"a", DType::kF32, {{"x", x}, {"y", 5 - x}, {"w", x % 2}}});
  for (uint64_t seed : {1, 2, 3}) {
    auto s = MakeLocalSearch(space, 0, seed);
    ASSERT_EQ(s->Next(), 0);
    s->Report(0, 1.0);  // the best: local steps would stay in family b
    std::set<int> a;
    for (int n = 0; n < 3; ++n) {
      const int i = s->Next();
      ASSERT_GE(i, 0);
      EXPECT_EQ(space[static_cast<size_t>(i)].family, "a") << "seed " << seed << ", step " << n;
      a.insert(i);
      s->Report(i, 2.0);
    }
    EXPECT_EQ(a.size(), 3u);
  }
}

TEST(SearchTest, KnobDistanceCountsDifferingKnobs) {
  gen::Config a = gen::DefaultConfig(Shape(), gen::Arch::Sm90());
  gen::Config b = a;
  EXPECT_EQ(KnobDistance(a, b), 0);
  b.Set("block_threads", 1024);
  EXPECT_EQ(KnobDistance(a, b), 1);
  b.Set("cluster", 2);  // the default takes 8
  b.Set("row_cache", 1 - b.Get("row_cache"));
  EXPECT_EQ(KnobDistance(a, b), 3);
  // Configs of two families share no knob.
  Problem moe;
  moe.batch = 4096;
  moe.n = 256;
  moe.k = 8;
  const gen::Config w = gen::DefaultConfig(moe, gen::Arch::Sm90());
  ASSERT_EQ(w.family, "warp");
  EXPECT_GT(KnobDistance(a, w), static_cast<int>(a.params.size()));
}

}  // namespace
}  // namespace topk::tuner
