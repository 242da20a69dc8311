// The parameter space of the radix-select kernel family: one Config is one
// variant. No CUDA calls here; everything builds and tests without a GPU.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "topk/status.hpp"
#include "topk/topk.hpp"

namespace topk::gen {

// The knobs. Fields marked [code] change the kernel's code and are template
// parameters; the rest are launch arguments, so variants that differ only in
// them share one compiled binary (see KernelKey).
struct Config {
  DType dtype = DType::kF32;  // [code]
  int block_threads = 512;    // [code] 128..1024, multiple of 32
  // [code] bits per digit: 8 or 11 (block / cluster modes); 1 in warp mode,
  // where the threshold is found one bit per step.
  int radix_bits = 11;
  // [code] coarse first pass: an 8-bit digit with fp16's resolution (four
  // bins per octave over 2^-15..2^17, clamped outside; fp32 only),
  // the refinement passes then use radix_bits on the exact key.
  bool half_first = false;
  int smem_buffer = 4096;  // candidate indices kept in shared memory (0: re-read)
  // [code: 0, 1 or clustered] 0 = one warp per row (several rows per CTA,
  // short rows); 1 = one CTA per row; 2, 4, 8, 16 = CTAs of a thread-block
  // cluster per row (one binary serves every cluster size: it is a launch
  // attribute).
  int cluster = 1;
  // Refinement passes before direct ranking is allowed. In warp mode it is
  // [code] and names how the threshold is found: 0 = tournament (k <= 16)
  // or one bit per step over a strided row; 1 = fp32 only, up to 16 items:
  // whole rows in 16-byte loads and, for k <= 8, one bounding round from
  // the lane maxima before the exact steps (fast with many rows).
  int rounds = 1;
  bool row_cache = true;   // keep the row in shared memory as far as it fits
  int items = 0;           // [code] warp mode: elements per lane (n <= 32 * items)

  bool operator==(const Config&) const = default;

  bool warp_mode() const { return cluster == 0; }
  bool warp_bound() const { return warp_mode() && rounds == 1; }
  // The template's CLUSTER parameter: 0, 1, or 2 for any cluster size.
  int cluster_class() const;
  int key_bits() const { return dtype == DType::kF32 ? 32 : 16; }
  // Digit passes over a key: ceil(key_bits / radix_bits), plus the coarse one.
  int passes() const;
  // rounds < passes() - 1 enables the final direct ranking (and its list).
  bool rank_enabled() const { return !warp_mode() && rounds < passes() - 1; }
  // Elements per 16-byte load.
  int vec() const { return 16 / DTypeSize(dtype); }
  int hist_smem_bytes() const;
  // Dynamic shared memory without the row cache (mirrors smem_layout_bytes
  // in templates/topk/policy.cuh).
  int fixed_smem_bytes() const;
  // Readable id from every parameter, e.g.
  // "radix_f32_b512_r11_s4096_c8_t1_m1_i0" ("r11h" with half_first).
  std::string Id() const;
  // Id of the compiled binary: only the [code] fields ("_t1" is appended for
  // warp_bound()).
  std::string KernelKey() const;
  static StatusOr<Config> FromId(std::string_view id);

  nlohmann::json ToJson() const;
  static StatusOr<Config> FromJson(const nlohmann::json& j);
};

std::ostream& operator<<(std::ostream& os, const Config& c);

// What a GPU architecture allows. Values come from the CUDA programming guide
// (and from the device when there is one).
struct Arch {
  int cc_major = 9;
  int cc_minor = 0;
  int max_threads_per_block = 1024;
  int max_smem_optin = 232448;  // bytes per block after opting in (227 KB)
  int static_smem_reserve = 1024;  // upper bound of a variant's static smem
  bool clusters() const { return cc_major >= 9; }
  int max_cluster() const { return clusters() ? 16 : 1; }
  std::string Name() const { return "sm_" + std::to_string(cc_major * 10 + cc_minor); }
  static Arch Sm80();
  static Arch Sm90();
  static StatusOr<Arch> FromName(std::string_view name);  // "sm_80", "sm_90", "90"
};

// Checks a Config against the constraints of the family and the arch. The
// message names the broken constraint, e.g.
// "constraint smem: fixed shared memory 266240 B exceeds sm_90's 232448 B".
Status Validate(const Config& c, const Arch& arch);
// Validate plus fit with one problem (dtype, warp-mode row length, ...).
Status ValidateFor(const Config& c, const Arch& arch, const Problem& p);

// Options that bound an enumeration.
struct SpaceOptions {
  bool include_cluster = true;  // arch permitting
  bool include_warp = true;     // warp mode where n allows it
};

// Every valid Config for `p` on `arch`, in a stable order.
std::vector<Config> Enumerate(const Problem& p, const Arch& arch, const SpaceOptions& opts = {});
// The problem-independent space for one dtype: every code shape the family
// can compile (one Config per KernelKey), for compile-all checks.
std::vector<Config> EnumerateKernels(DType dtype, const Arch& arch);

// A correct, reasonably fast configuration for `p` when nothing is tuned.
Config DefaultConfig(const Problem& p, const Arch& arch);

// Elements per lane a warp-mode kernel needs for rows of n: the smallest
// power of two >= 2 with 32 * items >= n.
int WarpItems(int64_t n);

}  // namespace topk::gen
