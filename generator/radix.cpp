#include "generator/radix.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "generator/warp.hpp"
#include "topk/args.h"

namespace topk::gen {
namespace {

// Thrown inside FromLegacyJson: the object is not an earlier release's
// configuration.
struct NotLegacy {};

// The strategy switches, in the order of their parameters and of
// topk::Strategy's template arguments.
constexpr const char* kSwitches[] = {"lane_atomics", "branch_free", "capture_only", "uniform_check", "prefetch"};

Status Broken(const std::string& constraint, const std::string& what) {
  return Status(Code::kInvalidArgument, "constraint " + constraint, what);
}

// Index of lane_atomics in Specs().
constexpr size_t kFirstSwitch = 7;

// (radix_bits, half_first) pairs the family compiles for a dtype.
std::vector<std::pair<int, bool>> RadixKinds(DType dtype) {
  std::vector<std::pair<int, bool>> out = {{8, false}, {11, false}};
  if (dtype == DType::kF32) {
    out.push_back({8, true});
    out.push_back({11, true});
  }
  return out;
}

// Whether a buffer of `buffer` candidates lets the one-CTA kernel capture
// the likely candidates of a row while it histograms it: the kernel's own
// rule (TOPK_SPECULATES).
bool Speculates(int buffer, int64_t k) { return TOPK_SPECULATES(static_cast<int64_t>(buffer), k); }

const std::vector<ParamSpec>& Specs() {
  static const std::vector<ParamSpec> specs = {
      {"block_threads", "b", "threads per CTA", {128, 256, 512, 1024}, true},
      {"radix_bits", "r", "bits per digit", {8, 11}, true},
      {"half_first", "h", "coarse 8-bit first pass with fp16's resolution (fp32 only)", {0, 1}, true},
      {"smem_buffer", "s", "candidates kept in shared memory (0: passes re-read the row)", {0, 1024, 4096, 8192},
       false},
      {"cluster", "c", "CTAs per row (2-16: a thread-block cluster; 1 and clustered are two binaries)",
       {1, 2, 4, 8, 16}, true},
      {"rounds", "t", "digit passes before the remaining candidates may be ranked directly", {1, 2}, false},
      {"row_cache", "m", "keep the row in shared memory as far as it fits", {0, 1}, false},
      // The strategy switches (RadixStrategy in templates/topk/policy.cuh):
      // -1 the automatic rule, 0 off, 1 on; left out of ids at -1.
      {"lane_atomics", "la", "per-lane shared-memory atomics reserve slots instead of a warp prefix sum (-1 auto)",
       {-1, 0, 1}, true, -1},
      {"branch_free", "bf", "branch-free classification of each element (-1 auto)", {-1, 0, 1}, true, -1},
      {"capture_only", "co",
       "a speculative pass 0 histograms only its sample and counts the rest from the capture (-1 auto)",
       {-1, 0, 1}, true, -1},
      {"uniform_check", "uc", "check that a large threshold bin holds one key, ending the row early (-1 auto)",
       {-1, 0, 1}, true, -1},
      {"prefetch", "pf", "software prefetch of the next step in the row scans (-1 auto)", {-1, 0, 1}, true, -1},
  };
  return specs;
}

class Radix final : public Family {
 public:
  const std::string& name() const override {
    static const std::string n = "radix";
    return n;
  }
  const std::string& summary() const override {
    static const std::string s =
        "radix select, digit by digit over the key's bits: one CTA or a thread-block cluster per row";
    return s;
  }
  const std::vector<ParamSpec>& params() const override { return Specs(); }

