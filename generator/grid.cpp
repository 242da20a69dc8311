#include "generator/grid.hpp"

#include <algorithm>
#include <sstream>

#include "topk/args.h"

namespace topk::gen {
namespace {

Status Broken(const std::string& constraint, const std::string& what) {
  return Status(Code::kInvalidArgument, "constraint " + constraint, what);
}

// templates/topk/grid/grid_select.cuh: the shared words before the
// candidates, a row's workspace words before its candidates, the sample's
// most vectors.
constexpr int kStaticWords = 2 * 256 + 128;
constexpr int kRowWords = 8 + 2 * (256 + 2) + 256 * 4 + 256;  // counters, the 64-bit histogram, the recovery's, ties
constexpr int kMaxCtas = 256;  // a row's tie counts in the workspace
// The one block size enumerated and taken by the default (Specs() says why).
constexpr int kBlock = 512;
// A row's workspace words (grid::row_words): the candidates' room rounded
// up to even, so that every row starts 16-byte aligned.
constexpr int64_t RowWords(int candidates) { return kRowWords + 2 * static_cast<int64_t>((candidates + 1) & ~1); }
constexpr int kMaxSample = 1024;
constexpr int kMinSliceElements = 1024;  // enumeration: fewer per CTA is all barrier
// The default's rows: at least this many elements, 16 CTAs of 2048 (on an
// H100 against the resident 8-CTA cluster it replaced, 1.11-1.35x faster on
// normal rows of 32768 and 49152, 1.28-1.36x on shifted ones:
// docs/PERFORMANCE.md, "The bin ranked as it arrives").
constexpr int64_t kDefaultShortestRow = 32768;
// The default's slice: a CTA per this many elements of the row (16 CTAs at
// 32768, 64 at 131072, 128 from 262144), the CTAs a power of two.
constexpr int64_t kDefaultSliceElements = 2048;
constexpr int64_t kDefaultLongestRow = 1048576;
constexpr int64_t kDefaultLeastK = 256;
constexpr int64_t kDefaultMostK = 4096;
constexpr int kDefaultLeastCtas = 16;  // fewer CTAs a row, one an SM: two an SM instead
// Two CTAs an SM (a batch whose rows do not get 16 CTAs each, one an SM):
// at least 4 CTAs a row, each at most 4 vectors a thread (Validate: the
// registers of two CTAs an SM). H200, k 2048, ranges, L2-hot, against the
// filter default, us (docs/PERFORMANCE.md, "Two grid CTAs an SM"):
//   16 x 131072 (16 CTAs, 4 vectors)  11.04 against 25.36
//   16 x 65536  (16, 2)                9.11 against 17.60
//   32 x 65536  (8, 4)                11.84 against 17.78
//   32 x 32768  (8, 2)                 9.39 against 13.28
//   64 x 32768  (4, 4)                12.20 against 13.34
constexpr int kDefaultLeastCtasTwoAnSm = 4;

const std::vector<ParamSpec>& Specs() {
  static const std::vector<ParamSpec> specs = {
      // 256 and 1024 threads ran 1.06-1.16x slower than 512 at both one-row
      // DSA shapes on an H100, and 256 two or four an SM slower than 512 two
      // an SM on batches (docs/PERFORMANCE.md): not enumerated.
      {"block_threads", "b", "threads per CTA", {kBlock}, true},
      {"items", "i", "16-byte vectors of the slice a thread holds in registers", {1, 2, 4, 8}, true},
      {"ctas", "g", "CTAs per row; every CTA of the launch resident at once (batch x ctas <= SMs x per_sm)",
       {2, 4, 8, 16, 32, 64, 128}, false},
      {"sample", "s", "16-byte vectors of the row sampled for the threshold", {256, 1024}, false},
      {"candidates", "c", "room per row for the k-th key's bin (8 bytes each in the workspace and shared memory)",
       {4096}, false},
      // Not searched: the default sets it for deterministic problems (the
      // tuner tunes none), and a kernel with it is a valid top-k for any
      // problem, only slower.
      {"ties", "t",
       "1: deterministic mode in the kernel (canonical keys, the lowest-index ties; no tie pass after it), "
       "0: deterministic problems get the common tie pass",
       {0}, true, 0},
      // 2 caps the registers at 65536 / (block x 2) a thread: for batches
      // whose rows want more CTAs than the SMs give one each (4 is valid,
      // not enumerated: slower than 2 wherever measured, docs/PERFORMANCE.md).
      {"per_sm", "m",
       "CTAs an SM the kernel is compiled to hold: more CTAs a row for a batch of rows (batch x ctas <= SMs x "
       "per_sm)",
       {1, 2}, true, 1},
  };
  return specs;
}

class Grid final : public Family {
 public:
  const std::string& name() const override {
    static const std::string n = "grid";
    return n;
  }
  const std::string& summary() const override {
    static const std::string s =
        "a row over many CTAs of the grid (cooperative launch, a global workspace): one threshold from a sample, "
        "the row read once into registers, the k-th key's bin ranked by CTA 0 as it arrives, an exact radix select over "
        "the registers when the guess fails; for a few long rows";
    return s;
  }
  const std::vector<ParamSpec>& params() const override { return Specs(); }

