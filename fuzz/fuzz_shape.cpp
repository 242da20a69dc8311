// The CLI's shape grammar ("[DTYPE:]BATCHxN:K[:FLAG...]") and the other
// argument parsers of tools/cli_common: never crash; a shape that parses
// prints back (ShapeSpec) to a spec that parses to the same shape.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tools/cli_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string spec(reinterpret_cast<const char*>(data), size);
  auto p = topk::cli::ParseShape(spec);
  if (p.ok()) {
    const std::string again = topk::cli::ShapeSpec(*p);
    auto q = topk::cli::ParseShape(again);
    if (!q.ok() || topk::cli::ShapeSpec(*q) != again) std::abort();
  } else if (p.status().message().empty()) {
    std::abort();  // an error always says why
  }
  (void)topk::cli::ParseShard(spec);
  (void)topk::cli::ParseDeviceList(spec);
  return 0;
}
