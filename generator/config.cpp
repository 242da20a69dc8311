#include "generator/config.hpp"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

namespace topk::gen {
namespace {

constexpr int kRankCap = 256;  // TOPK_RANK_CAP in templates/topk/args.h

bool IsPow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

Status Broken(const std::string& constraint, const std::string& what) {
  return Status(Code::kInvalidArgument, "constraint " + constraint, what);
}

}  // namespace

int Config::passes() const {
  if (warp_mode()) return key_bits();
  return (key_bits() + radix_bits - 1) / radix_bits + (half_first ? 1 : 0);
}

int Config::hist_smem_bytes() const {
  if (warp_mode()) return 0;
  return (2 + (cluster > 1 ? 2 : 0)) * (1 << radix_bits) * 4;  // P::kHistSmem
}

int Config::fixed_smem_bytes() const {
  if (warp_mode()) return 0;
  const int raw = hist_smem_bytes() + smem_buffer * 8 + (rank_enabled() ? kRankCap * 8 : 0);
  return (raw + 15) / 16 * 16;
}

std::string Config::Id() const {
  std::ostringstream s;
  s << "radix_" << DTypeName(dtype) << "_b" << block_threads << "_r" << radix_bits << (half_first ? "h" : "")
    << "_s" << smem_buffer << "_c" << cluster << "_t" << rounds << "_m" << (row_cache ? 1 : 0) << "_i" << items;
  return s.str();
}

int Config::cluster_class() const { return cluster > 1 ? 2 : cluster; }

std::string Config::KernelKey() const {
  std::ostringstream s;
  s << "kernel_" << DTypeName(dtype) << "_b" << block_threads << "_r" << radix_bits << (half_first ? "h" : "") << "_c"
    << (cluster > 1 ? std::string("N") : std::to_string(cluster)) << "_i" << items << (warp_bound() ? "_t1" : "");
  return s.str();
}

StatusOr<Config> Config::FromId(std::string_view id) {
  auto bad = [&](const std::string& why) {
    return Status(Code::kInvalidArgument, "Config::FromId", "malformed variant id '" + std::string(id) + "': " + why);
  };
  if (id.substr(0, 6) != "radix_") return bad("does not start with 'radix_'");
  std::vector<std::string_view> parts;
  std::string_view rest = id.substr(6);
  while (!rest.empty()) {
    const size_t u = rest.find('_');
    parts.push_back(rest.substr(0, u));
    if (u == std::string_view::npos) break;
    rest = rest.substr(u + 1);
  }
  if (parts.size() != 8) return bad("expected 8 fields after 'radix_'");
  Config c;
  auto dt = ParseDType(parts[0]);
  if (!dt.ok()) return bad("unknown dtype '" + std::string(parts[0]) + "'");
  c.dtype = *dt;
  auto num = [&](std::string_view f, char tag, int* out, bool* h_suffix) -> bool {
    if (f.size() < 2 || f[0] != tag) return false;
    std::string_view digits = f.substr(1);
    if (h_suffix) {
      *h_suffix = !digits.empty() && digits.back() == 'h';
      if (*h_suffix) digits.remove_suffix(1);
    }
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *out);
    return ec == std::errc() && p == digits.data() + digits.size();
  };
  int cache = 0;
  if (!num(parts[1], 'b', &c.block_threads, nullptr)) return bad("field 'b<block>'");
  if (!num(parts[2], 'r', &c.radix_bits, &c.half_first)) return bad("field 'r<radix>[h]'");
  if (!num(parts[3], 's', &c.smem_buffer, nullptr)) return bad("field 's<buffer>'");
  if (!num(parts[4], 'c', &c.cluster, nullptr)) return bad("field 'c<cluster>'");
  if (!num(parts[5], 't', &c.rounds, nullptr)) return bad("field 't<rounds>'");
  if (!num(parts[6], 'm', &cache, nullptr) || (cache != 0 && cache != 1)) return bad("field 'm<0|1>'");
  if (!num(parts[7], 'i', &c.items, nullptr)) return bad("field 'i<items>'");
  c.row_cache = cache == 1;
  return c;
}

