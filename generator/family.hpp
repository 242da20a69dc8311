// A kernel family: one selection algorithm with its parameters, constraints,
// enumeration, default, CUDA source and launch plan. The registry lists the
// families; the tuner, cache, dispatch, report and CLI only iterate over a
// family's parameters and never name one. docs/DESIGN.md ("Adding a kernel
// family") lists what a new family touches.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "generator/config.hpp"
#include "generator/source.hpp"
#include "topk/args.h"

namespace topk::gen {

// One parameter of a family.
struct ParamSpec {
  std::string name;     // "block_threads"; the key in JSON and in Config::params
  std::string tag;      // its field in the id: "b" gives "_b512"; unique within the family
  std::string meaning;  // one line, for the report and `topk-tune space`
  std::vector<int> values;  // the values enumeration draws from (docs, charts, local search)
  bool code = false;    // true: a template parameter (changes the binary); false: a launch argument
  // A parameter at this value is left out of the id and the JSON; an id or
  // JSON without the field takes this value (a parameter added after ids
  // were stored, e.g. a switch whose -1 means "the automatic rule").
  std::optional<int> implicit;
  bool IsImplicit(int v) const { return implicit && *implicit == v; }
};

// One kernel launch of a plan: which of the family's kernels, its geometry,
// and the argument block (the knob fields filled; pointers and batch are set
// at launch).
struct Stage {
  int kernel = 0;           // index into Family::Sources(c)
  unsigned block = 0;
  unsigned cluster = 1;     // CTAs per cluster (1: no cluster attribute)
  int smem_bytes = 0;       // dynamic shared memory
  int rows_per_cta = 1;     // a CTA (or a cluster) serves this many rows
  // CTAs of the grid per row (no cluster: they meet through the workspace).
  int ctas_per_row = 1;
  // Launched cooperatively: every CTA of the grid is resident at once (the
  // kernel waits at grid barriers), or the launch fails.
  bool cooperative = false;
  TopkArgs args = {};
  // Grid for `batch` rows: ceil(batch / rows_per_cta) CTAs (clusters), times
  // the cluster size and the CTAs per row.
  unsigned Grid(int64_t batch) const {
    return static_cast<unsigned>((batch + rows_per_cta - 1) / rows_per_cta * cluster * ctas_per_row);
  }
};

// The launches that run one variant on one problem, in order. The optional
// tie pass of deterministic mode and row sort of sorted output are common to
// every family and appended by the jit, not listed here.
struct LaunchPlan {
  std::vector<Stage> stages;
  // Global scratch the stages share (TopkArgs::workspace), 0 for none. It
  // must be zero before the first launch; every launch leaves it zero.
  size_t workspace_bytes = 0;
  // Every stage's kernel calls await_prior_grids() (templates/topk/types.cuh)
  // before it touches global memory, so the jit may launch it with
  // programmatic dependent launch (gen::Arch::programmatic()); a kernel that
  // does not wait must leave this false.
  bool awaits_prior_grids = false;
};

class Family {
 public:
  virtual ~Family() = default;

  // The id prefix and registry key ("radix", "warp").
  virtual const std::string& name() const = 0;
  // One line: what the family does and where it pays.
  virtual const std::string& summary() const = 0;
  virtual const std::vector<ParamSpec>& params() const = 0;

  // Constraint checks. `c` has this family's name and every parameter (the
  // caller checks that). Failures say "constraint <name>: <what>".
  virtual Status Validate(const Config& c, const Arch& arch) const = 0;
  // Fit with one problem beyond Validate and the dtype (checked by the caller).
  virtual Status ValidateFor(const Config& c, const Arch& arch, const Problem& p) const {
    (void)c, (void)arch, (void)p;
    return Status::Ok();
  }

  // Every valid config for `p` on `arch`, in a stable order.
  virtual std::vector<Config> Enumerate(const Problem& p, const Arch& arch, const SpaceOptions& opts) const = 0;
  // One config per compiled kernel the family can build for `dtype`.
  virtual std::vector<Config> EnumerateKernels(DType dtype, const Arch& arch) const = 0;
  // The configuration used for `p` when nothing is tuned, or nullopt when
  // this family should not serve `p` by default.
  virtual std::optional<Config> Default(const Problem& p, const Arch& arch) const = 0;

  // Identity of the compiled binary: configs with equal keys share it.
  virtual std::string KernelKey(const Config& c) const = 0;
  // The CUDA sources of the variant's kernels (most families: one).
  virtual std::vector<KernelSource> Sources(const Config& c) const = 0;
  // The launches for `p` on `arch`. Pure arithmetic, no GPU. `max_cache_keys`
  // >= 0 caps whatever the family keeps of a row in shared memory (tests use
  // it to reach partly cached paths); < 0: as much as fits.
  virtual LaunchPlan Plan(const Config& c, const Problem& p, const Arch& arch, int max_cache_keys = -1) const = 0;

