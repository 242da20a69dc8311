#include "jit/variant.hpp"

namespace topk::jit {

unsigned ProblemFlags(const Problem& p) {
  return (p.largest ? 0u : TOPK_FLAG_SMALLEST) | (p.ranges ? TOPK_FLAG_RANGES : 0u) |
         (p.values ? TOPK_FLAG_VALUES : 0u);
}

StatusOr<PreparedVariant> PreparedVariant::Make(const gen::Config& c, const Problem& p, const gen::Arch& arch,
                                                CUfunction topk, CUfunction sort, int max_cache_keys) {
  TOPK_RETURN_IF_ERROR(p.Validate());
  TOPK_RETURN_IF_ERROR(gen::ValidateFor(c, arch, p));
  if (p.sorted && p.k > kMaxSortedK)
    return Status(Code::kUnimplemented, "PreparedVariant",
                  "sorted output supports k <= " + std::to_string(kMaxSortedK) + ", got k = " + std::to_string(p.k));
  if (p.sorted && !sort) return Status(Code::kInternal, "PreparedVariant", "sorted problem without a sort kernel");
  PreparedVariant v;
  v.config_ = c;
  v.problem_ = p;
  v.topk_ = topk;
  v.sort_ = p.sorted ? sort : nullptr;
  v.args_.row_stride = p.stride();
  v.args_.n = static_cast<int>(p.n);
  v.args_.k = static_cast<int>(p.k);
  v.args_.batch = static_cast<int>(p.batch);
  v.args_.flags = ProblemFlags(p);
  v.shape_ = ComputeLaunch(c, p, p.batch, arch, &v.args_, max_cache_keys);
  TOPK_RETURN_IF_ERROR(PrepareFunction(topk, v.shape_, arch.max_smem_optin));
  TOPK_RETURN_IF_ERROR(CheckFits(topk, v.shape_));
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
  return v;
}

Status PreparedVariant::Launch(const void* input, const int32_t* ranges, int32_t* indices, void* values,
                               int64_t batch, CUstream stream) const {
  if (batch <= 0 || problem_.k == 0) return Status::Ok();
  TopkArgs a = args_;
  a.input = input;
  a.ranges = ranges;
  a.out_idx = indices;
  a.out_val = values;
  a.batch = static_cast<int>(batch);
  LaunchShape s = shape_;
  if (batch != problem_.batch)
    s.grid = config_.warp_mode() ? static_cast<unsigned>((batch + config_.block_threads / 32 - 1) /
                                                         (config_.block_threads / 32))
                                 : static_cast<unsigned>(batch * config_.cluster);
  TOPK_RETURN_IF_ERROR(jit::Launch(topk_, s, &a, sizeof(a), stream));
  if (!sort_) return Status::Ok();
  SortArgs sa = sort_args_;
  sa.input = input;
  sa.idx = indices;
  sa.val = values;
  sa.batch = static_cast<int>(batch);
  LaunchShape ss = sort_shape_;
  ss.grid = static_cast<unsigned>(batch);
  return jit::Launch(sort_, ss, &sa, sizeof(sa), stream);
}

}  // namespace topk::jit
