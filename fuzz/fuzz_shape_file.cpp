// The shape-file parser (tune --shapes FILE.json): any text is a ShapeSet
// or an error, never a crash; every shape it accepts is tunable.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tuner/presets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto s = topk::tuner::ShapesFromJsonText(text, "fuzz.json");
  if (s.ok()) {
    if (s->problems.empty()) std::abort();
    for (const topk::Problem& p : s->problems)
      if (!topk::tuner::ValidateTunable(p).ok()) std::abort();
  }
  return 0;
}
