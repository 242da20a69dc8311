// Devices, contexts, modules and launches through the driver API: the pieces
// the tuner and the runtime share.
#pragma once

#include <cuda.h>

#include <array>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "generator/config.hpp"
#include "generator/family.hpp"
#include "jit/compiler.hpp"
#include "topk/args.h"
#include "topk/status.hpp"

namespace topk::jit {

// What identifies a GPU for tuning purposes.
struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  int64_t l2_bytes = 0;
  int64_t total_mem = 0;
  int max_smem_optin = 0;
  int max_smem_per_sm = 0;
  int driver_version = 0;  // e.g. 13000
  std::string compiler_version;  // NVRTC
  std::string uuid;
  // Clusters of 1, 2, 4, 8 and 16 CTAs, one CTA an SM, that run at once
  // (cuOccupancyMaxActiveClusters; sm_90 and newer): 0 where a size does not
  // run or its query failed, -1 where nothing was asked (before sm_90) or
  // the probe could not run, whose reason is cluster_query_error.
  std::array<int, 5> resident_clusters{-1, -1, -1, -1, -1};
  std::string cluster_query_error;

  // Name, compute capability, SM count and L2 size: two devices with equal
  // fingerprints share tuning results. Driver and NVRTC versions are kept
  // beside it (and key the binaries) but an update does not orphan results.
  std::string Fingerprint() const;
  std::string ArchName() const { return "sm_" + std::to_string(cc_major * 10 + cc_minor); }
  gen::Arch ToArch() const;
  nlohmann::json ToJson() const;
  static StatusOr<DeviceInfo> FromJson(const nlohmann::json& j);
};

// Number of CUDA devices; kUnavailable when there is no driver.
StatusOr<int> DeviceCount();
StatusOr<DeviceInfo> QueryDevice(int ordinal);

// The device's primary context, retained for the object's lifetime.
class Context {
 public:
  static StatusOr<std::shared_ptr<Context>> Primary(int ordinal);
  ~Context();
  CUcontext get() const { return ctx_; }
  int ordinal() const { return ordinal_; }
  // Makes the context current on the calling thread.
  Status MakeCurrent() const;

 private:
  Context(int ordinal, CUdevice dev, CUcontext ctx) : ordinal_(ordinal), dev_(dev), ctx_(ctx) {}
  int ordinal_;
  CUdevice dev_;
  CUcontext ctx_;
};

// Makes `ctx` current on this thread for the guard's lifetime (pushing it
// only when another context is current) and restores the caller's context.
class ContextGuard {
 public:
  explicit ContextGuard(CUcontext ctx);
  ~ContextGuard();
  ContextGuard(const ContextGuard&) = delete;
  ContextGuard& operator=(const ContextGuard&) = delete;
  const Status& status() const { return status_; }

 private:
  bool pushed_ = false;
  Status status_;
};

// A loaded cubin with one function. The context must be current to load it;
// the module keeps it and unloads in it, whatever context (or none) the
// destroying thread has current.
class Module {
 public:
  static StatusOr<std::unique_ptr<Module>> Load(const std::vector<char>& cubin, const std::string& lowered_name);
  ~Module();
  CUfunction function() const { return fn_; }
  // Registers / static smem / local memory from cuFuncGetAttribute.
  StatusOr<ResourceUsage> Usage() const;

 private:
  Module(CUmodule m, CUfunction f, CUcontext ctx) : mod_(m), fn_(f), ctx_(ctx) {}
  CUmodule mod_;
  CUfunction fn_;
  CUcontext ctx_;  // the context current at load
};

// Grid, block, cluster and shared memory of one launch.
struct LaunchShape {
  unsigned grid = 0;
  unsigned block = 0;
  unsigned cluster = 1;  // CTAs per cluster (1: no cluster attribute)
  int smem_bytes = 0;    // dynamic shared memory
  bool cooperative = false;  // every CTA resident at once (grid barriers), or the launch fails
  // Programmatic dependent launch (sm_90: gen::Arch::programmatic): the launch may begin
  // while the stream's previous kernel runs; the kernel waits for it first
  // (await_prior_grids in templates/topk/types.cuh).
  bool programmatic = false;
};

// The launch shape of one stage of a family's plan for `batch` rows.
LaunchShape StageShape(const gen::Stage& stage, int64_t batch);

// Raises the function's dynamic shared memory limit to the device's maximum
// (`max_smem_optin` bytes per block) and allows non-portable cluster sizes
// when needed. Idempotent; call before launching.
Status PrepareFunction(CUfunction f, const LaunchShape& s, int max_smem_optin);

// Whether at least one cluster (or CTA) of this shape fits on the device,
// and for a cooperative shape every CTA at once on its `sm_count` SMs
// (kResourceExhausted naming the counts if not).
Status CheckFits(CUfunction f, const LaunchShape& s, int sm_count);

// How many clusters of launch shape `s` (a cluster attribute of s.cluster
// CTAs, 1 included) can be co-resident on the device
// (cuOccupancyMaxActiveClusters).
StatusOr<int> ResidentClusters(CUfunction f, const LaunchShape& s);

// Launches `f` with one by-value parameter block (TopkArgs or SortArgs).
Status Launch(CUfunction f, const LaunchShape& s, void* params, size_t params_size, CUstream stream);

// Device memory owned by the object (the context must be current).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static StatusOr<DeviceBuffer> Alloc(size_t bytes);
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = 0; o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  CUdeviceptr get() const { return ptr_; }
  void* ptr() const { return reinterpret_cast<void*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

}  // namespace topk::jit
