#include "generator/filter.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <utility>

#include "generator/resident.hpp"
#include "topk/args.h"

namespace topk::gen {
namespace {

// An upper bound of filter::Control's size (filter_select.cuh; each
// generated source asserts it).
constexpr int kControlBytes = 320;

// filter::rows_smem_bytes: a row's histogram and list, with several rows per
// CTA each rounded to 16 bytes.
int RowsSmem(int hist_bytes, int capacity, int rows) {
  const int one = hist_bytes + capacity * 8;
  return rows == 1 ? one : rows * ((one + 15) / 16 * 16);
}

// Two 512-thread CTAs an SM: the 16-byte loads a thread a step enumerated
// (the `unroll` spec's values and 3, which the default takes on rows past
// 65536; the step of 512 threads then still leaves room for k 2048 in a
// list of 8192).
constexpr int kTwoCtaUnrolls[] = {1, 2, 3};

// Several rows per CTA: enumerated for rows up to this length, as (block,
// rows) pairs that give each row 128 or 256 threads.
constexpr int64_t kMultiRowLongestRow = 16384;
constexpr std::pair<int, int> kMultiRowShapes[] = {{256, 2}, {512, 2}, {512, 4}, {1024, 4}, {1024, 8}};

// Several rows per CTA only while ceil(batch / rows) still gives every SM a
// CTA (enumeration and Adapt).
bool RowsFillGpu(int64_t batch, int rows, const Arch& arch) { return (batch + rows - 1) / rows >= arch.sm_count; }

// The shortest row a group's guess takes its sample from: 512 16-byte
// vectors (filter_select.cuh, guess; 256 for 16-bit keys in groups of 128,
// so the bound is conservative for them). Shorter rows start open.
int64_t GroupSampleRow(DType dtype) { return 512LL * (16 / DTypeSize(dtype)); }

Status Broken(const std::string& constraint, const std::string& what) {
  return Status(Code::kInvalidArgument, "constraint " + constraint, what);
}

const std::vector<ParamSpec>& Specs() {
  static const std::vector<ParamSpec> specs = {
      {"block_threads", "b", "threads per CTA (one CTA per row)", {256, 512, 1024}, true},
      {"unroll", "u", "16-byte loads per thread per step of the row", {1, 2}, true},
      {"radix_bits", "r", "digit width of the exact select that cuts the candidate list", {8, 11}, true},
      {"slack", "s", "steps of the row the candidate list holds beyond k (more: fewer cuts)", {1, 2, 4}, false},
      {"cluster", "c", "CTAs per row (2-16: a thread-block cluster, slices kept in shared memory, a guessed threshold)",
       {1, 2, 4, 8, 16}, true, 1},
      {"sample", "p", "cluster mode: keys in the merged sample the threshold is guessed from (split over the CTAs)",
       {1024, 2048, 4096}, false, 4096},
      {"margin", "m", "cluster mode: the guess's over-selection in percent of k (more: fewer retries, more candidates)",
       {25, 50, 100}, false, 50},
      {"recovery", "v", "cluster mode: retries that move the guess along the sample before the key interval halves",
       {0, 2, 4}, false, 2},
      {"guess", "g",
       "one CTA per row: start from a threshold guessed from a sample of the row, runs of 32 consecutive 16-byte "
       "vectors evenly spaced over it (1), "
       "or let every key enter until the first cut (0); 2 guesses the sample's largest key, too high on purpose, and 3 "
       "streams without barriers even where the sample says the list may overflow (tests)",
       {0, 1, 2, 3}, false, 0},
      {"rows", "w",
       "rows per CTA (not in cluster mode), each row a group of block_threads / rows threads with its own candidate "
       "list (short rows, many of them)",
       {1, 2, 4, 8}, true, 1},
      {"ctas", "o",
       "one CTA per row: CTAs an SM the kernel is compiled to hold (its registers capped at 65536 / (block_threads x "
       "ctas)); 2 lets two 512-thread rows share an SM where the rows outnumber the SMs",
       {1, 2}, true, 1},
  };
  return specs;
}

class Filter final : public Family {
 public:
  const std::string& name() const override {
    static const std::string n = "filter";
    return n;
  }
  const std::string& summary() const override {
    static const std::string s =
        "one read of the row, a running or guessed threshold, an exact select of the candidates: robust to the value "
        "distribution";
    return s;
  }
  const std::vector<ParamSpec>& params() const override { return Specs(); }

