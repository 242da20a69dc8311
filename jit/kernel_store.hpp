// Compiled kernels by source hash: found in a persistent binary store (the
// tuning cache, or a directory in tests) or compiled with NVRTC once and
// written back; loaded into the current context once per process.
#pragma once

#include <cuda.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "generator/source.hpp"
#include "jit/compiler.hpp"
#include "jit/device.hpp"

namespace topk::jit {

// Where binaries persist between processes.
class BinaryStore {
 public:
  virtual ~BinaryStore() = default;
  virtual StatusOr<std::optional<CompiledKernel>> Find(const std::string& source_hash, const std::string& arch,
                                                       const std::string& options,
                                                       const std::string& compiler_version) = 0;
  virtual Status Put(const CompiledKernel& k) = 0;
};

// (The tuning cache's store is cache::MakeBinaryStore, cache/jit_adapter.hpp.)
// Binaries as files <hash>_<arch>.cubin (+ .name, the lowered name) in `dir`.
std::unique_ptr<BinaryStore> MakeDirectoryStore(const std::string& dir);

class KernelStore {
 public:
  // `store` may be null (compile every time, keep in memory only).
  KernelStore(Compiler* compiler, BinaryStore* store, CompileOptions options);

  // The binary of `src`: from memory, the store, or NVRTC (then written to
  // the store; a failing write is not an error). No GPU needed; thread-safe.
  // `from_store` tells where it came from.
  StatusOr<std::shared_ptr<const CompiledKernel>> Binary(const gen::KernelSource& src, bool* from_store = nullptr);

  // The function of `src` loaded into the current context (once per
  // source); the module stays loaded for the store's lifetime.
  StatusOr<CUfunction> Function(const gen::KernelSource& src, bool* from_store = nullptr);

  const CompileOptions& options() const { return options_; }

 private:
  Compiler* compiler_;
  BinaryStore* store_;
  CompileOptions options_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const CompiledKernel>> binaries_;
  std::map<std::string, std::unique_ptr<Module>> modules_;  // by hash + context
};

}  // namespace topk::jit
