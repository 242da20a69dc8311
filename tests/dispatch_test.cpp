// Dispatch on fixture cache files, no GPU: the exact winner, the nearest
// tuned shape (and its limits: too far away, a buffer too small for the new
// k), the default, another device's entries (only with allow_same_arch),
// and winners that do not fit the problem.
#include <gtest/gtest.h>

#include "cache/cache.hpp"
#include "generator/grid.hpp"
#include "generator/radix.hpp"
#include "generator/warp.hpp"
#include "runtime/dispatch.hpp"
#include "support/test_support.hpp"

namespace topk::runtime {
namespace {

const char* kHere = "NVIDIA H200|sm_90|132sm|L2=62914560";
const char* kTwin = "NVIDIA H100 80GB HBM3|sm_90|132sm|L2=52428800";

Problem Rows(DType dtype, int64_t batch, int64_t n, int64_t k, bool ranges, bool values) {
  Problem p;
  p.dtype = dtype;
  p.batch = batch;
  p.n = n;
  p.k = k;
  p.ranges = ranges;
  p.values = values;
  return p;
}

// DSA indexer rows: fp32 with per-row ranges.
Problem Dsa(int64_t batch, int64_t n, int64_t k) { return Rows(DType::kF32, batch, n, k, true, false); }

// bf16 sampling rows: logits with values out.
Problem Sampling(int64_t batch, int64_t n, int64_t k) { return Rows(DType::kBF16, batch, n, k, false, true); }

gen::Config Cfg(int block, int cluster, int buffer, DType dtype = DType::kF32) {
  gen::RadixParams c;
  c.dtype = dtype;
  c.block_threads = block;
  c.radix_bits = 11;
  c.cluster = cluster;
  c.smem_buffer = buffer;
  c.rounds = c.passes() - 1;
  c.row_cache = true;
  return c;
}

// One warp per row, 8 items per lane; `bound` picks the body.
gen::Config WarpCfg(int block, int bound) { return gen::WarpParams{DType::kF32, block, 8, bound}; }

// The radix family's nearest-dispatch adaptation of a winner tuned at k =
// `tuned_k` (the buffer is the only thing it changes).
void AdaptBuffer(gen::Config* c, int64_t tuned_k, const Problem& p, const gen::Arch& arch) {
  Problem tuned = p;
  tuned.k = tuned_k;
  if (auto a = gen::RadixFamily().Adapt(*c, tuned, p, arch)) *c = *a;
}

int Buffer(const gen::Config& c) { return c.Get("smem_buffer"); }

class DispatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = cache::Cache::Open(testing::TempPath("dispatch.db"));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cache_ = std::move(*c);
    for (const char* fp : {kHere, kTwin}) {
      cache::DeviceRecord d;
      d.fingerprint = fp;
      d.name = fp;
      d.cc_major = 9;
      ASSERT_TRUE(cache_->PutDevice(d).ok());
    }
    Win(kHere, Dsa(64, 32768, 2048), Cfg(1024, 2, 4096), 18.1);
    Win(kHere, Dsa(1, 524288, 2048), Cfg(1024, 16, 1024), 26.1);
    Win(kTwin, Dsa(8, 65536, 2048), Cfg(512, 8, 4096), 20.0);
    Win(kHere, Rows(DType::kF32, 4096, 256, 8, false, false), WarpCfg(256, 0), 5.6);
  }

  void Win(const char* fp, const Problem& p, const gen::Config& c, double us) {
    cache::Winner w;
    w.device_fingerprint = fp;
    w.problem = p;
    w.config = c;
    w.variant_id = c.Id();
    w.median_us = us;
    ASSERT_TRUE(cache_->PutWinner(w).ok());
  }

  std::unique_ptr<cache::Cache> cache_;
  gen::Arch arch_ = gen::Arch::Sm90();
};

TEST_F(DispatchTest, ExactWinner) {
  const DispatchDecision d = Decide(cache_.get(), kHere, {kTwin}, false, Dsa(64, 32768, 2048), arch_);
  EXPECT_EQ(d.source, DispatchSource::kExact);
  EXPECT_EQ(d.config, Cfg(1024, 2, 4096));
  EXPECT_EQ(d.tuned_median_us, 18.1);
}

