#include "jit/variant.hpp"

#include <algorithm>

#include "jit/driver.hpp"
#include "jit/kernel_store.hpp"

namespace topk::jit {

bool NativeTies(const gen::Config& c) {
  const gen::Family* f = c.family_ptr();
  return f && f->TakesLowestIndexTies(c);
}

unsigned ProblemFlags(const Problem& p) {
  return (p.largest ? 0u : TOPK_FLAG_SMALLEST) | (p.ranges ? TOPK_FLAG_RANGES : 0u) |
         (p.values ? TOPK_FLAG_VALUES : 0u);
}

StatusOr<PreparedVariant> PreparedVariant::Make(const gen::Config& c, const Problem& p, const gen::Arch& arch,
                                                const std::vector<CUfunction>& kernels, CUfunction sort,
                                                int max_cache_keys, CUfunction ties) {
  TOPK_RETURN_IF_ERROR(p.Validate());
  TOPK_RETURN_IF_ERROR(gen::ValidateFor(c, arch, p));
  if (p.sorted && p.k > kMaxSortedK)
    return Status(Code::kUnimplemented, "PreparedVariant",
                  "sorted output supports k <= " + std::to_string(kMaxSortedK) + ", got k = " + std::to_string(p.k));
  if (p.sorted && !sort) return Status(Code::kInternal, "PreparedVariant", "sorted problem without a sort kernel");
  const bool native_ties = p.deterministic && NativeTies(c);
  if (p.deterministic && !native_ties && !ties)
    return Status(Code::kInternal, "PreparedVariant", "deterministic problem without a tie-pass kernel");
  PreparedVariant v;
  v.config_ = c;
  v.problem_ = p;
  v.sort_ = p.sorted ? sort : nullptr;
  // The common passes after the plan wait for it on the GPU; the plan's own
  // kernels may be launched before their predecessor ends only if they do.
  v.programmatic_ = arch.programmatic();
  v.plan_ = gen::PlanLaunch(c, p, arch, max_cache_keys);
  if (v.plan_.stages.empty())
    return Status(Code::kInternal, "PreparedVariant", "family " + c.family + " planned no launch for " + c.Id());
  v.base_args_.row_stride = p.stride();
  v.base_args_.n = static_cast<int>(p.n);
  v.base_args_.k = static_cast<int>(p.k);
  v.base_args_.batch = static_cast<int>(p.batch);
  v.base_args_.flags = ProblemFlags(p) | (native_ties ? TOPK_FLAG_DETERMINISTIC : 0u);
  for (const gen::Stage& st : v.plan_.stages) {
    if (st.kernel < 0 || st.kernel >= static_cast<int>(kernels.size()) || !kernels[st.kernel])
      return Status(Code::kInternal, "PreparedVariant",
                    c.Id() + ": a stage names kernel " + std::to_string(st.kernel) + " of " +
                        std::to_string(kernels.size()) + " loaded");
    const LaunchShape shape = StageShape(st, p.batch);
    TOPK_RETURN_IF_ERROR(PrepareFunction(kernels[st.kernel], shape, arch.max_smem_optin));
    TOPK_RETURN_IF_ERROR(CheckFits(kernels[st.kernel], shape, arch.sm_count));
    v.stage_fns_.push_back(kernels[st.kernel]);
  }
  if (v.plan_.workspace_bytes > 0) {
    // Zeroed on a stream of its own: neither the legacy stream nor a
    // context-wide wait, which would join (or break, in a global-mode
    // capture) the caller's other work.
    TOPK_ASSIGN_OR_RETURN(DeviceBuffer ws, DeviceBuffer::Alloc(v.plan_.workspace_bytes));
    CUstream zero = nullptr;
    TOPK_CU(cuStreamCreate, &zero, CU_STREAM_NON_BLOCKING);
    auto d = GetDriver();
    CUresult r = (*d)->cuMemsetD8Async(ws.get(), 0, v.plan_.workspace_bytes, zero);
    if (r == CUDA_SUCCESS) r = (*d)->cuStreamSynchronize(zero);
    (*d)->cuStreamDestroy(zero);
    if (r != CUDA_SUCCESS) return CudaStatus(r, "cuMemsetD8Async", __FILE__, __LINE__);
    v.workspace_ = std::make_shared<DeviceBuffer>(std::move(ws));
  }
  if (v.sort_) {
    int cap = 1;
    while (cap < p.k) cap *= 2;
    v.sort_args_.row_stride = p.stride();
    v.sort_args_.k = static_cast<int>(p.k);
    v.sort_args_.flags = ProblemFlags(p) & (TOPK_FLAG_SMALLEST | TOPK_FLAG_VALUES);
    v.sort_args_.cap = cap;
    v.sort_shape_.block = cap >= 512 ? 512 : (cap >= 64 ? static_cast<unsigned>(cap) : 64u);
    v.sort_shape_.smem_bytes = cap * 8;
    TOPK_RETURN_IF_ERROR(PrepareFunction(sort, v.sort_shape_, arch.max_smem_optin));
  }
  if (p.deterministic && !native_ties) {
    v.ties_ = ties;
    v.ties_args_.row_stride = p.stride();
    v.ties_args_.n = static_cast<int>(p.n);
    v.ties_args_.k = static_cast<int>(p.k);
    v.ties_args_.flags = ProblemFlags(p);
    // Threads: enough for one scan step to cover the row (16 elements each,
    // templates/topk/ties.cuh) or one pass over the k entries, whichever is
    // more, in whole warps; up to 1024 while the rows are fewer than the SMs
    // (each CTA then has an SM to itself), else 512. Rows of 256 (MoE
    // routing) get one warp each, and many share an SM.
    const int64_t want = std::max<int64_t>((p.n + 15) / 16, p.k);
    const int64_t cap = p.batch < arch.sm_count ? TOPK_TIE_MAX_BLOCK : 512;
    v.ties_shape_.block = static_cast<unsigned>(std::clamp<int64_t>((want + 31) / 32 * 32, 32, cap));
    TOPK_RETURN_IF_ERROR(PrepareFunction(ties, v.ties_shape_, arch.max_smem_optin));
  }
  return v;
}

LaunchShape PreparedVariant::shape() const {
  return plan_.stages.empty() ? LaunchShape{} : PlanShape(plan_.stages.front(), problem_.batch);
}

LaunchShape PreparedVariant::PlanShape(const gen::Stage& stage, int64_t batch) const {
  LaunchShape s = StageShape(stage, batch);
  s.programmatic = programmatic_ && plan_.awaits_prior_grids;
  return s;
}

Status PreparedVariant::Launch(const void* input, const int32_t* ranges, int32_t* indices, void* values,
                               int64_t batch, CUstream stream, void* workspace) const {
  if (batch <= 0 || problem_.k == 0) return Status::Ok();
  if (!workspace && workspace_) workspace = workspace_->ptr();  // Make allocated it when the plan has one
  for (size_t i = 0; i < stage_fns_.size(); ++i) {
    const gen::Stage& st = plan_.stages[i];
    TopkArgs a = base_args_;
    a.buffer = st.args.buffer;
    a.rounds = st.args.rounds;
    a.cache_cap = st.args.cache_cap;
    a.smem_bytes = st.args.smem_bytes;
    a.input = input;
    a.ranges = ranges;
    a.out_idx = indices;
    a.out_val = values;
    a.batch = static_cast<int>(batch);
    a.workspace = plan_.workspace_bytes > 0 ? workspace : nullptr;
    TOPK_RETURN_IF_ERROR(jit::Launch(stage_fns_[i], PlanShape(st, batch), &a, sizeof(a), stream));
  }
  // The passes after the plan: one CTA per row over the finished output.
  auto row_pass = [&](CUfunction fn, LaunchShape shape, auto args) {
    args.input = input;
    args.idx = indices;
    args.val = values;
    args.batch = static_cast<int>(batch);
    shape.grid = static_cast<unsigned>(batch);
    shape.programmatic = programmatic_;
    return jit::Launch(fn, shape, &args, sizeof(args), stream);
  };
  if (ties_) {
    TieArgs ta = ties_args_;
    ta.ranges = ranges;
    TOPK_RETURN_IF_ERROR(row_pass(ties_, ties_shape_, ta));
  }
  return sort_ ? row_pass(sort_, sort_shape_, sort_args_) : Status::Ok();
}

StatusOr<PreparedVariant> LoadVariant(KernelStore& kernels, const gen::Config& c, const Problem& p,
                                      const gen::Arch& arch, bool* from_store, int max_cache_keys,
                                      const std::function<gen::KernelSource(gen::KernelSource)>& transform) {
  auto prepared = [&](gen::KernelSource src) { return transform ? transform(std::move(src)) : src; };
  TOPK_RETURN_IF_ERROR(gen::ValidateFor(c, arch, p));
  bool all_stored = true;
  std::vector<CUfunction> fns;
  for (const gen::KernelSource& src : gen::GenerateSources(c)) {
    bool stored = false;
    TOPK_ASSIGN_OR_RETURN(CUfunction fn, kernels.Function(prepared(src), &stored));
    all_stored = all_stored && stored;
    fns.push_back(fn);
  }
  CUfunction sort = nullptr;
  if (p.sorted) {
    bool stored = false;
    TOPK_ASSIGN_OR_RETURN(sort, kernels.Function(prepared(gen::SortSource(p.dtype)), &stored));
    all_stored = all_stored && stored;
  }
  CUfunction ties = nullptr;
  if (p.deterministic && !NativeTies(c)) {
    bool stored = false;
    TOPK_ASSIGN_OR_RETURN(ties, kernels.Function(prepared(gen::TieSource(p.dtype)), &stored));
    all_stored = all_stored && stored;
  }
  if (from_store) *from_store = all_stored;
  return PreparedVariant::Make(c, p, arch, fns, sort, max_cache_keys, ties);
}

}  // namespace topk::jit
