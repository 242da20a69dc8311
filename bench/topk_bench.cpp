// topk-bench: the Google Benchmark suite. For every shape of the presets it
// times, the same way and in the same run:
//   tuned    the runtime's dispatch with the tuning cache (winner / nearest),
//   default  the runtime without a cache (the built-in default),
//   cub      a baseline on CUB's segmented radix sort (sort, keep k).
// Each iteration replays a CUDA graph of several calls (inputs rotating over
// copies larger than L2, or one L2-hot copy for the DSA shapes) between CUDA
// events; the reported time is per call. Use the standard flags for output:
//   topk-bench [--db tuning.db] [--preset dsa,sampling,moe] [--benchmark_format=json]
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/cub_baseline.hpp"
#include "topk/topk.hpp"
#include "tuner/presets.hpp"
#include "tuner/reference.hpp"
#include "tuner/timing.hpp"

namespace {

using topk::Problem;

#define CUDA_OK(expr)                                                                       \
  do {                                                                                      \
    cudaError_t e_ = (expr);                                                                \
    if (e_ != cudaSuccess) {                                                                \
      state.SkipWithError((std::string(#expr) + ": " + cudaGetErrorString(e_)).c_str()); \
      return;                                                                               \
    }                                                                                       \
  } while (0)

// Device inputs of one shape, shared by its three benchmarks.
struct Inputs {
  Problem p;
  std::string l2_mode;
  std::vector<void*> copies;
  int32_t* ranges = nullptr;
  int32_t* indices = nullptr;
  void* values = nullptr;
  ~Inputs() {
    for (void* c : copies) cudaFree(c);
    cudaFree(ranges);
    cudaFree(indices);
    cudaFree(values);
  }
};

std::shared_ptr<Inputs> MakeInputs(const Problem& p, const std::string& l2_mode, const std::string& dist,
                                   std::string* err) {
  auto in = std::make_shared<Inputs>();
  in->p = p;
  in->l2_mode = l2_mode;
  topk::tuner::HostMatrix m(p.dtype, p.batch, p.n, p.stride());
  auto d = topk::tuner::ParseDist(dist);
  topk::tuner::Fill(&m, d.ok() ? *d : topk::tuner::Dist::kNormal, 11, p.k);
  int l2 = 0;
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0);
  const int copies = l2_mode == "hot" ? 1 : topk::tuner::RotationCopies(m.bytes.size(), l2);
  for (int i = 0; i < copies; ++i) {
    void* c = nullptr;
    if (cudaMalloc(&c, m.bytes.size()) != cudaSuccess ||
        cudaMemcpy(c, m.bytes.data(), m.bytes.size(), cudaMemcpyHostToDevice) != cudaSuccess) {
      *err = "cannot allocate inputs";
      return nullptr;
    }
    in->copies.push_back(c);
  }
  std::vector<int32_t> r(static_cast<size_t>(2 * p.batch));
  for (int64_t i = 0; i < p.batch; ++i) r[static_cast<size_t>(2 * i + 1)] = static_cast<int32_t>(p.n);
  const size_t out = static_cast<size_t>(p.batch * p.k);
  if (cudaMalloc(&in->ranges, r.size() * 4) != cudaSuccess ||
      cudaMemcpy(in->ranges, r.data(), r.size() * 4, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMalloc(&in->indices, out * 4) != cudaSuccess ||
      cudaMalloc(&in->values, out * topk::DTypeSize(p.dtype)) != cudaSuccess) {
    *err = "cannot allocate outputs";
    return nullptr;
  }
  return in;
}

// Times `call` (one top-k on a given input copy) as graph replays.
template <class Call>
void TimeGraph(benchmark::State& state, const Inputs& in, const Call& call) {
  const int per_graph = in.l2_mode == "hot" ? 20 : static_cast<int>(in.copies.size());
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::string err = call(in.copies[0], s);  // warm: module load, first-call work
  if (err.empty()) {
    const cudaError_t se = cudaStreamSynchronize(s);
    if (se != cudaSuccess) err = cudaGetErrorString(se);
  }
  if (!err.empty()) {
    cudaStreamDestroy(s);
    state.SkipWithError(err.c_str());
    return;
  }
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < per_graph && err.empty(); ++i) err = call(in.copies[i % in.copies.size()], s);
  CUDA_OK(cudaStreamEndCapture(s, &g));
  if (!err.empty()) {
    state.SkipWithError(err.c_str());
    return;
  }
  CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t a, b;
  CUDA_OK(cudaEventCreate(&a));
  CUDA_OK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) CUDA_OK(cudaGraphLaunch(ge, s));
  for (auto _ : state) {
    CUDA_OK(cudaEventRecord(a, s));
    CUDA_OK(cudaGraphLaunch(ge, s));
    CUDA_OK(cudaEventRecord(b, s));
    CUDA_OK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, a, b));
    state.SetIterationTime(ms / 1000.0 / per_graph);
  }
  const double bytes = static_cast<double>(in.p.batch) * in.p.n * topk::DTypeSize(in.p.dtype);
  state.counters["GB/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
}

}  // namespace