  Status Validate(const Config& cfg, const Arch& arch) const override {
    const FilterParams c = FilterParams::Of(cfg);
    TOPK_RETURN_IF_ERROR(ValidateBlock(c.block_threads, arch));
    if (c.block_threads < 64) return Broken("block", "the filter family needs at least 64 threads");
    if (c.rows != 1 && c.rows != 2 && c.rows != 4 && c.rows != 8)
      return Broken("rows", "rows must be 1, 2, 4 or 8 per CTA, got " + std::to_string(c.rows));
    if (c.block_threads % c.rows != 0 || c.group() % 32 != 0 || c.group() < 64)
      return Broken("rows", std::to_string(c.rows) + " rows per CTA of " + std::to_string(c.block_threads) +
                                " threads leave " + std::to_string(c.block_threads / c.rows) +
                                " a row; the filter family needs at least 64, a multiple of 32");
    if (c.rows > 1 && c.cluster > 1)
      return Broken("rows", "several rows per CTA apply to one CTA per row, got cluster " + std::to_string(c.cluster));
    if (c.ctas != 1 && c.ctas != 2) return Broken("ctas", "ctas must be 1 or 2 per SM, got " + std::to_string(c.ctas));
    if (c.ctas > 1 && (c.cluster > 1 || c.rows > 1 || c.block_threads * c.ctas > 1024))
      return Broken("ctas", std::to_string(c.ctas) + " CTAs an SM apply to one CTA per row and one row per CTA of at "
                            "most " + std::to_string(1024 / c.ctas) + " threads, got block_threads " +
                            std::to_string(c.block_threads) + ", cluster " + std::to_string(c.cluster) + ", rows " +
                            std::to_string(c.rows));
    if (c.unroll < 1 || c.unroll > 4)
      return Broken("unroll", "unroll must be 1, 2, 3 or 4, got " + std::to_string(c.unroll));
    if (c.radix_bits != 8 && c.radix_bits != 11)
      return Broken("radix", "radix_bits must be 8 or 11, got " + std::to_string(c.radix_bits));
    if (c.slack < 1 || c.slack > 16) return Broken("slack", "slack must be in [1, 16], got " + std::to_string(c.slack));
    if (c.tile() > c.max_capacity())
      return Broken("capacity", "a step of " + std::to_string(c.tile()) + " elements exceeds the list's " +
                                    std::to_string(c.max_capacity()));
    TOPK_RETURN_IF_ERROR(ValidateCluster(c.cluster, arch));
    if (c.guess < 0 || c.guess > 3)
      return Broken("guess", "guess must be 0, 1, 2 or 3, got " + std::to_string(c.guess));
    if (c.guess != 0 && c.cluster > 1)
      return Broken("guess", "guess applies to one CTA per row (cluster mode always guesses from its merged sample), "
                             "got cluster " +
                                 std::to_string(c.cluster));
    if (c.cluster == 1) {
      // One CTA per row has no sample: the cluster-mode knobs stay at their
      // defaults, so that one launch has one id.
      if (c.sample != FilterParams{}.sample || c.margin != FilterParams{}.margin ||
          c.recovery != FilterParams{}.recovery)
        return Broken("cluster", "sample, margin and recovery apply to cluster mode only (cluster 2-16), got cluster 1 "
                                 "with sample " +
                                     std::to_string(c.sample) + ", margin " + std::to_string(c.margin) +
                                     ", recovery " + std::to_string(c.recovery));
    } else {
      if (c.sample < 64 || c.sample > 16384 || (c.sample & (c.sample - 1)) != 0)
        return Broken("sample", "sample must be a power of two in [64, 16384] keys, got " + std::to_string(c.sample));
      if (c.sample > c.max_capacity())
        return Broken("sample", "a sample of " + std::to_string(c.sample) + " keys exceeds the " +
                                    std::to_string(c.max_capacity()) +
                                    " the threads hold while selecting (smaller sample or more threads)");
      // A negative margin guesses too high on purpose, one above 400 percent
      // too low (the kernel keeps only [0, 400] inside the list's capacity):
      // rows then take the recovery rounds (tests).
      if (c.margin < -90 || c.margin > 1000)
        return Broken("margin", "margin must be in [-90, 1000] percent, got " + std::to_string(c.margin));
      if (c.recovery < 0 || c.recovery > 4)
        return Broken("recovery", "recovery must be 0 to 4 retries along the sample, got " + std::to_string(c.recovery));
    }
    return Status::Ok();
  }