  Status Validate(const Config& cfg, const Arch& arch) const override {
    const RadixParams c = RadixParams::Of(cfg);
    TOPK_RETURN_IF_ERROR(ValidateBlock(c.block_threads, arch));
    if (cfg.Get("half_first") != 0 && cfg.Get("half_first") != 1)
      return Broken("first-pass", "half_first must be 0 or 1, got " + std::to_string(cfg.Get("half_first")));
    if (cfg.Get("row_cache") != 0 && cfg.Get("row_cache") != 1)
      return Broken("row-cache", "row_cache must be 0 or 1, got " + std::to_string(cfg.Get("row_cache")));
    for (const char* sw : kSwitches)
      if (cfg.Get(sw, -1) < -1 || cfg.Get(sw, -1) > 1)
        return Broken("strategy", std::string(sw) + " must be -1 (automatic), 0 or 1, got " +
                                      std::to_string(cfg.Get(sw, -1)));
    if (c.uniform_check == 1 && (c.cluster != 1 || c.half_first || c.key_bits() != 32))
      return Broken("strategy", "uniform_check 1 needs one CTA per row, no coarse first pass and 32-bit keys");
    if (c.radix_bits != 8 && c.radix_bits != 11)
      return Broken("radix", "radix_bits must be 8 or 11, got " + std::to_string(c.radix_bits));
    if (c.radix_bits > c.key_bits()) return Broken("radix", "radix wider than the key");
    if (c.half_first && c.dtype != DType::kF32)
      return Broken("first-pass", "the coarse first pass only applies to fp32 keys");
    TOPK_RETURN_IF_ERROR(ValidateCluster(c.cluster, arch));
    if (c.smem_buffer < 0 || c.smem_buffer > 16384 || c.smem_buffer % 32 != 0)
      return Broken("buffer",
                    "smem_buffer must be a multiple of 32 in [0, 16384], got " + std::to_string(c.smem_buffer));
    if (c.rounds < 1 || c.rounds > c.passes() - 1)
      return Broken("rounds", "rounds must be in [1, " + std::to_string(c.passes() - 1) + "] for " +
                                  std::to_string(c.passes()) + " digit passes, got " + std::to_string(c.rounds));
    const int smem = c.fixed_smem_bytes() + arch.static_smem_reserve;
    if (smem > arch.max_smem_optin)
      return Broken("smem", "fixed shared memory " + std::to_string(smem) + " B exceeds " + arch.Name() + "'s " +
                                std::to_string(arch.max_smem_optin) + " B per block");
    return Status::Ok();
  }

  std::vector<Config> Enumerate(const Problem& p, const Arch& arch, const SpaceOptions& opts) const override {
    std::vector<Config> out;
    std::vector<int> clusters = {1};
    // Clusters beyond about two CTAs per SM cannot all run at once.
    if (opts.include_cluster && arch.clusters())
      for (int cl : {2, 4, 8, 16})
        if (p.n / cl >= 2048 && p.batch * cl <= 2 * arch.sm_count) clusters.push_back(cl);
    const std::vector<int> blocks =
        p.n <= 4096 ? std::vector<int>{128, 256, 512} : std::vector<int>{256, 512, 1024};
    for (int b : blocks)
      for (auto [r, h] : RadixKinds(p.dtype))
        for (int cl : clusters)
          for (int buf : {0, 1024, 4096, 8192})
            for (int cache : {0, 1}) {
              // 8192 candidates only for one CTA per row and large k, where a
              // threshold bin past 4096 sends a pass back to the row (H100,
              // 128 x 131072 k2048: 38.87 -> 36.94 us; 64 x 32768 and
              // 256 x 128256 k1024 within 1.5%).
              if (buf == 8192 && (cl != 1 || p.k < 1024)) continue;
              RadixParams c;
              c.dtype = p.dtype;
              c.block_threads = b;
              c.radix_bits = r;
              c.half_first = h;
              c.cluster = cl;
              c.smem_buffer = buf;
              c.row_cache = cache == 1;
              // Ranking needs buffered candidates; without a buffer only the
              // pure radix schedule is meaningful.
              std::vector<int> rounds = {c.passes() - 1};
              if (buf > 0 && c.passes() > 2) rounds.insert(rounds.begin(), 1);
              for (int t : rounds) {
                c.rounds = t;
                Config cfg = c.ToConfig();
                if (Validate(cfg, arch).ok()) out.push_back(std::move(cfg));
              }
            }
    return out;
  }