  Status Validate(const Config& cfg, const Arch& arch) const override {
    const GridParams c = GridParams::Of(cfg);
    TOPK_RETURN_IF_ERROR(ValidateBlock(c.block_threads, arch));
    if (c.block_threads < 64)
      return Broken("block", "block_threads must be at least 64, got " + std::to_string(c.block_threads));
    if (c.items < 1 || c.items > 8) return Broken("items", "items must be in [1, 8], got " + std::to_string(c.items));
    if (c.ctas < 1 || c.ctas > arch.sm_count || c.ctas > kMaxCtas)
      return Broken("ctas", "ctas must be in [1, " + std::to_string(std::min(arch.sm_count, kMaxCtas)) +
                                "] (the SMs: every CTA resident; at most " + std::to_string(kMaxCtas) + "), got " +
                                std::to_string(c.ctas));
    if (c.sample < 1 || c.sample > kMaxSample)
      return Broken("sample", "sample must be in [1, " + std::to_string(kMaxSample) + "] vectors, got " +
                                  std::to_string(c.sample));
    if (c.ties != 0 && c.ties != 1) return Broken("ties", "ties must be 0 or 1, got " + std::to_string(c.ties));
    if (c.per_sm != 1 && c.per_sm != 2 && c.per_sm != 4)
      return Broken("per_sm", "per_sm must be 1, 2 or 4, got " + std::to_string(c.per_sm));
    if (c.items * c.per_sm > 8)
      return Broken("per_sm", std::to_string(c.per_sm) + " CTAs an SM leave registers for " +
                                  std::to_string(8 / c.per_sm) + " items a thread, got " + std::to_string(c.items));
    if (c.per_sm * c.block_threads > arch.max_threads_per_sm())
      return Broken("per_sm", std::to_string(c.per_sm) + " CTAs of " + std::to_string(c.block_threads) +
                                  " threads are more than the " + std::to_string(arch.max_threads_per_sm()) +
                                  " threads an SM of " + arch.Name() + " holds");
    if (c.candidates < 32 || c.candidates > 16384)
      return Broken("candidates", "candidates must be in [32, 16384], got " + std::to_string(c.candidates));
    if (c.smem_bytes() + arch.static_smem_reserve > arch.max_smem_optin)
      return Broken("candidates", std::to_string(c.candidates) + " candidates take " + std::to_string(c.smem_bytes()) +
                                      " B of shared memory, more than a CTA can have");
    // An SM's shared memory: a CTA's most after opting in, plus the 1 KB
    // the driver reserves per CTA (H100 227 + 1 KB, A100 163 + 1 KB).
    if (static_cast<int64_t>(c.per_sm) * (c.smem_bytes() + arch.static_smem_reserve + 1024) >
        arch.max_smem_optin + 1024)
      return Broken("per_sm", std::to_string(c.per_sm) + " CTAs with " + std::to_string(c.candidates) +
                                  " candidates each take more shared memory than an SM has");
    return Status::Ok();
  }