  Status ValidateFor(const Config& cfg, const Arch& arch, const Problem& p) const override {
    const FilterParams c = FilterParams::Of(cfg);
    // A step as large as the list is taken one load a thread at a time
    // (room(); filter_select.cuh, filter_step).
    if (p.k + c.room() > c.max_capacity())
      return Broken("capacity", "k " + std::to_string(p.k) + " plus " +
                                    (c.room() < c.tile() ? "one 16-byte load a thread (" + std::to_string(c.room()) +
                                                               " elements; a step of " + std::to_string(c.tile()) +
                                                               " is the whole list)"
                                                         : "a step of " + std::to_string(c.room()) + " elements") +
                                    " exceeds the list's " + std::to_string(c.max_capacity()) +
                                    " (fewer threads per step, or more threads)");
    if (c.cluster > 1) {
      // The guess from the sample lands k <= survivors <= capacity only if
      // the list's room beyond k spans about three standard deviations of the
      // guess on either side (in sample ranks: room >= 6 sqrt(mid rank));
      // a narrower room fails often and pays the retry rounds (measured: 17.5
      // us on one input, 37 on another).
      const double per_rank = static_cast<double>(p.n) / c.sample;
      const double expect = static_cast<double>(p.k) / per_rank;
      const double room = (c.capacity(p.k) - static_cast<double>(p.k)) / per_rank;
      if (room < 6.0 * std::sqrt(expect + room / 2))
        return Broken("sample", "a sample of " + std::to_string(c.sample) + " keys of a row of " + std::to_string(p.n) +
                                    " guesses too coarsely for a list of " + std::to_string(c.capacity(p.k)) +
                                    " with k " + std::to_string(p.k) + " (more sample or more slack)");
    }
    // Each row of a CTA past the first has a control block of its own.
    const int smem = (c.cluster > 1 ? c.cluster_base_smem(p.k) : c.smem_bytes(p.k)) + arch.static_smem_reserve +
                     (c.rows - 1) * kControlBytes;
    if (smem > arch.max_smem_optin)
      return Broken("smem", "shared memory " + std::to_string(smem) + " B exceeds " + arch.Name() + "'s " +
                                std::to_string(arch.max_smem_optin) + " B per block");
    if (c.ctas > 1 && c.ctas * smem > arch.max_smem_optin)
      return Broken("ctas", std::to_string(c.ctas) + " CTAs of " + std::to_string(smem) +
                                " B of shared memory do not fit one of " + arch.Name() + "'s SMs (" +
                                std::to_string(arch.max_smem_optin) + " B; less slack, or ctas 1)");
    return Status::Ok();
  }

