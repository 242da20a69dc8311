// The C API on a GPU: the bad-input contract of DESIGN.md end to end.
// Plans with bad problems and runs with bad pointers fail with a clear
// status and launch nothing (outputs keep a sentinel); k = 0 and batch = 0
// are no-ops; k > n and short ranges pad with -1; a workspace is ignored by
// plans that need none and checked by those that do; a cache file that is
// corrupt, of a newer schema or tuned on another device is ignored with a
// warning and the default kernel runs. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cache/cache.hpp"
#include "generator/config.hpp"
#include "jit/device.hpp"
#include "jit/driver.hpp"
#include "support/test_support.hpp"
#include "topk/topk.h"

namespace topk {
namespace {

std::string Take(char* err) {
  std::string s = err ? err : "";
  topk_free(err);
  return s;
}

bool Contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// Exactly representable values only (see Values), so no rounding is needed.
uint16_t ToHalf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  const uint32_t sign = (b >> 16) & 0x8000u;
  if ((b & 0x7fffffffu) == 0) return static_cast<uint16_t>(sign);
  const int exp = static_cast<int>((b >> 23) & 0xff) - 127 + 15;
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exp) << 10) | ((b >> 13) & 0x3ffu));
}
uint16_t ToBf16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>(b >> 16);
}

std::vector<char> Encode(const std::vector<float>& v, int dtype) {
  std::vector<char> out(v.size() * (dtype == TOPK_F32 ? 4 : 2));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == TOPK_F32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
    } else {
      const uint16_t h = dtype == TOPK_F16 ? ToHalf(v[i]) : ToBf16(v[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

// Random values that every dtype represents exactly: multiples of 1/2 in
// [-64, 64), at most 8 significant bits (bf16 has 8).
std::vector<float> Values(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-128, 127);
  std::vector<float> v(count);
  for (float& x : v) x = static_cast<float>(d(rng)) / 2.0f;
  return v;
}

const jit::Driver* Drv() { return *jit::GetDriver(); }

class CApiGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TOPK_REQUIRE_GPU();
    auto ctx = jit::Context::Primary(0);
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    ctx_ = *ctx;
    ASSERT_TRUE(ctx_->MakeCurrent().ok());
    lib_ = Open("", false);
    ASSERT_NE(lib_, nullptr);
  }
  void TearDown() override {
    for (topk_plan* p : plans_) topk_plan_destroy(p);
    for (topk_library* l : libs_) topk_library_close(l);
  }

  topk_library* Open(const std::string& cache, bool allow_same_arch, bool write_back = true) {
    topk_options o;
    topk_options_init(&o);
    o.cache_path = cache.c_str();
    o.allow_same_arch = allow_same_arch;
    o.write_back = write_back;
    topk_library* lib = nullptr;
    char* err = nullptr;
    const int code = topk_library_open(&o, &lib, &err);
    EXPECT_EQ(code, TOPK_OK) << Take(err);
    if (lib) libs_.push_back(lib);
    return lib;
  }

  topk_plan* MakePlan(const topk_problem& p, topk_library* lib = nullptr) {
    topk_plan* plan = nullptr;
    char* err = nullptr;
    const int code = topk_plan_create(lib ? lib : lib_, &p, &plan, &err);
    EXPECT_EQ(code, TOPK_OK) << Take(err);
    if (plan) plans_.push_back(plan);
    return plan;
  }

  jit::DeviceBuffer Alloc(size_t bytes) {
    auto b = jit::DeviceBuffer::Alloc(bytes);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    return b.ok() ? std::move(*b) : jit::DeviceBuffer();
  }
  template <typename T>
  jit::DeviceBuffer Upload(const std::vector<T>& host) {
    jit::DeviceBuffer b = Alloc(host.size() * sizeof(T));
    EXPECT_EQ(Drv()->cuMemcpyHtoD(b.get(), host.data(), host.size() * sizeof(T)), CUDA_SUCCESS);
    return b;
  }
  template <typename T>
  std::vector<T> Download(const jit::DeviceBuffer& b, size_t count) {
    std::vector<T> host(count);
    EXPECT_EQ(Drv()->cuCtxSynchronize(), CUDA_SUCCESS);
    EXPECT_EQ(Drv()->cuMemcpyDtoH(host.data(), b.get(), count * sizeof(T)), CUDA_SUCCESS);
    return host;
  }
  void Fill(const jit::DeviceBuffer& b, unsigned char byte) {
    ASSERT_EQ(Drv()->cuMemsetD8(b.get(), byte, b.bytes()), CUDA_SUCCESS);
    ASSERT_EQ(Drv()->cuCtxSynchronize(), CUDA_SUCCESS);
  }
  // Every byte still `byte`: nothing was written.
  bool Untouched(const jit::DeviceBuffer& b, unsigned char byte) {
    std::vector<unsigned char> h = Download<unsigned char>(b, b.bytes());
    return std::all_of(h.begin(), h.end(), [&](unsigned char c) { return c == byte; });
  }

  std::shared_ptr<jit::Context> ctx_;
  topk_library* lib_ = nullptr;
  std::vector<topk_plan*> plans_;
  std::vector<topk_library*> libs_;
};

