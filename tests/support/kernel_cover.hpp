// Which kernels CI compiles when it does not compile them all: a covering
// subset of an enumeration, so that every knob value (order 1), or every pair
// of two knobs' values (order 2), that the enumeration has in a family is
// compiled at least once (compile_all_test; docs/TESTING.md says why).
#pragma once

#include <string>
#include <vector>

#include "generator/config.hpp"

namespace topk::testing {

// The configs of `all` that `seeds` name (by KernelKey; free to compile:
// they are in the shipped blob), then, greedily, the config of `all` that
// covers the most knob values (order 1) or value pairs (order 2) not yet
// covered in its family, until every one that `all` has is covered. The
// result keeps `all`'s order. Deterministic: same inputs, same subset.
std::vector<gen::Config> CoveringKernels(const std::vector<gen::Config>& all, const std::vector<gen::Config>& seeds,
                                         int order);

// The knob values (order 1) or value pairs (order 2) of `configs`, each as
// "<family>:<knob>=<value>[,<knob>=<value>]": what CoveringKernels covers.
std::vector<std::string> KnobFeatures(const std::vector<gen::Config>& configs, int order);

}  // namespace topk::testing