  std::vector<Config> Enumerate(const Problem& p, const Arch& arch, const SpaceOptions& opts) const override {
    (void)opts;
    std::vector<Config> out;
    if (p.n <= 512) return out;  // rows a warp holds: the warp family's
    for (int b : Specs()[0].values)
      for (int u : Specs()[1].values)
        for (int r : Specs()[2].values)
          for (int s : Specs()[3].values)
            // The guessed start first: the search starts a family from its
            // most central config, the first one on a tie (tuner/search.cpp),
            // and a 10 s budget from the open start did not reach the guess
            // at 128 x 131072 (H200: 50.85 us against 35.62). 2 is for tests.
            for (int g : {1, 0}) {
              FilterParams f{p.dtype, b, u, r, s};
              f.guess = g;
              Config c = f.ToConfig();
              if (Validate(c, arch).ok() && ValidateFor(c, arch, p).ok()) out.push_back(std::move(c));
            }
    // Two 512-thread CTAs an SM where the rows outnumber the SMs, with up
    // to three 16-byte loads a thread a step (kTwoCtaUnrolls).
    if (p.batch > arch.sm_count)
      for (int u : kTwoCtaUnrolls)
        for (int r : Specs()[2].values)
          for (int s : Specs()[3].values)
            for (int g : {1, 0}) {
              FilterParams f{p.dtype, 512, u, r, s};
              f.guess = g;
              f.ctas = 2;
              Config c = f.ToConfig();
              if (Validate(c, arch).ok() && ValidateFor(c, arch, p).ok()) out.push_back(std::move(c));
            }
    // Several rows per CTA where rows are short and many: while the CTAs
    // still give every SM one (ceil(batch / rows) >= SMs).
    if (p.n <= kMultiRowLongestRow)
      for (const auto& [b, w] : kMultiRowShapes) {
        if (!RowsFillGpu(p.batch, w, arch)) continue;
        for (int r : Specs()[2].values)
          for (int s : Specs()[3].values)
            for (int g : {1, 0}) {
              FilterParams f{p.dtype, b, 1, r, s};
              f.guess = g;
              f.rows = w;
              if (g == 1 && p.n < GroupSampleRow(p.dtype)) continue;  // it would start open either way
              Config c = f.ToConfig();
              if (Validate(c, arch).ok() && ValidateFor(c, arch, p).ok()) out.push_back(std::move(c));
            }
      }
    // Cluster mode where a row is long and the rows are few: every CTA keeps
    // at least 2048 elements, and every cluster is resident at once (a CTA
    // takes an SM, Arch::max_resident_clusters; a second wave doubled the
    // time on the H100).
    if (opts.include_cluster && arch.clusters())
      for (int cl : {2, 4, 8, 16}) {
        if (cl > arch.max_cluster() || p.n / cl < 2048 || p.batch > arch.max_resident_clusters(cl)) continue;
        for (int b : {512, 1024})
          for (int u : Specs()[1].values)
            for (int r : {11})  // the 8-bit select measured slower in every cluster case
              for (int sample : Specs()[5].values)
                for (int margin : Specs()[6].values) {
                  FilterParams f{p.dtype, b, u, r, 1};
                  f.cluster = cl;
                  f.sample = sample;
                  f.margin = margin;
                  Config c = f.ToConfig();
                  if (Validate(c, arch).ok() && ValidateFor(c, arch, p).ok()) out.push_back(std::move(c));
                }
      }
    return out;
  }

  std::vector<Config> EnumerateKernels(DType dtype, const Arch& arch) const override {
    std::vector<Config> out;
    for (int b : Specs()[0].values)
      for (int u : Specs()[1].values)
        for (int r : Specs()[2].values) {
          Config c = FilterParams{dtype, b, u, r, 1}.ToConfig();
          if (Validate(c, arch).ok()) out.push_back(std::move(c));
        }
    // Two 512-thread CTAs an SM.
    for (int u : kTwoCtaUnrolls)
      for (int r : Specs()[2].values) {
        FilterParams f{dtype, 512, u, r, 1};
        f.ctas = 2;
        Config c = f.ToConfig();
        if (Validate(c, arch).ok()) out.push_back(std::move(c));
      }
    // Several rows per CTA (one 16-byte load per thread a step).
    for (const auto& [b, w] : kMultiRowShapes)
      for (int r : Specs()[2].values) {
        FilterParams f{dtype, b, 1, r, 1};
        f.rows = w;
        Config c = f.ToConfig();
        if (Validate(c, arch).ok()) out.push_back(std::move(c));
      }
    // The clustered binaries (one serves every cluster size).
    if (arch.clusters())
      for (int b : {512, 1024})
        for (int u : Specs()[1].values)
          for (int r : Specs()[2].values) {
            FilterParams f{dtype, b, u, r, 1};
            f.cluster = 2;
            Config c = f.ToConfig();
            if (Validate(c, arch).ok()) out.push_back(std::move(c));
          }
    return out;
  }

