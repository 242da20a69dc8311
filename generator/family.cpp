#include "generator/family.hpp"

#include <algorithm>
#include <mutex>
#include <map>
#include <set>

#include "generator/filter.hpp"
#include "generator/grid.hpp"
#include "generator/radix.hpp"
#include "generator/resident.hpp"
#include "generator/warp.hpp"

namespace topk::gen {
namespace {

struct Registry {
  std::vector<std::shared_ptr<const Family>> families;
  Registry() {
    // The built-in families, in the order DefaultConfig consults them: a
    // family's Default() declines the problems it should not serve.
    families.push_back(MakeWarpFamily());
    families.push_back(MakeGridFamily());      // before resident: its default serves a few long rows
    families.push_back(MakeResidentFamily());  // before radix: its default serves rows up to 8192
    families.push_back(MakeFilterFamily());    // before radix: its default serves many long rows
    families.push_back(MakeRadixFamily());
  }
};

Registry& TheRegistry() {
  static Registry r;
  return r;
}

Status Broken(const std::string& what) { return Status(Code::kInvalidArgument, "constraint family", what); }

}  // namespace

Config Family::Blank(DType dtype) const {
  Config c;
  c.family = name();
  c.dtype = dtype;
  for (const ParamSpec& p : params())
    c.params.emplace_back(p.name, p.implicit ? *p.implicit : p.values.empty() ? 0 : p.values.front());
  return c;
}

std::optional<Config> Family::Adapt(const Config& tuned, const Problem& tuned_p, const Problem& p,
                                    const Arch& arch) const {
  (void)tuned_p;
  if (!ValidateFor(tuned, arch, p).ok()) return std::nullopt;
  return tuned;
}

Status ValidateBlock(int block_threads, const Arch& arch) {
  if (block_threads % 32 != 0 || block_threads < 32)
    return Status(Code::kInvalidArgument, "constraint block",
                  "block_threads " + std::to_string(block_threads) + " is not a positive multiple of 32");
  if (block_threads > arch.max_threads_per_block || block_threads > 1024)
    return Status(Code::kInvalidArgument, "constraint block",
                  "block_threads " + std::to_string(block_threads) + " exceeds " +
                      std::to_string(std::min(1024, arch.max_threads_per_block)));
  return Status::Ok();
}

Status ValidateCluster(int cluster, const Arch& arch) {
  if (cluster < 1 || cluster > 16 || (cluster & (cluster - 1)) != 0)
    return Status(Code::kInvalidArgument, "constraint cluster",
                  "cluster must be 1, 2, 4, 8 or 16, got " + std::to_string(cluster));
  if (cluster > 1 && !arch.clusters())
    return Status(Code::kInvalidArgument, "constraint cluster",
                  "thread-block clusters need sm_90 or newer, not " + arch.Name());
  if (cluster > arch.max_cluster())
    return Status(Code::kInvalidArgument, "constraint cluster",
                  "cluster " + std::to_string(cluster) + " exceeds " + arch.Name() + "'s maximum");
  return Status::Ok();
}

std::vector<const Family*> Families() {
  std::vector<const Family*> out;
  for (const auto& f : TheRegistry().families) out.push_back(f.get());
  return out;
}

const Family* FindFamily(std::string_view name) {
  for (const auto& f : TheRegistry().families)
    if (f->name() == name) return f.get();
  return nullptr;
}

Status RegisterFamily(std::shared_ptr<const Family> family) {
  if (!family) return Status(Code::kInvalidArgument, "RegisterFamily", "null family");
  const std::string& name = family->name();
  if (name.empty() || name.find('_') != std::string::npos)
    return Status(Code::kInvalidArgument, "RegisterFamily",
                  "family name '" + name + "' must be non-empty and contain no '_' (it prefixes variant ids)");
  if (FindFamily(name)) return Status(Code::kFailedPrecondition, "RegisterFamily", "family '" + name + "' exists");
  std::set<std::string> names, tags;
  for (const ParamSpec& p : family->params()) {
    if (!names.insert(p.name).second || p.name == "family" || p.name == "dtype")
      return Status(Code::kInvalidArgument, "RegisterFamily", "family '" + name + "': parameter name '" + p.name +
                                                                  "' is repeated or reserved");
    if (p.tag.empty() || !tags.insert(p.tag).second ||
        p.tag.find_first_of("0123456789_-") != std::string::npos)
      return Status(Code::kInvalidArgument, "RegisterFamily",
                    "family '" + name + "': tag '" + p.tag + "' of '" + p.name + "' is empty, repeated or not letters");
  }
  TheRegistry().families.push_back(std::move(family));
  return Status::Ok();
}

void UnregisterFamily(std::string_view name) {
  auto& fs = TheRegistry().families;
  fs.erase(std::remove_if(fs.begin(), fs.end(), [&](const auto& f) { return f->name() == name; }), fs.end());
}

Config WithModes(const Config& c, const Problem& p, const Arch& arch) {
  const Family* f = c.family_ptr();
  if (!f) return c;
  Config moded = f->WithModesOf(c, p);
  return ValidateFor(moded, arch, p).ok() ? moded : c;
}

StatusOr<const Family*> FamilyOf(const Config& c) {
  const Family* f = FindFamily(c.family);
  if (!f) return Broken("unknown kernel family '" + c.family + "'");
  const std::vector<ParamSpec>& specs = f->params();
  if (c.params.size() != specs.size())
    return Broken("family " + f->name() + " has " + std::to_string(specs.size()) + " parameters, the config " +
                  std::to_string(c.params.size()));
  for (size_t i = 0; i < specs.size(); ++i)
    if (c.params[i].first != specs[i].name)
      return Broken("family " + f->name() + " expects parameter '" + specs[i].name + "' at position " +
                    std::to_string(i) + ", the config has '" + c.params[i].first + "'");
  return f;
}

std::vector<KernelSource> GenerateSources(const Config& c) {
  auto f = FamilyOf(c);
  return f.ok() ? (*f)->Sources(c) : std::vector<KernelSource>{};
}

LaunchPlan PlanLaunch(const Config& c, const Problem& p, const Arch& arch, int max_cache_keys) {
  auto f = FamilyOf(c);
  return f.ok() ? (*f)->Plan(c, p, arch, max_cache_keys) : LaunchPlan{};
}

std::vector<Config> DefaultKernelConfigs(const Arch& arch) {
  std::set<int64_t> ns, batches;
  for (int64_t v = 1; v < (int64_t{1} << 31); v *= 2)
    for (int64_t x : {v - 1, v, v + 1, 3 * v})
      if (x >= 1 && x < (int64_t{1} << 31)) ns.insert(x);
  for (int64_t v = 1; v <= (int64_t{1} << 20); v *= 2)
    for (int64_t x : {v - 1, v, v + 1, 3 * v})
      if (x >= 1) batches.insert(x);
  // The SM count decides whether rows split over clusters (few rows on many
  // SMs): the architecture's flagship part and parts far smaller and larger,
  // and one of 64 to 127 SMs (the grid family's 64 CTAs a row instead of 128).
  std::vector<Arch> arches = {arch};
  for (int sms : {8, 100, 512}) {
    Arch a = arch;
    a.sm_count = sms;
    arches.push_back(a);
  }
  std::map<std::string, Config> by_key;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16})
    for (const Arch& a : arches)
      for (int64_t n : ns)
        for (int64_t batch : batches)
          for (int64_t k : {int64_t{1}, int64_t{8}, int64_t{9}, int64_t{1024}, n}) {
            if (k > n) continue;
            Problem p;
            p.dtype = dtype;
            p.n = n;
            p.k = k;
            p.batch = batch;
            const Config c = DefaultConfig(p, a);
            if (c.family.empty()) continue;
            by_key.emplace(c.KernelKey(), c);
            // Deterministic problems: the same defaults but where a family
            // takes the ties in a kernel of its own (the grid's `ties`).
            p.deterministic = true;
            const Config d = DefaultConfig(p, a);
            if (!d.family.empty()) by_key.emplace(d.KernelKey(), d);
          }
  std::vector<Config> out;
  for (auto& [key, c] : by_key) out.push_back(std::move(c));
  return out;
}

std::vector<KernelSource> DefaultKernelSources(const Arch& arch) {
  return DefaultKernelSources(DefaultKernelConfigs(arch));
}

std::vector<KernelSource> DefaultKernelSources(const std::vector<Config>& default_configs) {
  std::map<std::string, KernelSource> by_key;
  for (const Config& c : default_configs)
    for (KernelSource& s : GenerateSources(c)) by_key.emplace(s.key, std::move(s));
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (KernelSource s : {SortSource(dtype), TieSource(dtype)}) by_key.emplace(s.key, std::move(s));
  }
  std::vector<KernelSource> out;
  std::set<std::string> hashes;
  for (auto& [key, s] : by_key)
    if (hashes.insert(s.hash).second) out.push_back(std::move(s));
  return out;
}

}  // namespace topk::gen
