// topk-probe: times chosen variants on chosen shapes, in process, with the
// tuner's verification and timing. A development tool for kernel work: it
// answers "how fast is variant X on shape Y" without a tuning run.
//
//   topk-probe --shape f32:64x32768:2048:ranges --variant default --variant radix_f32_b1024_r11_s4096_c2_t2_m1_i0
//   topk-probe --targets            (the issue-6 target shapes, a built-in candidate list)
//   topk-probe --shape f32:1x524288:2048:ranges --variant default --launch both
//                                    (each variant with plain and programmatic launches)
#include <atomic>
#include <cstdio>
#include <thread>
#include <cstdlib>
#include <cctype>
#include <cstring>
#include <string>
#include <vector>

#include "generator/config.hpp"
#include "generator/source.hpp"
#include "jit/driver.hpp"
#include "jit/kernel_store.hpp"
#include "jit/variant.hpp"
#include "tuner/runner.hpp"
#include "tuner/search.hpp"
#include "tuner/timing.hpp"

using namespace topk;

namespace {

struct Shape {
  Problem p;
  std::string dist = "normal";
  std::string l2 = "hot";
};

// "f32:64x32768:2048[:ranges][:values][:smallest][:sorted][:deterministic][:rotate][:dist=logits]"
bool ParseShape(const std::string& s, Shape* out) {
  std::vector<std::string> f;
  size_t a = 0;
  for (size_t b; (b = s.find(':', a)) != std::string::npos; a = b + 1) f.push_back(s.substr(a, b - a));
  f.push_back(s.substr(a));
  if (f.size() < 3) return false;
  auto dt = ParseDType(f[0]);
  if (!dt.ok()) return false;
  out->p.dtype = *dt;
  if (std::sscanf(f[1].c_str(), "%ldx%ld", &out->p.batch, &out->p.n) != 2) return false;
  out->p.k = std::atol(f[2].c_str());
  for (size_t i = 3; i < f.size(); ++i) {
    if (f[i] == "ranges") out->p.ranges = true;
    else if (f[i] == "values") out->p.values = true;
    else if (f[i] == "smallest") out->p.largest = false;
    else if (f[i] == "sorted") out->p.sorted = true;
    else if (f[i] == "deterministic") out->p.deterministic = true;
    else if (f[i] == "rotate") out->l2 = "rotate";
    else if (f[i].rfind("dist=", 0) == 0) out->dist = f[i].substr(5);
    else return false;
  }
  return out->p.Validate().ok();
}

// The default and its neighbours in the space: same family, at most two
// parameters different.
std::vector<gen::Config> Candidates(const Problem& p, const gen::Arch& arch) {
  const gen::Config def = gen::DefaultConfig(p, arch);
  std::vector<gen::Config> v = {def};
  for (const gen::Config& c : gen::Enumerate(p, arch))
    if (c.family == def.family && !(c == def) && tuner::KnobDistance(c, def) <= 2) v.push_back(c);
  return v;
}

// Development defines (--define NAME[=VALUE]) prepended to every kernel
// source, e.g. TOPK_STOP_AT=N (radix/trace.cuh) to time a prefix of the
// kernel's phases; they change the kernel's key and hash, so such cubins never
// mix with the real ones in the store.
std::vector<std::string> g_defines;

gen::KernelSource WithDefines(gen::KernelSource src) {
  std::string pre, tag;
  for (const std::string& d : g_defines) {
    const size_t eq = d.find('=');
    pre += "#define " + (eq == std::string::npos ? d : d.substr(0, eq) + " " + d.substr(eq + 1)) + "\n";
    tag += "_" + d;
  }
  if (pre.empty()) return src;
  for (char& ch : tag)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  src.text = pre + src.text;
  src.key += tag;
  src.hash = gen::HashHex(src.hash + pre);
  return src;
}

// With --define TOPK_TRACE: the phase boundaries CTA 0 passed in the last
// launch (radix/trace.cuh), in SM cycles and microseconds since its entry:
// b<i> = boundary i, m<i> = trace-only mark i, end0 = exit.
void PrintTrace(CUfunction fn) {
  CUmodule mod = nullptr;
  CUdeviceptr dptr = 0;
  size_t bytes = 0;
  unsigned long long t[32] = {};
  int khz = 0;
  CUdevice dev = 0;
  if (cuFuncGetModule(&mod, fn) != CUDA_SUCCESS || cuModuleGetGlobal(&dptr, &bytes, mod, "topk_trace") != CUDA_SUCCESS ||
      bytes != sizeof(t) || cuCtxSynchronize() != CUDA_SUCCESS || cuMemcpyDtoH(t, dptr, sizeof(t)) != CUDA_SUCCESS ||
      cuCtxGetDevice(&dev) != CUDA_SUCCESS ||
      cuDeviceGetAttribute(&khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev) != CUDA_SUCCESS || khz <= 0) {
    std::printf("    trace: not available\n");
    return;
  }
  std::printf("    trace (cycles, us at %.0f MHz):", khz / 1000.0);
  for (int i = 1; i < 32; ++i)
    if (t[i] >= t[0] && t[i] != 0)
      std::printf(" %s%d=%llu/%.2f", i == 31 ? "end" : i >= 20 ? "m" : "b", i == 31 ? 0 : i >= 20 ? i : i - 1,
                  t[i] - t[0], (t[i] - t[0]) / (khz * 1e-3));
  std::printf("\n");
  const unsigned long long zero[32] = {};
  (void)cuMemcpyHtoD(dptr, zero, sizeof(zero));
}

gen::KernelSource Source(const gen::Config& c) { return WithDefines(gen::GenerateSource(c)); }

}  // namespace