  // The default for rows past the resident family's (n > 8192) when the
  // rows are enough to spread over the GPU (at least 16, and at least one
  // for every 8 SMs) and k is at most n / 8: a guessed start, one CTA a row.
  // Measured against the radix default it replaces there
  // (scripts/device/default-sweep.sh; docs/PERFORMANCE.md, "The defaults for
  // rows over 8192"): from 32 rows on 0.24-1.05x its time on normal rows,
  // at 16 rows 0.84-1.32x, and it does not collapse on shifted rows, where the
  // radix default took up to 3.9x its normal time. Fewer rows take the
  // resident family's clusters (up to 15 rows of up to 131072 and, with
  // k >= 64, of up to 262144, and as many rows of up to 524288 as 16-CTA
  // clusters run at once, fp32 with k >= 64)
  // or the radix default's, which spread a row over up to 16 SMs (8 rows of
  // 524288, k 8: 29.0 us on 16 CTAs, 25.0 on 8, against 52.2); so does a
  // larger k (1024 x 16384, k 4096: 96 us against 139).
  //
  // Many short rows (FilterShortRowDefault) take groups of 128
  // threads, 8 rows per CTA from 8 rows per SM, else 4 (H100, against the
  // resident default, docs/PERFORMANCE.md "Several rows per CTA"): 1056 x
  // 4096 k128 18.45 us against 24.64, 4096 x 8192 k32 111.5 against 199.1,
  // 528 x 2048 k32 8.94 against 10.97; shorter rows, where a group cannot
  // sample, and k above n / 8 stayed with the resident family.
  std::optional<Config> Default(const Problem& p, const Arch& arch) const override {
    if (auto c = FilterShortRowDefault(p, arch)) return c;
    if (p.n <= kResidentDefaultLongestCtaRow || p.k * 8 > p.n || p.batch < std::max(16, arch.sm_count / 8))
      return std::nullopt;
    FilterParams f;
    f.dtype = p.dtype;
    f.guess = 1;
    if (p.dtype != DType::kF32) {
      // Two loads a thread a step, room made a load at a time (the step is
      // the whole list): H200, rotated rows, us, normal / shifted / plateau /
      // 16 values, against one load: bf16 128 x 201088 k64 22.9 / 23.4 /
      // 23.0 / 28.0 against 25.6 / 26.5 / 25.6 / 24.6; bf16 256 x 128256
      // k1024 38.7 / 42.7 / 38.4 / 45.1 against 46.3 / 50.7 / 46.1 / 53.2;
      // bf16 64 x 131072 k64 (L2-hot) 13.1 against 15.8 (docs/PERFORMANCE.md,
      // "Two 16-bit loads a thread at 1024 threads").
      f.block_threads = 1024, f.unroll = 2, f.radix_bits = 8, f.slack = 1;
    } else if (p.batch >= arch.sm_count && (p.n <= 65536 ? p.k <= 2048 : p.n <= 131072 && p.k <= 1024)) {
      // Two 512-thread CTAs an SM (registers capped at 64): 1024 threads'
      // loads in flight on each SM, where two 256-thread CTAs had 512 (H100,
      // rotated rows, us: 256 x 128256 k1024 logits 59.0 against 63.1 for
      // `b256_u2_r8_s2`, 16 values 55.4 against 61.6; 256 x 65536 k2048 37.3
      // against 93.3; 160 x 131072 k512 44.9 against 52.7; 1024 x 16384 k1024
      // 54.6 against 56.0; docs/PERFORMANCE.md "Two CTAs of 512 threads an
      // SM"). Past that (256 x 131072 k2048: 204 us against 70.5 for 1024
      // threads, with 256) the list cuts too often.
      // Rows past 65536 take three 16-byte loads a thread a step (H200,
      // rotated rows, us, against two: 256 x 128256 k1024 46.7-46.8 against
      // 47.7-47.9 on normal rows, 44.4 against 45.6 on 16 values; rows of
      // 65536 even, 32768 and 16384 2-5% slower; docs/PERFORMANCE.md,
      // "Three loads a step for two 512-thread CTAs an SM").
      f.block_threads = 512, f.unroll = p.n > 65536 ? 3 : 2, f.radix_bits = 8, f.slack = 1;
      f.ctas = 2;
    } else if (p.n < 32768 || (p.n == 32768 && p.k < 512)) {
      // Rows of 32768 with k from 512 take the 1024 threads below (H100,
      // L2-hot, us: 64 x 32768 k2048 13.25 against 13.62 here, 16 rows
      // 13.16 against 13.57, 128 rows 13.67 against 13.81, k512 12.10
      // against 12.20, k1024 12.69 against 12.64), shorter rows keep 512
      // (64 x 16384 k2048 10.42 against 10.90, 32 x 24576 k1024 11.05
      // against 11.36).
      f.block_threads = 512, f.unroll = 2, f.radix_bits = 11, f.slack = 2;
    } else {
      f.block_threads = 1024, f.unroll = 2, f.radix_bits = 11, f.slack = 1;
    }
    Config c = f.ToConfig();
    if (!Validate(c, arch).ok() || !ValidateFor(c, arch, p).ok()) return std::nullopt;
    return c;
  }

