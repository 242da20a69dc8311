#include "generator/resident.hpp"

#include <algorithm>
#include <sstream>

#include "generator/filter.hpp"
#include "topk/args.h"

namespace topk::gen {
namespace {

Status Broken(const std::string& constraint, const std::string& what) {
  return Status(Code::kInvalidArgument, "constraint " + constraint, what);
}

constexpr int64_t kShortestRow = 513;    // shorter rows fit a warp: the warp family's
constexpr int64_t kLongestRow = 16384;   // 1024 threads x 16 keys in registers
constexpr int64_t kLongestCtaRow = 65536;  // one CTA's positions fit 16 bits
constexpr int64_t kDefaultLongestClusterRow = 131072;  // a cluster a row, the default's
constexpr int64_t kDefaultClusterRows = 15;            // the most rows the cluster default serves
constexpr int64_t kDefaultLongestSharedRow = 524288;   // 16 CTAs, 16 keys a thread in registers and shared memory
constexpr int64_t kDefaultLeastLongRowK = 64;          // past 131072 smaller fp32 k keep the radix default
constexpr int64_t kDefaultLongestEightCtaRow = 262144;  // 8 CTAs, 16 keys a thread in registers and shared memory
constexpr int kMaxRowsPerCta = 8;        // a named barrier and 3 KB of shared memory each
constexpr int kGroupStaticBytes = 3120;  // resident::Group: 3 histograms and 12 words

const std::vector<ParamSpec>& Specs();

// Keys per thread for a row of n over `threads` threads (a group, or a
// cluster's groups): the smallest enumerated value that holds the row, or 0
// when none does or the threads would hold four times the row or more.
int FitItems(int64_t threads, int64_t n) {
  for (int i : Specs()[2].values)
    if (threads * i >= n) return threads * i >= 4 * n ? 0 : i;
  return 0;
}

// Shared-memory keys per thread beside `items` registers for a row of n over
// `threads` threads: the smallest enumerated value that holds it, or 0.
int FitShared(int64_t threads, int items, int64_t n) {
  for (int s : Specs()[3].values)
    if (s > 0 && threads * (items + s) >= n) return s;
  return 0;
}

const std::vector<ParamSpec>& Specs() {
  static const std::vector<ParamSpec> specs = {
      {"block_threads", "b", "threads per CTA (block / group rows per CTA)", {128, 256, 512, 1024}, true},
      {"group_threads", "g", "threads per row, the row in their registers", {64, 128, 256, 512, 1024}, true},
      {"items", "i", "keys per thread in registers: rows up to group x items", {4, 8, 16}, true},
      {"shared", "s",
       "more keys per thread in shared memory, for rows the registers do not hold (group x shared x 4 bytes)",
       {0, 16, 48}, true, 0},
      {"cluster", "c",
       "CTAs per row (2-16: a thread-block cluster, the row split over their registers; one binary for every size)",
       {1, 2, 4, 8, 16}, true, 1},
  };
  return specs;
}

class Resident final : public Family {
 public:
  const std::string& name() const override {
    static const std::string n = "resident";
    return n;
  }
  const std::string& summary() const override {
    static const std::string s =
        "a group of threads holds the row in registers (and shared memory past 16 keys a thread), 8-bit digits "
        "found over them, several rows per CTA (rows of 513 to 65536) or a cluster's CTAs per row (up to 1048576): "
        "robust to the value distribution";
    return s;
  }
  const std::vector<ParamSpec>& params() const override { return Specs(); }