  std::vector<Config> EnumerateKernels(DType dtype, const Arch& arch) const override {
    std::vector<Config> out;
    for (int b : {128, 256, 512, 1024})
      for (auto [r, h] : RadixKinds(dtype))
        for (int cl : {1, 2}) {  // one clustered binary serves sizes 2..16
          RadixParams c;
          c.dtype = dtype;
          c.block_threads = b;
          c.radix_bits = r;
          c.half_first = h;
          c.cluster = cl;
          c.smem_buffer = 0;
          c.rounds = c.passes() - 1;
          c.row_cache = false;
          Config cfg = c.ToConfig();
          if (Validate(cfg, arch).ok()) out.push_back(std::move(cfg));
        }
    return out;
  }

  std::optional<Config> Default(const Problem& p, const Arch& arch) const override {
    RadixParams c;
    c.dtype = p.dtype;
    // One CTA per row, 11-bit digits on the exact key, a 4096-candidate
    // buffer and the row cached; rows too few to fill the GPU split over a
    // cluster (up to 16 CTAs, while each still gets >= 8K elements and every
    // cluster runs at once: Arch::max_resident_clusters). 512
    // threads, not the often faster 1024: at 1024 the 64-register cap makes
    // the kernel spill, and a default must not (the tuner may still pick 1024).
    c.block_threads = p.n > 4096 ? 512 : 256;
    c.radix_bits = 11;
    c.half_first = false;
    c.cluster = 1;
    if (arch.clusters())
      while (c.cluster < 16 && p.batch <= arch.max_resident_clusters(c.cluster * 2) && p.n / (c.cluster * 2) >= 8192)
        c.cluster *= 2;
    c.smem_buffer = 4096;
    c.rounds = c.passes() - 1;
    c.row_cache = true;
    if (!Validate(c.ToConfig(), arch).ok()) c.smem_buffer = 1024;
    return c.ToConfig();
  }

  std::string KernelKey(const Config& cfg) const override {
    const RadixParams c = RadixParams::Of(cfg);
    std::ostringstream s;
    s << "kernel_" << DTypeName(c.dtype) << "_b" << c.block_threads << "_r" << c.radix_bits
      << (c.half_first ? "h" : "") << "_c" << (c.cluster > 1 ? std::string("N") : std::to_string(c.cluster))
      << "_i0";
    // The strategy switches set away from automatic (an untuned kernel's
    // key stays as it was).
    for (size_t i = 0; i < std::size(kSwitches); ++i)
      if (const int v = cfg.Get(kSwitches[i], -1); v >= 0) s << '_' << Specs()[kFirstSwitch + i].tag << v;
    return s.str();
  }

  std::vector<KernelSource> Sources(const Config& cfg) const override {
    const RadixParams c = RadixParams::Of(cfg);
    std::ostringstream pol;
    pol << "topk::Policy<" << static_cast<int>(c.dtype) << ", " << c.block_threads << ", " << c.radix_bits << ", "
        << (c.half_first ? 1 : 0) << ", " << c.cluster_class() << ", 0>";
    if (c.automatic_strategy())  // the plain policy: an untuned kernel's source and binary as they were
      return {TopkKernelSource(KernelKey(cfg), pol.str(), c.hist_smem_bytes(), c.passes())};
    // The switches set, and asserts that the host's mirror of the automatic
    // rules gives what the template does.
    const int set[] = {c.lane_atomics, c.branch_free, c.capture_only, c.uniform_check, c.prefetch};
    const bool automatic[] = {c.auto_lane_atomics(), c.auto_branch_free(), c.auto_capture_only(),
                              c.auto_uniform_check(), c.auto_prefetch()};
    const char* members[] = {"kLaneAtomics", "kBranchFree", "kCaptureOnly", "kUniformCheck", "kPrefetch"};
    std::ostringstream strat, asserts;
    strat << "topk::Strategy<" << pol.str();
    for (int v : set) strat << ", " << v;
    strat << ">";
    for (size_t i = 0; i < std::size(members); ++i)
      asserts << "static_assert(P::" << members[i]
              << " == " << (RadixParams::effective(set[i], automatic[i]) ? "true" : "false")
              << ", \"host and template disagree on " << kSwitches[i] << "\");\n";
    return {TopkKernelSource(KernelKey(cfg), strat.str(), c.hist_smem_bytes(), c.passes(), asserts.str())};
  }