  // A winner of several rows per CTA carries over only while the batch
  // still gives every SM a CTA (the enumeration's rule): 8 rows a CTA tuned
  // on 4096 rows would leave most SMs idle on 64.
  std::optional<Config> Adapt(const Config& tuned, const Problem& tuned_p, const Problem& p,
                              const Arch& arch) const override {
    const FilterParams c = FilterParams::Of(tuned);
    if (c.rows > 1 && !RowsFillGpu(p.batch, c.rows, arch)) return std::nullopt;
    return Family::Adapt(tuned, tuned_p, p, arch);
  }

  std::string KernelKey(const Config& cfg) const override {
    const FilterParams c = FilterParams::Of(cfg);
    std::ostringstream s;
    s << "filter_" << DTypeName(c.dtype) << "_b" << c.block_threads << "_u" << c.unroll << "_r" << c.radix_bits;
    if (c.cluster > 1) s << "_cN";
    if (c.rows > 1) s << "_w" << c.rows;
    if (c.ctas > 1) s << "_o" << c.ctas;
    return s.str();
  }

  std::vector<KernelSource> Sources(const Config& cfg) const override {
    const FilterParams c = FilterParams::Of(cfg);
    std::ostringstream pol;
    pol << "topk::filter::Policy<" << static_cast<int>(c.dtype) << ", " << c.block_threads << ", " << c.unroll << ", "
        << c.radix_bits;
    if (c.rows > 1 || c.ctas > 1) pol << ", " << c.rows;
    if (c.ctas > 1) pol << ", " << c.ctas;
    pol << ">";
    KernelSource s;
    s.key = KernelKey(cfg);
    s.file_name = s.key + ".cu";
    const bool clustered = c.cluster > 1;
    s.name_expression = std::string(clustered ? "topk::filter_cluster_kernel<" : "topk::filter_kernel<") + pol.str() + ">";
    std::ostringstream t;
    t << "// Generated by topk-tune: kernel " << s.key << ".\n"
      << (clustered ? "#include \"topk/filter/filter_cluster.cuh\"\n\n" : "#include \"topk/filter/filter_select.cuh\"\n\n")
      << "namespace topk_generated {\n"
      << "using P = " << pol.str() << ";\n"
      << "static_assert(P::kHistSmem == " << c.hist_smem_bytes()
      << ", \"host and template disagree on the histogram shared memory\");\n"
      << "static_assert(P::kTile == " << c.tile() << ", \"host and template disagree on the step\");\n"
      // One CTA a row: what a stream with cuts makes room for (room(),
      // Policy::kRoom, derived on each side from the step and the list).
      << (clustered ? std::string()
                    : "static_assert(P::kRoom == " + std::to_string(c.room()) +
                          ", \"host and template disagree on the room a stream with cuts makes\");\n")
      << "static_assert(topk::filter::rows_smem_bytes(" << c.hist_smem_bytes() << ", 1001, " << c.rows
      << ") == " << RowsSmem(c.hist_smem_bytes(), 1001, c.rows)
      << ", \"host and template disagree on the rows' shared memory\");\n"
      << "static_assert(sizeof(topk::filter::Control) <= " << kControlBytes
      << ", \"host and template disagree on the control block\");\n"
      << "static_assert(sizeof(TopkArgs) == " << TOPK_ARGS_SIZE << ", \"TopkArgs layout\");\n"
      << "}  // namespace topk_generated\n\n"
      << "template __global__ void " << s.name_expression << "(TopkArgs);\n";
    s.text = t.str();
    return {FinishSource(std::move(s))};
  }