topk_problem MakeProblem(int dtype, int64_t batch, int64_t n, int64_t k) {
  topk_problem p;
  topk_problem_init(&p);
  p.dtype = dtype;
  p.batch = batch;
  p.n = n;
  p.k = k;
  return p;
}

// Checks one row: indices in [lo, hi) of the row, distinct, their values the
// top-k multiset of that range, then -1 padding.
void ExpectRow(const std::vector<float>& row, int64_t lo, int64_t hi, const int32_t* idx, int64_t k, bool largest,
               const std::string& what) {
  lo = std::clamp<int64_t>(lo, 0, static_cast<int64_t>(row.size()));
  hi = std::clamp<int64_t>(hi, 0, static_cast<int64_t>(row.size()));
  std::vector<float> want(row.begin() + lo, row.begin() + std::max(lo, hi));
  if (largest)
    std::sort(want.begin(), want.end(), std::greater<float>());
  else
    std::sort(want.begin(), want.end());
  const int64_t valid = std::min<int64_t>(k, static_cast<int64_t>(want.size()));
  want.resize(static_cast<size_t>(valid));
  std::vector<float> got;
  std::vector<int32_t> seen;
  for (int64_t j = 0; j < k; ++j) {
    const int32_t i = idx[j];
    if (i == -1) continue;
    ASSERT_GE(i, lo) << what << " slot " << j;
    ASSERT_LT(i, hi) << what << " slot " << j;
    got.push_back(row[static_cast<size_t>(i)]);
    seen.push_back(i);
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::adjacent_find(seen.begin(), seen.end()), seen.end()) << what << ": duplicate index";
  ASSERT_EQ(static_cast<int64_t>(got.size()), valid) << what << ": wrong number of -1 entries";
  if (largest)
    std::sort(got.begin(), got.end(), std::greater<float>());
  else
    std::sort(got.begin(), got.end());
  EXPECT_EQ(got, want) << what;
}

TEST_F(CApiGpuTest, PlanCreateRejectsBadProblems) {
  struct Case {
    topk_problem p;
    int code;
    const char* message;
  };
  auto with = [](std::function<void(topk_problem&)> f) {
    topk_problem p = MakeProblem(TOPK_F32, 4, 1000, 10);
    f(p);
    return p;
  };
  const std::vector<Case> cases = {
      {with([](topk_problem& p) { p.k = -1; }), TOPK_INVALID_ARGUMENT, "k must be >= 0, got -1"},
      {with([](topk_problem& p) { p.n = 0; }), TOPK_INVALID_ARGUMENT, "n must be >= 1"},
      {with([](topk_problem& p) { p.n = -5; }), TOPK_INVALID_ARGUMENT, "n must be >= 1"},
      {with([](topk_problem& p) { p.batch = -1; }), TOPK_INVALID_ARGUMENT, "batch must be >= 0"},
      {with([](topk_problem& p) { p.row_stride = 999; }), TOPK_INVALID_ARGUMENT, "row_stride 999 is smaller than n"},
      {with([](topk_problem& p) { p.row_stride = -3; }), TOPK_INVALID_ARGUMENT, "row_stride"},
      {with([](topk_problem& p) { p.n = int64_t{1} << 31; }), TOPK_INVALID_ARGUMENT, "n must be < 2^31"},
      {with([](topk_problem& p) { p.batch = int64_t{1} << 40; }), TOPK_INVALID_ARGUMENT, "batch must be < 2^31"},
      {with([](topk_problem& p) { p.dtype = 7; }), TOPK_INVALID_ARGUMENT, "dtype must be"},
      {with([](topk_problem& p) { p.n = 100000, p.k = 20000, p.sorted = 1; }), TOPK_UNIMPLEMENTED, "sorted output"},
  };
  for (const Case& c : cases) {
    topk_plan* plan = nullptr;
    char* err = nullptr;
    EXPECT_EQ(topk_plan_create(lib_, &c.p, &plan, &err), c.code) << c.message;
    const std::string msg = Take(err);
    EXPECT_TRUE(Contains(msg, c.message)) << msg;
    EXPECT_TRUE(Contains(msg, topk_code_name(c.code))) << msg;
    EXPECT_EQ(plan, nullptr);
    EXPECT_EQ(topk_plan_create(lib_, &c.p, &plan, nullptr), c.code);  // err may be NULL
    EXPECT_EQ(plan, nullptr);
  }
}

