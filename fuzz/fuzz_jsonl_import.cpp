// `topk-tune import`: JSON Lines into a fresh cache. A malformed file fails
// with a Status and leaves the cache as it was; an accepted one reads back
// (winners, measurements, baselines, devices) and exports again.
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "cache/cache.hpp"
#include "fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = topk::fuzz::TempDir().string();
  const std::string in = dir + "/in.jsonl";
  const std::string db = dir + "/import.db";
  topk::fuzz::WriteBytes(in, data, size);
  topk::fuzz::RemoveDb(db);
  {
    auto c = topk::cache::Cache::Open(db);
    if (!c.ok()) std::abort();  // a fresh file in our own directory
    topk::cache::Cache& cache = **c;
    const topk::Status st = cache.ImportJsonl(in);
    if (!st.ok()) {
      // All or nothing: a failed import leaves the fresh cache empty.
      auto n = cache.CountMeasurements();
      if (!n.ok() || *n != 0) std::abort();
    }
    (void)cache.Devices();
    (void)cache.Winners("");
    (void)cache.Measurements("", nullptr);
    (void)cache.Baselines("");
    std::ostringstream out;
    (void)cache.WriteJsonl(out, true);
  }
  topk::fuzz::RemoveDb(db);
  return 0;
}
