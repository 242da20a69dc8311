// Which variant serves a problem: the tuned winner for exactly this problem,
// else the winner of the nearest tuned shape (in log n, log k/n, log batch)
// with the same dtype and flags, else the built-in default. Pure logic over
// the cache: tested without a GPU.
#pragma once

#include <cstdint>
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
  int64_t tuned_batch = 0;       // batch of the tuned shape used
  double distance = 0;           // nearest: log-space distance to the tuned shape
};

// `device_fingerprint` is this device's; `same_arch_devices` are other
// devices in the cache with this device's compute capability, consulted only
// when `allow_same_arch`. Winners whose config does not fit `p` on `arch`
// are skipped; a nearest-shape winner goes through its family's Adapt
// (gen::Family), which may change launch arguments or refuse to carry over. `cache` may be
// null (then the default).
DispatchDecision Decide(const cache::Cache* cache, const std::string& device_fingerprint,
                        const std::vector<std::string>& same_arch_devices, bool allow_same_arch, const Problem& p,
                        const gen::Arch& arch);

// Log-space distance between two shapes (same dtype and flags assumed): in
// n, in the selected fraction k / n, and (weighted by half) in batch.
double ShapeDistance(const Problem& a, const Problem& b);

// Beyond this distance the nearest tuned shape is not used; the default is.
// Measured on an H100 (topk-bench, sampling and MoE presets, each shape
// through a cache holding the issue-6 shapes' winners): at 4.0 and 4.8 the
// nearest winner beat the default by 4-35%; at 6.1 (bf16 1 x 32000 k50 from
// 128 x 201088 k64) it was 7% slower and at 7.0 (bf16 8 x 256000 k1) 50%
// slower.
constexpr double kMaxNearestDistance = 5.5;

}  // namespace topk::runtime
