#include "runtime/dispatch.hpp"

#include <cmath>
#include <limits>

namespace topk::runtime {

double ShapeDistance(const Problem& a, const Problem& b) {
  auto d = [](int64_t x, int64_t y) {
    const double lx = std::log2(static_cast<double>(std::max<int64_t>(x, 1)));
    const double ly = std::log2(static_cast<double>(std::max<int64_t>(y, 1)));
    return (lx - ly) * (lx - ly);
  };
  // n and k shape the kernel most; batch mostly changes the grid.
  return std::sqrt(d(a.n, b.n) + d(a.k, b.k) + 0.5 * d(a.batch, b.batch));
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
        out.tuned_shape = cache::ProblemKey((*w)->problem);
        out.tuned_device = dev;
        out.tuned_median_us = (*w)->median_us;
        return out;
      }
    }
  for (const auto& devs : tiers) {
    auto like = cache->WinnersLike(devs, p);
    if (!like.ok()) continue;
    double best = std::numeric_limits<double>::infinity();
    for (const cache::Winner& w : *like) {
      // A warp-mode winner holds its tuned row length in registers; a
      // shorter row wastes them (measured: 4096x64 ran at half the speed of
      // the default with the 4096x256 winner's 8 items per lane), so the
      // other knobs carry over and the items follow this row.
      cache::Winner adapted = w;
      if (adapted.config.warp_mode()) adapted.config.items = gen::WarpItems(p.n);
      if (!Fits(adapted, p, arch)) continue;
      const double dist = ShapeDistance(w.problem, p);
      if (dist < best) {
        best = dist;
        out.source = DispatchSource::kNearest;
        out.config = adapted.config;
        out.tuned_shape = cache::ProblemKey(w.problem);
        out.tuned_device = w.device_fingerprint;
        out.tuned_median_us = w.median_us;
        out.distance = dist;
      }
    }
    if (out.source == DispatchSource::kNearest) return out;
  }
  return out;
}

}  // namespace topk::runtime