TEST_F(CApiGpuTest, RunRejectsBadPointersAndLaunchesNothing) {
  for (int dtype : {TOPK_F32, TOPK_F16, TOPK_BF16}) {
    SCOPED_TRACE("dtype " + std::to_string(dtype));
    const int64_t batch = 4, n = 1000, k = 10;
    const int es = dtype == TOPK_F32 ? 4 : 2;
    topk_problem p = MakeProblem(dtype, batch, n, k);
    p.values = 1;
    p.ranges = 1;
    topk_plan* plan = MakePlan(p);
    ASSERT_NE(plan, nullptr);
    jit::DeviceBuffer in = Upload(Encode(Values(batch * n, 1), dtype));
    std::vector<int32_t> rg_host;
    for (int64_t r = 0; r < batch; ++r) rg_host.insert(rg_host.end(), {0, static_cast<int32_t>(n)});
    jit::DeviceBuffer rg = Upload(rg_host);
    // One spare element so that offset pointers stay inside the allocation.
    jit::DeviceBuffer idx = Alloc((batch * k + 1) * 4), val = Alloc((batch * k + 1) * es);
    Fill(idx, 0xAB);
    Fill(val, 0xCD);
    auto at = [](const jit::DeviceBuffer& b, size_t offset) {
      return reinterpret_cast<void*>(b.get() + offset);
    };
    struct Case {
      const void* input;
      const void* ranges;
      void* indices;
      void* values;
      int64_t batch;
      const char* message;
    };
    const std::vector<Case> cases = {
        {nullptr, rg.ptr(), idx.ptr(), val.ptr(), -1, "input is null"},
        {in.ptr(), rg.ptr(), nullptr, val.ptr(), -1, "indices is null"},
        {in.ptr(), rg.ptr(), idx.ptr(), nullptr, -1, "values is null"},
        {in.ptr(), nullptr, idx.ptr(), val.ptr(), -1, "ranges is null"},
        {at(in, 1), rg.ptr(), idx.ptr(), val.ptr(), -1, "input is not aligned"},
        {in.ptr(), rg.ptr(), at(idx, 2), val.ptr(), -1, "indices are not 4-byte aligned"},
        {in.ptr(), rg.ptr(), idx.ptr(), at(val, 1), -1, "values are not aligned"},
        {in.ptr(), at(rg, 2), idx.ptr(), val.ptr(), -1, "ranges are not 4-byte aligned"},
        {in.ptr(), rg.ptr(), idx.ptr(), val.ptr(), batch + 1, "exceeds the planned batch 4"},
    };
    for (const Case& c : cases) {
      char* err = nullptr;
      EXPECT_EQ(topk_plan_run(plan, c.input, static_cast<const int32_t*>(c.ranges), static_cast<int32_t*>(c.indices),
                              c.values, c.batch, nullptr, &err),
                TOPK_INVALID_ARGUMENT)
          << c.message;
      const std::string msg = Take(err);
      EXPECT_TRUE(Contains(msg, c.message)) << msg;
      EXPECT_EQ(topk_plan_run(plan, c.input, static_cast<const int32_t*>(c.ranges), static_cast<int32_t*>(c.indices),
                              c.values, c.batch, nullptr, nullptr),
                TOPK_INVALID_ARGUMENT);
    }
    EXPECT_TRUE(Untouched(idx, 0xAB)) << "a rejected run wrote indices";
    EXPECT_TRUE(Untouched(val, 0xCD)) << "a rejected run wrote values";
    // The same plan still runs with good arguments.
    char* err = nullptr;
    EXPECT_EQ(topk_plan_run(plan, in.ptr(), static_cast<const int32_t*>(rg.ptr()), static_cast<int32_t*>(idx.ptr()),
                            val.ptr(), -1, nullptr, &err),
              TOPK_OK)
        << Take(err);
    EXPECT_FALSE(Untouched(idx, 0xAB));
  }
}

// Ordinary shapes need no workspace: topk_plan_workspace_bytes is 0 and a
// workspace passed anyway, even a misaligned one, is ignored.
TEST_F(CApiGpuTest, WorkspaceIsIgnoredWhenThePlanNeedsNone) {
  struct Shape {
    int64_t batch, n, k;
  };
  jit::DeviceBuffer ws = Alloc(64);
  void* misaligned = reinterpret_cast<void*>(ws.get() + 1);
  for (const Shape& s : {Shape{8, 20000, 100}, Shape{4, 1000, 10}, Shape{64, 4096, 8}}) {
    const std::string what = std::to_string(s.batch) + "x" + std::to_string(s.n) + " k=" + std::to_string(s.k);
    topk_plan* plan = MakePlan(MakeProblem(TOPK_F32, s.batch, s.n, s.k));
    ASSERT_NE(plan, nullptr) << what;
    EXPECT_EQ(topk_plan_workspace_bytes(plan), 0u) << what << " " << topk_plan_variant(plan);
    std::vector<float> x = Values(s.batch * s.n, 13);
    jit::DeviceBuffer in = Upload(x), idx = Alloc(s.batch * s.k * 4);
    Fill(idx, 0xAB);
    char* err = nullptr;
    ASSERT_EQ(topk_plan_run_workspace(plan, in.ptr(), nullptr, static_cast<int32_t*>(idx.ptr()), nullptr, -1,
                                      misaligned, nullptr, &err),
              TOPK_OK)
        << what << ": " << Take(err);
    std::vector<int32_t> got = Download<int32_t>(idx, s.batch * s.k);
    for (int64_t r = 0; r < s.batch; ++r)
      ExpectRow(std::vector<float>(x.begin() + r * s.n, x.begin() + (r + 1) * s.n), 0, s.n, got.data() + r * s.k, s.k,
                true, what + " row " + std::to_string(r));
  }
}