// Tuning ignores `deterministic`, so a tuned grid winner (ties 0) serves the
// deterministic calls of its shape too: with `ties` 1 (the kernel that takes
// the lowest-index ties itself), not the winner plus the tie pass.
TEST_F(DispatchTest, ExactGridWinnerTakesTheTiesKernelForDeterministicCalls) {
  gen::GridParams g;
  g.block_threads = 512;
  g.items = 1;
  g.ctas = 64;
  Win(kHere, Dsa(1, 131072, 2048), g, 7.6);
  const DispatchDecision plain = Decide(cache_.get(), kHere, {}, false, Dsa(1, 131072, 2048), arch_);
  EXPECT_EQ(plain.source, DispatchSource::kExact);
  EXPECT_EQ(plain.config, gen::Config(g));
  Problem det = Dsa(1, 131072, 2048);
  det.deterministic = true;
  const DispatchDecision d = Decide(cache_.get(), kHere, {}, false, det, arch_);
  EXPECT_EQ(d.source, DispatchSource::kExact);
  EXPECT_EQ(d.config.Get("ties"), 1) << d.config.Id();
  EXPECT_TRUE(d.config.family_ptr()->TakesLowestIndexTies(d.config));
  gen::GridParams want = g;
  want.ties = 1;
  EXPECT_EQ(d.config, gen::Config(want));
  // Other families' winners are kept as tuned (the tie pass follows them).
  Problem radix_det = Dsa(64, 32768, 2048);
  radix_det.deterministic = true;
  EXPECT_EQ(Decide(cache_.get(), kHere, {}, false, radix_det, arch_).config, Cfg(1024, 2, 4096));
}

TEST_F(DispatchTest, NearestShapeInLogSpace) {
  // 64 x 40000 is nearer 64 x 32768 than 1 x 524288.
  const DispatchDecision d = Decide(cache_.get(), kHere, {}, false, Dsa(64, 40000, 2000), arch_);
  EXPECT_EQ(d.source, DispatchSource::kNearest);
  EXPECT_EQ(d.config, Cfg(1024, 2, 4096));
  EXPECT_EQ(d.tuned_shape, cache::ProblemKey(Dsa(64, 32768, 2048)));
  EXPECT_GT(d.distance, 0);
  const DispatchDecision far = Decide(cache_.get(), kHere, {}, false, Dsa(2, 400000, 2048), arch_);
  EXPECT_EQ(far.source, DispatchSource::kNearest);
  EXPECT_EQ(far.config, Cfg(1024, 16, 1024));
}

TEST_F(DispatchTest, DefaultWithoutCacheOrWithoutMatchingFlags) {
  const Problem p = Dsa(64, 32768, 2048);
  EXPECT_EQ(Decide(nullptr, kHere, {}, false, p, arch_).source, DispatchSource::kDefault);
  EXPECT_EQ(Decide(nullptr, kHere, {}, false, p, arch_).config, gen::DefaultConfig(p, arch_));
  Problem other = p;
  other.values = true;  // no winner with these flags
  EXPECT_EQ(Decide(cache_.get(), kHere, {}, false, other, arch_).source, DispatchSource::kDefault);
  other = p;
  other.dtype = DType::kBF16;
  EXPECT_EQ(Decide(cache_.get(), kHere, {}, false, other, arch_).source, DispatchSource::kDefault);
}

TEST_F(DispatchTest, AnotherDevicesEntriesOnlyWithAllowSameArch) {
  const Problem p = Dsa(8, 65536, 2048);  // tuned only on the twin
  const DispatchDecision mine = Decide(cache_.get(), kHere, {kTwin}, false, p, arch_);
  EXPECT_NE(mine.source, DispatchSource::kExact);
  EXPECT_NE(mine.tuned_device, kTwin);
  const DispatchDecision twin = Decide(cache_.get(), kHere, {kTwin}, true, p, arch_);
  EXPECT_EQ(twin.source, DispatchSource::kExact);
  EXPECT_EQ(twin.tuned_device, kTwin);
  EXPECT_EQ(twin.config, Cfg(512, 8, 4096));
  // A device with no entries of its own and no opt-in gets the default.
  EXPECT_EQ(Decide(cache_.get(), "Other GPU|sm_90|100sm|L2=1", {kTwin}, false, p, arch_).source,
            DispatchSource::kDefault);
}