int main(int argc, char** argv) {
  std::string db = topk::DefaultCachePath();
  std::string presets = "dsa,sampling,moe";
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--db=", 0) == 0) db = a.substr(5);
    else if (a == "--db" && i + 1 < argc) db = argv[++i];
    else if (a.rfind("--preset=", 0) == 0) presets = a.substr(9);
    else if (a == "--preset" && i + 1 < argc) presets = argv[++i];
    else rest.push_back(argv[i]);
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_argc, rest.data())) return 2;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("topk-bench: no GPU, nothing to time (skipped)\n");
    return 0;
  }
  topk::Options with_cache;
  with_cache.cache_path = db;
  with_cache.write_back = false;
  auto tuned = topk::Library::Open(with_cache);
  auto plain = topk::Library::Open(topk::Options());
  if (!tuned.ok() || !plain.ok()) {
    std::fprintf(stderr, "topk-bench: %s\n", (tuned.ok() ? plain.status() : tuned.status()).ToString().c_str());
    return 3;
  }
  if (!(*tuned)->warnings().empty()) std::fprintf(stderr, "topk-bench: %s\n", (*tuned)->warnings().c_str());
  std::vector<std::shared_ptr<topk::Plan>> plans;  // kept alive for the run
  size_t pos = 0;
  while (pos <= presets.size()) {
    const size_t comma = presets.find(',', pos);
    const std::string name = presets.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? presets.size() + 1 : comma + 1;
    auto set = topk::tuner::Preset(name);
    if (!set.ok()) {
      std::fprintf(stderr, "topk-bench: %s\n", set.status().ToString().c_str());
      return 2;
    }
    for (const Problem& p : set->problems) {
      std::string err;
      auto in = MakeInputs(p, set->l2_mode, set->dist, &err);
      if (!in) {
        std::fprintf(stderr, "topk-bench: %s: %s\n", p.ToString().c_str(), err.c_str());
        continue;
      }
      const std::string label = name + "/" + topk::DTypeName(p.dtype) + "/" + std::to_string(p.batch) + "x" +
                                std::to_string(p.n) + "/k" + std::to_string(p.k);
      for (auto* lib : {tuned->get(), plain->get()}) {
        auto plan = lib->MakePlan(p);
        if (!plan.ok()) {
          std::fprintf(stderr, "topk-bench: %s: %s\n", label.c_str(), plan.status().ToString().c_str());
          continue;
        }
        std::shared_ptr<topk::Plan> pl = std::move(*plan);
        plans.push_back(pl);
        const std::string kind = lib == tuned->get() ? "tuned" : "default";
        benchmark::RegisterBenchmark((label + "/" + kind).c_str(), [in, pl](benchmark::State& state) {
          TimeGraph(state, *in, [&](const void* x, cudaStream_t s) {
            topk::Args a;
            a.input = x;
            a.ranges = in->ranges;
            a.indices = in->indices;
            a.values = in->values;
            topk::Status st = pl->Run(a, s);
            return st.ok() ? std::string() : st.ToString();
          });
          state.SetLabel(pl->info().variant_id + " (" + topk::DispatchSourceName(pl->info().source) + ")");
        })->UseManualTime()->Unit(benchmark::kMicrosecond);
      }
      benchmark::RegisterBenchmark((label + "/cub").c_str(), [in](benchmark::State& state) {
        std::string err;
        topk::bench::CubTopk* t = topk::bench::CubTopkCreate(topk::DTypeName(in->p.dtype), static_cast<int>(in->p.batch),
                                                           static_cast<int>(in->p.n), static_cast<int>(in->p.k), &err);
        if (!t) {
          state.SkipWithError(("CUB baseline: " + err).c_str());
          return;
        }
        TimeGraph(state, *in, [&](const void* x, cudaStream_t s) {
          return topk::bench::CubTopkRun(t, x, in->indices, s);
        });
        topk::bench::CubTopkDestroy(t);
      })->UseManualTime()->Unit(benchmark::kMicrosecond);
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
