// Variant ids ("radix_f32_b512_r11_h0_s4096_c1_t2_m1", ids of earlier
// releases) and their JSON form, as read from caches and --variant:
// Config::FromId / FromJson then Validate never crash, and a config that
// parses prints back to an id and a JSON object that parse to it again.
// The first byte picks the parser: even FromId, odd FromJson.
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "generator/config.hpp"

namespace {

void Check(const topk::gen::Config& c) {
  (void)topk::gen::Validate(c, topk::gen::Arch::Sm90());
  (void)topk::gen::Validate(c, topk::gen::Arch::Sm80());
  if (c.family_ptr() == nullptr) return;
  const std::string id = c.Id();
  auto again = topk::gen::Config::FromId(id);
  if (!again.ok() || again->Id() != id) std::abort();
  auto from_json = topk::gen::Config::FromJson(c.ToJson());
  if (!from_json.ok() || from_json->Id() != id) std::abort();
  (void)c.KernelKey();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    auto c = topk::gen::Config::FromId(text);
    if (c.ok()) Check(*c);
  } else {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) return 0;
    auto c = topk::gen::Config::FromJson(j);
    if (c.ok()) Check(*c);
  }
  return 0;
}
