// A compiler that compiles nothing: every source becomes a few bytes of
// "cubin" at once, except the key in `fail_key`, which fails with a log.
// For tuner tests that run with a fake evaluator.
#pragma once

#include <atomic>
#include <string>

#include "jit/compiler.hpp"

namespace topk::testing {

class FakeCompiler final : public jit::Compiler {
 public:
  StatusOr<jit::CompiledKernel> Compile(const gen::KernelSource& src, const jit::CompileOptions& o) override {
    ++compiles;
    if (fail_key == src.key) return Status(Code::kCompileError, "fake", "log: error in " + src.key);
    jit::CompiledKernel k;
    k.key = src.key;
    k.source_hash = src.hash;
    k.arch = o.arch;
    k.options = o.Key();
    k.compiler_version = Version();
    k.lowered_name = "fake_" + src.key;
    k.cubin = {'c', 'u', 'b', 'i', 'n', '\0', '1'};
    return k;
  }
  std::string Version() const override { return "fake 1.0"; }
  std::atomic<int> compiles{0};
  std::string fail_key;
};

}  // namespace topk::testing