  Status Validate(const Config& cfg, const Arch& arch) const override {
    const ResidentParams c = ResidentParams::Of(cfg);
    TOPK_RETURN_IF_ERROR(ValidateBlock(c.block_threads, arch));
    if (c.group_threads < 32 || c.group_threads % 32 != 0 || c.group_threads > c.block_threads ||
        c.block_threads % c.group_threads != 0)
      return Broken("group", "group_threads must be a multiple of 32 that divides block_threads " +
                                 std::to_string(c.block_threads) + ", got " + std::to_string(c.group_threads));
    if (c.items < 1 || c.items > 32)
      return Broken("items", "items must be in [1, 32], got " + std::to_string(c.items));
    if (c.shared < 0 || c.shared > 64)
      return Broken("shared", "shared must be in [0, 64], got " + std::to_string(c.shared));
    // Static: each group's record, and in cluster mode the partial sums.
    const int static_bytes = c.rows_per_cta() * kGroupStaticBytes + (c.cluster > 1 ? 4 * c.block_threads : 0);
    if (c.shared_bytes() + static_bytes > arch.max_smem_optin)
      return Broken("shared", std::to_string(c.block_threads) + " threads x " + std::to_string(c.shared) +
                                  " shared keys take " + std::to_string(c.shared_bytes()) +
                                  " B of shared memory, more than the " + std::to_string(arch.max_smem_optin) +
                                  " B a CTA can have beside its histograms");
    if (c.cluster == 1 && c.max_row() > kLongestCtaRow)
      return Broken("shared", "one CTA's row positions fit 16 bits: group x (items + shared) must be at most " +
                                  std::to_string(kLongestCtaRow) + ", got " + std::to_string(c.max_row()));
    TOPK_RETURN_IF_ERROR(ValidateCluster(c.cluster, arch));
    if (c.cluster > 1 && c.group_threads != c.block_threads)
      return Broken("cluster", "cluster mode holds one group per CTA: group_threads must equal block_threads");
    if (c.rows_per_cta() > kMaxRowsPerCta)
      return Broken("group", "at most " + std::to_string(kMaxRowsPerCta) + " rows per CTA (block " +
                                 std::to_string(c.block_threads) + " / group " + std::to_string(c.group_threads) + ")");
    return Status::Ok();
  }

  Status ValidateFor(const Config& cfg, const Arch& arch, const Problem& p) const override {
    (void)arch;
    const ResidentParams c = ResidentParams::Of(cfg);
    if (p.n > c.capacity())
      return Broken("items", std::to_string(c.cluster) + " x " + std::to_string(c.group_threads) + " threads of " +
                                 std::to_string(c.items + c.shared) + " keys hold rows up to " +
                                 std::to_string(c.capacity()) + ", n is " + std::to_string(p.n) +
                                 " (more items or shared keys, a larger group or cluster)");
    return Status::Ok();
  }

  std::vector<Config> Enumerate(const Problem& p, const Arch& arch, const SpaceOptions& opts) const override {
    std::vector<Config> out;
    if (p.n < kShortestRow) return out;
    auto add = [&](const ResidentParams& r) {
      Config c = r.ToConfig();
      if (Validate(c, arch).ok() && ValidateFor(c, arch, p).ok()) out.push_back(std::move(c));
    };
    // The largest cluster of which the GPU runs one a row at once (1: none;
    // Arch::max_resident_clusters).
    int max_cl = 1;
    if (opts.include_cluster && arch.clusters())
      for (int cl : {2, 4, 8, 16})
        if (cl <= arch.max_cluster() && p.batch <= arch.max_resident_clusters(cl) && p.n / cl >= 1024) max_cl = cl;
    // Keys in shared memory past 16 a thread only where no register-only
    // config holds the row: 2-2.5x slower per key on the H100 (1 x 131072:
    // cluster 8 in registers 16.2 us, cluster 4 with 16 shared keys 22.3;
    // 64 x 32768: cluster 2 17.6, one CTA with 16 shared keys 27.6).
    if (p.n > kLongestRow * max_cl) {
      const int64_t threads = 1024LL * max_cl;
      ResidentParams r{p.dtype, 1024, 1024, 16};
      r.cluster = max_cl;
      r.shared = FitShared(threads, 16, p.n);
      if (r.shared > 0) add(r);
    }
    if (p.n <= kLongestRow) {
      for (int g : Specs()[1].values)
        for (int rows : {1, 2, 4}) {
          const int b = g * rows;
          if (b < 128 || b > 1024) continue;
          // Several rows per CTA only while every SM still gets a CTA.
          if (rows > 1 && p.batch / rows < arch.sm_count) continue;
          const int items = FitItems(g, p.n);
          if (items == 0) continue;
          Config c = ResidentParams{p.dtype, b, g, items}.ToConfig();
          if (Validate(c, arch).ok() && ValidateFor(c, arch, p).ok()) out.push_back(std::move(c));
        }
    }
    // Cluster mode where the rows are few: every cluster resident at once (a
    // CTA an SM), every CTA at least 1024 keys, the CTAs' registers not more
    // than four times the row's need.
    if (opts.include_cluster && arch.clusters())
      for (int cl : {2, 4, 8, 16}) {
        if (cl > arch.max_cluster() || p.batch > arch.max_resident_clusters(cl) || p.n / cl < 1024) continue;
        for (int g : {512, 1024}) {
          const int items = FitItems(static_cast<int64_t>(cl) * g, p.n);
          if (items == 0) continue;
          ResidentParams r{p.dtype, g, g, items};
          r.cluster = cl;
          add(r);
        }
      }
    // The default, where the rules above do not reach it (its clusters hold
    // 16 keys a thread at 65536 and 131072, where FitItems takes the fewest).
    if (auto d = Default(p, arch); d && (opts.include_cluster || ResidentParams::Of(*d).cluster == 1) &&
                                    std::find(out.begin(), out.end(), *d) == out.end())
      out.push_back(*d);
    return out;
  }

