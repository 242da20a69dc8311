#include "tuner/search.hpp"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <set>

namespace topk::tuner {

int KnobDistance(const gen::Config& a, const gen::Config& b) {
  // Configs of two families share no knob: as far apart as they can be.
  if (a.family != b.family) return static_cast<int>(1 + std::max(a.params.size(), b.params.size()));
  int d = a.dtype != b.dtype;
  for (const auto& [name, value] : a.params) d += !b.Has(name) || b.Get(name) != value;
  for (const auto& [name, value] : b.params) d += !a.Has(name);
  return d;
}

namespace {

class Exhaustive final : public Strategy {
 public:
  Exhaustive(size_t n, int first) {
    if (first >= 0 && static_cast<size_t>(first) < n) order_.push_back(first);
    for (size_t i = 0; i < n; ++i)
      if (static_cast<int>(i) != first) order_.push_back(static_cast<int>(i));
  }
  int Next() override { return pos_ < order_.size() ? order_[pos_++] : -1; }
  void Report(int, double) override {}
  const char* name() const override { return "exhaustive"; }

 private:
  std::vector<int> order_;
  size_t pos_ = 0;
};

// For every family in `space` other than that of `space[start]` (every
// family when `start` is out of range), in order of first appearance, the
// index of its most central config: the one whose knob values lie nearest
// the middle of the values its family takes in the space (each knob's value
// ranked among them), the first in the space's order on a tie.
std::vector<int> FamilyStarts(const std::vector<gen::Config>& space, int start) {
  const bool has_start = start >= 0 && static_cast<size_t>(start) < space.size();
  std::vector<std::string> families;
  std::map<std::string, std::vector<int>> members;
  for (size_t i = 0; i < space.size(); ++i) {
    const std::string& f = space[i].family;
    if (has_start && f == space[static_cast<size_t>(start)].family) continue;
    if (!members.count(f)) families.push_back(f);
    members[f].push_back(static_cast<int>(i));
  }
  std::vector<int> starts;
  for (const std::string& f : families) {
    std::map<std::string, std::set<int>> values;  // knob -> the values the family's configs take
    for (int i : members[f])
      for (const auto& [name, value] : space[static_cast<size_t>(i)].params) values[name].insert(value);
    int best = -1, best_off = 0;
    for (int i : members[f]) {
      int off = 0;  // over knobs, |2 * rank - (count - 1)|: twice the distance from the middle rank
      for (const auto& [name, value] : space[static_cast<size_t>(i)].params) {
        const std::set<int>& v = values[name];
        const int rank = static_cast<int>(std::distance(v.begin(), v.find(value)));
        off += std::abs(2 * rank - static_cast<int>(v.size() - 1));
      }
      if (best < 0 || off < best_off) {
        best = i;
        best_off = off;
      }
    }
    starts.push_back(best);
  }
  return starts;
}

class LocalSearch final : public Strategy {
 public:
  static constexpr size_t kWholeFamily = 8;  // families of at most this many configs are measured whole

