// Helpers shared by the tests: GPU detection (GPU tests skip without one)
// and per-test temporary paths.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

namespace topk::testing {

// True when a CUDA driver and at least one device are present; otherwise
// `why` says what is missing.
bool HaveGpu(std::string* why);

// A fresh path in this process's folder under the test temp dir
// ($TOPK_TEST_TMP, else /tmp/topk-tests), unique per call; the file does not
// exist yet. The folder is removed when the process ends with every test
// passed, and kept when one failed.
std::string TempPath(const std::string& name);

// Directory of the built executables ($TOPK_BIN_DIR), for tests that run the
// CLI or the tuner worker.
std::string BinDir();

// The first of `paths` that exists ("" when none does): for tests that run an
// optional external program (nvcc, a headless browser) and skip without it.
std::string FirstExisting(std::initializer_list<const char*> paths);

}  // namespace topk::testing

// Skips the current test with the reason when there is no GPU.
#define TOPK_REQUIRE_GPU()                                             \
  do {                                                                 \
    std::string topk_why_;                                             \
    if (!::topk::testing::HaveGpu(&topk_why_)) GTEST_SKIP() << topk_why_; \
  } while (0)