  std::vector<Config> EnumerateKernels(DType dtype, const Arch& arch) const override {
    std::vector<Config> out;
    for (int g : Specs()[1].values)
      for (int rows : {1, 2, 4})
        for (int items : Specs()[2].values) {
          const int b = g * rows;
          if (b < 128 || b > 1024) continue;
          Config c = ResidentParams{dtype, b, g, items}.ToConfig();
          if (Validate(c, arch).ok()) out.push_back(std::move(c));
        }
    // 16 keys a thread in registers and the rest in shared memory, one CTA
    // of 1024 threads per row (Enumerate's single-CTA long rows).
    for (int sh : Specs()[3].values) {
      ResidentParams r{dtype, 1024, 1024, 16};
      r.shared = sh;
      Config c = r.ToConfig();
      if (sh > 0 && Validate(c, arch).ok()) out.push_back(std::move(c));
    }
    // The clustered binaries (one serves every cluster size).
    if (arch.clusters()) {
      for (int g : {512, 1024})
        for (int items : Specs()[2].values) {
          ResidentParams r{dtype, g, g, items};
          r.cluster = 2;
          Config c = r.ToConfig();
          if (Validate(c, arch).ok()) out.push_back(std::move(c));
        }
      for (int sh : Specs()[3].values) {
        ResidentParams r{dtype, 1024, 1024, 16};
        r.cluster = 2;
        r.shared = sh;
        Config c = r.ToConfig();
        if (sh > 0 && Validate(c, arch).ok()) out.push_back(std::move(c));
      }
    }
    return out;
  }

