// A kernel family that lives only in the tests: "sorttrunc", an exact top-k
// by counting each element's rank in its row (O(n^2) per row, rows up to
// 4096) and keeping the first k. It takes the same path as the built-in
// families (registry, enumeration, NVRTC, launch plan, verification, tuning,
// the cache, dispatch) without touching a file outside the tests, which is
// what shows that those layers know no family.
#pragma once

#include <memory>

#include "generator/family.hpp"

namespace topk::testing {

// The family, not registered.
std::shared_ptr<const gen::Family> MakeToyFamily();

// Registers the toy family for the object's lifetime.
class ScopedToyFamily {
 public:
  ScopedToyFamily();
  ~ScopedToyFamily();
  const Status& status() const { return status_; }

 private:
  Status status_;
};

// The toy family's config for `dtype` with `block` threads.
gen::Config ToyConfig(DType dtype, int block);

}  // namespace topk::testing
