// Opening a cache file made of arbitrary bytes (a truncated, corrupt or
// foreign file at --db): OpenReadOnly then Open either fail with a Status or
// give a cache whose rows can be read.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "cache/cache.hpp"
#include "fuzz/fuzz_util.hpp"

namespace {

void ReadEverything(const topk::cache::Cache& c) {
  (void)c.schema_version();
  (void)c.Devices();
  (void)c.CountBinaries();
  (void)c.CountMeasurements();
  auto ws = c.Winners("");
  if (ws.ok()) {
    for (const auto& w : *ws) (void)c.FindWinner(w.device_fingerprint, w.problem);
  }
  auto ms = c.Measurements("", nullptr);
  (void)c.Baselines("");
  (void)c.IntegrityCheck();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string db = topk::fuzz::TempDir().string() + "/open.db";
  topk::fuzz::RemoveDb(db);
  topk::fuzz::WriteBytes(db, data, size);
  {
    auto ro = topk::cache::Cache::OpenReadOnly(db);
    if (ro.ok()) ReadEverything(**ro);
  }
  {
    auto rw = topk::cache::Cache::Open(db);
    if (rw.ok()) ReadEverything(**rw);
  }
  topk::fuzz::RemoveDb(db);
  return 0;
}