TEST_F(DispatchTest, NearestWarpWinnerOnlyForItsRowLengthAndBatch) {
  // The fixture's 4096 x 256 k8 winner: 256 threads, 8 items per lane.
  Problem near;
  near.batch = 8192;
  near.n = 200;  // 8 items per lane as well
  near.k = 5;
  const DispatchDecision d = Decide(cache_.get(), kHere, {}, false, near, arch_);
  ASSERT_EQ(d.source, DispatchSource::kNearest);
  EXPECT_EQ(d.tuned_batch, 4096);
  EXPECT_EQ(d.config.Get("block_threads"), 256);
  EXPECT_EQ(d.config.Get("items"), 8);
  // Another row-length class, or a batch beyond a factor of two: the default.
  for (auto [batch, n] : {std::pair<int64_t, int64_t>{4096, 64}, {4096, 512}, {2047, 256}, {8193, 256}, {64, 256}}) {
    Problem q = near;
    q.batch = batch;
    q.n = n;
    const DispatchDecision e = Decide(cache_.get(), kHere, {}, false, q, arch_);
    EXPECT_EQ(e.source, DispatchSource::kDefault) << q.ToString();
    EXPECT_EQ(e.config, gen::DefaultConfig(q, arch_)) << q.ToString();
  }
  // A row longer than the warp kernel can hold skips the warp winner.
  Problem longer = near;
  longer.n = 4096;
  longer.k = 8;
  const DispatchDecision l = Decide(cache_.get(), kHere, {}, false, longer, arch_);
  EXPECT_NE(l.config.family, "warp");
}

TEST_F(DispatchTest, NearestWarpBoundWinnerWithinItsBatchRange) {
  const gen::Config bound = WarpCfg(512, 1);
  // With ranges, so that the fixture's 4096-row tournament winner (no
  // ranges) is not a candidate.
  Win(kHere, Rows(DType::kF32, 16384, 256, 8, true, false), bound, 11.0);
  const DispatchDecision d = Decide(cache_.get(), kHere, {}, false, Rows(DType::kF32, 8192, 256, 4, true, false), arch_);
  ASSERT_EQ(d.source, DispatchSource::kNearest);
  EXPECT_EQ(d.tuned_batch, 16384);
  EXPECT_EQ(d.config, bound);
  const Problem fewer = Rows(DType::kF32, 6000, 256, 8, true, false);
  const DispatchDecision f = Decide(cache_.get(), kHere, {}, false, fewer, arch_);
  EXPECT_EQ(f.source, DispatchSource::kDefault);
  EXPECT_EQ(f.config.Get("block_threads"), 128);
  EXPECT_EQ(f.config.Get("lane_bound"), 1);  // the default's rule: 4096 fp32 rows or more, k <= 8
}

TEST_F(DispatchTest, ShapeDistanceIsSymmetricAndZeroOnlyForEqualShapes) {
  const Problem a = Dsa(64, 32768, 2048), b = Dsa(1, 524288, 2048);
  EXPECT_DOUBLE_EQ(ShapeDistance(a, a), 0);
  EXPECT_DOUBLE_EQ(ShapeDistance(a, b), ShapeDistance(b, a));
  EXPECT_GT(ShapeDistance(a, b), 0);
}

