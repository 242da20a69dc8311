// Which variant serves a problem: the tuned winner for exactly this problem,
// else the winner of the nearest tuned shape (in log n, log k, log batch)
// with the same dtype and flags, else the built-in default. Pure logic over
// the cache: tested without a GPU.
#pragma once

#include <string>
#include <vector>

#include "cache/cache.hpp"
#include "generator/config.hpp"
#include "topk/topk.hpp"

namespace topk::runtime {

struct DispatchDecision {
  DispatchSource source = DispatchSource::kDefault;
  gen::Config config;
  std::string tuned_shape;       // ProblemKey of the winner used
  std::string tuned_device;      // its device fingerprint
  double tuned_median_us = 0;
  double distance = 0;           // nearest: log-space distance to the tuned shape
};

// `device_fingerprint` is this device's; `same_arch_devices` are other
// devices in the cache with this device's compute capability, consulted only
// when `allow_same_arch`. Winners whose config does not fit `p` on `arch`
// (e.g. a warp-mode winner for a longer row) are skipped. `cache` may be
// null (then the default).
DispatchDecision Decide(const cache::Cache* cache, const std::string& device_fingerprint,
                        const std::vector<std::string>& same_arch_devices, bool allow_same_arch, const Problem& p,
                        const gen::Arch& arch);

// Log-space distance between two shapes (same dtype and flags assumed).
double ShapeDistance(const Problem& a, const Problem& b);

}  // namespace topk::runtime