// A plan that spreads a row over many CTAs needs a workspace: a misaligned
// one is refused before anything launches; the caller's own (zeroed) gives
// a correct result and is left zero, as the contract promises; NULL and
// topk_plan_run use the plan's own. Skips while no shape below gets such a
// plan.
TEST_F(CApiGpuTest, WorkspaceContractOfPlansThatNeedOne) {
  struct Shape {
    int64_t batch, n, k;
  };
  topk_plan* plan = nullptr;
  Shape s{};
  for (const Shape& c :
       {Shape{1, 524288, 2048}, Shape{1, 131072, 512}, Shape{1, 1 << 20, 1024}, Shape{2, 524288, 64}}) {
    topk_plan* p = MakePlan(MakeProblem(TOPK_F32, c.batch, c.n, c.k));
    ASSERT_NE(p, nullptr);
    if (topk_plan_workspace_bytes(p) > 0) {
      plan = p;
      s = c;
      break;
    }
  }
  if (!plan) GTEST_SKIP() << "no shape tried here gets a plan with a workspace";
  const size_t bytes = topk_plan_workspace_bytes(plan);
  std::vector<float> x = Values(s.batch * s.n, 17);
  jit::DeviceBuffer in = Upload(x), idx = Alloc(s.batch * s.k * 4), ws = Alloc(bytes + 16);
  Fill(ws, 0);
  Fill(idx, 0xAB);
  const auto* input = in.ptr();
  auto* out = static_cast<int32_t*>(idx.ptr());
  char* err = nullptr;
  for (size_t offset : {1, 4, 8}) {
    EXPECT_EQ(topk_plan_run_workspace(plan, input, nullptr, out, nullptr, -1,
                                      reinterpret_cast<void*>(ws.get() + offset), nullptr, &err),
              TOPK_INVALID_ARGUMENT)
        << offset;
    const std::string msg = Take(err);
    err = nullptr;
    EXPECT_TRUE(Contains(msg, "workspace is not 16-byte aligned")) << msg;
  }
  EXPECT_TRUE(Untouched(idx, 0xAB)) << "a rejected run wrote indices";
  EXPECT_TRUE(Untouched(ws, 0)) << "a rejected run wrote the workspace";
  auto check = [&](const std::string& what) {
    std::vector<int32_t> got = Download<int32_t>(idx, s.batch * s.k);
    for (int64_t r = 0; r < s.batch; ++r)
      ExpectRow(std::vector<float>(x.begin() + r * s.n, x.begin() + (r + 1) * s.n), 0, s.n, got.data() + r * s.k, s.k,
                true, what + " row " + std::to_string(r));
  };
  // The caller's workspace, three calls in a row: each must find it zero.
  for (int call = 0; call < 3; ++call) {
    Fill(idx, 0xAB);
    ASSERT_EQ(topk_plan_run_workspace(plan, input, nullptr, out, nullptr, -1, ws.ptr(), nullptr, &err), TOPK_OK)
        << Take(err);
    check("own workspace, call " + std::to_string(call));
    EXPECT_TRUE(Untouched(ws, 0)) << "call " << call << " left the workspace non-zero";
  }
  Fill(idx, 0xAB);
  ASSERT_EQ(topk_plan_run_workspace(plan, input, nullptr, out, nullptr, -1, nullptr, nullptr, &err), TOPK_OK)
      << Take(err);
  check("the plan's workspace (NULL)");
  Fill(idx, 0xAB);
  ASSERT_EQ(topk_plan_run(plan, input, nullptr, out, nullptr, -1, nullptr, &err), TOPK_OK) << Take(err);
  check("the plan's workspace (topk_plan_run)");
}