  LocalSearch(const std::vector<gen::Config>& space, int start, uint64_t seed, int random_starts)
      : rng_(seed), cost_(space.size(), std::numeric_limits<double>::quiet_NaN()), proposed_(space.size(), false) {
    // A config's neighbours: the configs of its family nearest to it, one
    // knob away where the space has them. Some spaces have none at one knob:
    // at 1 x 131072 the resident family's three configs (1024 threads in 8
    // CTAs, 512 in 16, 1024 with 8 keys in 16) each differ from the others
    // in two or three knobs, so a step of one knob reached none of them and
    // only a random restart could.
    neighbours_.resize(space.size());
    for (size_t i = 0; i < space.size(); ++i) {
      int nearest = std::numeric_limits<int>::max();
      for (size_t j = 0; j < space.size(); ++j) {
        if (i == j || space[i].family != space[j].family) continue;
        const int d = KnobDistance(space[i], space[j]);
        if (d == 0) continue;
        if (d < nearest) {
          nearest = d;
          neighbours_[i].clear();
        }
        if (d == nearest) neighbours_[i].push_back(static_cast<int>(j));
      }
    }
    if (start >= 0 && static_cast<size_t>(start) < space.size()) starts_.push_back(start);
    // Neighbours never cross families (KnobDistance), so a family without a
    // start is reached only by a random one, which a small budget may never
    // draw: e.g. no filter config measured for 128 x 131072, k 2048, and the
    // robust objective, which re-times the best of every family, never saw
    // the family that does not collapse. So one start of every other family
    // comes before the random ones.
    for (int i : FamilyStarts(space, start)) starts_.push_back(i);
    // Then the rest of every family small enough to measure whole: such a
    // space is curated (the resident family's one to five configs a shape)
    // and its configs often lie several knobs apart, so a family whose start
    // is not the best overall would otherwise keep its other configs
    // unmeasured, while the robust objective picks among every family's best.
    std::map<std::string, std::vector<int>> members;
    for (size_t i = 0; i < space.size(); ++i) members[space[i].family].push_back(static_cast<int>(i));
    for (size_t i = 0; i < space.size(); ++i)
      if (members[space[i].family].size() <= kWholeFamily &&
          std::find(starts_.begin(), starts_.end(), static_cast<int>(i)) == starts_.end())
        starts_.push_back(static_cast<int>(i));
    const size_t fixed = starts_.size();
    std::vector<int> all(space.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    std::shuffle(all.begin(), all.end(), rng_);
    for (int i : all) {
      if (starts_.size() >= fixed + static_cast<size_t>(std::max(random_starts, 0))) break;
      if (std::find(starts_.begin(), starts_.end(), i) == starts_.end()) starts_.push_back(i);
    }
  }

  int Next() override {
    while (!starts_.empty()) {
      const int s = starts_.front();
      starts_.erase(starts_.begin());
      if (!proposed_[static_cast<size_t>(s)]) return Propose(s);
    }
    if (best_ >= 0) {
      std::vector<int> open;
      for (int j : neighbours_[static_cast<size_t>(best_)])
        if (!proposed_[static_cast<size_t>(j)]) open.push_back(j);
      if (!open.empty()) return Propose(open[rng_() % open.size()]);
    }
    // Local optimum (or nothing succeeded yet): restart at random.
    std::vector<int> rest;
    for (size_t i = 0; i < proposed_.size(); ++i)
      if (!proposed_[i]) rest.push_back(static_cast<int>(i));
    if (rest.empty()) return -1;
    return Propose(rest[rng_() % rest.size()]);
  }

  void Report(int index, double cost) override {
    cost_[static_cast<size_t>(index)] = cost;
    if (cost < std::numeric_limits<double>::infinity() && (best_ < 0 || cost < cost_[static_cast<size_t>(best_)]))
      best_ = index;
  }
  const char* name() const override { return "budget"; }

 private:
  int Propose(int i) {
    proposed_[static_cast<size_t>(i)] = true;
    return i;
  }
  std::mt19937_64 rng_;
  std::vector<double> cost_;
  std::vector<bool> proposed_;
  std::vector<std::vector<int>> neighbours_;
  std::vector<int> starts_;
  int best_ = -1;
};

}  // namespace

std::unique_ptr<Strategy> MakeExhaustive(size_t n, int first) { return std::make_unique<Exhaustive>(n, first); }

std::unique_ptr<Strategy> MakeLocalSearch(const std::vector<gen::Config>& space, int start, uint64_t seed,
                                          int random_starts) {
  return std::make_unique<LocalSearch>(space, start, seed, random_starts);
}

StatusOr<std::unique_ptr<Strategy>> MakeStrategy(const std::string& name, const std::vector<gen::Config>& space,
                                                 int start, uint64_t seed, size_t auto_limit) {
  if (name == "exhaustive" || (name == "auto" && space.size() <= auto_limit)) return MakeExhaustive(space.size(), start);
  if (name == "budget" || name == "auto") return MakeLocalSearch(space, start, seed);
  return InvalidArgument("MakeStrategy", "unknown strategy '" + name + "' (exhaustive, budget, auto)");
}

}  // namespace topk::tuner