  Status ValidateFor(const Config& cfg, const Arch& arch, const Problem& p) const override {
    const GridParams c = GridParams::Of(cfg);
    if (p.n > c.capacity())
      return Broken("items", std::to_string(c.ctas) + " CTAs x " + std::to_string(c.block_threads) + " threads x " +
                                 std::to_string(c.items) + " vectors hold rows up to " + std::to_string(c.capacity()) +
                                 " elements, n is " + std::to_string(p.n) + " (more items or CTAs)");
    if (p.batch * c.ctas > static_cast<int64_t>(arch.sm_count) * c.per_sm)
      return Broken("ctas", "batch " + std::to_string(p.batch) + " x " + std::to_string(c.ctas) +
                                " CTAs a row must be at most the " + std::to_string(arch.sm_count) + " SMs x " +
                                std::to_string(c.per_sm) + " (per_sm): the cooperative launch runs every CTA at once");
    return Status::Ok();
  }

  // Items for a row of n over `ctas` CTAs of `block` threads: the fewest
  // enumerated that hold it, 0 when none does.
  static int FitItems(DType dtype, int block, int ctas, int64_t n) {
    for (int i : Specs()[1].values) {
      GridParams g{dtype, block, i, ctas};
      if (g.capacity() >= n) return i;
    }
    return 0;
  }

  std::vector<Config> Enumerate(const Problem& p, const Arch& arch, const SpaceOptions& opts) const override {
    (void)opts;
    std::vector<Config> out;
    for (int per_sm : Specs()[6].values)
      for (int ctas : Specs()[2].values) {
        if (p.n / ctas < kMinSliceElements) continue;  // ValidateFor below keeps batch x ctas within the SMs
        // More CTAs an SM only where the rows' CTAs need them: fewer would
        // hold the same CTAs with more registers.
        if (per_sm > 1 && p.batch * ctas <= static_cast<int64_t>(arch.sm_count) * (per_sm / 2)) continue;
        const int items = FitItems(p.dtype, kBlock, ctas, p.n);
        if (items == 0) continue;
        for (int sample : Specs()[3].values) {
          GridParams g{p.dtype, kBlock, items, ctas, sample, 4096};
          g.per_sm = per_sm;
          Config c = g.ToConfig();
          if (Validate(c, arch).ok() && ValidateFor(c, arch, p).ok()) out.push_back(std::move(c));
        }
      }
    return out;
  }

  std::vector<Config> EnumerateKernels(DType dtype, const Arch& arch) const override {
    std::vector<Config> out;
    // The deterministic-mode kernels too (`ties` 1, the default's for
    // deterministic problems).
    for (int ties : {0, 1})
      for (int per_sm : Specs()[6].values)
        for (int i : Specs()[1].values) {
          GridParams g{dtype, kBlock, i, 1};  // ctas a launch argument: 1 fits any GPU
          g.ties = ties;
          g.per_sm = per_sm;
          Config c = g.ToConfig();
          if (Validate(c, arch).ok()) out.push_back(std::move(c));
        }
    return out;
  }