  // For each switch still automatic, the config with it flipped from its
  // automatic value, where that is valid for `p`.
  std::vector<Config> Refinements(const Config& cfg, const Problem& p, const Arch& arch) const override {
    const RadixParams c = RadixParams::Of(cfg);
    const bool automatic[] = {c.auto_lane_atomics(), c.auto_branch_free(), c.auto_capture_only(),
                              c.auto_uniform_check(), c.auto_prefetch()};
    std::vector<Config> out;
    for (size_t i = 0; i < std::size(kSwitches); ++i) {
      if (cfg.Get(kSwitches[i], -1) >= 0) continue;
      Config r = cfg;
      r.Set(kSwitches[i], automatic[i] ? 0 : 1);
      if (gen::ValidateFor(r, arch, p).ok()) out.push_back(std::move(r));
    }
    return out;
  }

  LaunchPlan Plan(const Config& cfg, const Problem& p, const Arch& arch, int max_cache_keys) const override {
    const RadixParams c = RadixParams::Of(cfg);
    Stage s;
    s.block = static_cast<unsigned>(c.block_threads);
    s.cluster = static_cast<unsigned>(c.cluster);
    s.rows_per_cta = 1;
    s.args.buffer = c.smem_buffer;
    s.args.rounds = c.rounds;
    const int fixed = c.fixed_smem_bytes();
    s.smem_bytes = fixed;
    if (c.row_cache) {
      const int v = c.vec();
      const int key_bytes = DTypeSize(c.dtype);
      // A slice is ceil(n / cluster) rounded to whole vectors; alignment can
      // shift it by up to one vector in the cache.
      int64_t chunk = (p.n + c.cluster - 1) / c.cluster;
      chunk = (chunk + v - 1) / v * v + v;
      const int64_t avail = (arch.max_smem_optin - arch.static_smem_reserve - fixed) / key_bytes;
      int64_t cap = std::min<int64_t>(chunk, std::max<int64_t>(avail, 0));
      if (max_cache_keys >= 0) cap = std::min<int64_t>(cap, max_cache_keys);
      cap = cap / v * v;
      s.args.cache_cap = static_cast<int>(cap);
      s.smem_bytes = fixed + static_cast<int>(cap) * key_bytes;
    }
    s.args.smem_bytes = s.smem_bytes;
    return LaunchPlan{{s}, 0, /*awaits_prior_grids=*/true};
  }

  // A one-CTA winner whose candidate buffer left room for speculative
  // capture at its tuned k, but not at this problem's k, gets the smallest
  // larger buffer of the space that does (when that still fits the device),
  // unless its row cache holds the whole row; the buffer is a launch
  // argument, the compiled kernel stays the same. Measured on an H100: bf16
  // 256 x 128256 k1024 ran in 148 us with the 128 x 201088 k64 winner's
  // 1024-candidate buffer and in 78 us with 4096 (default: 97); 64 x 8192
  // k1024 (cached rows) ran 10% slower with the buffer raised.
  std::optional<Config> Adapt(const Config& tuned, const Problem& tuned_p, const Problem& p,
                              const Arch& arch) const override {
    if (!gen::ValidateFor(tuned, arch, p).ok()) return std::nullopt;
    const RadixParams c = RadixParams::Of(tuned);
    if (c.cluster != 1 || !Speculates(c.smem_buffer, tuned_p.k) || Speculates(c.smem_buffer, p.k)) return tuned;
    const int64_t row_bytes = p.n * DTypeSize(p.dtype);
    if (c.row_cache && row_bytes + c.fixed_smem_bytes() + arch.static_smem_reserve <= arch.max_smem_optin)
      return tuned;
    for (int buf : Specs()[3].values) {
      if (buf <= c.smem_buffer || !Speculates(buf, p.k)) continue;
      Config bigger = tuned;
      bigger.Set("smem_buffer", buf);
      if (gen::ValidateFor(bigger, arch, p).ok()) return bigger;
    }
    return tuned;
  }