TEST_F(DispatchTest, NearestPrefersTheSameSelectedFraction) {
  // k / n sets where the threshold falls: 32 x 16384 k512 (1/32) takes the
  // winner at 64 x 32768 k1024 (1/32), not the one at the same k (1/64).
  Win(kHere, Dsa(64, 32768, 512), Cfg(1024, 2, 1024), 15.3);
  Win(kHere, Dsa(64, 32768, 1024), Cfg(512, 2, 1024), 18.0);
  const DispatchDecision d = Decide(cache_.get(), kHere, {}, false, Dsa(32, 16384, 512), arch_);
  ASSERT_EQ(d.source, DispatchSource::kNearest);
  EXPECT_EQ(d.tuned_shape, cache::ProblemKey(Dsa(64, 32768, 1024)));
  EXPECT_EQ(d.config, Cfg(512, 2, 1024));
  EXPECT_EQ(d.tuned_batch, 64);
  // Scaling n and k together keeps the fraction: only the n term remains.
  EXPECT_DOUBLE_EQ(ShapeDistance(Dsa(8, 16384, 512), Dsa(8, 65536, 2048)), 2.0);
  EXPECT_DOUBLE_EQ(ShapeDistance(Dsa(8, 16384, 512), Dsa(8, 16384, 2048)), 2.0);
}

TEST_F(DispatchTest, EquallyNearShapesGoToTheSmallerTunedProblem) {
  // 64 x 8192 k1024 sits halfway between 64 x 4096 k512 and 64 x 16384 k2048
  // (same fraction, n a factor of 2 either way); the cache lists the n16384
  // winner first, so without the tie-break it would win.
  Win(kHere, Dsa(64, 16384, 2048), Cfg(1024, 2, 4096), 14.6);
  Win(kHere, Dsa(64, 4096, 512), Cfg(512, 1, 4096), 7.5);
  Win(kHere, Dsa(8, 16384, 512), Cfg(256, 2, 1024), 9.0);
  EXPECT_EQ(Decide(cache_.get(), kHere, {}, false, Dsa(64, 8192, 1024), arch_).tuned_shape,
            cache::ProblemKey(Dsa(64, 4096, 512)));
  Win(kHere, Dsa(64, 4096, 512), Cfg(256, 1, 4096), 7.4);  // replaced: order no longer matters
  EXPECT_EQ(Decide(cache_.get(), kHere, {}, false, Dsa(64, 8192, 1024), arch_).config, Cfg(256, 1, 4096));
}

TEST_F(DispatchTest, NearestShapesTooFarAwayGetTheDefault) {
  // bf16 sampling: the only bf16 winner is at 128 x 201088 k64.
  const Problem tuned = Sampling(128, 201088, 64);
  const gen::Config c = Cfg(1024, 1, 1024, DType::kBF16);
  Win(kHere, tuned, c, 41.8);
  const Problem near = Sampling(64, 151936, 50);  // distance about 0.8
  const DispatchDecision n = Decide(cache_.get(), kHere, {}, false, near, arch_);
  EXPECT_EQ(n.source, DispatchSource::kNearest);
  EXPECT_EQ(n.config, c);
  EXPECT_LE(n.distance, kMaxNearestDistance);
  const Problem far = Sampling(8, 256000, 1);  // distance about 7
  EXPECT_GT(ShapeDistance(tuned, far), kMaxNearestDistance);
  const DispatchDecision f = Decide(cache_.get(), kHere, {}, false, far, arch_);
  EXPECT_EQ(f.source, DispatchSource::kDefault);
  EXPECT_EQ(f.config, gen::DefaultConfig(far, arch_));
  EXPECT_TRUE(f.tuned_shape.empty());
  // Too far on this device, but another device of the architecture has the
  // shape nearby: with allow_same_arch that one serves.
  const gen::Config tc = Cfg(512, 2, 4096, DType::kBF16);
  Win(kTwin, Sampling(16, 256000, 1), tc, 30.0);
  const DispatchDecision t = Decide(cache_.get(), kHere, {kTwin}, true, far, arch_);
  EXPECT_EQ(t.source, DispatchSource::kNearest);
  EXPECT_EQ(t.tuned_device, kTwin);
  EXPECT_EQ(t.config, tc);
  EXPECT_EQ(Decide(cache_.get(), kHere, {kTwin}, false, far, arch_).source, DispatchSource::kDefault);
}