  // fp32 rows of 32768 to 1048576 elements, k 256 to 4096 (the DSA
  // indexer's long rows), while a row gets at least 16 CTAs: 512 threads a
  // CTA, a CTA per 2048 elements (16 at 32768, 64 at 131072, 128 from
  // 262144) up to 128 CTAs where the GPU has the SMs, else 64, halved until
  // batch x CTAs fits the SMs. H100, k 2048, ranges, L2-hot,
  // each verified exact, against the default it replaced in the same run
  // (normal / shifted / plateau / 16 values, us; docs/PERFORMANCE.md, "The
  // grid family: a row over the grid"):
  //   1 x 524288 (128 CTAs)  11.85 / 11.94 / 12.11 /  9.76 against 24.50 / 27.56 / 27.46 / 26.16
  //   1 x 131072 (64)         9.84 / 10.21 / 10.06 /  8.40 against 12.53 / 14.87 / 12.75 / 12.28
  //   2 x 524288 (64)        13.25 / 13.16 / 13.17 / 11.22 against 24.30 / 27.43 / 26.98 / 25.79
  //   4 x 262144 (32)        13.33 / 13.20 / 12.98 / 11.04 against 19.04 / 19.12 / 16.56 / 16.69
  //   4 x 524288 (32)        16.89 / 16.72 / 16.89 / 14.63 against 24.37 / 27.47 / 26.98 / 25.86
  //   8 x 131072 (16)        13.12 / 13.42 / 12.85 / 11.00 against 15.23 / 17.45 / 17.16 / 15.53
  // and from 65536 ("Programmatic dependent launch", normal / shifted):
  //   1 x 65536 (32)          9.38 /  9.60 against  9.17 / 13.20
  //   4 x 65536 (32)          9.49 /  9.78 against 11.15 / 13.31
  //   8 x 65536 (16)         10.80 / 10.80 against 13.02 / 13.42
  // and from 32768, with the bin ranked as it arrives ("The bin ranked as it
  // arrives", normal / shifted):
  //   1 x 32768 (16)          8.60 /  8.99 against 10.20 / 12.20
  //   8 x 32768 (16)          8.95 /  9.31 against 12.10 / 12.34
  //   1 x 49152 (16)          9.63 /  9.99 against 10.72 / 12.80
  // Deterministic problems too, with `ties` 1: the kernel takes the
  // lowest-index ties itself (H100, k 2048, ranges, us, without / with the
  // flag: 1 x 524288 9.37 / 10.14, where the resident default took 26.27 and
  // this one with the tie pass 48.96; 1 x 131072 7.83 / 7.95; 4 x 65536
  // 8.00 / 8.05; docs/PERFORMANCE.md, "Deterministic mode").
  std::optional<Config> Default(const Problem& p, const Arch& arch) const override {
    if (p.dtype != DType::kF32 || p.n < kDefaultShortestRow || p.n > kDefaultLongestRow || p.k < kDefaultLeastK ||
        p.k > kDefaultMostK)
      return std::nullopt;
    int top = arch.sm_count >= 128 ? 128 : 64;
    while (top > kDefaultLeastCtas && top * kDefaultSliceElements > p.n) top /= 2;
    int ctas = top, per_sm = 1;
    while (ctas >= kDefaultLeastCtas && p.batch * ctas > arch.sm_count) ctas /= 2;
    if (ctas < kDefaultLeastCtas) {
      // Too many rows for 16 CTAs each, one an SM: two an SM, as many CTAs
      // a row as fit, at least 4, each slice at most 4 vectors a thread.
      per_sm = 2, ctas = top;
      while (ctas >= kDefaultLeastCtasTwoAnSm && p.batch * ctas > 2LL * arch.sm_count) ctas /= 2;
      if (ctas < kDefaultLeastCtasTwoAnSm) return std::nullopt;
    }
    const int items = FitItems(p.dtype, kBlock, ctas, p.n);
    if (items == 0) return std::nullopt;
    GridParams g{p.dtype, kBlock, items, ctas, 256, 4096, p.deterministic ? 1 : 0};
    g.per_sm = per_sm;
    const Config c = g.ToConfig();
    if (!Validate(c, arch).ok() || !ValidateFor(c, arch, p).ok()) return std::nullopt;
    return c;
  }

  // A winner carried to another problem takes the ties in the kernel when
  // that problem is deterministic (`ties` is not tuned).
  std::optional<Config> Adapt(const Config& tuned, const Problem& tuned_p, const Problem& p,
                              const Arch& arch) const override {
    std::optional<Config> c = Family::Adapt(tuned, tuned_p, p, arch);
    if (c) c = WithModesOf(*c, p);
    return c;
  }

  // Deterministic problems take the kernel with the ties in it.
  Config WithModesOf(const Config& c, const Problem& p) const override {
    GridParams g = GridParams::Of(c);
    g.ties = p.deterministic ? 1 : 0;
    return g.ToConfig();
  }

  // With `ties` 1, deterministic mode in the kernel: canonical keys, and
  // ties taken by position (the slices follow the CTAs, so a CTA's ties
  // follow those of the CTAs before it; the gathered bin's by their
  // columns): no tie pass.
  bool TakesLowestIndexTies(const Config& c) const override { return GridParams::Of(c).ties == 1; }