  std::optional<Config> FitToBatch(const Config& cfg, const Problem& p, int64_t tuned_batch,
                                   const std::function<int(const Config&)>& resident) const override {
    const int cluster = cfg.Get("cluster");
    if (cluster < 2 || p.batch <= tuned_batch) return std::nullopt;
    const int fitted = FitClusterToBatch(cluster, p.batch, tuned_batch, [&](int cl) {
      Config t = cfg;
      t.Set("cluster", cl);
      return resident(t);
    });
    if (fitted == cluster) return std::nullopt;
    Config t = cfg;
    t.Set("cluster", fitted);
    return t;
  }

  // Earlier releases had one family, "radix", whose cluster 0 meant one warp
  // per row: "radix_f32_b512_r11h_s4096_c1_t1_m1_i0" and the same fields in
  // JSON. Cluster 0 becomes the warp family.
  std::optional<Config> FromLegacyId(std::string_view id) const override {
    if (id.substr(0, 6) != "radix_") return std::nullopt;
    std::vector<std::string_view> parts;
    std::string_view rest = id.substr(6);
    while (true) {
      const size_t u = rest.find('_');
      parts.push_back(rest.substr(0, u));
      if (u == std::string_view::npos) break;
      rest = rest.substr(u + 1);
    }
    if (parts.size() != 8) return std::nullopt;
    auto dt = ParseDType(parts[0]);
    if (!dt.ok()) return std::nullopt;
    auto num = [&](std::string_view f, char tag, int* out, bool* h_suffix) -> bool {
      if (f.size() < 2 || f[0] != tag) return false;
      std::string_view digits = f.substr(1);
      if (h_suffix) {
        *h_suffix = !digits.empty() && digits.back() == 'h';
        if (*h_suffix) digits.remove_suffix(1);
      }
      auto [q, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *out);
      return ec == std::errc() && q == digits.data() + digits.size();
    };
    nlohmann::json j = {{"dtype", DTypeName(*dt)}};
    int b = 0, r = 0, s = 0, c = 0, t = 0, m = 0, i = 0;
    bool h = false;
    if (!num(parts[1], 'b', &b, nullptr) || !num(parts[2], 'r', &r, &h) || !num(parts[3], 's', &s, nullptr) ||
        !num(parts[4], 'c', &c, nullptr) || !num(parts[5], 't', &t, nullptr) || !num(parts[6], 'm', &m, nullptr) ||
        (m != 0 && m != 1) || !num(parts[7], 'i', &i, nullptr))
      return std::nullopt;
    j["block_threads"] = b;
    j["radix_bits"] = r;
    j["half_first"] = h;
    j["smem_buffer"] = s;
    j["cluster"] = c;
    j["rounds"] = t;
    j["row_cache"] = m == 1;
    j["items"] = i;
    return FromLegacyJson(j);
  }

