#include "support/toy_family.hpp"

#include <string>

namespace topk::testing {
namespace {

constexpr int kMaxRow = 4096;

const std::vector<gen::ParamSpec>& Specs() {
  static const std::vector<gen::ParamSpec> specs = {
      {"block_threads", "b", "threads per CTA (one row per CTA)", {64, 128}, true},
  };
  return specs;
}

// The kernel: every element counts the elements of its row that rank before
// it (a larger key, or an equal key at a lower index); ranks below k are the
// result. Ranges and padding through the common per-row contract
// (topk/row.cuh), as every family.
constexpr const char* kKernel = R"cuda(
#include "topk/args.h"
#include "topk/keys.cuh"
#include "topk/row.cuh"

namespace toy {

template <int DTYPE, int BLOCK>
__global__ void __launch_bounds__(BLOCK) sort_truncate(TopkArgs a) {
  using K = topk::Keys<DTYPE>;
  const int row = blockIdx.x;
  if (row >= a.batch) return;
  const bool smallest = (a.flags & TOPK_FLAG_SMALLEST) != 0;
  const bool values = (a.flags & TOPK_FLAG_VALUES) != 0 && a.out_val != nullptr;
  const topk::RowRange range = topk::row_range(a, row);
  const int start = range.start, end = range.end;
  const long long base = static_cast<long long>(row) * a.row_stride;
  const long long out = static_cast<long long>(row) * a.k;
  for (int i = start + static_cast<int>(threadIdx.x); i < end; i += BLOCK) {
    const unsigned raw = topk::load_raw<DTYPE>(a.input, base + i);
    const unsigned ki = K::key(raw, smallest);
    int rank = 0;
    for (int j = start; j < end; ++j) {
      const unsigned kj = K::key(topk::load_raw<DTYPE>(a.input, base + j), smallest);
      rank += kj > ki || (kj == ki && j < i);
    }
    if (rank < a.k) {
      a.out_idx[out + rank] = i;
      if (values) topk::store_raw<DTYPE>(a.out_val, out + rank, raw);
    }
  }
  using Raw = typename K::Raw;
  Raw* out_val = values ? static_cast<Raw*>(a.out_val) + out : nullptr;
  topk::pad_output(a.out_idx + out, out_val, end - start + static_cast<int>(threadIdx.x), a.k, BLOCK,
                   static_cast<Raw>(K::kLowest));
}

}  // namespace toy
)cuda";

class Toy final : public gen::Family {
 public:
  const std::string& name() const override {
    static const std::string n = "sorttrunc";
    return n;
  }
  const std::string& summary() const override {
    static const std::string s = "test-only: rank by counting, keep the first k (rows up to 4096)";
    return s;
  }
  const std::vector<gen::ParamSpec>& params() const override { return Specs(); }

  Status Validate(const gen::Config& c, const gen::Arch& arch) const override {
    TOPK_RETURN_IF_ERROR(gen::ValidateBlock(c.Get("block_threads"), arch));
    if (c.Get("block_threads") > 256)
      return Status(Code::kInvalidArgument, "constraint toy-block", "at most 256 threads");
    return Status::Ok();
  }
  Status ValidateFor(const gen::Config& c, const gen::Arch& arch, const Problem& p) const override {
    (void)c, (void)arch;
    if (p.n > kMaxRow)
      return Status(Code::kInvalidArgument, "constraint toy-rows",
                    "rows up to " + std::to_string(kMaxRow) + ", n is " + std::to_string(p.n));
    return Status::Ok();
  }
  std::vector<gen::Config> Enumerate(const Problem& p, const gen::Arch& arch,
                                     const gen::SpaceOptions& opts) const override {
    (void)opts;
    std::vector<gen::Config> out;
    for (int b : Specs()[0].values) {
      gen::Config c = ToyConfig(p.dtype, b);
      if (ValidateFor(c, arch, p).ok()) out.push_back(c);
    }
    return out;
  }
  std::vector<gen::Config> EnumerateKernels(DType dtype, const gen::Arch& arch) const override {
    (void)arch;
    return {ToyConfig(dtype, 64), ToyConfig(dtype, 128)};
  }
  std::optional<gen::Config> Default(const Problem& p, const gen::Arch& arch) const override {
    (void)p, (void)arch;
    return std::nullopt;  // never the default
  }
  std::string KernelKey(const gen::Config& c) const override {
    return "sorttrunc_" + std::string(DTypeName(c.dtype)) + "_b" + std::to_string(c.Get("block_threads"));
  }
  std::vector<gen::KernelSource> Sources(const gen::Config& c) const override {
    gen::KernelSource s;
    s.key = KernelKey(c);
    s.file_name = s.key + ".cu";
    s.name_expression = "toy::sort_truncate<" + std::to_string(static_cast<int>(c.dtype)) + ", " +
                        std::to_string(c.Get("block_threads")) + ">";
    s.text = std::string(kKernel) + "\ntemplate __global__ void " + s.name_expression + "(TopkArgs);\n";
    return {gen::FinishSource(std::move(s))};
  }
  gen::LaunchPlan Plan(const gen::Config& c, const Problem& p, const gen::Arch& arch,
                       int max_cache_keys) const override {
    (void)p, (void)arch, (void)max_cache_keys;
    gen::Stage s;
    s.block = static_cast<unsigned>(c.Get("block_threads"));
    return gen::LaunchPlan{{s}};
  }
};

}  // namespace

std::shared_ptr<const gen::Family> MakeToyFamily() { return std::make_shared<Toy>(); }

ScopedToyFamily::ScopedToyFamily() : status_(gen::RegisterFamily(MakeToyFamily())) {}

ScopedToyFamily::~ScopedToyFamily() {
  if (status_.ok()) gen::UnregisterFamily("sorttrunc");
}

gen::Config ToyConfig(DType dtype, int block) {
  gen::Config c;
  c.family = "sorttrunc";
  c.dtype = dtype;
  c.params = {{"block_threads", block}};
  return c;
}

}  // namespace topk::testing
