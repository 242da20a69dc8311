#include "generator/warp.hpp"

#include <sstream>

namespace topk::gen {
namespace {

Status Broken(const std::string& constraint, const std::string& what) {
  return Status(Code::kInvalidArgument, "constraint " + constraint, what);
}

constexpr int64_t kBoundRows = 4096;  // the default's batch from which lane_bound pays

const std::vector<ParamSpec>& Specs() {
  static const std::vector<ParamSpec> specs = {
      {"block_threads", "b", "threads per CTA (one row per warp)", {128, 256, 512}, true},
      {"items", "i", "elements per lane: rows up to 32 x items", {2, 4, 8, 16}, true},
      {"lane_bound", "l",
       "1: whole rows in 16-byte loads and, for k <= 8, a bound from the lane maxima first (fp32, <= 16 items); "
       "0: tournament or one bit per step",
       {0, 1}, true},
  };
  return specs;
}

class Warp final : public Family {
 public:
  const std::string& name() const override {
    static const std::string n = "warp";
    return n;
  }
  const std::string& summary() const override {
    static const std::string s = "one warp per row, the row in registers: short rows (up to 512 elements)";
    return s;
  }
  const std::vector<ParamSpec>& params() const override { return Specs(); }

  Status Validate(const Config& cfg, const Arch& arch) const override {
    const WarpParams c = WarpParams::Of(cfg);
    TOPK_RETURN_IF_ERROR(ValidateBlock(c.block_threads, arch));
    if (c.items < 1 || c.items > 32)
      return Broken("items", "the warp family needs 1 <= items <= 32, got " + std::to_string(c.items));
    if (c.lane_bound != 0 && c.lane_bound != 1)
      return Broken("lane-bound", "lane_bound must be 0 (tournament or bit steps) or 1 (lane-maximum bound), got " +
                                      std::to_string(c.lane_bound));
    if (c.lane_bound == 1 && (c.key_bits() != 32 || c.items > 16))
      return Broken("lane-bound", "the lane-maximum bound needs 32-bit keys and at most 16 items");
    return Status::Ok();
  }

  Status ValidateFor(const Config& cfg, const Arch& arch, const Problem& p) const override {
    (void)arch;
    const WarpParams c = WarpParams::Of(cfg);
    if (p.n > 32LL * c.items)
      return Broken("items", "the warp family with " + std::to_string(c.items) + " items per lane holds rows up to " +
                                 std::to_string(32 * c.items) + ", n is " + std::to_string(p.n));
    return Status::Ok();
  }

  std::vector<Config> Enumerate(const Problem& p, const Arch& arch, const SpaceOptions& opts) const override {
    (void)opts;
    std::vector<Config> out;
    if (p.n > 512) return out;
    for (int b : Specs()[0].values)
      for (int bound : {0, 1}) {
        Config c = WarpParams{p.dtype, b, WarpItems(p.n), bound}.ToConfig();
        if (Validate(c, arch).ok()) out.push_back(std::move(c));
      }
    return out;
  }

  std::vector<Config> EnumerateKernels(DType dtype, const Arch& arch) const override {
    std::vector<Config> out;
    for (int b : Specs()[0].values)
      for (int items : Specs()[1].values)
        for (int bound : {0, 1}) {
          Config c = WarpParams{dtype, b, items, bound}.ToConfig();
          if (Validate(c, arch).ok()) out.push_back(std::move(c));
        }
    return out;
  }

  std::optional<Config> Default(const Problem& p, const Arch& arch) const override {
    (void)arch;
    if (p.n > 512) return std::nullopt;
    // The lane-maximum bound for many fp32 rows and k <= 8 (H100, rows of
    // 256, 128 threads: 4096 rows k8 5.41 us against the tournament's 5.97,
    // 16384 rows 12.43 against 17.31, k2 4.11 against 5.42; 2048 rows even,
    // 1024 rows 3.60 against 3.09, k16 7.39 against 7.11).
    const int items = WarpItems(p.n);
    const bool bound = p.dtype == DType::kF32 && p.k <= 8 && p.batch >= kBoundRows && items <= 16;
    return WarpParams{p.dtype, 128, items, bound ? 1 : 0}.ToConfig();
  }

  std::string KernelKey(const Config& cfg) const override {
    const WarpParams c = WarpParams::Of(cfg);
    std::ostringstream s;
    s << "kernel_" << DTypeName(c.dtype) << "_b" << c.block_threads << "_r1_c0_i" << c.items
      << (c.lane_bound ? "_t1" : "");
    return s.str();
  }

  std::vector<KernelSource> Sources(const Config& cfg) const override {
    const WarpParams c = WarpParams::Of(cfg);
    std::ostringstream pol;
    pol << "topk::Policy<" << static_cast<int>(c.dtype) << ", " << c.block_threads << ", 1, 0, 0, " << c.items
        << (c.lane_bound ? ", 1" : "") << ">";
    return {TopkKernelSource(KernelKey(cfg), pol.str(), 0, 0)};
  }

  LaunchPlan Plan(const Config& cfg, const Problem& p, const Arch& arch, int max_cache_keys) const override {
    (void)p, (void)arch, (void)max_cache_keys;
    Stage s;
    s.block = static_cast<unsigned>(cfg.Get("block_threads"));
    s.rows_per_cta = cfg.Get("block_threads") / 32;
    return LaunchPlan{{s}, 0, /*awaits_prior_grids=*/true};
  }

  // A winner carries over only to rows of its own length class (the same
  // items per lane) and to within a factor of two of its batch; anything
  // else takes the default, whose rules come from measurements across row
  // counts. Measured (H100, f32, k8 unless noted): 4096 x 64 ran at half
  // the default's speed with the 4096 x 256 winner's 8 items per lane, and
  // at the default's speed with the items adapted but the winner's
  // 512-thread block (2.76 us against 2.73 at k2); with that winner
  // 16384 x 256 took 14.1 us against the default's 12.5, 4096 x 512 9.26
  // against 8.32; 64 rows of 256 took 3.10 us with a 512-thread block
  // against 2.01 with 128 threads.
  std::optional<Config> Adapt(const Config& tuned, const Problem& tuned_p, const Problem& p,
                              const Arch& arch) const override {
    if (tuned.Get("items") != WarpItems(p.n) || p.batch * 2 < tuned_p.batch || p.batch > 2 * tuned_p.batch)
      return std::nullopt;
    if (!gen::ValidateFor(tuned, arch, p).ok()) return std::nullopt;
    return tuned;
  }
};

}  // namespace

int WarpItems(int64_t n) {
  int items = 2;
  while (32LL * items < n) items *= 2;
  return items;
}

WarpParams WarpParams::Of(const Config& c) {
  return WarpParams{c.dtype, c.Get("block_threads"), c.Get("items"), c.Get("lane_bound")};
}

Config WarpParams::ToConfig() const {
  Config c;
  c.family = "warp";
  c.dtype = dtype;
  c.params = {{"block_threads", block_threads}, {"items", items}, {"lane_bound", lane_bound}};
  return c;
}

std::shared_ptr<const Family> MakeWarpFamily() { return std::make_shared<Warp>(); }

const Family& WarpFamily() { return *FindFamily("warp"); }

}  // namespace topk::gen