int main(int argc, char** argv) {
  std::vector<Shape> shapes;
  std::vector<std::string> variants;
  std::string cubins = "/tmp/topk-probe-cubins";
  bool verify = true;
  // Programmatic dependent launch (gen::Arch::programmatic_launch) per timing.
  std::vector<bool> launch_modes = {true};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--shape") {
      Shape s;
      const std::string v = next();
      if (!ParseShape(v, &s)) {
        std::fprintf(stderr, "bad shape '%s' (e.g. f32:64x32768:2048:ranges)\n", v.c_str());
        return 2;
      }
      shapes.push_back(s);
    } else if (a == "--variant") {
      variants.push_back(next());
    } else if (a == "--cubins") {
      cubins = next();
    } else if (a == "--define") {
      g_defines.push_back(next());
    } else if (a == "--launch") {
      const std::string v = next();
      if (v == "plain") launch_modes = {false};
      else if (v == "programmatic") launch_modes = {true};
      else if (v == "both") launch_modes = {false, true};
      else {
        std::fprintf(stderr, "--launch: plain, programmatic or both, got '%s'\n", v.c_str());
        return 2;
      }
    } else if (a == "--no-verify") {
      verify = false;
    } else if (a == "--targets") {
      for (const char* t : {"f32:64x32768:2048:ranges", "f32:1x131072:2048:ranges", "f32:1x524288:2048:ranges",
                            "f32:128x131072:2048:ranges", "bf16:128x201088:64:values:rotate:dist=logits",
                            "f32:256x128256:1024:values:rotate:dist=logits", "f32:4096x256:8:rotate",
                            "bf16:16384x256:8:rotate"}) {
        Shape s;
        ParseShape(t, &s);
        shapes.push_back(s);
      }
    } else {
      std::fprintf(stderr,
                   "usage: topk-probe (--shape DT:BxN:K[:ranges][:values][:smallest][:sorted][:deterministic][:rotate][:dist=D])... "
                   "[--variant ID|default|all]... [--targets] [--launch plain|programmatic|both] [--cubins DIR] [--no-verify] [--define NAME[=VALUE]]...\n");
      return 2;
    }
  }
  auto ctx = jit::Context::Primary(0);  // first: the device query reuses it
  if (!ctx.ok() || !(*ctx)->MakeCurrent().ok()) return 3;
  auto info = jit::QueryDevice(0);
  if (!info.ok()) {
    std::fprintf(stderr, "topk-probe: %s\n", info.status().ToString().c_str());
    return 3;
  }
  const gen::Arch arch = info->ToArch();
  if (!arch.programmatic() && launch_modes.size() > 1) {
    std::printf("%s: no programmatic launches here, plain only\n", arch.Name().c_str());
    launch_modes = {false};
  }
  auto compiler = jit::MakeNvrtcCompiler();
  auto store = jit::MakeDirectoryStore(cubins);
  jit::CompileOptions co;
  co.arch = info->ArchName();
  jit::KernelStore ks(compiler.get(), store.get(), co);
  std::printf("device: %s\n", info->Fingerprint().c_str());
  // Compile every kernel the run needs on all cores first.
  {
    std::vector<gen::KernelSource> srcs;
    for (const Shape& s : shapes) {
      const bool all = variants.empty() || (variants.size() == 1 && variants[0] == "all");
      if (all)
        for (const gen::Config& c : Candidates(s.p, arch)) srcs.push_back(Source(c));
      for (const std::string& v : variants) {
        auto c = gen::Config::FromId(v);
        if (c.ok()) srcs.push_back(Source(*c));
      }
      srcs.push_back(Source(gen::DefaultConfig(s.p, arch)));
      if (s.p.sorted) srcs.push_back(WithDefines(gen::SortSource(s.p.dtype)));
      if (s.p.deterministic) srcs.push_back(WithDefines(gen::TieSource(s.p.dtype)));
    }
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < std::max(1u, std::thread::hardware_concurrency()); ++t)
      pool.emplace_back([&] {
        for (size_t i = next++; i < srcs.size(); i = next++) (void)ks.Binary(srcs[i]);
      });
    for (auto& th : pool) th.join();
  }
  bool trace = false;
  for (const std::string& d : g_defines) trace = trace || d == "TOPK_TRACE";
  int failures = 0;
  for (const Shape& s : shapes) {
    auto dist = tuner::ParseDist(s.dist);
    if (!dist.ok()) return 2;
    // Verification and timing on whole-row ranges (the random adversarial
    // ranges are the GPU tests' job).
    auto dc = tuner::DeviceCase::Make(s.p, *dist, 7, tuner::RangesMode::kFull);
    if (!dc.ok()) {
      std::fprintf(stderr, "%s\n", dc.status().ToString().c_str());
      return 3;
    }
    std::vector<gen::Config> cs;
    if (variants.empty() || (variants.size() == 1 && variants[0] == "all")) {
      cs = Candidates(s.p, arch);
    } else {
      for (const std::string& v : variants) {
        if (v == "default") {
          cs.push_back(gen::DefaultConfig(s.p, arch));
          continue;
        }
        auto c = gen::Config::FromId(v);
        if (!c.ok() || c->dtype != s.p.dtype) continue;
        cs.push_back(*c);
      }
    }
    std::printf("\n%s  input=%s l2=%s\n", s.p.ToString().c_str(), s.dist.c_str(), s.l2.c_str());
    double best = 1e30;
    std::string best_id;
    for (const gen::Config& c : cs) {
      for (const bool programmatic : launch_modes) {
        gen::Arch la = arch;
        la.programmatic_launch = programmatic;
        const std::string label =
            launch_modes.size() > 1 ? c.Id() + (la.programmatic() ? " pdl" : " plain") : c.Id();
        auto v = jit::LoadVariant(ks, c, s.p, la, nullptr, -1, WithDefines);
        if (!v.ok()) {
          std::printf("  %-50s %s\n", label.c_str(), v.status().ToString().substr(0, 300).c_str());
          continue;
        }
        if (verify) {
          Status st = tuner::RunAndCheck(*v, &*dc, nullptr);
          if (!st.ok()) {
            ++failures;
            std::printf("  %-50s WRONG %s\n", label.c_str(), st.ToString().substr(0, 300).c_str());
            if (st.code() != Code::kWrongResult) return 4;
            continue;
          }
        }
        tuner::MeasureSettings ms;
        ms.l2_mode = s.l2;
        auto t = tuner::TimeVariant(*v, &*dc, ms, info->l2_bytes, nullptr);
        if (!t.ok()) {
          std::printf("  %-50s time: %s\n", label.c_str(), t.status().ToString().c_str());
          continue;
        }
        std::printf("  %-50s %9.2f us  [p10 %.2f p90 %.2f]\n", label.c_str(), t->median, t->p10, t->p90);
        if (trace) {
          auto fn = ks.Function(Source(c));  // loaded already: the variant's first kernel
          if (fn.ok()) PrintTrace(*fn);
        }
        if (t->median < best) {
          best = t->median;
          best_id = label;
        }
      }
    }
    if (!best_id.empty()) std::printf("  best: %s %.2f us\n", best_id.c_str(), best);
  }
  return failures ? 1 : 0;
}