nlohmann::json Config::ToJson() const {
  return nlohmann::json{{"dtype", DTypeName(dtype)}, {"block_threads", block_threads}, {"radix_bits", radix_bits},
                        {"half_first", half_first},  {"smem_buffer", smem_buffer},     {"cluster", cluster},
                        {"rounds", rounds},          {"row_cache", row_cache},         {"items", items}};
}

StatusOr<Config> Config::FromJson(const nlohmann::json& j) {
  auto bad = [](const std::string& why) { return Status(Code::kInvalidArgument, "Config::FromJson", why); };
  if (!j.is_object()) return bad("expected a JSON object");
  Config c;
  try {
    auto dt = ParseDType(j.at("dtype").get<std::string>());
    if (!dt.ok()) return dt.status();
    c.dtype = *dt;
    c.block_threads = j.at("block_threads").get<int>();
    c.radix_bits = j.at("radix_bits").get<int>();
    c.half_first = j.value("half_first", false);
    c.smem_buffer = j.at("smem_buffer").get<int>();
    c.cluster = j.at("cluster").get<int>();
    c.rounds = j.at("rounds").get<int>();
    c.row_cache = j.value("row_cache", false);
    c.items = j.value("items", 0);
  } catch (const nlohmann::json::exception& e) {
    return bad(std::string("missing or mistyped field: ") + e.what());
  }
  return c;
}

std::ostream& operator<<(std::ostream& os, const Config& c) { return os << c.Id(); }

Arch Arch::Sm80() {
  Arch a;
  a.cc_major = 8;
  a.cc_minor = 0;
  a.max_smem_optin = 166912;  // 163 KB
  return a;
}

Arch Arch::Sm90() { return Arch(); }

StatusOr<Arch> Arch::FromName(std::string_view name) {
  std::string_view s = name;
  if (s.substr(0, 3) == "sm_") s = s.substr(3);
  int cc = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), cc);
  if (ec != std::errc() || p != s.data() + s.size() || cc < 80)
    return Status(Code::kInvalidArgument, "Arch::FromName",
                  "unsupported architecture '" + std::string(name) + "' (need sm_80 or newer, e.g. sm_90)");
  Arch a = cc >= 90 ? Sm90() : Sm80();
  a.cc_major = cc / 10;
  a.cc_minor = cc % 10;
  if (cc == 86 || cc == 89) a.max_smem_optin = 101376;  // 99 KB
  return a;
}

