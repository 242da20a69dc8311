// A variant made ready for one problem: its functions, launch shapes and
// argument blocks, so that launching is only filling pointers and one
// cuLaunchKernel call per stage. Shared by the tuner's worker, the runtime,
// the CLI's verify, the probe and the tests; LoadVariant is the one way from
// a configuration to a ready variant through the kernel store.
#pragma once

#include <cuda.h>

#include <functional>
#include <memory>
#include <vector>

#include "generator/config.hpp"
#include "generator/family.hpp"
#include "jit/device.hpp"
#include "topk/args.h"
#include "topk/topk.hpp"

namespace topk::jit {

class KernelStore;

// Largest k the row sort supports (TOPK_MAX_SORTED_K in topk/args.h).
constexpr int64_t kMaxSortedK = TOPK_MAX_SORTED_K;

class PreparedVariant {
 public:
  PreparedVariant() = default;
  // `kernels` are the functions of the family's sources for `c`, in order
  // (gen::GenerateSources); `sort` the row-sort function of the dtype
  // (required when p.sorted); `ties` the tie pass of the dtype (required
  // when p.deterministic, unless the family takes the lowest-index ties
  // itself (NativeTies); it runs after the plan, before the sort). Runs the family's launch plan: sets the
  // functions' shared-memory attributes and checks that one block / cluster
  // of every stage fits (kResourceExhausted otherwise). The context must be
  // current. `max_cache_keys` >= 0 caps the row cache (tests use it to cover
  // the partly cached path).
  static StatusOr<PreparedVariant> Make(const gen::Config& c, const Problem& p, const gen::Arch& arch,
                                        const std::vector<CUfunction>& kernels, CUfunction sort,
                                        int max_cache_keys = -1, CUfunction ties = nullptr);

  // Launches on `stream` for `batch` rows (<= the planned batch). No
  // allocation, no synchronisation.
  // `workspace`: the plan's global scratch (workspace_bytes(), zero, left
  // zero), or null for the variant's own, allocated and zeroed by Make;
  // launches sharing one must be ordered on the GPU.
  Status Launch(const void* input, const int32_t* ranges, int32_t* indices, void* values, int64_t batch,
                CUstream stream, void* workspace = nullptr) const;
  // Bytes of global scratch a launch needs (gen::LaunchPlan::workspace_bytes).
  size_t workspace_bytes() const { return plan_.workspace_bytes; }
  // The variant's own workspace (null when the plan needs none): tests check
  // that every launch leaves it zero.
  CUdeviceptr own_workspace() const { return workspace_ ? workspace_->get() : 0; }

  const gen::Config& config() const { return config_; }
  const Problem& problem() const { return problem_; }
  // The first stage's launch shape for the planned batch.
  LaunchShape shape() const;
  const gen::LaunchPlan& plan() const { return plan_; }

 private:
  // A stage's launch shape for `batch` rows, programmatic where the plan's
  // kernels wait for their predecessor.
  LaunchShape PlanShape(const gen::Stage& stage, int64_t batch) const;

  gen::Config config_;
  Problem problem_;
  gen::LaunchPlan plan_;
  std::vector<CUfunction> stage_fns_;  // one per plan stage
  bool programmatic_ = false;  // gen::Arch::programmatic()
  CUfunction sort_ = nullptr;
  TopkArgs base_args_ = {};  // the problem's fields; each stage adds its knobs
  LaunchShape sort_shape_;
  SortArgs sort_args_ = {};
  CUfunction ties_ = nullptr;
  LaunchShape ties_shape_;
  TieArgs ties_args_ = {};
  // The variant's own workspace (zeroed), when the plan needs one; shared by
  // copies of the variant.
  std::shared_ptr<DeviceBuffer> workspace_;
};

// Flags word of a problem (TOPK_FLAG_*).
unsigned ProblemFlags(const Problem& p);
// Whether `c`'s family takes the lowest-index ties itself in deterministic
// mode (gen::Family::TakesLowestIndexTies): no tie pass is loaded or run.
bool NativeTies(const gen::Config& c);

// The one pipeline from a configuration to a ready variant: the family's
// sources (the row sort when p.sorted, the tie pass when p.deterministic) through `kernels` (memory, the
// binary store, or NVRTC), then PreparedVariant::Make. `from_store` (may be
// null) says whether every binary came from the store or memory rather than
// a fresh compile. `transform`, when set, rewrites every source before it is
// compiled (the probe prepends development defines). The context must be
// current.
StatusOr<PreparedVariant> LoadVariant(KernelStore& kernels, const gen::Config& c, const Problem& p,
                                      const gen::Arch& arch, bool* from_store = nullptr, int max_cache_keys = -1,
                                      const std::function<gen::KernelSource(gen::KernelSource)>& transform = {});

}  // namespace topk::jit
