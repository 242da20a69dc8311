// The C API (include/topk/topk.h) on paths that need no GPU: every NULL
// argument, bad dtypes, opening without a device, code names, the default
// cache path, the init functions and NULL-safe accessors. The paths that
// need a device are in gpu_c_api_test.cpp.
#include "topk/topk.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "topk/topk.hpp"

namespace {

// Same numbers on both sides of the API.
static_assert(TOPK_OK == static_cast<int>(topk::Code::kOk));
static_assert(TOPK_INVALID_ARGUMENT == static_cast<int>(topk::Code::kInvalidArgument));
static_assert(TOPK_NOT_FOUND == static_cast<int>(topk::Code::kNotFound));
static_assert(TOPK_OUT_OF_RANGE == static_cast<int>(topk::Code::kOutOfRange));
static_assert(TOPK_FAILED_PRECONDITION == static_cast<int>(topk::Code::kFailedPrecondition));
static_assert(TOPK_UNAVAILABLE == static_cast<int>(topk::Code::kUnavailable));
static_assert(TOPK_RESOURCE_EXHAUSTED == static_cast<int>(topk::Code::kResourceExhausted));
static_assert(TOPK_DATA_LOSS == static_cast<int>(topk::Code::kDataLoss));
static_assert(TOPK_COMPILE_ERROR == static_cast<int>(topk::Code::kCompileError));
static_assert(TOPK_CUDA_ERROR == static_cast<int>(topk::Code::kCudaError));
static_assert(TOPK_WRONG_RESULT == static_cast<int>(topk::Code::kWrongResult));
static_assert(TOPK_CRASH == static_cast<int>(topk::Code::kCrash));
static_assert(TOPK_TIMEOUT == static_cast<int>(topk::Code::kTimeout));
static_assert(TOPK_INTERNAL == static_cast<int>(topk::Code::kInternal));
static_assert(TOPK_UNIMPLEMENTED == static_cast<int>(topk::Code::kUnimplemented));
static_assert(TOPK_F32 == static_cast<int>(topk::DType::kF32));
static_assert(TOPK_F16 == static_cast<int>(topk::DType::kF16));
static_assert(TOPK_BF16 == static_cast<int>(topk::DType::kBF16));
static_assert(TOPK_DISPATCH_EXACT == static_cast<int>(topk::DispatchSource::kExact));
static_assert(TOPK_DISPATCH_NEAREST == static_cast<int>(topk::DispatchSource::kNearest));
static_assert(TOPK_DISPATCH_DEFAULT == static_cast<int>(topk::DispatchSource::kDefault));
// The workspace size is the C++ PlanInfo's type, so no plan's size is cut.
static_assert(std::is_same_v<decltype(topk_plan_workspace_bytes(nullptr)), decltype(topk::PlanInfo::workspace_bytes)>);

// Takes ownership of a C API error message and returns it ("" for NULL).
std::string Take(char* err) {
  std::string s = err ? err : "";
  topk_free(err);
  return s;
}

// A handle that is never dereferenced: the argument checks below must come
// before any use of the library, so a plan with bad arguments touches
// nothing. (Were that ever reordered, these tests would crash, which is the
// point.)
topk_library* UntouchableLibrary() {
  static char bytes[64];
  return reinterpret_cast<topk_library*>(bytes);
}

topk_problem GoodProblem() {
  topk_problem p;
  topk_problem_init(&p);
  p.n = 1024;
  p.k = 8;
  return p;
}

// Sets or unsets an environment variable for the scope, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

std::string DefaultPath() {
  char* p = topk_default_cache_path();
  EXPECT_NE(p, nullptr);
  return Take(p);
}

TEST(CApiTest, OptionsInitDefaults) {
  topk_options o;
  std::memset(&o, 0x5a, sizeof(o));
  topk_options_init(&o);
  EXPECT_EQ(o.device, 0);
  EXPECT_EQ(o.cache_path, nullptr);
  EXPECT_EQ(o.allow_same_arch, 0);
  EXPECT_EQ(o.write_back, 1);
  EXPECT_EQ(o.programmatic_launch, 1);
  topk_options_init(nullptr);  // allowed, does nothing
}

TEST(CApiTest, ProblemInitDefaults) {
  topk_problem p;
  std::memset(&p, 0x5a, sizeof(p));
  topk_problem_init(&p);
  EXPECT_EQ(p.dtype, TOPK_F32);
  EXPECT_EQ(p.batch, 1);
  EXPECT_EQ(p.n, 0);
  EXPECT_EQ(p.k, 0);
  EXPECT_EQ(p.row_stride, 0);
  EXPECT_EQ(p.largest, 1);
  EXPECT_EQ(p.ranges, 0);
  EXPECT_EQ(p.values, 0);
  EXPECT_EQ(p.sorted, 0);
  EXPECT_EQ(p.deterministic, 0);
  topk_problem_init(nullptr);
}

TEST(CApiTest, LibraryOpenNullArguments) {
  topk_options o;
  topk_options_init(&o);
  topk_library* lib = UntouchableLibrary();
  char* err = nullptr;
  EXPECT_EQ(topk_library_open(nullptr, &lib, &err), TOPK_INVALID_ARGUMENT);
  EXPECT_EQ(Take(err), "invalid_argument: topk_library_open: options is NULL");
  EXPECT_EQ(lib, UntouchableLibrary()) << "*out must be untouched on failure";

  err = nullptr;
  EXPECT_EQ(topk_library_open(&o, nullptr, &err), TOPK_INVALID_ARGUMENT);
  EXPECT_EQ(Take(err), "invalid_argument: topk_library_open: out is NULL");

  // err == NULL is allowed: the code alone comes back.
  EXPECT_EQ(topk_library_open(nullptr, &lib, nullptr), TOPK_INVALID_ARGUMENT);
  EXPECT_EQ(topk_library_open(&o, nullptr, nullptr), TOPK_INVALID_ARGUMENT);
}

TEST(CApiTest, LibraryOpenNegativeDevice) {
  topk_options o;
  topk_options_init(&o);
  o.device = -1;
  topk_library* lib = nullptr;
  char* err = nullptr;
  EXPECT_EQ(topk_library_open(&o, &lib, &err), TOPK_INVALID_ARGUMENT);
  const std::string msg = Take(err);
  EXPECT_NE(msg.find("device must be >= 0, got -1"), std::string::npos) << msg;
  EXPECT_EQ(lib, nullptr);
}

TEST(CApiTest, LibraryOpenWithoutGpu) {
  topk_options o;
  topk_options_init(&o);
  topk_library* lib = nullptr;
  char* err = nullptr;
  const int code = topk_library_open(&o, &lib, &err);
  if (code == TOPK_OK) {
    topk_library_close(lib);
    GTEST_SKIP() << "a GPU is present; gpu_c_api_test covers this machine";
  }
  const std::string msg = Take(err);
  // No driver: unavailable; a driver without device 0: not_found.
  EXPECT_TRUE(code == TOPK_UNAVAILABLE || code == TOPK_NOT_FOUND) << code << " " << msg;
  EXPECT_EQ(msg.rfind(std::string(topk_code_name(code)) + ": ", 0), 0u) << msg;
  EXPECT_TRUE(msg.find("driver") != std::string::npos || msg.find("device") != std::string::npos) << msg;
  EXPECT_EQ(lib, nullptr);
  // Same code without a message; a cache path does not change that, and the
  // file is not created when the device cannot be opened.
  const std::string db = ::testing::TempDir() + "c_api_test_never_created.db";
  std::remove(db.c_str());
  o.cache_path = db.c_str();
  EXPECT_EQ(topk_library_open(&o, &lib, nullptr), code);
  EXPECT_EQ(lib, nullptr);
  EXPECT_NE(std::remove(db.c_str()), 0) << "the cache file was created";
}

TEST(CApiTest, PlanCreateNullArguments) {
  topk_problem p = GoodProblem();
  topk_plan* plan = nullptr;
  char* err = nullptr;
  EXPECT_EQ(topk_plan_create(nullptr, &p, &plan, &err), TOPK_INVALID_ARGUMENT);
  EXPECT_EQ(Take(err), "invalid_argument: topk_plan_create: lib is NULL");
  EXPECT_EQ(plan, nullptr);

  err = nullptr;
  EXPECT_EQ(topk_plan_create(UntouchableLibrary(), nullptr, &plan, &err), TOPK_INVALID_ARGUMENT);
  EXPECT_EQ(Take(err), "invalid_argument: topk_plan_create: problem is NULL");

  err = nullptr;
  EXPECT_EQ(topk_plan_create(UntouchableLibrary(), &p, nullptr, &err), TOPK_INVALID_ARGUMENT);
  EXPECT_EQ(Take(err), "invalid_argument: topk_plan_create: out is NULL");

  EXPECT_EQ(topk_plan_create(nullptr, &p, &plan, nullptr), TOPK_INVALID_ARGUMENT);
  EXPECT_EQ(topk_plan_create(UntouchableLibrary(), nullptr, nullptr, nullptr), TOPK_INVALID_ARGUMENT);
  EXPECT_EQ(plan, nullptr);
}

TEST(CApiTest, PlanCreateBadDtype) {
  for (int dtype : {-1, 3, 42, 1 << 30}) {
    topk_problem p = GoodProblem();
    p.dtype = dtype;
    topk_plan* plan = nullptr;
    char* err = nullptr;
    EXPECT_EQ(topk_plan_create(UntouchableLibrary(), &p, &plan, &err), TOPK_INVALID_ARGUMENT) << dtype;
    const std::string msg = Take(err);
    EXPECT_NE(msg.find("dtype must be TOPK_F32, TOPK_F16 or TOPK_BF16"), std::string::npos) << msg;
    EXPECT_EQ(plan, nullptr);
    EXPECT_EQ(topk_plan_create(UntouchableLibrary(), &p, &plan, nullptr), TOPK_INVALID_ARGUMENT);
  }
}

TEST(CApiTest, PlanRunNullPlan) {
  std::vector<float> x(16);
  std::vector<int32_t> idx(4);
  char* err = nullptr;
  EXPECT_EQ(topk_plan_run(nullptr, x.data(), nullptr, idx.data(), nullptr, -1, nullptr, &err), TOPK_INVALID_ARGUMENT);
  EXPECT_EQ(Take(err), "invalid_argument: topk_plan_run: plan is NULL");
  EXPECT_EQ(topk_plan_run(nullptr, nullptr, nullptr, nullptr, nullptr, 0, nullptr, nullptr), TOPK_INVALID_ARGUMENT);
}

TEST(CApiTest, PlanRunWorkspaceNullPlan) {
  std::vector<float> x(16);
  std::vector<int32_t> idx(4);
  alignas(16) unsigned char ws[64] = {};
  char* err = nullptr;
  EXPECT_EQ(topk_plan_run_workspace(nullptr, x.data(), nullptr, idx.data(), nullptr, -1, ws, nullptr, &err),
            TOPK_INVALID_ARGUMENT);
  EXPECT_EQ(Take(err), "invalid_argument: topk_plan_run_workspace: plan is NULL");
  // A NULL workspace (the plan's own) and a NULL err change nothing.
  EXPECT_EQ(topk_plan_run_workspace(nullptr, nullptr, nullptr, nullptr, nullptr, 0, nullptr, nullptr, nullptr),
            TOPK_INVALID_ARGUMENT);
}

TEST(CApiTest, AccessorsAndDestructorsAcceptNull) {
  EXPECT_STREQ(topk_library_warnings(nullptr), "");
  EXPECT_STREQ(topk_library_device(nullptr), "");
  EXPECT_EQ(topk_plan_dispatch(nullptr), -1);
  EXPECT_STREQ(topk_plan_variant(nullptr), "");
  EXPECT_STREQ(topk_plan_tuned_shape(nullptr), "");
  EXPECT_EQ(topk_plan_tuned_median_us(nullptr), 0.0);
  EXPECT_EQ(topk_plan_binary_from_cache(nullptr), 0);
  EXPECT_EQ(topk_plan_ms(nullptr), 0.0);
  EXPECT_EQ(topk_plan_workspace_bytes(nullptr), 0u);
  topk_plan_destroy(nullptr);
  topk_library_close(nullptr);
  topk_free(nullptr);
}

TEST(CApiTest, CodeNames) {
  const std::vector<std::pair<int, const char*>> names = {
      {TOPK_OK, "ok"},
      {TOPK_INVALID_ARGUMENT, "invalid_argument"},
      {TOPK_NOT_FOUND, "not_found"},
      {TOPK_OUT_OF_RANGE, "out_of_range"},
      {TOPK_FAILED_PRECONDITION, "failed_precondition"},
      {TOPK_UNAVAILABLE, "unavailable"},
      {TOPK_RESOURCE_EXHAUSTED, "resource_exhausted"},
      {TOPK_DATA_LOSS, "data_loss"},
      {TOPK_COMPILE_ERROR, "compile_error"},
      {TOPK_CUDA_ERROR, "cuda_error"},
      {TOPK_WRONG_RESULT, "wrong_result"},
      {TOPK_CRASH, "crash"},
      {TOPK_TIMEOUT, "timeout"},
      {TOPK_INTERNAL, "internal"},
      {TOPK_UNIMPLEMENTED, "unimplemented"},
  };
  ASSERT_EQ(names.size(), static_cast<size_t>(TOPK_UNIMPLEMENTED) + 1);
  for (const auto& [code, name] : names) {
    EXPECT_STREQ(topk_code_name(code), name) << code;
    EXPECT_STREQ(topk_code_name(code), topk::CodeName(static_cast<topk::Code>(code)));
  }
  for (int code : {-1, TOPK_UNIMPLEMENTED + 1, 100, -2147483647 - 1, 2147483647})
    EXPECT_STREQ(topk_code_name(code), "unknown") << code;
}

TEST(CApiTest, DefaultCachePathFollowsTheEnvironment) {
  {
    ScopedEnv db("TOPK_TUNE_DB", "/data/my tuning.db");
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(DefaultPath(), "/data/my tuning.db");
  }
  {
    ScopedEnv db("TOPK_TUNE_DB", "");  // empty counts as unset
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    ScopedEnv home("HOME", "/home/u");
    EXPECT_EQ(DefaultPath(), "/xdg/topk-tune/tuning.db");
  }
  {
    ScopedEnv db("TOPK_TUNE_DB", nullptr);
    ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
    ScopedEnv home("HOME", "/home/u");
    EXPECT_EQ(DefaultPath(), "/home/u/.cache/topk-tune/tuning.db");
  }
  {
    // A relative XDG_CACHE_HOME is invalid (XDG base-directory spec).
    ScopedEnv db("TOPK_TUNE_DB", nullptr);
    ScopedEnv xdg("XDG_CACHE_HOME", "relative/cache");
    ScopedEnv home("HOME", "/home/u");
    EXPECT_EQ(DefaultPath(), "/home/u/.cache/topk-tune/tuning.db");
  }
  {
    // No location at all: empty, never a file in the current directory.
    ScopedEnv db("TOPK_TUNE_DB", nullptr);
    ScopedEnv xdg("XDG_CACHE_HOME", "");
    ScopedEnv home("HOME", nullptr);
    EXPECT_EQ(DefaultPath(), "");
    EXPECT_EQ(topk::DefaultCachePath(), "");
  }
  {
    ScopedEnv db("TOPK_TUNE_DB", nullptr);
    ScopedEnv xdg("XDG_CACHE_HOME", "cache");
    ScopedEnv home("HOME", nullptr);
    EXPECT_EQ(DefaultPath(), "");
  }
}

}  // namespace
