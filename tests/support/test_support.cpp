#include "support/test_support.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <system_error>

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

namespace {

// This process's folder under the test temp dir ($TOPK_TEST_TMP or
// /tmp/topk-tests): run-<pid>. Removed when the process exits with every
// test passed; kept, for a look at what a failing test left, otherwise. A
// forked child leaves it alone (it exits through _exit anyway).
class RunDir {
 public:
  const std::filesystem::path& Get() {
    std::call_once(once_, [this] {
      const char* base = std::getenv("TOPK_TEST_TMP");
      dir_ = std::filesystem::path(base && *base ? base : "/tmp/topk-tests") / ("run-" + std::to_string(::getpid()));
      owner_ = ::getpid();
      std::filesystem::remove_all(dir_);  // a folder of an earlier process with the same pid
      std::filesystem::create_directories(dir_);
    });
    return dir_;
  }
  ~RunDir() {
    if (owner_ != ::getpid() || dir_.empty()) return;
    const ::testing::UnitTest* u = ::testing::UnitTest::GetInstance();
    if (u->Passed()) {
      std::error_code ec;  // best effort: a folder a test made read-only stays
      std::filesystem::remove_all(dir_, ec);
    }
  }

 private:
  std::once_flag once_;
  std::filesystem::path dir_;
  pid_t owner_ = 0;
};

RunDir& TheRunDir() {
  static RunDir d;  // constructed after gtest's UnitTest, so destroyed before it
  return d;
}

}  // namespace

std::string TempPath(const std::string& name) {
  static std::atomic<int> counter{0};
  const std::filesystem::path p = TheRunDir().Get() / (std::to_string(counter.fetch_add(1)) + "_" + name);
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