  // Rows of 513 to 8192 elements (H100, normal rows, every enumerated config
  // against the radix default, docs/PERFORMANCE.md): one row per CTA, 4 keys
  // per thread while the rows are few (1 x 1024 k32 2.76 us against 4.42,
  // 64 x 2048 k64 3.91 against 5.34, 64 x 4096 k128 4.70 against 7.20), 8
  // once there are more than two rows per SM (4096 x 1024 k32 18.2 against
  // 114, 1024 x 4096 k128 22.7 against 50.6, bf16 1024 x 2048 k16 9.7
  // against 34.9); the group the smallest power of two that then holds the
  // row, at most 1024 threads (64 x 8192 k256 7.38 against 8.46). Longer rows
  // in one CTA lost to the radix default (1 x 16384: 10.07 against 9.00).
  //
  // Up to 15 rows of 8193 to 131072 elements on a GPU with clusters: a
  // cluster per row, every cluster resident at once. 512 threads of 8 keys
  // over 4 CTAs up to 16384 keys, of 16 keys over 8 CTAs up to 65536; past
  // that 16 CTAs for one or two rows (1 x 131072 k2048: 11.46 us against the
  // radix default's 13.76), 8 CTAs of 1024 threads for more, or where
  // 16-CTA clusters do not all run at once (8 x 131072 k2048: 14.30 against
  // 22.22 for 16 CTAs and 20.48 for the radix default). Measured with 1, 2,
  // 8 and 13-15 rows on an H200 and 12 on an H100, against the radix
  // default on normal and shifted rows, each verified exact
  // (docs/PERFORMANCE.md, "The defaults for rows over 8192"): 0.67-1.25x its
  // time on normal rows, at most 1.36x its own normal time on shifted rows,
  // where the radix default took up to 2.11x; 13 to 15 rows on an H200
  // likewise (15 x 131072 k8: 14.20 / 15.65 us against 14.27 / 29.94; the
  // slowest against it 13 x 32768 k8, 9.30 / 9.35 against 8.20 / 15.00). At
  // 16 rows the 8-CTA clusters ran 1.5-1.8x slower than at 12 (H100, 16 x
  // 65536 k8: 17.28 us against 11.13), more clusters than the GPU runs at
  // once: 16 rows and more go to the filter family.
  //
  // Up to max_resident_clusters(16) rows (7 on an H200) of 131073 to 524288
  // elements, fp32 with k >= 64, 16-bit keys with any k: 16 CTAs of 1024
  // threads, 16 keys each in registers and past 262144 16 more in shared
  // memory. Scored as the tuner
  // scores, max(normal, shifted / 1.25), against the radix default (H200,
  // 1-7 rows of 196608, 262144 and 524288, k 8 to 2048, each verified exact;
  // docs/PERFORMANCE.md): 1 x 524288 k2048 23.35 / 26.24 us against 20.88 /
  // 35.65, 1 x 262144 k2048 15.45 / 17.81 against 17.47 / 25.21, bf16
  // 1 x 262144 k64 12.82 / 12.55 against 11.50 / 18.66. For fp32 below k 64
  // the radix default scores better on 10 of 16 shapes (1 x 524288 k8:
  // 15.48 / 25.43 against 23.15 / 22.80) and stays, as it does for longer
  // rows and more rows. 16-bit keys at k 8 score better or within 1% on
  // three of four shapes (bf16 1 x 262144 k8: 12.68 / 12.55 against 11.49 /
  // 18.21; 1 x 524288 k8: 20.57 / 20.26 against 14.91 / 23.99, 7% worse).
  // More rows, up to 15 (8-CTA clusters at once) of up to 262144 with
  // k >= 64, take 8 CTAs with 16 shared keys a thread (H100: 8 x 262144
  // k2048 25.81 / 26.19 us against the radix default's 29.00 / 36.42; bf16
  // 15 x 262144 k64 20.96 / 20.53 against 16.77 / 27.24); at k 8 the radix
  // default scores better (8 x 262144: 16.58 / 25.94 against 22.67 /
  // 22.35), and past 262144 48 shared keys a thread are too slow (8 x 524288
  // k2048: 62.41 against 31.91 / 60.22).
  std::optional<Config> Default(const Problem& p, const Arch& arch) const override {
    if (p.n > kResidentDefaultLongestCtaRow) {
      if (!arch.clusters()) return std::nullopt;
      ResidentParams r{p.dtype, 512, 512, p.n <= 16384 ? 8 : 16};
      if (p.n <= kDefaultLongestClusterRow) {
        if (p.batch > kDefaultClusterRows) return std::nullopt;
        r.cluster = p.n <= 16384 ? 4 : p.n <= 65536 ? 8 : 16;
        if (r.cluster == 16 && (p.batch > 2 || p.batch > arch.max_resident_clusters(16))) {
          r = ResidentParams{p.dtype, 1024, 1024, 16};
          r.cluster = 8;
        }
      } else {
        // Longer rows: 16 CTAs of 1024 threads, 16 keys each in registers
        // and, past 262144, 16 more in shared memory; more rows than 16-CTA
        // clusters run at once, up to 262144 and k >= 64: 8 CTAs, 16 more
        // keys each in shared memory.
        if (p.n > kDefaultLongestSharedRow || (p.dtype == DType::kF32 && p.k < kDefaultLeastLongRowK))
          return std::nullopt;
        r = ResidentParams{p.dtype, 1024, 1024, 16};
        r.cluster = 16;
        if (p.batch > arch.max_resident_clusters(16)) {
          if (p.n > kDefaultLongestEightCtaRow || p.k < kDefaultLeastLongRowK) return std::nullopt;
          r.cluster = 8;
        }
        if (p.n > r.capacity()) r.shared = FitShared(1024LL * r.cluster, 16, p.n);
      }
      const Config c = r.ToConfig();
      if (p.batch > arch.max_resident_clusters(r.cluster) || !Validate(c, arch).ok() || !ValidateFor(c, arch, p).ok())
        return std::nullopt;
      return c;
    }
    if (p.n < kShortestRow) return std::nullopt;
    // At least 4 rows per SM of 2048 fp32 (4096 16-bit) to 8192 elements with
    // k <= n / 8, where the config fits: the filter family's several rows per
    // CTA (generator/filter.cpp).
    if (FilterShortRowDefault(p, arch)) return std::nullopt;
    int items = p.batch > 2LL * arch.sm_count ? 8 : 4;
    int g = 64;
    while (g < 1024 && static_cast<int64_t>(g) * items < p.n) g *= 2;
    while (static_cast<int64_t>(g) * items < p.n) items *= 2;
    return ResidentParams{p.dtype, g, g, items}.ToConfig();
  }

