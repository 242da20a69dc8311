#include "runtime/dispatch.hpp"

#include "generator/family.hpp"

#include <cmath>
#include <optional>
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

namespace {

bool Fits(const cache::Winner& w, const Problem& p, const gen::Arch& arch) {
  return gen::ValidateFor(w.config, arch, p).ok();
}

}  // namespace

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
        // The winner's mode knobs from this call's flags (tuning ignores
        // `deterministic`), where that config fits too.
        out.config = gen::WithModes(out.config, p, arch);
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
      const gen::Family* family = w.config.family_ptr();
      if (!family) continue;
      std::optional<gen::Config> adapted = family->Adapt(w.config, w.problem, p, arch);
      if (!adapted) continue;
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
        out.config = *adapted;
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
