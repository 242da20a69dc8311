// Build-time tool: compiles every kernel the built-in defaults need
// (gen::DefaultKernelSources) for the given architectures and writes them as
// one blob (jit::WriteKernelBlob), which CMake embeds into libtopk so that a
// first call on defaults needs no NVRTC.
// Usage: topk_ship_kernels --out FILE [--jobs N] ARCH...   (ARCH: sm_80, sm_90, ...)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "generator/family.hpp"
#include "jit/compiler.hpp"
#include "jit/kernel_store.hpp"

int main(int argc, char** argv) {
  using namespace topk;
  std::string out_path;
  std::vector<gen::Arch> arches;
  unsigned jobs = std::max(1u, std::thread::hardware_concurrency());
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) {
      out_path = argv[++i];
    } else if (a == "--jobs" && i + 1 < argc) {
      jobs = static_cast<unsigned>(std::max(1, std::atoi(argv[++i])));
    } else {
      auto arch = gen::Arch::FromName(a);
      if (!arch.ok()) {
        std::fprintf(stderr, "topk_ship_kernels: %s\n", arch.status().ToString().c_str());
        return 2;
      }
      arches.push_back(*arch);
    }
  }
  if (out_path.empty()) {
    std::fprintf(stderr, "usage: topk_ship_kernels --out FILE [--jobs N] ARCH...\n");
    return 2;
  }
  struct Job {
    gen::KernelSource src;
    jit::CompileOptions opts;
  };
  std::vector<Job> work;
  for (const gen::Arch& arch : arches) {
    jit::CompileOptions o;
    o.arch = arch.Name();
    for (gen::KernelSource& s : gen::DefaultKernelSources(arch)) work.push_back({std::move(s), o});
  }
  auto compiler = jit::MakeNvrtcCompiler();
  std::vector<jit::CompiledKernel> done(work.size());
  std::vector<std::string> errors(work.size());
  std::atomic<size_t> next{0};
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < std::min<size_t>(jobs, work.size()); ++t)
    threads.emplace_back([&] {
      for (size_t i = next++; i < work.size(); i = next++) {
        auto k = compiler->Compile(work[i].src, work[i].opts);
        if (k.ok())
          done[i] = std::move(*k);
        else
          errors[i] = k.status().ToString();
      }
    });
  for (std::thread& t : threads) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  size_t bytes = 0;
  for (size_t i = 0; i < work.size(); ++i) {
    if (!errors[i].empty()) {
      std::fprintf(stderr, "topk_ship_kernels: %s\n", errors[i].c_str());
      return 1;
    }
    bytes += done[i].cubin.size();
  }
  // Write then rename: an interrupted build leaves no half blob for the
  // next one to embed.
  const std::string tmp = out_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    const std::string blob = jit::WriteKernelBlob(done);
    out.write(blob.data(), static_cast<std::streamsize>(blob.size()));
    out.close();
    if (!out || std::rename(tmp.c_str(), out_path.c_str()) != 0) {
      std::fprintf(stderr, "topk_ship_kernels: cannot write %s\n", out_path.c_str());
      return 1;
    }
  }
  std::printf("topk_ship_kernels: %zu kernels for %zu architectures, %.1f MB of cubins, %.1f s on %u threads\n",
              work.size(), arches.size(), bytes / 1e6, s, jobs);
  return 0;
}
