// Search strategies over an enumerated space. A strategy proposes the next
// candidate and learns each result; the tuner owns the clock and the budget.
// Pure logic: tested with fake costs, no GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "generator/config.hpp"
#include "topk/status.hpp"

namespace topk::tuner {

class Strategy {
 public:
  virtual ~Strategy() = default;
  // Index of the next candidate to evaluate, or -1 when the strategy is done.
  virtual int Next() = 0;
  // The cost of an evaluated candidate (microseconds; +inf for failures).
  virtual void Report(int index, double cost) = 0;
  virtual const char* name() const = 0;
};

// Every candidate once, `first` (the default configuration) first.
std::unique_ptr<Strategy> MakeExhaustive(size_t n, int first);

// Family starts, random starts, then local search: evaluate `start`, then
// one candidate of every other family in the space (its most central config:
// knob values nearest the middle of those the family takes in the space),
// then the other configs of every family with at most 8 in the space, then
// `random_starts` random candidates, then repeatedly the unevaluated
// neighbours of the best so far (the configs of its family that differ from
// it in the fewest knobs: one, where the space has such configs),
// restarting from a random unevaluated candidate at a local optimum. Ends
// when everything was tried.
std::unique_ptr<Strategy> MakeLocalSearch(const std::vector<gen::Config>& space, int start, uint64_t seed,
                                          int random_starts = 4);

// "exhaustive", "budget" (local search) or "auto" (exhaustive for spaces of
// at most `auto_limit` candidates).
StatusOr<std::unique_ptr<Strategy>> MakeStrategy(const std::string& name, const std::vector<gen::Config>& space,
                                                 int start, uint64_t seed, size_t auto_limit = 150);

// Number of knobs in which two configs differ.
int KnobDistance(const gen::Config& a, const gen::Config& b);

}  // namespace topk::tuner