Status Validate(const Config& c, const Arch& arch) {
  if (c.block_threads % 32 != 0 || c.block_threads < 32)
    return Broken("block", "block_threads " + std::to_string(c.block_threads) + " is not a positive multiple of 32");
  if (c.block_threads > arch.max_threads_per_block || c.block_threads > 1024)
    return Broken("block", "block_threads " + std::to_string(c.block_threads) + " exceeds " +
                               std::to_string(std::min(1024, arch.max_threads_per_block)));
  if (c.warp_mode()) {
    if (c.radix_bits != 1) return Broken("radix", "warp mode finds the threshold one bit per step: radix_bits must be 1");
    if (c.half_first) return Broken("first-pass", "warp mode has no coarse first pass");
    if (c.items < 1 || c.items > 32)
      return Broken("items", "warp mode needs 1 <= items <= 32, got " + std::to_string(c.items));
    if (c.smem_buffer != 0 || c.row_cache)
      return Broken("warp-knobs", "warp mode keeps rows in registers: smem_buffer and row_cache must be 0");
    if (c.rounds != 0 && c.rounds != 1)
      return Broken("rounds", "warp mode takes rounds 0 (tournament or bit steps) or 1 (lane-maximum bound), got " +
                                  std::to_string(c.rounds));
    if (c.rounds == 1 && (c.key_bits() != 32 || c.items > 16))
      return Broken("rounds", "the warp-mode lane-maximum bound (rounds 1) needs 32-bit keys and at most 16 items");
    return Status::Ok();
  }
  if (c.items != 0) return Broken("items", "items is a warp-mode knob; it must be 0 when cluster >= 1");
  if (c.radix_bits != 8 && c.radix_bits != 11)
    return Broken("radix", "radix_bits must be 8 or 11, got " + std::to_string(c.radix_bits));
  if (c.radix_bits > c.key_bits()) return Broken("radix", "radix wider than the key");
  if (c.half_first && c.dtype != DType::kF32)
    return Broken("first-pass", "the coarse first pass only applies to fp32 keys");
  if (c.cluster < 1 || c.cluster > 16 || !IsPow2(c.cluster))
    return Broken("cluster", "cluster must be 0 (warp mode), 1, 2, 4, 8 or 16, got " + std::to_string(c.cluster));
  if (c.cluster > 1 && !arch.clusters())
    return Broken("cluster", "thread-block clusters need sm_90 or newer, not " + arch.Name());
  if (c.cluster > arch.max_cluster())
    return Broken("cluster", "cluster " + std::to_string(c.cluster) + " exceeds " + arch.Name() + "'s maximum");
  if (c.smem_buffer < 0 || c.smem_buffer > 16384 || c.smem_buffer % 32 != 0)
    return Broken("buffer", "smem_buffer must be a multiple of 32 in [0, 16384], got " + std::to_string(c.smem_buffer));
  if (c.rounds < 1 || c.rounds > c.passes() - 1)
    return Broken("rounds", "rounds must be in [1, " + std::to_string(c.passes() - 1) + "] for " +
                                std::to_string(c.passes()) + " digit passes, got " + std::to_string(c.rounds));
  const int smem = c.fixed_smem_bytes() + arch.static_smem_reserve;
  if (smem > arch.max_smem_optin)
    return Broken("smem", "fixed shared memory " + std::to_string(smem) + " B exceeds " + arch.Name() + "'s " +
                              std::to_string(arch.max_smem_optin) + " B per block");
  return Status::Ok();
}

Status ValidateFor(const Config& c, const Arch& arch, const Problem& p) {
  TOPK_RETURN_IF_ERROR(Validate(c, arch));
  if (c.dtype != p.dtype)
    return Broken("dtype", std::string("variant is ") + DTypeName(c.dtype) + ", problem is " + DTypeName(p.dtype));
  if (c.warp_mode() && p.n > 32LL * c.items)
    return Broken("items", "warp mode with " + std::to_string(c.items) + " items per lane holds rows up to " +
                               std::to_string(32 * c.items) + ", n is " + std::to_string(p.n));
  return Status::Ok();
}

namespace {

void RadixKinds(DType dtype, std::vector<std::pair<int, bool>>* out) {
  out->push_back({8, false});
  out->push_back({11, false});
  if (dtype == DType::kF32) {
    out->push_back({8, true});
    out->push_back({11, true});
  }
}

constexpr int kSmCountHint = 132;  // clusters beyond ~2 CTAs per SM cannot run at once
constexpr int64_t kWarpBoundRows = 4096;  // the default's batch for warp_bound()

// A warp-mode config: one warp per row, keys in registers, no buffer or
// row cache; `rounds` picks the body (0 or 1, see Config::rounds).
Config WarpConfig(DType dtype, int block, int items, int rounds) {
  Config c;
  c.dtype = dtype;
  c.block_threads = block;
  c.radix_bits = 1;
  c.cluster = 0;
  c.items = items;
  c.smem_buffer = 0;
  c.rounds = rounds;
  c.row_cache = false;
  return c;
}

}  // namespace

int WarpItems(int64_t n) {
  int items = 2;
  while (32LL * items < n) items *= 2;
  return items;
}

