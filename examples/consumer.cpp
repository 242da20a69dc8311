// A small program that uses an installed topk-tune through its C++ API:
//
//   consumer [cache.db]
//
// Opens the library on device 0 (with the tuning cache when one is given),
// plans the DeepSeek-V3.2 indexer shape (64 rows of 32768 fp32 scores, top
// 2048), runs it on a stream, checks one row against a CPU top-k and prints
// where the kernel came from. On a machine without a GPU it prints why and
// "skipped: no GPU" and exits 0, so CI can run it.
//
// Memory comes from the CUDA runtime API; topk-tune uses the same primary
// context, so pointers and streams pass straight through.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "topk/topk.hpp"

namespace {

bool Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  topk::Options options;
  options.device = 0;
  if (argc > 1) options.cache_path = argv[1];

  auto lib = topk::Library::Open(options);
  if (!lib.ok()) {
    std::printf("topk::Library::Open: %s\n", lib.status().ToString().c_str());
    const topk::Code code = lib.status().code();
    if (code == topk::Code::kUnavailable || code == topk::Code::kNotFound) {
      std::printf("skipped: no GPU\n");
      return 0;
    }
    if (code == topk::Code::kUnimplemented) {
      std::printf("skipped: GPU not supported\n");
      return 0;
    }
    return 1;
  }
  std::printf("device: %s\n", (*lib)->device_description().c_str());
  if (!(*lib)->warnings().empty()) std::printf("warning: %s\n", (*lib)->warnings().c_str());

  topk::Problem problem;
  problem.dtype = topk::DType::kF32;
  problem.batch = 64;
  problem.n = 32768;
  problem.k = 2048;
  auto plan = (*lib)->MakePlan(problem);
  if (!plan.ok()) {
    std::fprintf(stderr, "MakePlan: %s\n", plan.status().ToString().c_str());
    return 1;
  }
  const topk::PlanInfo& info = (*plan)->info();
  std::printf("problem: %s\n", problem.ToString().c_str());
  std::printf("variant: %s (dispatch %s%s%s) plan %.1f ms, binary %s\n", info.variant_id.c_str(),
              topk::DispatchSourceName(info.source), info.tuned_shape.empty() ? "" : ", tuned for ",
              info.tuned_shape.c_str(), info.plan_ms, info.binary_from_cache ? "from cache" : "compiled");

  const size_t elems = static_cast<size_t>(problem.batch * problem.n);
  const size_t outs = static_cast<size_t>(problem.batch * problem.k);
  std::vector<float> host(elems);
  std::mt19937 rng(42);
  std::normal_distribution<float> dist;
  for (float& v : host) v = dist(rng);

  float* d_in = nullptr;
  int32_t* d_idx = nullptr;
  cudaStream_t stream = nullptr;
  if (!Check(cudaMalloc(&d_in, elems * sizeof(float)), "cudaMalloc") ||
      !Check(cudaMalloc(&d_idx, outs * sizeof(int32_t)), "cudaMalloc") ||
      !Check(cudaStreamCreate(&stream), "cudaStreamCreate") ||
      !Check(cudaMemcpy(d_in, host.data(), elems * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy"))
    return 1;

  topk::Args args;
  args.input = d_in;
  args.indices = d_idx;
  topk::Status s = (*plan)->Run(args, stream);
  if (!s.ok()) {
    std::fprintf(stderr, "Run: %s\n", s.ToString().c_str());
    return 1;
  }
  std::vector<int32_t> idx(outs);
  if (!Check(cudaStreamSynchronize(stream), "cudaStreamSynchronize") ||
      !Check(cudaMemcpy(idx.data(), d_idx, outs * sizeof(int32_t), cudaMemcpyDeviceToHost), "cudaMemcpy"))
    return 1;

  // Row 7 against a CPU top-k: the selected values, as a multiset, must be
  // the 2048 largest of the row (the output is unsorted by default).
  const int64_t row = 7;
  const float* x = host.data() + row * problem.n;
  std::vector<float> want(x, x + problem.n);
  std::sort(want.begin(), want.end(), std::greater<float>());
  want.resize(static_cast<size_t>(problem.k));
  std::vector<float> got;
  for (int64_t j = 0; j < problem.k; ++j) {
    const int32_t i = idx[static_cast<size_t>(row * problem.k + j)];
    if (i < 0 || i >= problem.n) {
      std::fprintf(stderr, "row %lld: index %d out of range\n", static_cast<long long>(row), i);
      return 1;
    }
    got.push_back(x[i]);
  }
  std::sort(got.begin(), got.end(), std::greater<float>());
  const bool ok = got == want;
  std::printf("row %lld: %s (k-th largest %.6f)\n", static_cast<long long>(row), ok ? "matches CPU top-k" : "MISMATCH",
              static_cast<double>(want.back()));

  cudaStreamDestroy(stream);
  cudaFree(d_idx);
  cudaFree(d_in);
  // Plans must be destroyed before their library: `plan` is declared after
  // `lib`, so it goes first.
  return ok ? 0 : 1;
}