  // Nearest dispatch: `tuned` won on `tuned_p`; the config to use for `p`
  // instead, or nullopt when it should not carry over (the caller then looks
  // further or takes the default). The default keeps `tuned` where it fits.
  virtual std::optional<Config> Adapt(const Config& tuned, const Problem& tuned_p, const Problem& p,
                                      const Arch& arch) const;
  // `c` with the knobs that follow the problem's modes set from `p`, for a
  // winner tuned without them: tuning ignores `deterministic`, and the exact
  // tier of dispatch serves a deterministic call of a tuned shape with this
  // (the grid family's `ties` 1, its kernel that takes the lowest-index ties
  // itself, instead of the winner plus the tie pass). The default keeps `c`.
  virtual Config WithModesOf(const Config& c, const Problem& p) const {
    (void)p;
    return c;
  }
  // Nearest dispatch, at plan time with a loaded kernel: a config for
  // `p.batch` rows when `c` was tuned for `tuned_batch` rows, given how many
  // of a config's clusters (or CTAs) are co-resident on the device
  // (`resident`, 0 when unknown). nullopt: keep `c`.
  virtual std::optional<Config> FitToBatch(const Config& c, const Problem& p, int64_t tuned_batch,
                                           const std::function<int(const Config&)>& resident) const {
    (void)c, (void)p, (void)tuned_batch, (void)resident;
    return std::nullopt;
  }

  // Ids and JSON written by earlier releases, whose configs this family now
  // owns. nullopt: not one of them.
  virtual std::optional<Config> FromLegacyId(std::string_view id) const {
    (void)id;
    return std::nullopt;
  }
  virtual std::optional<Config> FromLegacyJson(const nlohmann::json& j) const {
    (void)j;
    return std::nullopt;
  }

  // Deterministic mode without the tie pass: true when `c`'s kernels, given
  // TOPK_FLAG_DETERMINISTIC, take the lowest-index ties at the k-th value
  // themselves (the jit then sets the flag and runs no tie pass).
  virtual bool TakesLowestIndexTies(const Config& c) const {
    (void)c;
    return false;
  }

  // Configs close to a good one that the space leaves out: the tuner times
  // them after its search, for the best config of the family (e.g. one
  // strategy switch flipped from its automatic rule). Each must be valid
  // for `p` on `arch`.
  virtual std::vector<Config> Refinements(const Config& c, const Problem& p, const Arch& arch) const {
    (void)c, (void)p, (void)arch;
    return {};
  }

  // A config of this family with every parameter at its implicit value, or
  // else its first listed value.
  Config Blank(DType dtype) const;
};

// The check every family makes of its block size: a positive multiple of 32
// up to the architecture's (and CUDA's) 1024 ("constraint block").
Status ValidateBlock(int block_threads, const Arch& arch);
// The check of a family's CTAs per row: 1, 2, 4, 8 or 16, more than 1 only
// where the architecture has thread-block clusters, and at most its maximum
// ("constraint cluster").
Status ValidateCluster(int cluster, const Arch& arch);

// The registered families, built-in ones first (warp, radix), in the order
// DefaultConfig consults them.
std::vector<const Family*> Families();
// The family named `name`, or null.
const Family* FindFamily(std::string_view name);
// Adds a family (a test's, or an embedder's) after the built-in ones. Not
// thread-safe with concurrent lookups: register before use. kAlreadyExists
// for a taken name, kInvalidArgument for duplicate parameter names or tags.
Status RegisterFamily(std::shared_ptr<const Family> family);
// Removes a family added by RegisterFamily (tests clean up after themselves).
void UnregisterFamily(std::string_view name);

// The family of `c`, with every parameter present; a status naming what is
// wrong otherwise ("constraint family: ...").
StatusOr<const Family*> FamilyOf(const Config& c);

// A tuned `c` with the knobs that follow `p`'s modes set from `p`
// (Family::WithModesOf), where that config is valid for `p` on `arch`; else
// `c`. What dispatch runs for an exact-shape winner, and what `topk-tune
// verify --deterministic` checks.
Config WithModes(const Config& c, const Problem& p, const Arch& arch);

// Every distinct kernel the built-in defaults need on `arch` over all
// problems: DefaultConfig's configs reduced to one per KernelKey (their other
// parameters are launch arguments, which share the binary), for every
// dtype, plus the row sort (sorted output) and the tie pass (deterministic
// mode) of each dtype. A family's Default is piecewise constant in the problem; the problems swept here
// straddle every boundary the built-in defaults use (row lengths and
// batches at powers of two, their neighbours and three times them; k
// around the warp family's bound; a few SM counts, which decide clusters).
// generator_test checks random problems against it. Sorted by key, one entry per source hash. Used to ship the defaults
// precompiled (jit/ship_kernels.cpp).
std::vector<Config> DefaultKernelConfigs(const Arch& arch);
std::vector<KernelSource> DefaultKernelSources(const Arch& arch);
// The same from DefaultKernelConfigs(arch)'s result, for a caller that has it
// (the sweep takes about 1.6 s an architecture, 20x that under ASan).
std::vector<KernelSource> DefaultKernelSources(const std::vector<Config>& default_configs);

// Every source of `c` (its family's Sources); empty for an unknown family.
std::vector<KernelSource> GenerateSources(const Config& c);
// The plan of `c` on `p` (its family's Plan); empty for an unknown family.
LaunchPlan PlanLaunch(const Config& c, const Problem& p, const Arch& arch, int max_cache_keys = -1);

}  // namespace topk::gen