  // Its kernels take the lowest-index ties themselves (a second search over
  // the ties' positions): deterministic mode runs no tie pass after them.
  bool TakesLowestIndexTies(const Config& c) const override {
    (void)c;
    return true;
  }

  // A winner carries over to rows it holds without idling more than three
  // quarters of its group (the enumeration's rule); otherwise the default.
  std::optional<Config> Adapt(const Config& tuned, const Problem& tuned_p, const Problem& p,
                              const Arch& arch) const override {
    (void)tuned_p;
    const ResidentParams c = ResidentParams::Of(tuned);
    if (c.capacity() >= 4 * p.n || !gen::ValidateFor(tuned, arch, p).ok()) return std::nullopt;
    return tuned;
  }

  std::string KernelKey(const Config& cfg) const override {
    const ResidentParams c = ResidentParams::Of(cfg);
    std::ostringstream s;
    s << "resident_" << DTypeName(c.dtype) << "_b" << c.block_threads << "_g" << c.group_threads << "_i" << c.items;
    if (c.shared > 0) s << "_s" << c.shared;
    if (c.cluster > 1) s << "_cN";
    return s.str();
  }

  std::vector<KernelSource> Sources(const Config& cfg) const override {
    const ResidentParams c = ResidentParams::Of(cfg);
    std::ostringstream pol;
    pol << "topk::resident::Policy<" << static_cast<int>(c.dtype) << ", " << c.block_threads << ", "
        << c.group_threads << ", " << c.items;
    if (c.shared > 0) pol << ", " << c.shared;  // the text of register-only kernels as before
    pol << ">";
    KernelSource s;
    s.key = KernelKey(cfg);
    s.file_name = s.key + ".cu";
    s.name_expression =
        std::string(c.cluster > 1 ? "topk::resident_cluster_kernel<" : "topk::resident_kernel<") + pol.str() + ">";
    std::ostringstream t;
    t << "// Generated by topk-tune: kernel " << s.key << ".\n"
      << "#include \"topk/resident/resident_select.cuh\"\n\n"
      << "namespace topk_generated {\n"
      << "using P = " << pol.str() << ";\n"
      << "static_assert(P::kRows == " << c.rows_per_cta() << ", \"host and template disagree on rows per CTA\");\n"
      << "static_assert(P::kSharedBytes == " << c.shared_bytes() << ", \"host and template disagree on shared memory\");\n"
      << "static_assert(sizeof(TopkArgs) == " << TOPK_ARGS_SIZE << ", \"TopkArgs layout\");\n"
      << "}  // namespace topk_generated\n\n"
      << "template __global__ void " << s.name_expression << "(TopkArgs);\n";
    s.text = t.str();
    return {FinishSource(std::move(s))};
  }

  LaunchPlan Plan(const Config& cfg, const Problem& p, const Arch& arch, int max_cache_keys) const override {
    (void)p, (void)arch, (void)max_cache_keys;
    const ResidentParams c = ResidentParams::Of(cfg);
    Stage s;
    s.block = static_cast<unsigned>(c.block_threads);
    s.rows_per_cta = c.rows_per_cta();
    s.cluster = static_cast<unsigned>(c.cluster);
    s.smem_bytes = c.shared_bytes();
    return LaunchPlan{{s}, 0, /*awaits_prior_grids=*/true};
  }
};

}  // namespace

ResidentParams ResidentParams::Of(const Config& c) {
  ResidentParams r{c.dtype, c.Get("block_threads"), c.Get("group_threads"), c.Get("items")};
  r.shared = c.Get("shared");
  r.cluster = c.Get("cluster");
  return r;
}

Config ResidentParams::ToConfig() const {
  Config c;
  c.family = "resident";
  c.dtype = dtype;
  c.params = {{"block_threads", block_threads}, {"group_threads", group_threads}, {"items", items},
              {"shared", shared},          {"cluster", cluster}};
  return c;
}

std::shared_ptr<const Family> MakeResidentFamily() { return std::make_shared<Resident>(); }

}  // namespace topk::gen
