#include "runtime/dispatch.hpp"

#include "topk/args.h"

#include <cmath>
#include <functional>
#include <limits>

namespace topk::runtime {

double ShapeDistance(const Problem& a, const Problem& b) {
  auto d = [](int64_t x, int64_t y) {
    const double lx = std::log2(static_cast<double>(std::max<int64_t>(x, 1)));
    const double ly = std::log2(static_cast<double>(std::max<int64_t>(y, 1)));
    return (lx - ly) * (lx - ly);
  };
  // n and the fraction k / n shape the kernel most: the fraction sets where
  // the threshold falls in the value distribution, so how many elements
  // share its radix bin (and whether they fit the candidate buffer). Batch
  // mostly changes the grid. Measured: 32 x 16384 k512 ran at 64% of its own
  // winner's speed with the winner of 64 x 32768 k512 (same k, half the
  // fraction), where a winner at the same fraction is the better guess.
  const double ratio = std::log2(static_cast<double>(std::max<int64_t>(a.k, 1)) / static_cast<double>(a.n)) -
                       std::log2(static_cast<double>(std::max<int64_t>(b.k, 1)) / static_cast<double>(b.n));
  return std::sqrt(d(a.n, b.n) + ratio * ratio + 0.5 * d(a.batch, b.batch));
}

int FitClusterToBatch(int cluster, int64_t batch, int64_t tuned_batch, const std::function<int(int)>& resident) {
  // Only shrink when this batch has more clusters than the tuned one, and
  // only while the tuned batch was co-resident at that size: a winner that
  // ran in one wave of clusters should not be stretched into two.
  while (cluster > 2 && batch > tuned_batch) {
    const int fit = resident(cluster);
    if (fit <= 0 || batch <= fit || tuned_batch > fit) break;
    cluster /= 2;
  }
  return cluster;
}

namespace {

bool Fits(const cache::Winner& w, const Problem& p, const gen::Arch& arch) {
  return gen::ValidateFor(w.config, arch, p).ok();
}

// Whether a buffer of `buffer` candidates lets the one-CTA kernel capture
// the likely candidates of a row while it histograms it: the kernel's own
// rule (TOPK_SPECULATES, at least 512 and room for 1.25 k + 64).
bool Speculates(int buffer, int64_t k) { return TOPK_SPECULATES(static_cast<int64_t>(buffer), k); }

}  // namespace

void AdaptBuffer(gen::Config* c, int64_t tuned_k, const Problem& p, const gen::Arch& arch) {
  if (c->cluster != 1 || !Speculates(c->smem_buffer, tuned_k) || Speculates(c->smem_buffer, p.k)) return;
  // A row the row cache holds is re-scanned from shared memory anyway: the
  // capture saves little there (64 x 8192 k1024 ran 10% slower with the
  // buffer raised).
  const int64_t row_bytes = p.n * DTypeSize(p.dtype);
  if (c->row_cache && row_bytes + c->fixed_smem_bytes() + arch.static_smem_reserve <= arch.max_smem_optin) return;
  // The tuner's buffer sizes, smallest first (generator/config.cpp).
  for (int buf : {1024, 4096}) {
    if (buf <= c->smem_buffer || !Speculates(buf, p.k)) continue;
    gen::Config bigger = *c;
    bigger.smem_buffer = buf;
    if (gen::ValidateFor(bigger, arch, p).ok()) {
      *c = bigger;
      return;
    }
  }
}

DispatchDecision Decide(const cache::Cache* cache, const std::string& device_fingerprint,
                        const std::vector<std::string>& same_arch_devices, bool allow_same_arch, const Problem& p,
                        const gen::Arch& arch) {
  DispatchDecision out;
  out.config = gen::DefaultConfig(p, arch);
  if (!cache) return out;
  std::vector<std::vector<std::string>> tiers = {{device_fingerprint}};
  if (allow_same_arch && !same_arch_devices.empty()) tiers.push_back(same_arch_devices);
  // Exact shape first on this device, then on the same architecture.
  for (const auto& devs : tiers)
    for (const std::string& dev : devs) {
      auto w = cache->FindWinner(dev, p);
      if (w.ok() && w->has_value() && Fits(**w, p, arch)) {
        out.source = DispatchSource::kExact;
        out.config = (*w)->config;
        out.tuned_shape = cache::ProblemKey((*w)->problem);
        out.tuned_device = dev;
        out.tuned_median_us = (*w)->median_us;
        out.tuned_batch = (*w)->problem.batch;
        return out;
      }
    }
  for (const auto& devs : tiers) {
    auto like = cache->WinnersLike(devs, p);
    if (!like.ok()) continue;
    double best = std::numeric_limits<double>::infinity();
    int64_t best_work = 0;
    for (const cache::Winner& w : *like) {
      // A warp-mode winner carries over only to rows of its own length class
      // (the same items per lane) and to within a factor of two of its
      // batch; anything else takes the default, whose warp rules come from
      // measurements across row counts. Measured (H100, f32, k8 unless
      // noted): 4096 x 64 ran at half the default's speed with the
      // 4096 x 256 winner's 8 items per lane, and at the default's speed with
      // the items adapted but the winner's 512-thread block (2.76 us against
      // 2.73 at k2); with that winner 16384 x 256 took 14.1 us against the
      // default's 12.5, 4096 x 512 9.26 against 8.32; 64 rows of 256 took
      // 3.10 us with a 512-thread block against 2.01 with 128 threads.
      if (w.config.warp_mode() && (w.config.items != gen::WarpItems(p.n) || p.batch * 2 < w.problem.batch ||
                                   p.batch > 2 * w.problem.batch))
        continue;
      cache::Winner adapted = w;
      if (!Fits(adapted, p, arch)) continue;
      AdaptBuffer(&adapted.config, w.problem.k, p, arch);
      // Equally near (a shape halfway between two tuned ones in log space):
      // the smaller tuned problem. Measured once: 64 x 8192 k1024 ran at 85%
      // of its own winner's speed with the 64 x 16384 k2048 winner (2-CTA
      // clusters), where its own winner and 64 x 4096 k512's use one CTA.
      const double dist = ShapeDistance(w.problem, p);
      const int64_t work = w.problem.batch * w.problem.n;
      if (dist < best - 1e-9 || (dist <= best + 1e-9 && work < best_work)) {
        best = dist;
        best_work = work;
        out.source = DispatchSource::kNearest;
        out.config = adapted.config;
        out.tuned_shape = cache::ProblemKey(w.problem);
        out.tuned_device = w.device_fingerprint;
        out.tuned_median_us = w.median_us;
        out.tuned_batch = w.problem.batch;
        out.distance = dist;
      }
    }
    if (out.source == DispatchSource::kNearest) {
      if (best <= kMaxNearestDistance) return out;
      // Too far to be a better guess than the default: the next tier (the
      // same architecture's devices) may hold a nearer shape; else the default.
      out = DispatchDecision();
      out.config = gen::DefaultConfig(p, arch);
    }
  }
  return out;
}

}  // namespace topk::runtime
