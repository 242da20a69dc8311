// Which variant serves a problem: the tuned winner for exactly this problem,
// else the winner of the nearest tuned shape (in log n, log k/n, log batch)
// with the same dtype and flags, else the built-in default. Pure logic over
// the cache: tested without a GPU.
#pragma once

#include <cstdint>
#include <functional>
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
// (e.g. a warp-mode winner for a longer row) are skipped. `cache` may be
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

// A nearest-shape winner of the one-CTA kernel whose candidate buffer left
// room for speculative capture at its tuned k, but not at this problem's k,
// gets the smallest of the tuner's larger buffer sizes that does (when that
// still fits the device), unless its row cache holds the whole row; the
// buffer is a launch argument, the compiled kernel stays the same. Measured
// on an H100: bf16 256 x 128256 k1024 ran in 148 us with the 128 x 201088
// k64 winner's 1024-candidate buffer and in 78 us with 4096 (default: 97);
// 64 x 8192 k1024 (cached rows) ran 10% slower with the buffer raised.
void AdaptBuffer(gen::Config* c, int64_t tuned_k, const Problem& p, const gen::Arch& arch);

// The cluster size a nearest-shape winner should launch with for `batch`
// rows, when it was tuned for `tuned_batch` rows with `cluster` CTAs per row
// (cluster size is a launch argument of one compiled kernel). `resident(c)`
// is how many clusters of size c are co-resident on the device (0: unknown).
// The size is halved (not below 2) while this batch has more rows than fit
// in one wave of clusters but the tuned batch did fit: two waves cost about
// twice the time (measured: 16 x 65536 ran at 66% of its own winner's speed
// with the 8 x 65536 winner's 8-CTA clusters).
int FitClusterToBatch(int cluster, int64_t batch, int64_t tuned_batch, const std::function<int(int)>& resident);

}  // namespace topk::runtime