  std::optional<Config> FromLegacyJson(const nlohmann::json& j) const override {
    if (!j.is_object() || j.contains("family")) return std::nullopt;
    // Earlier releases wrote these fields as JSON integers. Anything else
    // (a fraction, 1e300, a number beyond int) is not such a configuration:
    // json::get<int> would convert it with undefined behaviour.
    auto int_field = [&](const char* key, std::optional<int> fallback = std::nullopt) -> int {
      if (!j.contains(key)) {
        if (fallback) return *fallback;
        throw NotLegacy();
      }
      const nlohmann::json& v = j[key];
      if (!v.is_number_integer()) throw NotLegacy();
      if (v.is_number_unsigned()) {
        const auto u = v.get<uint64_t>();
        if (u > static_cast<uint64_t>(std::numeric_limits<int>::max())) throw NotLegacy();
        return static_cast<int>(u);
      }
      const auto i = v.get<int64_t>();
      if (i < std::numeric_limits<int>::min() || i > std::numeric_limits<int>::max()) throw NotLegacy();
      return static_cast<int>(i);
    };
    try {
      auto dt = ParseDType(j.at("dtype").get<std::string>());
      if (!dt.ok()) return std::nullopt;
      const int cluster = int_field("cluster");
      if (cluster == 0) {
        WarpParams w;
        w.dtype = *dt;
        w.block_threads = int_field("block_threads");
        w.items = int_field("items", 0);
        w.lane_bound = int_field("rounds");
        return w.ToConfig();
      }
      RadixParams c;
      c.dtype = *dt;
      c.block_threads = int_field("block_threads");
      c.radix_bits = int_field("radix_bits");
      c.half_first = j.value("half_first", false);
      c.smem_buffer = int_field("smem_buffer");
      c.cluster = cluster;
      c.rounds = int_field("rounds");
      c.row_cache = j.value("row_cache", false);
      return c.ToConfig();
    } catch (const NotLegacy&) {
      return std::nullopt;
    } catch (const nlohmann::json::exception&) {
      return std::nullopt;
    }
  }
};

}  // namespace

RadixParams RadixParams::Of(const Config& c) {
  RadixParams r;
  r.dtype = c.dtype;
  r.block_threads = c.Get("block_threads");
  r.radix_bits = c.Get("radix_bits");
  r.half_first = c.Get("half_first") != 0;
  r.smem_buffer = c.Get("smem_buffer");
  r.cluster = c.Get("cluster");
  r.rounds = c.Get("rounds");
  r.row_cache = c.Get("row_cache") != 0;
  r.lane_atomics = c.Get("lane_atomics", -1);
  r.branch_free = c.Get("branch_free", -1);
  r.capture_only = c.Get("capture_only", -1);
  r.uniform_check = c.Get("uniform_check", -1);
  r.prefetch = c.Get("prefetch", -1);
  return r;
}

Config RadixParams::ToConfig() const {
  Config c;
  c.family = "radix";
  c.dtype = dtype;
  c.params = {{"block_threads", block_threads}, {"radix_bits", radix_bits}, {"half_first", half_first ? 1 : 0},
              {"smem_buffer", smem_buffer},     {"cluster", cluster},       {"rounds", rounds},
              {"row_cache", row_cache ? 1 : 0}, {"lane_atomics", lane_atomics}, {"branch_free", branch_free},
              {"capture_only", capture_only},   {"uniform_check", uniform_check}, {"prefetch", prefetch}};
  return c;
}

int RadixParams::fixed_smem_bytes() const {
  const int raw = hist_smem_bytes() + smem_buffer * 8 + (rank_enabled() ? TOPK_RANK_CAP * 8 : 0);
  return (raw + 15) / 16 * 16;
}

std::shared_ptr<const Family> MakeRadixFamily() { return std::make_shared<Radix>(); }

const Family& RadixFamily() { return *FindFamily("radix"); }

int FitClusterToBatch(int cluster, int64_t batch, int64_t tuned_batch, const std::function<int(int)>& resident) {
  // Only shrink when this batch has more clusters than the tuned one, and
  // only while the tuned batch was co-resident at that size: a winner that
  // ran in one wave of clusters should not be stretched into two.
  while (cluster > 2 && batch > tuned_batch) {
    const int fit = resident(cluster);
    if (fit <= 0 || batch <= fit || tuned_batch > fit) break;
    cluster /= 2;
  }
  return cluster;
}

}  // namespace topk::gen
