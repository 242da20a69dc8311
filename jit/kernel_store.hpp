// Compiled kernels by source hash: found in a persistent binary store (the
// kernels shipped in the library, the tuning cache, a directory of
// compiled kernels) or compiled with NVRTC once and written back; loaded
// into the current context once per process.
#pragma once

#include <cuda.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// One compiled kernel as bytes: a magic, every field length-prefixed, and a
// checksum over all of it, so that a torn or foreign file is recognised
// (ParseKernel fails) instead of being loaded.
std::string SerializeKernel(const CompiledKernel& k);
StatusOr<CompiledKernel> ParseKernel(std::string_view bytes);

// (The tuning cache's store is cache::MakeBinaryStore, cache/jit_adapter.hpp.)
// Binaries as files <hash>_<arch>_<options and compiler hash>.kernel in
// `dir` (created on the first write). Safe for concurrent processes: each
// write goes to a temporary named after the process and thread, then is
// renamed over the entry; a file that does not parse is a miss (recompiled
// and replaced), never an error.
std::unique_ptr<BinaryStore> MakeDirectoryStore(const std::string& dir);

// Read-only: the kernels in a blob written by WriteKernelBlob (the kernels
// shipped in the library). Matches hash, arch and options but not the
// compiler version: a cubin built by the NVRTC of the build serves any
// NVRTC at run time (its source hash covers every template). A blob that
// does not parse is empty, a kernel that does not is a miss. `blob` must
// outlive the store (the embedded blob does). Put does nothing.
std::unique_ptr<BinaryStore> MakeBlobStore(std::string_view blob);
// The blob of `kernels` for MakeBlobStore.
std::string WriteKernelBlob(const std::vector<CompiledKernel>& kernels);
// Every kernel of a blob; an error when it does not parse.
StatusOr<std::vector<CompiledKernel>> ReadKernelBlob(std::string_view blob);

// Several stores consulted in order (none owned; nulls skipped). A hit in a
// later store is written back (best effort) to the earlier ones, so that a
// tuning cache that lacks a binary gets it once; Put writes to all.
std::unique_ptr<BinaryStore> MakeChainStore(std::vector<BinaryStore*> stores);

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
