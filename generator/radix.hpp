// The radix family: digit-by-digit radix select with one CTA per row or a
// thread-block cluster per row (templates/topk/radix/). Its
// parameters, typed, for the family's own code and tests; everything else
// sees a gen::Config.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "generator/family.hpp"

namespace topk::gen {

// A radix-family config with named fields. [code] fields are template
// parameters; the others are launch arguments, so variants that differ only
// in them share one compiled binary (see KernelKey).
struct RadixParams {
  DType dtype = DType::kF32;
  int block_threads = 512;  // [code] 128..1024, multiple of 32
  int radix_bits = 11;      // [code] bits per digit: 8 or 11
  // [code] coarse first pass: an 8-bit digit with fp16's resolution (four
  // bins per octave over 2^-15..2^17, clamped outside; fp32 only), the
  // refinement passes then use radix_bits on the exact key.
  bool half_first = false;
  int smem_buffer = 4096;   // candidate indices kept in shared memory (0: re-read)
  // [code: 1 or clustered] 1 = one CTA per row; 2, 4, 8, 16 = CTAs of a
  // thread-block cluster per row (one binary serves every cluster size: it
  // is a launch attribute).
  int cluster = 1;
  int rounds = 1;           // refinement passes before direct ranking is allowed
  bool row_cache = true;    // keep the row in shared memory as far as it fits
  // [code] The strategy switches of RadixStrategy (templates/topk/policy.cuh):
  // -1 = the automatic rule (auto_*() below), 0 = off, 1 = on. Ids leave
  // them out at -1, so the ids and kernels of untuned variants stay as they
  // were; the tuner tries them flipped on its best config (Refinements).
  int lane_atomics = -1;
  int branch_free = -1;
  int capture_only = -1;
  int uniform_check = -1;
  int prefetch = -1;

  static RadixParams Of(const Config& c);
  Config ToConfig() const;
  // So that a typed config passes wherever a gen::Config is taken.
  operator Config() const { return ToConfig(); }  // NOLINT(google-explicit-constructor)

  int cluster_class() const { return cluster > 1 ? 2 : cluster; }  // the template's CLUSTER
  int key_bits() const { return dtype == DType::kF32 ? 32 : 16; }
  // Digit passes over a key: ceil(key_bits / radix_bits), plus the coarse one.
  int passes() const { return (key_bits() + radix_bits - 1) / radix_bits + (half_first ? 1 : 0); }
  // rounds < passes() - 1 enables the final direct ranking (and its list).
  bool rank_enabled() const { return rounds < passes() - 1; }
  int vec() const { return 16 / DTypeSize(dtype); }  // elements per 16-byte load
  // The automatic rules of RadixStrategy (templates/topk/policy.cuh), on the
  // host; generated sources static_assert that both agree.
  bool auto_lane_atomics() const { return key_bits() == 32; }
  bool auto_branch_free() const { return block_threads < 1024 || (cluster_class() > 1 && key_bits() == 32); }
  bool auto_capture_only() const { return key_bits() == 16; }
  bool auto_uniform_check() const {
    return cluster_class() == 1 && !half_first && key_bits() == 32 && passes() >= 3;
  }
  bool auto_prefetch() const { return block_threads >= 512; }
  // The switch in effect: the set value, or the automatic rule at -1.
  static bool effective(int set, bool automatic) { return set < 0 ? automatic : set != 0; }
  // Whether every switch is at -1 (the kernel is the plain Policy's).
  bool automatic_strategy() const {
    return lane_atomics < 0 && branch_free < 0 && capture_only < 0 && uniform_check < 0 && prefetch < 0;
  }
  // Policy::kHistSmem in templates/topk/policy.cuh.
  int hist_smem_bytes() const { return (2 + (cluster > 1 ? 2 : 0)) * (1 << radix_bits) * 4; }
  // Dynamic shared memory without the row cache (smem_layout_bytes in
  // templates/topk/policy.cuh).
  int fixed_smem_bytes() const;
};

std::shared_ptr<const Family> MakeRadixFamily();
// The registered radix family.
const Family& RadixFamily();

// The cluster size a nearest-shape winner should launch with for `batch`
// rows, when it was tuned for `tuned_batch` rows with `cluster` CTAs per row
// (cluster size is a launch argument of one compiled kernel). `resident(c)`
// is how many clusters of size c are co-resident on the device (0: unknown).
// The size is halved (not below 2) while this batch has more rows than fit
// in one wave of clusters but the tuned batch did fit: two waves cost about
// twice the time (measured: 16 x 65536 ran at 66% of its own winner's speed
// with the 8 x 65536 winner's 8-CTA clusters).
int FitClusterToBatch(int cluster, int64_t batch, int64_t tuned_batch, const std::function<int(int)>& resident);

}  // namespace topk::gen