  std::string KernelKey(const Config& cfg) const override {
    const GridParams c = GridParams::Of(cfg);
    std::ostringstream s;
    s << "grid_" << DTypeName(c.dtype) << "_b" << c.block_threads << "_i" << c.items;
    if (c.ties) s << "_t1";
    if (c.per_sm != 1) s << "_m" << c.per_sm;
    return s.str();
  }

  std::vector<KernelSource> Sources(const Config& cfg) const override {
    const GridParams c = GridParams::Of(cfg);
    std::ostringstream pol;
    pol << "topk::grid::Policy<" << static_cast<int>(c.dtype) << ", " << c.block_threads << ", " << c.items << ", "
        << (c.ties ? "true" : "false");
    if (c.per_sm != 1) pol << ", " << c.per_sm;
    pol << ">";
    KernelSource s;
    s.key = KernelKey(cfg);
    s.file_name = s.key + ".cu";
    s.name_expression = "topk::grid_topk_kernel<" + pol.str() + ">";
    std::ostringstream t;
    t << "// Generated by topk-tune: kernel " << s.key << ".\n"
      << "#include \"topk/grid/grid_select.cuh\"\n\n"
      << "namespace topk_generated {\n"
      << "using P = " << pol.str() << ";\n"
      << "static_assert(P::kStaticWords == " << kStaticWords << ", \"host and template disagree on shared memory\");\n"
      << "static_assert(topk::grid::kRowWords == " << kRowWords << ", \"host and template disagree on the workspace\");\n"
      << "static_assert(topk::grid::row_words(129) == " << RowWords(129) << " && topk::grid::row_words(4096) == "
      << RowWords(4096) << ", \"host and template disagree on a row's stride\");\n"
      << "static_assert(topk::grid::kMaxSample == " << kMaxSample << ", \"host and template disagree on the sample\");\n"
      << "static_assert(sizeof(TopkArgs) == " << TOPK_ARGS_SIZE << ", \"TopkArgs layout\");\n"
      << "}  // namespace topk_generated\n\n"
      << "template __global__ void " << s.name_expression << "(TopkArgs);\n";
    s.text = t.str();
    return {FinishSource(std::move(s))};
  }

  LaunchPlan Plan(const Config& cfg, const Problem& p, const Arch& arch, int max_cache_keys) const override {
    (void)arch, (void)max_cache_keys;
    const GridParams c = GridParams::Of(cfg);
    Stage s;
    s.block = static_cast<unsigned>(c.block_threads);
    s.ctas_per_row = c.ctas;
    s.cooperative = true;
    s.smem_bytes = c.smem_bytes();
    s.args.buffer = c.candidates;
    s.args.rounds = c.sample;
    s.args.cache_cap = c.ctas;
    s.args.smem_bytes = c.smem_bytes();
    LaunchPlan plan{{s}};
    plan.workspace_bytes = c.workspace_bytes(p.batch);
    plan.awaits_prior_grids = true;
    return plan;
  }
};

}  // namespace

int GridParams::smem_bytes() const { return (kStaticWords + 2 * candidates) * 4; }

size_t GridParams::workspace_bytes(int64_t batch) const {
  return static_cast<size_t>(batch) * static_cast<size_t>(RowWords(candidates)) * 4;
}

GridParams GridParams::Of(const Config& c) {
  return GridParams{c.dtype,          c.Get("block_threads"),
                    c.Get("items"),   c.Get("ctas"),
                    c.Get("sample"),  c.Get("candidates"),
                    c.Has("ties") ? c.Get("ties") : 0, c.Has("per_sm") ? c.Get("per_sm") : 1};
}

Config GridParams::ToConfig() const {
  Config c;
  c.family = "grid";
  c.dtype = dtype;
  c.params = {{"block_threads", block_threads}, {"items", items},           {"ctas", ctas},
              {"sample", sample},               {"candidates", candidates}, {"ties", ties},
              {"per_sm", per_sm}};
  return c;
}

std::shared_ptr<const Family> MakeGridFamily() { return std::make_shared<Grid>(); }

}  // namespace topk::gen