// The plan's own workspace used from two streams without any host wait:
// the plan orders the calls (a call on the other stream waits for the
// previous one on the GPU), so every output is exact; unordered, the
// launches would share the row's counters.
TEST_F(CApiGpuTest, PlansOwnWorkspaceIsOrderedAcrossStreams) {
  const int64_t n = 524288, k = 2048;
  topk_plan* plan = MakePlan(MakeProblem(TOPK_F32, 1, n, k));
  ASSERT_NE(plan, nullptr);
  if (topk_plan_workspace_bytes(plan) == 0) GTEST_SKIP() << "1 x 524288 k2048 got a plan without a workspace";
  std::vector<float> x = Values(n, 23);
  jit::DeviceBuffer in = Upload(x);
  constexpr int kCalls = 16;
  std::vector<jit::DeviceBuffer> outs;
  for (int i = 0; i < kCalls; ++i) {
    outs.push_back(Alloc(k * 4));
    Fill(outs.back(), 0xAB);
  }
  CUstream streams[2] = {nullptr, nullptr};
  for (CUstream& st : streams) ASSERT_EQ(Drv()->cuStreamCreate(&st, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  char* err = nullptr;
  for (int i = 0; i < kCalls; ++i)
    ASSERT_EQ(topk_plan_run(plan, in.ptr(), nullptr, static_cast<int32_t*>(outs[i].ptr()), nullptr, -1,
                            streams[i % 2], &err),
              TOPK_OK)
        << Take(err);
  ASSERT_EQ(Drv()->cuCtxSynchronize(), CUDA_SUCCESS);
  for (int i = 0; i < kCalls; ++i) {
    std::vector<int32_t> got = Download<int32_t>(outs[i], k);
    ExpectRow(x, 0, n, got.data(), k, true, "call " + std::to_string(i));
  }
  for (CUstream st : streams) Drv()->cuStreamDestroy(st);
}

TEST_F(CApiGpuTest, InputOffsetByOneElementRuns) {
  // Rows need no alignment beyond their element: a variant that wants
  // vector loads falls back to one that does not.
  for (int dtype : {TOPK_F32, TOPK_F16, TOPK_BF16}) {
    const int64_t batch = 3, n = 4099, k = 77;
    const int es = dtype == TOPK_F32 ? 4 : 2;
    std::vector<float> x = Values(batch * n + 1, 7);
    jit::DeviceBuffer in = Upload(Encode(x, dtype));
    topk_plan* plan = MakePlan(MakeProblem(dtype, batch, n, k));
    ASSERT_NE(plan, nullptr);
    jit::DeviceBuffer idx = Alloc(batch * k * 4);
    char* err = nullptr;
    ASSERT_EQ(topk_plan_run(plan, reinterpret_cast<void*>(in.get() + es), nullptr, static_cast<int32_t*>(idx.ptr()),
                            nullptr, -1, nullptr, &err),
              TOPK_OK)
        << Take(err);
    std::vector<int32_t> got = Download<int32_t>(idx, batch * k);
    for (int64_t r = 0; r < batch; ++r) {
      std::vector<float> row(x.begin() + 1 + r * n, x.begin() + 1 + (r + 1) * n);
      ExpectRow(row, 0, n, got.data() + r * k, k, true, "dtype " + std::to_string(dtype) + " row " + std::to_string(r));
    }
  }
}

// An engine's thread may have no context current (or another device's)
// when it opens a library, plans, runs and closes: every call works in the
// library's own context and leaves the caller's as it was, and the rows
// are exact. (Whether a module's unload or a workspace's free succeeded is
// not observable here: the driver's results are not returned at close.)
TEST_F(CApiGpuTest, EveryCallWorksWithoutACurrentContextAndLeavesNone) {
  struct Case {
    int64_t batch, n, k;
  };
  const Case cases[] = {{3, 4099, 77}, {1, 131072, 2048}};  // the second a grid plan with a workspace on most GPUs
  std::vector<std::vector<float>> xs;
  std::vector<jit::DeviceBuffer> ins, idxs;
  for (const Case& c : cases) {
    xs.push_back(Values(c.batch * c.n, 11));
    ins.push_back(Upload(Encode(xs.back(), TOPK_F32)));
    idxs.push_back(Alloc(c.batch * c.k * 4));
  }
  auto current = [] {
    CUcontext cur = reinterpret_cast<CUcontext>(1);
    EXPECT_EQ(Drv()->cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    return cur;
  };
  ASSERT_EQ(Drv()->cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
  // The fixture's context current again however the test ends (the buffers
  // are freed in it).
  struct Restore {
    const jit::Context* ctx;
    ~Restore() { (void)ctx->MakeCurrent(); }
  } restore{ctx_.get()};
  topk_options o;
  topk_options_init(&o);
  topk_library* lib = nullptr;
  char* err = nullptr;
  ASSERT_EQ(topk_library_open(&o, &lib, &err), TOPK_OK) << Take(err);
  EXPECT_EQ(current(), nullptr) << "topk_library_open";
  for (size_t i = 0; i < std::size(cases); ++i) {
    const Case& c = cases[i];
    const topk_problem p = MakeProblem(TOPK_F32, c.batch, c.n, c.k);
    topk_plan* plan = nullptr;
    ASSERT_EQ(topk_plan_create(lib, &p, &plan, &err), TOPK_OK) << Take(err);
    EXPECT_EQ(current(), nullptr) << "topk_plan_create";
    EXPECT_EQ(topk_plan_run(plan, ins[i].ptr(), nullptr, static_cast<int32_t*>(idxs[i].ptr()), nullptr, -1, nullptr,
                            &err),
              TOPK_OK)
        << Take(err);
    EXPECT_EQ(current(), nullptr) << "topk_plan_run";
    topk_plan_destroy(plan);
    EXPECT_EQ(current(), nullptr) << "topk_plan_destroy";
  }
  topk_library_close(lib);
  EXPECT_EQ(current(), nullptr) << "topk_library_close";
  ASSERT_TRUE(ctx_->MakeCurrent().ok());
  for (size_t i = 0; i < std::size(cases); ++i) {
    const Case& c = cases[i];
    std::vector<int32_t> got = Download<int32_t>(idxs[i], c.batch * c.k);
    for (int64_t r = 0; r < c.batch; ++r) {
      std::vector<float> row(xs[i].begin() + r * c.n, xs[i].begin() + (r + 1) * c.n);
      ExpectRow(row, 0, c.n, got.data() + r * c.k, c.k, true, "case " + std::to_string(i) + " row " + std::to_string(r));
    }
  }
}

TEST_F(CApiGpuTest, ZeroKAndZeroBatchAreNoOps) {
  // k = 0 and batch = 0 plans run with any pointers, even NULL.
  for (auto [batch, k] : {std::pair<int64_t, int64_t>{4, 0}, {0, 10}, {0, 0}}) {
    topk_problem p = MakeProblem(TOPK_F32, batch, 1000, k);
    p.values = 1;
    p.ranges = 1;
    topk_plan* plan = MakePlan(p);
    ASSERT_NE(plan, nullptr);
    char* err = nullptr;
    EXPECT_EQ(topk_plan_run(plan, nullptr, nullptr, nullptr, nullptr, -1, nullptr, &err), TOPK_OK) << Take(err);
    EXPECT_EQ(topk_plan_run(plan, nullptr, nullptr, nullptr, nullptr, 0, nullptr, nullptr), TOPK_OK);
  }
  // A run of 0 rows on a real plan writes nothing.
  topk_plan* plan = MakePlan(MakeProblem(TOPK_F32, 4, 1000, 10));
  ASSERT_NE(plan, nullptr);
  jit::DeviceBuffer in = Upload(Values(4 * 1000, 3));
  jit::DeviceBuffer idx = Alloc(4 * 10 * 4);
  Fill(idx, 0xEE);
  char* err = nullptr;
  EXPECT_EQ(topk_plan_run(plan, in.ptr(), nullptr, static_cast<int32_t*>(idx.ptr()), nullptr, 0, nullptr, &err),
            TOPK_OK)
      << Take(err);
  EXPECT_EQ(topk_plan_run(plan, nullptr, nullptr, nullptr, nullptr, 0, nullptr, nullptr), TOPK_OK);
  EXPECT_TRUE(Untouched(idx, 0xEE));
}

TEST_F(CApiGpuTest, KGreaterThanNPadsWithMinusOne) {
  const int64_t batch = 2, n = 5, k = 8;
  const std::vector<float> x = {1, 5, 3, 2, 4, -1, -2, 0.5f, 8, 7};
  for (int dtype : {TOPK_F32, TOPK_F16, TOPK_BF16}) {
    for (int largest : {1, 0}) {
      const std::string what = "dtype " + std::to_string(dtype) + (largest ? " largest" : " smallest");
      topk_problem p = MakeProblem(dtype, batch, n, k);
      p.values = 1;
      p.largest = largest;
      topk_plan* plan = MakePlan(p);
      ASSERT_NE(plan, nullptr) << what;
      jit::DeviceBuffer in = Upload(Encode(x, dtype));
      const int es = dtype == TOPK_F32 ? 4 : 2;
      jit::DeviceBuffer idx = Alloc(batch * k * 4), val = Alloc(batch * k * es);
      char* err = nullptr;
      ASSERT_EQ(topk_plan_run(plan, in.ptr(), nullptr, static_cast<int32_t*>(idx.ptr()), val.ptr(), -1, nullptr, &err),
                TOPK_OK)
          << Take(err);
      std::vector<int32_t> got = Download<int32_t>(idx, batch * k);
      std::vector<char> vals = Download<char>(val, batch * k * es);
      for (int64_t r = 0; r < batch; ++r) {
        std::vector<float> row(x.begin() + r * n, x.begin() + (r + 1) * n);
        ExpectRow(row, 0, n, got.data() + r * k, k, largest, what);
        for (int64_t j = 0; j < k; ++j) {
          const int32_t i = got[r * k + j];
          const char* v = vals.data() + (r * k + j) * es;
          if (i >= 0) {
            // The value written is the row's value at that index.
            EXPECT_EQ(std::memcmp(v, Encode({row[i]}, dtype).data(), es), 0) << what << " slot " << j;
          } else if (largest) {
            // Padding: the dtype's lowest finite value.
            const std::vector<char> lowest =
                dtype == TOPK_F32 ? Encode({std::numeric_limits<float>::lowest()}, dtype)
                                  : std::vector<char>{dtype == TOPK_F16 ? '\xff' : '\x7f',
                                                      dtype == TOPK_F16 ? '\xfb' : '\xff'};
            EXPECT_EQ(std::memcmp(v, lowest.data(), es), 0) << what << " padding slot " << j;
          }
        }
      }
    }
  }
}

TEST_F(CApiGpuTest, RangesAreClampedAndMayBeEmpty) {
  const int64_t n = 300, k = 16;
  const std::vector<std::pair<int32_t, int32_t>> ranges = {
      {0, 300}, {10, 20}, {-50, 3}, {290, 100000}, {50, 40}, {300, 400}, {-10, -1}, {100, 116}, {7, 7}};
  const int64_t batch = static_cast<int64_t>(ranges.size());
  std::vector<float> x = Values(batch * n, 11);
  std::vector<int32_t> rg;
  for (auto [s, e] : ranges) rg.insert(rg.end(), {s, e});
  for (int sorted : {0, 1}) {
    topk_problem p = MakeProblem(TOPK_F32, batch, n, k);
    p.ranges = 1;
    p.sorted = sorted;
    topk_plan* plan = MakePlan(p);
    ASSERT_NE(plan, nullptr);
    jit::DeviceBuffer in = Upload(x), d_rg = Upload(rg), idx = Alloc(batch * k * 4);
    char* err = nullptr;
    ASSERT_EQ(topk_plan_run(plan, in.ptr(), static_cast<const int32_t*>(d_rg.ptr()), static_cast<int32_t*>(idx.ptr()),
                            nullptr, -1, nullptr, &err),
              TOPK_OK)
        << Take(err);
    std::vector<int32_t> got = Download<int32_t>(idx, batch * k);
    for (int64_t r = 0; r < batch; ++r) {
      std::vector<float> row(x.begin() + r * n, x.begin() + (r + 1) * n);
      ExpectRow(row, ranges[r].first, ranges[r].second, got.data() + r * k, k, true,
                "range [" + std::to_string(ranges[r].first) + ", " + std::to_string(ranges[r].second) + ")");
    }
  }
}

// Deterministic mode through the C API: rows of few distinct values (every
// selection ends inside a large tie) give, in every call, the elements above
// the k-th value plus its lowest-index ties; with sorted output, the same
// bytes every call. The plan's variant is the one without the flag.
TEST_F(CApiGpuTest, DeterministicTakesTheLowestIndexTiesOnEveryCall) {
  const int64_t batch = 6, n = 20000, k = 700;
  std::vector<float> x(static_cast<size_t>(batch * n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 2654435761u >> 7) % 5);  // 0..4
  for (int sorted : {0, 1}) {
    topk_problem p = MakeProblem(TOPK_F32, batch, n, k);
    p.sorted = sorted;
    topk_plan* plain = MakePlan(p);
    p.deterministic = 1;
    topk_plan* plan = MakePlan(p);
    ASSERT_NE(plan, nullptr);
    ASSERT_NE(plain, nullptr);
    EXPECT_STREQ(topk_plan_variant(plan), topk_plan_variant(plain));
    jit::DeviceBuffer in = Upload(x), idx = Alloc(batch * k * 4);
    std::vector<int32_t> first;
    for (int call = 0; call < 20; ++call) {
      char* err = nullptr;
      ASSERT_EQ(topk_plan_run(plan, in.ptr(), nullptr, static_cast<int32_t*>(idx.ptr()), nullptr, -1, nullptr, &err),
                TOPK_OK)
          << Take(err);
      std::vector<int32_t> got = Download<int32_t>(idx, batch * k);
      if (!sorted)
        for (int64_t r = 0; r < batch; ++r) std::sort(got.begin() + r * k, got.begin() + (r + 1) * k);
      if (call == 0) {
        first = got;
        for (int64_t r = 0; r < batch; ++r) {
          const float* row = x.data() + r * n;
          std::vector<float> v(row, row + n);
          std::nth_element(v.begin(), v.begin() + (k - 1), v.end(), std::greater<float>());
          const float kth = v[static_cast<size_t>(k - 1)];
          std::vector<int32_t> want;
          int64_t above = 0;
          for (int64_t c = 0; c < n; ++c) above += row[c] > kth;
          for (int64_t c = 0, ties = 0; c < n; ++c)
            if (row[c] > kth || (row[c] == kth && ties++ < k - above)) want.push_back(static_cast<int32_t>(c));
          std::vector<int32_t> have(got.begin() + r * k, got.begin() + (r + 1) * k);
          std::sort(have.begin(), have.end());
          EXPECT_EQ(have, want) << "row " << r << " sorted " << sorted;
        }
      } else {
        ASSERT_EQ(got, first) << "call " << call << " sorted " << sorted;
      }
    }
  }
}

// --- cache files the library must not trust --------------------------------------

std::vector<char> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), {});
}

void WriteFile(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

class CApiCacheTest : public CApiGpuTest {
 protected:
  // Opens the library on `path`, expects a warning naming the problem,
  // then plans and runs on the default kernel; the file is left as it was.
  void ExpectIgnored(const std::string& path, const std::string& warning) {
    const std::vector<char> before = ReadFile(path);
    topk_library* lib = Open(path, true);
    ASSERT_NE(lib, nullptr);
    const std::string w = topk_library_warnings(lib);
    EXPECT_TRUE(Contains(w, "tuning cache ignored")) << w;
    EXPECT_TRUE(Contains(w, warning)) << w;
    const int64_t batch = 4, n = 5000, k = 64;
    topk_plan* plan = MakePlan(MakeProblem(TOPK_F32, batch, n, k), lib);
    ASSERT_NE(plan, nullptr);
    EXPECT_EQ(topk_plan_dispatch(plan), TOPK_DISPATCH_DEFAULT);
    std::vector<float> x = Values(batch * n, 5);
    jit::DeviceBuffer in = Upload(x), idx = Alloc(batch * k * 4);
    char* err = nullptr;
    ASSERT_EQ(topk_plan_run(plan, in.ptr(), nullptr, static_cast<int32_t*>(idx.ptr()), nullptr, -1, nullptr, &err),
              TOPK_OK)
        << Take(err);
    std::vector<int32_t> got = Download<int32_t>(idx, batch * k);
    for (int64_t r = 0; r < batch; ++r)
      ExpectRow(std::vector<float>(x.begin() + r * n, x.begin() + (r + 1) * n), 0, n, got.data() + r * k, k, true,
                "row " + std::to_string(r));
    EXPECT_EQ(ReadFile(path), before) << "the library modified a cache file it did not trust";
  }
};

TEST_F(CApiCacheTest, CorruptFileIsIgnoredWithAWarning) {
  const std::string path = testing::TempPath("corrupt.db");
  std::vector<char> junk(8192);
  std::mt19937 rng(1);
  for (char& c : junk) c = static_cast<char>(rng());
  WriteFile(path, junk);
  ExpectIgnored(path, "data_loss");
}

TEST_F(CApiCacheTest, TruncatedSqliteFileIsIgnoredWithAWarning) {
  const std::string path = testing::TempPath("truncated.db");
  {
    auto c = cache::Cache::Open(path);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
  }
  std::vector<char> bytes = ReadFile(path);
  ASSERT_GT(bytes.size(), 200u);
  // Keep the "SQLite format 3" header, destroy the rest.
  for (size_t i = 100; i < bytes.size(); ++i) bytes[i] = static_cast<char>(0x5a);
  WriteFile(path, bytes);
  ExpectIgnored(path, "");
}

TEST_F(CApiCacheTest, NewerSchemaIsIgnoredWithAWarning) {
  const std::string path = testing::TempPath("newer.db");
  {
    auto c = cache::Cache::Open(path);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
  }
  // PRAGMA user_version lives at byte offset 60 of the database header, a
  // big-endian 32-bit integer; the closed database has no WAL left over.
  std::vector<char> bytes = ReadFile(path);
  ASSERT_GT(bytes.size(), 100u);
  const uint32_t v = cache::kSchemaVersion + 1000;
  for (int i = 0; i < 4; ++i) bytes[60 + i] = static_cast<char>((v >> (24 - 8 * i)) & 0xff);
  WriteFile(path, bytes);
  ExpectIgnored(path, "failed_precondition");
}

TEST_F(CApiCacheTest, EntriesOfAnotherDeviceAreNotUsed) {
  auto info = jit::QueryDevice(0);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  const std::string path = testing::TempPath("foreign.db");
  Problem p;
  p.batch = 4;
  p.n = 5000;
  p.k = 64;
  {
    auto c = cache::Cache::Open(path);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cache::DeviceRecord d;
    d.fingerprint = "Some Other GPU|" + info->ArchName() + "|1sm|L2=1";
    d.name = "Some Other GPU";
    d.cc_major = info->cc_major;
    d.cc_minor = info->cc_minor;
    d.sm_count = 1;
    ASSERT_TRUE((*c)->PutDevice(d).ok());
    cache::Winner w;
    w.device_fingerprint = d.fingerprint;
    w.problem = p;
    w.config = gen::DefaultConfig(p, info->ToArch());
    w.variant_id = w.config.Id();
    w.median_us = 12.5;
    ASSERT_TRUE((*c)->PutWinner(w).ok());
  }
  topk_problem cp = MakeProblem(TOPK_F32, p.batch, p.n, p.k);
  // Not this device: the default, without a warning (the file is fine).
  topk_library* strict = Open(path, false);
  ASSERT_NE(strict, nullptr);
  EXPECT_STREQ(topk_library_warnings(strict), "");
  topk_plan* plan = MakePlan(cp, strict);
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(topk_plan_dispatch(plan), TOPK_DISPATCH_DEFAULT);
  EXPECT_STREQ(topk_plan_tuned_shape(plan), "");
  // Same compute capability and allow_same_arch: used, and says so.
  topk_library* same_arch = Open(path, true);
  ASSERT_NE(same_arch, nullptr);
  topk_plan* plan2 = MakePlan(cp, same_arch);
  ASSERT_NE(plan2, nullptr);
  EXPECT_EQ(topk_plan_dispatch(plan2), TOPK_DISPATCH_EXACT);
  EXPECT_EQ(topk_plan_tuned_median_us(plan2), 12.5);
  EXPECT_STRNE(topk_plan_tuned_shape(plan2), "");
}

TEST_F(CApiGpuTest, PlanInfoAccessors) {
  topk_plan* plan = MakePlan(MakeProblem(TOPK_BF16, 8, 20000, 100));
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(topk_plan_dispatch(plan), TOPK_DISPATCH_DEFAULT);  // no cache
  EXPECT_TRUE(Contains(topk_plan_variant(plan), "bf16")) << topk_plan_variant(plan);
  EXPECT_STREQ(topk_plan_tuned_shape(plan), "");
  EXPECT_EQ(topk_plan_tuned_median_us(plan), 0.0);
  EXPECT_GT(topk_plan_ms(plan), 0.0);
  EXPECT_EQ(topk_plan_workspace_bytes(plan), 0u);
  EXPECT_STRNE(topk_library_device(lib_), "");
  EXPECT_STREQ(topk_library_warnings(lib_), "");
}

}  // namespace
}  // namespace topk
