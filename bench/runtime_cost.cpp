// topk-runtime-cost: what the runtime costs the host.
//
//   plan  MakePlan timed three ways for each shape: the first plan with a new,
//         empty cache file (NVRTC compiles, the cubin is written back), a plan
//         in a fresh Library on that file (the cubin comes from the cache,
//         no NVRTC), and a second plan in that Library (module already loaded).
//   run   Plan::Run's host time per call over --calls calls (default 10^4),
//         in bursts of --burst launches with a stream synchronisation between
//         bursts (not timed) so that a full launch queue never stalls the
//         host; the same for bare launches of an empty kernel, the floor
//         any launch pays: cudaLaunchKernel, and cuLaunchKernel with a
//         80-byte argument like the one Plan::Run passes.
//
//   topk-runtime-cost [--dir /tmp] [--calls 10000] [--burst 250]
// Prints a table and exits 0; exits 3 without a GPU, 1 on a failed call.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench/empty_kernel.hpp"
#include "topk/topk.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double Us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

struct Stats {
  double median = 0, p10 = 0, p90 = 0, p99 = 0, max = 0, mean = 0;
};

Stats Summarise(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))]; };
  s.median = at(0.5);
  s.p10 = at(0.1);
  s.p90 = at(0.9);
  s.p99 = at(0.99);
  s.max = v.back();
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  return s;
}

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "topk-runtime-cost: %s\n", what.c_str());
  std::exit(1);
}

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) Fail(std::string(what) + ": " + cudaGetErrorString(e));
}

std::unique_ptr<topk::Library> Open(const std::string& cache) {
  topk::Options o;
  o.cache_path = cache;
  // The plan table times NVRTC against the tuning cache's cubins: neither
  // the shipped kernels nor the kernel directory may answer first.
  o.shipped_kernels = false;
  o.kernel_dir = "off";
  auto lib = topk::Library::Open(o);
  if (!lib.ok()) Fail(lib.status().ToString());
  return std::move(*lib);
}

std::unique_ptr<topk::Plan> MakePlan(topk::Library* lib, const topk::Problem& p) {
  auto plan = lib->MakePlan(p);
  if (!plan.ok()) Fail(p.ToString() + ": " + plan.status().ToString());
  return std::move(*plan);
}

topk::Problem Shape(topk::DType dt, int64_t batch, int64_t n, int64_t k, bool ranges) {
  topk::Problem p;
  p.dtype = dt;
  p.batch = batch;
  p.n = n;
  p.k = k;
  p.ranges = ranges;
  return p;
}

