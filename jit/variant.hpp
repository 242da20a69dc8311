// A variant made ready for one problem: its function(s), launch shape and
// argument block, so that launching is only filling pointers and one or two
// cuLaunchKernel calls. Shared by the tuner, the runtime and the tests.
#pragma once

#include <cuda.h>

#include "generator/config.hpp"
#include "jit/device.hpp"
#include "topk/args.h"
#include "topk/topk.hpp"

namespace topk::jit {

// Largest k the row sort supports (its shared memory holds a power of two
// >= k of 8-byte entries, opting in to 128 KB).
constexpr int64_t kMaxSortedK = 16384;

class PreparedVariant {
 public:
  PreparedVariant() = default;
  // `topk` is the variant's function; `sort` the row-sort function of the
  // dtype (required when p.sorted). Sets the functions' shared-memory
  // attributes and checks that one block / cluster fits: kResourceExhausted
  // otherwise. The context must be current. `max_cache_keys` >= 0 caps the
  // row cache (tests use it to cover the partly cached path).
  static StatusOr<PreparedVariant> Make(const gen::Config& c, const Problem& p, const gen::Arch& arch,
                                        CUfunction topk, CUfunction sort, int max_cache_keys = -1);

  // Launches on `stream` for `batch` rows (<= the planned batch). No
  // allocation, no synchronisation.
  Status Launch(const void* input, const int32_t* ranges, int32_t* indices, void* values, int64_t batch,
                CUstream stream) const;

  const gen::Config& config() const { return config_; }
  const Problem& problem() const { return problem_; }
  const LaunchShape& shape() const { return shape_; }

 private:
  gen::Config config_;
  Problem problem_;
  CUfunction topk_ = nullptr;
  CUfunction sort_ = nullptr;
  LaunchShape shape_;
  LaunchShape sort_shape_;
  TopkArgs args_ = {};
  SortArgs sort_args_ = {};
};

// Flags word of a problem (TOPK_FLAG_*).
unsigned ProblemFlags(const Problem& p);

}  // namespace topk::jit