TEST_F(DispatchTest, NearestOneCtaWinnerGetsABufferForItsK) {
  const gen::Config c = Cfg(1024, 1, 1024, DType::kBF16);
  Win(kHere, Sampling(128, 201088, 64), c, 41.8);
  // k1024 needs 1.25 k + 64 = 1344 candidates for the speculative capture:
  // the winner's 1024 became the tuner's next size, 4096; nothing else moved.
  const Problem bigger_k = Sampling(256, 128256, 1024);
  const DispatchDecision d = Decide(cache_.get(), kHere, {}, false, bigger_k, arch_);
  ASSERT_EQ(d.source, DispatchSource::kNearest);
  gen::Config want = c;
  want.Set("smem_buffer", 4096);
  EXPECT_EQ(d.config, want);
  // A k the buffer already serves keeps it (the row, 256 KB, is too long
  // for the row cache in every case here).
  EXPECT_EQ(Decide(cache_.get(), kHere, {}, false, Sampling(256, 128256, 600), arch_).config, c);
  // Clusters do not speculate: their buffer stays, even where a one-CTA
  // winner's would grow (1024 served k512, not k800: 1.25 k + 64 = 1064).
  Win(kHere, Dsa(1, 393216, 512), Cfg(1024, 16, 1024), 20.0);
  const DispatchDecision cl = Decide(cache_.get(), kHere, {}, false, Dsa(1, 393216, 800), arch_);
  ASSERT_EQ(cl.source, DispatchSource::kNearest);
  EXPECT_EQ(cl.tuned_shape, cache::ProblemKey(Dsa(1, 393216, 512)));
  EXPECT_EQ(cl.config, Cfg(1024, 16, 1024));
  gen::Config one_cta = Cfg(1024, 1, 1024);
  AdaptBuffer(&one_cta, 512, Dsa(1, 393216, 800), arch_);
  EXPECT_EQ(Buffer(one_cta), 4096);
  // The helper alone: no room at the tuned k either means nothing to keep;
  // rows the row cache holds keep their buffer, uncached ones do not.
  gen::Config small = Cfg(512, 1, 1024);
  AdaptBuffer(&small, 2048, Dsa(4, 131072, 4096), arch_);
  EXPECT_EQ(Buffer(small), 1024);
  gen::Config cached = Cfg(512, 1, 1024);
  AdaptBuffer(&cached, 512, Dsa(64, 8192, 1024), arch_);
  EXPECT_EQ(Buffer(cached), 1024);
  cached.Set("row_cache", 0);
  AdaptBuffer(&cached, 512, Dsa(64, 8192, 1024), arch_);
  EXPECT_EQ(Buffer(cached), 4096);
  // Below 512 candidates the kernel never speculates (TOPK_SPECULATES):
  // nothing to keep, so the buffer stays even where k would fit it.
  gen::Config tiny = Cfg(512, 1, 256);
  tiny.Set("row_cache", 0);
  AdaptBuffer(&tiny, 64, Dsa(4, 131072, 1024), arch_);
  EXPECT_EQ(Buffer(tiny), 256);
}

TEST(FitClusterToBatchTest, HalvesOnlyWhenTheTunedBatchFitAndThisOneDoesNot) {
  // A device where 14 clusters of 8, 30 of 4 and 64 of 2 are co-resident.
  auto resident = [](int c) { return c == 16 ? 6 : c == 8 ? 14 : c == 4 ? 30 : c == 2 ? 64 : 0; };
  EXPECT_EQ(gen::FitClusterToBatch(8, 16, 8, resident), 4);     // 16 > 14, and 8 fit
  EXPECT_EQ(gen::FitClusterToBatch(16, 40, 4, resident), 2);    // 40 > 30: down to 2
  EXPECT_EQ(gen::FitClusterToBatch(16, 100, 4, resident), 2);   // never below 2
  EXPECT_EQ(gen::FitClusterToBatch(16, 2, 1, resident), 16);    // fits: unchanged
  EXPECT_EQ(gen::FitClusterToBatch(8, 8, 16, resident), 8);     // fewer rows than tuned
  EXPECT_EQ(gen::FitClusterToBatch(8, 64, 32, resident), 8);    // the tuned batch did not fit either
  EXPECT_EQ(gen::FitClusterToBatch(8, 16, 8, [](int) { return 0; }), 8);  // unknown occupancy
  EXPECT_EQ(gen::FitClusterToBatch(1, 500, 8, resident), 1);    // one CTA per row: nothing to fit
}

}  // namespace
}  // namespace topk::runtime
