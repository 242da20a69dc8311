#include "support/kernel_cover.hpp"

#include <set>
#include <unordered_set>

namespace topk::testing {
namespace {

std::vector<std::string> Features(const gen::Config& c, int order) {
  std::vector<std::string> f;
  const std::string fam = c.family + ":";
  for (size_t i = 0; i < c.params.size(); ++i) {
    const std::string a = c.params[i].first + "=" + std::to_string(c.params[i].second);
    if (order == 1) f.push_back(fam + a);
    for (size_t j = i + 1; order == 2 && j < c.params.size(); ++j)
      f.push_back(fam + a + "," + c.params[j].first + "=" + std::to_string(c.params[j].second));
  }
  return f;
}

}  // namespace

std::vector<std::string> KnobFeatures(const std::vector<gen::Config>& configs, int order) {
  std::set<std::string> all;
  for (const gen::Config& c : configs)
    for (std::string& f : Features(c, order)) all.insert(std::move(f));
  return {all.begin(), all.end()};
}

std::vector<gen::Config> CoveringKernels(const std::vector<gen::Config>& all, const std::vector<gen::Config>& seeds,
                                         int order) {
  std::unordered_set<std::string> seed_keys;
  for (const gen::Config& c : seeds) seed_keys.insert(c.KernelKey());
  std::vector<std::vector<std::string>> feats;
  feats.reserve(all.size());
  std::unordered_set<std::string> every;
  for (const gen::Config& c : all) {
    feats.push_back(Features(c, order));
    every.insert(feats.back().begin(), feats.back().end());
  }
  const size_t need = every.size();
  std::vector<bool> taken(all.size(), false);
  std::unordered_set<std::string> covered;
  auto take = [&](size_t i) {
    taken[i] = true;
    covered.insert(feats[i].begin(), feats[i].end());
  };
  for (size_t i = 0; i < all.size(); ++i)
    if (seed_keys.count(all[i].KernelKey())) take(i);
  while (covered.size() < need) {
    size_t best = 0, best_new = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      if (taken[i]) continue;
      size_t fresh = 0;
      for (const std::string& f : feats[i]) fresh += covered.count(f) == 0;
      if (fresh > best_new) best = i, best_new = fresh;  // the first of equals: deterministic
    }
    if (best_new == 0) break;  // cannot happen: every feature comes from some config
    take(best);
  }
  std::vector<gen::Config> out;
  for (size_t i = 0; i < all.size(); ++i)
    if (taken[i]) out.push_back(all[i]);
  return out;
}

}  // namespace topk::testing
