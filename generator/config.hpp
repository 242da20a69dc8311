// A kernel variant as the layers above the generator see it: a family name,
// a dtype and one integer per parameter of that family. Nothing here knows
// what a parameter means; the family does (generator/family.hpp). No CUDA
// calls; everything builds and tests without a GPU.
#pragma once

#include <algorithm>
#include <array>
#include <nlohmann/json_fwd.hpp>
#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "topk/status.hpp"
#include "topk/topk.hpp"

namespace topk::gen {

class Family;

// One configuration: {family, dtype, parameter values}. `params` holds every
// parameter of the family, in the family's order (Family::params()).
struct Config {
  std::string family;
  DType dtype = DType::kF32;
  std::vector<std::pair<std::string, int>> params;

  bool operator==(const Config&) const = default;

  // The value of parameter `name`; `fallback` when the config has none.
  int Get(std::string_view name, int fallback = 0) const;
  bool Has(std::string_view name) const;
  // Sets `name`, appending it when absent.
  void Set(std::string_view name, int value);
  // The family this config names; null when no registered family has that name.
  const Family* family_ptr() const;

  // Readable id: "<family>_<dtype>" then "_<tag><value>" per parameter, e.g.
  // "radix_f32_b512_r11_h0_s4096_c8_t1_m1" or "warp_f32_b128_i8_l0". Ids of
  // earlier releases ("radix_f32_b512_r11_s4096_c8_t1_m1_i0") still parse.
  std::string Id() const;
  // Id of the compiled binary (only what changes code), from the family.
  std::string KernelKey() const;
  static StatusOr<Config> FromId(std::string_view id);

  // {"family": ..., "dtype": ..., "<param>": value, ...}; FromJson also
  // reads the field-per-knob objects of earlier releases.
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
  // Streaming multiprocessors: the device's count when known, else the
  // flagship part of the architecture (H100 SXM: 132, A100: 108).
  int sm_count = 132;
  // Launch with programmatic dependent launch where it was measured (sm_90):
  // a kernel's launch overlaps the tail of the stream's previous kernel
  // (jit::LaunchShape::programmatic). Off, and on other architectures (the
  // attribute exists from sm_90, but graph capture with it was reported to
  // fail on sm_120): plain launches.
  bool programmatic_launch = true;
  bool programmatic() const { return programmatic_launch && cc_major == 9; }
  bool clusters() const { return cc_major >= 9; }
  // Threads an SM holds: 2048 on sm_80, sm_90 and sm_100, 1536 elsewhere
  // (sm_86, sm_89, sm_120).
  int max_threads_per_sm() const {
    return (cc_major == 8 && cc_minor == 0) || cc_major == 9 || (cc_major == 10 && cc_minor == 0) ? 2048 : 1536;
  }
  int max_cluster() const { return clusters() ? 16 : 1; }
  // Clusters of 1, 2, 4, 8 and 16 CTAs, one CTA an SM, that the device runs
  // at once (cuOccupancyMaxActiveClusters, jit::QueryDevice); 0 where that
  // size does not run (or its query failed), -1 where no device answered.
  std::array<int, 5> resident_clusters{-1, -1, -1, -1, -1};
  // Clusters of `size` CTAs (one CTA an SM) that run at once: the device's
  // answer, else a fit; none past 16 CTAs, sizes between powers of two count
  // as the next. A cluster takes SMs of one GPC, so the GPCs hold fewer
  // clusters of 4 to 16 than sm_count / size: an H100's and an H200's
  // driver answer 66, 30, 15 and 7 for 2, 4, 8 and 16 CTAs on 132 SMs; on an
  // H100 16 rows of 8-CTA clusters and 8 rows of 16-CTA ones ran in two
  // waves, on an H200 15 and 7 ran in one (docs/PERFORMANCE.md, "The
  // defaults for rows over 8192"). The fit scales those counts to other SM
  // counts.
  int max_resident_clusters(int size) const {
    if (size > 16) return 0;
    const int i = size <= 1 ? 0 : size <= 2 ? 1 : size <= 4 ? 2 : size <= 8 ? 3 : 4;
    if (resident_clusters[i] >= 0) return resident_clusters[i];
    if (size <= 2) return sm_count / std::max(size, 1);
    return sm_count * (size <= 4 ? 30 : size <= 8 ? 15 : 7) / 132;
  }
  std::string Name() const { return "sm_" + std::to_string(cc_major * 10 + cc_minor); }
  static Arch Sm80();
  static Arch Sm90();
  // "sm_80", "sm_90", "90": sm_80 up to sm_<kMaxArchCc>.
  static StatusOr<Arch> FromName(std::string_view name);
  static constexpr int kMaxArchCc = 120;
};

// Checks a Config against the constraints of its family and the arch. The
// message names the broken constraint, e.g.
// "constraint smem: fixed shared memory 266240 B exceeds sm_90's 232448 B".
// An unknown family or a missing parameter is "constraint family".
Status Validate(const Config& c, const Arch& arch);
// Validate plus fit with one problem (dtype, row length, ...).
Status ValidateFor(const Config& c, const Arch& arch, const Problem& p);

// Options that bound an enumeration.
struct SpaceOptions {
  bool include_cluster = true;         // families with clusters may use them (arch permitting)
  std::vector<std::string> families;   // empty: every registered family
};

// Every valid Config for `p` on `arch` over the registered families (or
// opts.families), in a stable order.
std::vector<Config> Enumerate(const Problem& p, const Arch& arch, const SpaceOptions& opts = {});
// Every code shape the registered families compile for one dtype (one
// Config per KernelKey), for compile-all checks.
std::vector<Config> EnumerateKernels(DType dtype, const Arch& arch);

// A correct, reasonably fast configuration for `p` when nothing is tuned:
// the default of the first registered family that serves `p`.
Config DefaultConfig(const Problem& p, const Arch& arch);

}  // namespace topk::gen