// Host time of `launch` per call: `calls` calls in bursts of `burst`.
template <class F>
Stats TimeHost(int calls, int burst, cudaStream_t s, const F& launch) {
  std::vector<double> per_call;
  per_call.reserve(static_cast<size_t>(calls));
  for (int i = 0; i < 50; ++i) launch();  // warm-up
  Check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  for (int done = 0; done < calls;) {
    const int m = std::min(burst, calls - done);
    for (int i = 0; i < m; ++i) {
      const auto a = Clock::now();
      launch();
      per_call.push_back(Us(a, Clock::now()));
    }
    Check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    done += m;
  }
  return Summarise(per_call);
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/tmp";
  int calls = 10000, burst = 250;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc) dir = argv[++i];
    else if (a == "--calls" && i + 1 < argc) calls = std::atoi(argv[++i]);
    else if (a == "--burst" && i + 1 < argc) burst = std::atoi(argv[++i]);
    else if (a == "--help" || a == "-h") {
      std::printf("usage: topk-runtime-cost [--dir DIR] [--calls N] [--burst N]\n");
      return 0;
    } else {
      std::fprintf(stderr, "topk-runtime-cost: unknown argument '%s' (see --help)\n", a.c_str());
      return 2;
    }
  }
  if (calls < 1 || burst < 1) {
    std::fprintf(stderr, "topk-runtime-cost: --calls and --burst must be >= 1\n");
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("topk-runtime-cost: no GPU, nothing to time (skipped)\n");
    return 3;
  }
  Check(cudaFree(nullptr), "cudaFree(nullptr)");  // the runtime's context, before anything is timed

  const std::vector<topk::Problem> shapes = {
      Shape(topk::DType::kF32, 4096, 256, 8, false),     // warp per row
      Shape(topk::DType::kF32, 64, 32768, 2048, true),   // CTA per row
      Shape(topk::DType::kF32, 1, 131072, 2048, true),   // a cluster per row
      Shape(topk::DType::kBF16, 128, 201088, 64, false),
  };

  // --- plan ---
  // A new, empty cache file per shape: two shapes may share one compiled
  // kernel (cluster size and buffers are launch arguments).
  const std::string db = dir + "/topk-runtime-cost.db";
  auto remove_db = [&] {
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((db + suffix).c_str());
  };
  std::printf("plan: MakePlan wall time (ms); each shape starts from an empty cache file\n");
  std::printf("| shape | first plan (NVRTC) | fresh library, cubin in cache | same library again | kernel |\n");
  std::printf("| --- | --- | --- | --- | --- |\n");
  for (const topk::Problem& p : shapes) {
    double first = 0, cached = 0, again = 0;
    bool from_cache = false;
    std::string variant;
    remove_db();
    {
      auto lib = Open(db);
      auto a = Clock::now();
      auto plan = MakePlan(lib.get(), p);
      first = Us(a, Clock::now()) / 1000.0;
      if (plan->info().binary_from_cache) Fail(p.ToString() + ": the first plan found a cubin in an empty cache");
      variant = plan->info().variant_id;
    }
    {
      auto lib = Open(db);
      auto a = Clock::now();
      auto plan = MakePlan(lib.get(), p);
      cached = Us(a, Clock::now()) / 1000.0;
      from_cache = plan->info().binary_from_cache;
      a = Clock::now();
      auto plan2 = MakePlan(lib.get(), p);
      again = Us(a, Clock::now()) / 1000.0;
    }
    if (!from_cache) Fail(p.ToString() + ": the second library did not load the cubin from the cache");
    std::printf("| %s | %.1f | %.2f | %.3f | %s |\n", p.ToString().c_str(), first, cached, again, variant.c_str());
  }

  // --- run ---
  cudaStream_t s;
  Check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  auto lib = Open("");
  std::printf("\nrun: host time per call (us), %d calls in bursts of %d\n", calls, burst);
  std::printf("| call | median | p10 | p90 | p99 | max | mean |\n| --- | --- | --- | --- | --- | --- | --- |\n");
  auto print = [](const std::string& name, const Stats& st) {
    std::printf("| %s | %.2f | %.2f | %.2f | %.2f | %.1f | %.2f |\n", name.c_str(), st.median, st.p10, st.p90, st.p99,
                st.max, st.mean);
  };
  print("cudaLaunchKernel, empty kernel", TimeHost(calls, burst, s, [&] {
          Check(topk::bench::LaunchEmptyKernel(s), "LaunchEmptyKernel");
        }));
  print("cuLaunchKernel, empty kernel, 80-byte argument", TimeHost(calls, burst, s, [&] {
          const int r = topk::bench::LaunchEmptyKernelDriver(s);
          if (r != 0) {
            std::fprintf(stderr, "topk-runtime-cost: cuLaunchKernel of the empty kernel failed (%d)\n", r);
            std::exit(1);
          }
        }));
  for (const topk::Problem& p : shapes) {
    auto plan = MakePlan(lib.get(), p);
    const size_t in_bytes = static_cast<size_t>(p.batch * p.n) * topk::DTypeSize(p.dtype);
    void* x = nullptr;
    int32_t *idx = nullptr, *ranges = nullptr;
    Check(cudaMalloc(&x, in_bytes), "cudaMalloc");
    Check(cudaMemset(x, 0, in_bytes), "cudaMemset");
    Check(cudaMalloc(reinterpret_cast<void**>(&idx), static_cast<size_t>(p.batch * p.k) * 4), "cudaMalloc");
    std::vector<int32_t> r(static_cast<size_t>(2 * p.batch));
    for (int64_t i = 0; i < p.batch; ++i) r[static_cast<size_t>(2 * i + 1)] = static_cast<int32_t>(p.n);
    Check(cudaMalloc(reinterpret_cast<void**>(&ranges), r.size() * 4), "cudaMalloc");
    Check(cudaMemcpy(ranges, r.data(), r.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
    topk::Args a;
    a.input = x;
    a.indices = idx;
    a.ranges = ranges;
    const Stats st = TimeHost(calls, burst, s, [&] {
      const topk::Status rs = plan->Run(a, s);
      if (!rs.ok()) Fail(rs.ToString());
    });
    print("Plan::Run " + p.ToString() + " (" + plan->info().variant_id + ")", st);
    Check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    cudaFree(x);
    cudaFree(idx);
    cudaFree(ranges);
  }
  cudaStreamDestroy(s);
  remove_db();
  return 0;
}