std::vector<Config> EnumerateKernels(DType dtype, const Arch& arch) {
  std::vector<Config> out;
  for (int b : {128, 256, 512}) {
    for (int items : {2, 4, 8, 16})
      for (int bound : {0, 1}) {
        const Config c = WarpConfig(dtype, b, items, bound);
        if (Validate(c, arch).ok()) out.push_back(c);
      }
  }
  std::vector<std::pair<int, bool>> kinds;
  RadixKinds(dtype, &kinds);
  for (int b : {128, 256, 512, 1024})
    for (auto [r, h] : kinds)
      for (int cl : {1, 2}) {  // one clustered binary serves sizes 2..16
        Config c;
        c.dtype = dtype;
        c.block_threads = b;
        c.radix_bits = r;
        c.half_first = h;
        c.cluster = cl;
        c.smem_buffer = 0;
        c.rounds = c.passes() - 1;
        c.row_cache = false;
        if (Validate(c, arch).ok()) out.push_back(c);
      }
  return out;
}

std::vector<Config> Enumerate(const Problem& p, const Arch& arch, const SpaceOptions& opts) {
  std::vector<Config> out;
  if (opts.include_warp && p.n <= 512) {
    for (int b : {128, 256, 512})
      for (int bound : {0, 1}) {
        const Config c = WarpConfig(p.dtype, b, WarpItems(p.n), bound);
        if (ValidateFor(c, arch, p).ok()) out.push_back(c);
      }
  }
  std::vector<std::pair<int, bool>> kinds;
  RadixKinds(p.dtype, &kinds);
  std::vector<int> clusters = {1};
  if (opts.include_cluster && arch.clusters())
    for (int cl : {2, 4, 8, 16})
      if (p.n / cl >= 2048 && p.batch * cl <= 2 * kSmCountHint) clusters.push_back(cl);
  const std::vector<int> blocks = p.n <= 4096 ? std::vector<int>{128, 256, 512} : std::vector<int>{256, 512, 1024};
  for (int b : blocks)
    for (auto [r, h] : kinds)
      for (int cl : clusters)
        for (int buf : {0, 1024, 4096, 8192})
          for (int cache : {0, 1}) {
            // 8192 candidates only for one CTA per row and large k, where a
            // threshold bin past 4096 sends a pass back to the row (H100,
            // 128 x 131072 k2048: 38.87 -> 36.94 us; 64 x 32768 and
            // 256 x 128256 k1024 within 1.5%).
            if (buf == 8192 && (cl != 1 || p.k < 1024)) continue;
            Config c;
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
              if (ValidateFor(c, arch, p).ok()) out.push_back(c);
            }
          }
  return out;
}

Config DefaultConfig(const Problem& p, const Arch& arch) {
  if (p.n <= 512) {
    // The lane-maximum bound for many fp32 rows and k <= 8 (H100, rows of
    // 256, 128 threads: 4096 rows k8 5.41 us against the tournament's 5.97,
    // 16384 rows 12.43 against 17.31, k2 4.11 against 5.42; 2048 rows even,
    // 1024 rows 3.60 against 3.09, k16 7.39 against 7.11).
    const int items = WarpItems(p.n);
    const bool bound = p.dtype == DType::kF32 && p.k <= 8 && p.batch >= kWarpBoundRows && items <= 16;
    return WarpConfig(p.dtype, 128, items, bound ? 1 : 0);
  }
  Config c;
  c.dtype = p.dtype;
  // One CTA per row, 11-bit digits on the exact key, a 4096-candidate buffer
  // and the row cached; rows too few to fill the GPU split over a cluster
  // (up to 16 CTAs, while each still gets >= 8K elements). 512 threads, not
  // the often faster 1024: at 1024 the 64-register cap makes the kernel
  // spill, and a default must not (the tuner may still pick 1024).
  c.block_threads = p.n > 4096 ? 512 : 256;
  c.radix_bits = 11;
  c.half_first = false;
  c.cluster = 1;
  if (arch.clusters())
    while (c.cluster < 16 && p.batch * c.cluster * 2 <= kSmCountHint && p.n / (c.cluster * 2) >= 8192) c.cluster *= 2;
  c.smem_buffer = 4096;
  c.rounds = c.passes() - 1;
  c.row_cache = true;
  if (!Validate(c, arch).ok()) c.smem_buffer = 1024;
  return c;
}

}  // namespace topk::gen
