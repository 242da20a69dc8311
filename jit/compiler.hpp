// Compilation of generated kernel sources to cubins. The Compiler interface
// lets the search and the cache be tested with a fake on machines without
// NVRTC or a GPU; NvrtcCompiler is the real one.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "generator/source.hpp"
#include "topk/status.hpp"

namespace topk::jit {

// Registers and memory of a compiled kernel, from ptxas -v (no GPU needed)
// or cuFuncGetAttribute (with one).
struct ResourceUsage {
  bool known = false;
  int registers = 0;
  int stack_bytes = 0;
  int spill_stores = 0;
  int spill_loads = 0;
  int static_smem = 0;
  bool spills() const { return spill_stores > 0 || spill_loads > 0; }
};

// Parses the "ptxas info: Used N registers ..." lines of an NVRTC log (for
// the one entry function it contains).
ResourceUsage ParsePtxasLog(const std::string& log);

struct CompileOptions {
  std::string arch = "sm_90";  // compile target: sm_80, sm_90, ...
  bool line_info = false;
  // The option string recorded with the binary (part of its cache key).
  std::string Key() const { return "-arch=" + arch + " -std=c++17 -default-device" + (line_info ? " -lineinfo" : ""); }
};

struct CompiledKernel {
  std::string key;           // KernelSource::key
  std::string source_hash;   // KernelSource::hash
  std::string arch;
  std::string options;       // CompileOptions::Key()
  std::string compiler_version;  // e.g. "nvrtc 13.0"
  std::string lowered_name;  // mangled entry point
  std::vector<char> cubin;
  std::string log;
  ResourceUsage usage;
  double compile_ms = 0;
};

class Compiler {
 public:
  virtual ~Compiler() = default;
  // kCompileError with the compiler log in the message when the source does
  // not compile. Thread-safe: several threads may compile at once.
  virtual StatusOr<CompiledKernel> Compile(const gen::KernelSource& src, const CompileOptions& opts) = 0;
  virtual std::string Version() const = 0;
};

// NVRTC with the embedded templates as headers.
std::unique_ptr<Compiler> MakeNvrtcCompiler();
// "nvrtc 13.0".
std::string NvrtcVersion();

}  // namespace topk::jit
