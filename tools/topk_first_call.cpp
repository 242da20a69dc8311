// Times the first top-k of a process through libtopk, as a new PyTorch
// process meets it: Library::Open, MakePlan (dispatch, kernel lookup or
// NVRTC, module load) and one Run. scripts/device/first-call.sh runs it in
// fresh processes with empty and populated kernel caches.
// Usage: topk-first-call DTYPE BATCH N K [--no-shipped] [--kernel-dir DIR|off] [--sorted]
// Prints one JSON line.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "topk/topk.hpp"

namespace {

double Ms(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

int Fail(const std::string& what) {
  std::printf("{\"error\": \"%s\"}\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: topk-first-call DTYPE BATCH N K [--no-shipped] [--kernel-dir DIR|off] [--sorted]\n");
    return 2;
  }
  topk::Problem p;
  auto dt = topk::ParseDType(argv[1]);
  if (!dt.ok()) return Fail(dt.status().ToString());
  p.dtype = *dt;
  p.batch = std::atoll(argv[2]);
  p.n = std::atoll(argv[3]);
  p.k = std::atoll(argv[4]);
  topk::Options o;
  for (int i = 5; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-shipped") o.shipped_kernels = false;
    if (a == "--sorted") p.sorted = true;
    if (a == "--kernel-dir" && i + 1 < argc) o.kernel_dir = argv[++i];
  }
  // The CUDA context first, as torch has one before its first top-k: its
  // creation is not the library's cost.
  const auto t_ctx = std::chrono::steady_clock::now();
  void* in = nullptr;
  int32_t* idx = nullptr;
  if (cudaMalloc(&in, static_cast<size_t>(p.batch * p.n) * topk::DTypeSize(p.dtype)) != cudaSuccess ||
      cudaMalloc(&idx, static_cast<size_t>(p.batch * p.k) * sizeof(int32_t)) != cudaSuccess)
    return Fail("cudaMalloc");
  cudaMemset(in, 0x3c, static_cast<size_t>(p.batch * p.n) * topk::DTypeSize(p.dtype));
  cudaDeviceSynchronize();
  const auto t0 = std::chrono::steady_clock::now();
  auto lib = topk::Library::Open(o);
  if (!lib.ok()) return Fail(lib.status().ToString());
  const auto t1 = std::chrono::steady_clock::now();
  auto plan = (*lib)->MakePlan(p);
  if (!plan.ok()) return Fail(plan.status().ToString());
  const auto t2 = std::chrono::steady_clock::now();
  topk::Args args;
  args.input = in;
  args.indices = idx;
  topk::Status st = (*plan)->Run(args, nullptr);
  if (!st.ok()) return Fail(st.ToString());
  if (cudaDeviceSynchronize() != cudaSuccess) return Fail("kernel failed");
  const auto t3 = std::chrono::steady_clock::now();
  const topk::PlanInfo& info = (*plan)->info();
  std::printf(
      "{\"problem\": \"%s\", \"context_ms\": %.1f, \"open_ms\": %.1f, \"plan_ms\": %.1f, \"run_ms\": %.2f, "
      "\"first_call_ms\": %.1f, \"no_nvrtc\": %s, \"variant\": \"%s\", \"device\": \"%s\"}\n",
      p.ToString().c_str(), Ms(t_ctx, t0), Ms(t0, t1), Ms(t1, t2), Ms(t2, t3), Ms(t0, t3),
      info.binary_from_cache ? "true" : "false", info.variant_id.c_str(), (*lib)->device_description().c_str());
  cudaFree(in);
  cudaFree(idx);
  return 0;
}
