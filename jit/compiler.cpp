#include "jit/compiler.hpp"

#include <nvrtc.h>

#include <charconv>
#include <chrono>
#include <regex>
#include <system_error>

namespace topk::jit {

namespace {

// A decimal number of the log as an int; false when it does not fit (the
// log may come from a cache file or a kernel directory, not only ptxas).
bool ToInt(const std::ssub_match& digits, int* out) {
  const std::string s = digits.str();
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

ResourceUsage ParsePtxasLog(const std::string& log) {
  ResourceUsage u;
  std::smatch m;
  static const std::regex used(R"(Used (\d+) registers)");
  static const std::regex frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex smem(R"((\d+) bytes smem)");
  // A number too large for an int leaves the usage unknown.
  if (std::regex_search(log, m, used)) {
    if (!ToInt(m[1], &u.registers)) return ResourceUsage();
    u.known = true;
  }
  if (std::regex_search(log, m, frame) &&
      !(ToInt(m[1], &u.stack_bytes) && ToInt(m[2], &u.spill_stores) && ToInt(m[3], &u.spill_loads)))
    return ResourceUsage();
  if (std::regex_search(log, m, smem) && !ToInt(m[1], &u.static_smem)) return ResourceUsage();
  return u;
}

std::string NvrtcVersion() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "nvrtc unknown";
  return "nvrtc " + std::to_string(major) + "." + std::to_string(minor);
}

namespace {

Status NvrtcStatus(nvrtcResult r, const char* call, const std::string& context) {
  return Status(Code::kCompileError, call, std::string(nvrtcGetErrorString(r)) + (context.empty() ? "" : ": " + context));
}

#define TOPK_NVRTC(call, context)                                          \
  do {                                                                     \
    nvrtcResult topk_nr_ = (call);                                         \
    if (topk_nr_ != NVRTC_SUCCESS) return NvrtcStatus(topk_nr_, #call, context); \
  } while (0)

// Owns an nvrtcProgram so that every early return destroys it.
struct Program {
  nvrtcProgram p = nullptr;
  ~Program() {
    if (p) nvrtcDestroyProgram(&p);
  }
};

class NvrtcCompiler final : public Compiler {
 public:
  NvrtcCompiler() {
    for (const auto& [name, text] : gen::EmbeddedTemplates()) {
      names_.push_back(name.c_str());
      texts_.push_back(text.c_str());
    }
  }

  std::string Version() const override { return NvrtcVersion(); }

  StatusOr<CompiledKernel> Compile(const gen::KernelSource& src, const CompileOptions& opts) override {
    const auto t0 = std::chrono::steady_clock::now();
    Program prog;
    TOPK_NVRTC(nvrtcCreateProgram(&prog.p, src.text.c_str(), src.file_name.c_str(), static_cast<int>(names_.size()),
                                  texts_.data(), names_.data()),
               src.key);
    TOPK_NVRTC(nvrtcAddNameExpression(prog.p, src.name_expression.c_str()), src.key);
    const std::string arch = "-arch=" + opts.arch;
    std::vector<const char*> o = {arch.c_str(), "-std=c++17", "-Xptxas=-v", "-default-device"};
    if (opts.line_info) o.push_back("-lineinfo");
    const nvrtcResult cr = nvrtcCompileProgram(prog.p, static_cast<int>(o.size()), o.data());
    size_t log_size = 0;
    std::string log;
    if (nvrtcGetProgramLogSize(prog.p, &log_size) == NVRTC_SUCCESS && log_size > 1) {
      log.resize(log_size);
      nvrtcGetProgramLog(prog.p, log.data());
      log.resize(log_size - 1);
    }
    if (cr != NVRTC_SUCCESS)
      return Status(Code::kCompileError, "nvrtcCompileProgram",
                    src.key + " for " + opts.arch + " failed: " + nvrtcGetErrorString(cr) + "\n" + log);
    const char* lowered = nullptr;
    TOPK_NVRTC(nvrtcGetLoweredName(prog.p, src.name_expression.c_str(), &lowered), src.key);
    CompiledKernel out;
    out.lowered_name = lowered;
    size_t size = 0;
    TOPK_NVRTC(nvrtcGetCUBINSize(prog.p, &size), src.key);
    out.cubin.resize(size);
    TOPK_NVRTC(nvrtcGetCUBIN(prog.p, out.cubin.data()), src.key);
    out.key = src.key;
    out.source_hash = src.hash;
    out.arch = opts.arch;
    out.options = opts.Key();
    out.compiler_version = Version();
    out.log = std::move(log);
    out.usage = ParsePtxasLog(out.log);
    out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return out;
  }

 private:
  std::vector<const char*> names_;
  std::vector<const char*> texts_;
};

}  // namespace

std::unique_ptr<Compiler> MakeNvrtcCompiler() { return std::make_unique<NvrtcCompiler>(); }

}  // namespace topk::jit