  LaunchPlan Plan(const Config& cfg, const Problem& p, const Arch& arch, int max_cache_keys) const override {
    (void)arch, (void)max_cache_keys;
    const FilterParams c = FilterParams::Of(cfg);
    Stage s;
    s.block = static_cast<unsigned>(c.block_threads);
    s.rows_per_cta = c.rows;
    s.args.buffer = c.capacity(p.k);
    s.smem_bytes = c.smem_bytes(p.k);
    if (c.cluster > 1) {
      s.cluster = static_cast<unsigned>(c.cluster);
      s.args.rounds = TOPK_FILTER_ROUNDS(c.margin, c.sample, c.recovery);
      // The slices stay in shared memory when they fit beside the list;
      // otherwise every round scans them from memory (L2).
      const int base = c.cluster_base_smem(p.k);
      const int64_t cache_bytes = c.slice(p.n) * DTypeSize(c.dtype);
      const bool fits = base + cache_bytes + arch.static_smem_reserve <= arch.max_smem_optin;
      s.args.cache_cap = fits ? static_cast<int>(c.slice(p.n)) : 0;
      s.smem_bytes = base + (fits ? static_cast<int>(cache_bytes) : 0);
    }
    if (c.cluster == 1) s.args.rounds = c.guess;  // filter_select.cuh: a guessed start
    s.args.smem_bytes = s.smem_bytes;
    return LaunchPlan{{s}, 0, /*awaits_prior_grids=*/true};
  }
};

}  // namespace

FilterParams FilterParams::Of(const Config& c) {
  FilterParams f{c.dtype, c.Get("block_threads"), c.Get("unroll"), c.Get("radix_bits"), c.Get("slack")};
  f.cluster = c.Get("cluster");
  f.sample = c.Get("sample");
  f.margin = c.Get("margin");
  f.recovery = c.Get("recovery");
  f.guess = c.Get("guess");
  f.rows = c.Get("rows");
  f.ctas = c.Get("ctas");
  return f;
}

Config FilterParams::ToConfig() const {
  Config c;
  c.family = "filter";
  c.dtype = dtype;
  c.params = {{"block_threads", block_threads}, {"unroll", unroll}, {"radix_bits", radix_bits}, {"slack", slack},
              {"cluster", cluster},            {"sample", sample}, {"margin", margin},
              {"recovery", recovery},          {"guess", guess},   {"rows", rows},
              {"ctas", ctas}};
  return c;
}

int FilterParams::max_capacity() const { return TOPK_FILTER_MAX_ITEMS * group(); }

int FilterParams::smem_bytes(int64_t k) const { return RowsSmem(hist_smem_bytes(), capacity(k), rows); }

// k + slack parts of room(): a kernel that makes room a load a thread at a
// time keeps the list of one load a thread a step, so that a row of few
// values whose top value's copies outnumber it streams with cuts, as the
// one-load kernel does, instead of appending every copy (H200, bf16 128 x
// 201088 k64 on 16 values: 38.0 us with a list of 16384, docs/PERFORMANCE.md).
int FilterParams::capacity(int64_t k) const {
  return static_cast<int>(std::min<int64_t>(max_capacity(), k + static_cast<int64_t>(slack) * room()));
}

int FilterParams::cluster_base_smem(int64_t k) const {
  // templates/topk/filter/filter_cluster.cuh, cluster_smem_bytes: histogram,
  // sample, list, rounded to 16 bytes.
  return (hist_smem_bytes() + sample * 4 + capacity(k) * 8 + 15) / 16 * 16;
}

std::shared_ptr<const Family> MakeFilterFamily() { return std::make_shared<Filter>(); }

std::optional<Config> FilterShortRowDefault(const Problem& p, const Arch& arch) {
  if (p.n < GroupSampleRow(p.dtype) || p.n > kResidentDefaultLongestCtaRow || p.k * 8 > p.n ||
      p.batch < 4LL * arch.sm_count)
    return std::nullopt;
  const bool eight = p.batch >= 8LL * arch.sm_count;
  FilterParams f{p.dtype, eight ? 1024 : 512, 1, 8, 2};
  f.guess = 1;
  f.rows = eight ? 8 : 4;
  Config c = f.ToConfig();
  static const Filter family;
  if (!family.Validate(c, arch).ok() || !family.ValidateFor(c, arch, p).ok()) return std::nullopt;
  return c;
}

}  // namespace topk::gen
