#include "support/test_support.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>

#include "jit/device.hpp"

namespace topk::testing {

bool HaveGpu(std::string* why) {
  auto n = jit::DeviceCount();
  if (!n.ok()) {
    *why = "no GPU: " + n.status().ToString();
    return false;
  }
  if (*n < 1) {
    *why = "no GPU: the driver reports 0 devices";
    return false;
  }
  return true;
}

std::string TempPath(const std::string& name) {
  static std::atomic<int> counter{0};
  const char* base = std::getenv("TOPK_TEST_TMP");
  std::filesystem::path dir = base && *base ? base : "/tmp/topk-tests";
  std::filesystem::create_directories(dir);
  const std::string unique =
      std::to_string(::getpid()) + "_" + std::to_string(counter.fetch_add(1)) + "_" + name;
  std::filesystem::path p = dir / unique;
  std::filesystem::remove_all(p);
  return p.string();
}

std::string BinDir() {
  const char* d = std::getenv("TOPK_BIN_DIR");
  return d && *d ? d : ".";
}

std::string FirstExisting(std::initializer_list<const char*> paths) {
  for (const char* p : paths)
    if (std::filesystem::exists(p)) return p;
  return "";
}

}  // namespace topk::testing
