#include "jit/device.hpp"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "jit/driver.hpp"

namespace topk::jit {

std::string DeviceInfo::Fingerprint() const {
  return name + "|sm_" + std::to_string(cc_major * 10 + cc_minor) + "|" + std::to_string(sm_count) + "sm|L2=" +
         std::to_string(l2_bytes);
}

gen::Arch DeviceInfo::ToArch() const {
  gen::Arch a = cc_major >= 9 ? gen::Arch::Sm90() : gen::Arch::Sm80();
  a.cc_major = cc_major;
  a.cc_minor = cc_minor;
  if (max_smem_optin > 0) a.max_smem_optin = max_smem_optin;
  if (sm_count > 0) a.sm_count = sm_count;
  a.resident_clusters = resident_clusters;
  return a;
}

nlohmann::json DeviceInfo::ToJson() const {
  return {{"ordinal", ordinal},
          {"name", name},
          {"cc", std::to_string(cc_major) + "." + std::to_string(cc_minor)},
          {"cc_major", cc_major},
          {"cc_minor", cc_minor},
          {"sm_count", sm_count},
          {"l2_bytes", l2_bytes},
          {"total_mem", total_mem},
          {"max_smem_optin", max_smem_optin},
          {"max_smem_per_sm", max_smem_per_sm},
          {"driver_version", driver_version},
          {"compiler_version", compiler_version},
          {"uuid", uuid},
          {"resident_clusters", resident_clusters},
          {"cluster_query_error", cluster_query_error},
          {"fingerprint", Fingerprint()}};
}

StatusOr<DeviceInfo> DeviceInfo::FromJson(const nlohmann::json& j) {
  DeviceInfo d;
  try {
    d.ordinal = j.value("ordinal", 0);
    d.name = j.at("name").get<std::string>();
    d.cc_major = j.at("cc_major").get<int>();
    d.cc_minor = j.at("cc_minor").get<int>();
    d.sm_count = j.value("sm_count", 0);
    d.l2_bytes = j.value("l2_bytes", int64_t{0});
    d.total_mem = j.value("total_mem", int64_t{0});
    d.max_smem_optin = j.value("max_smem_optin", 0);
    d.max_smem_per_sm = j.value("max_smem_per_sm", 0);
    d.driver_version = j.value("driver_version", 0);
    d.compiler_version = j.value("compiler_version", std::string());
    d.uuid = j.value("uuid", std::string());
    // Leniently: a missing or malformed list reads as "not asked".
    const auto rc = j.find("resident_clusters");
    if (rc != j.end() && rc->is_array() && rc->size() == d.resident_clusters.size())
      for (size_t i = 0; i < d.resident_clusters.size(); ++i)
        if ((*rc)[i].is_number_integer()) d.resident_clusters[i] = (*rc)[i].get<int>();
    d.cluster_query_error = j.value("cluster_query_error", std::string());
  } catch (const nlohmann::json::exception& e) {
    return Status(Code::kInvalidArgument, "DeviceInfo::FromJson", e.what());
  }
  return d;
}

StatusOr<int> DeviceCount() {
  int n = 0;
  auto run = [&]() -> Status {
    TOPK_CU(cuDeviceGetCount, &n);
    return Status::Ok();
  };
  TOPK_RETURN_IF_ERROR(run());
  return n;
}

namespace {

// The device of a CUDA ordinal, or kNotFound naming the machine's count.
Status DeviceOf(const char* where, int ordinal, CUdevice* dev) {
  int count = 0;
  TOPK_CU(cuDeviceGetCount, &count);
  if (ordinal < 0 || ordinal >= count)
    return Status(Code::kNotFound, where,
                  "no CUDA device " + std::to_string(ordinal) + " (this machine has " + std::to_string(count) + ")");
  TOPK_CU(cuDeviceGet, dev, ordinal);
  return Status::Ok();
}

// Clusters of 1, 2, 4, 8 and 16 CTAs the device runs at once with one CTA an
// SM (what the defaults' kernels take): cuOccupancyMaxActiveClusters for an
// empty kernel, which the driver builds from PTX, asking for a CTA's whole
// shared memory. A size whose query fails counts 0 (not run); the error is
// the probe's own (its module, its context). The primary context is retained
// for the query (a caller that holds it already saves its creation).
Status QueryResidentClusters(CUdevice dev, int max_smem_optin, std::array<int, 5>* out) {
  static const char kPtx[] =
      ".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry topk_cluster_probe()\n{\n  ret;\n}\n";
  CUcontext ctx = nullptr;
  TOPK_CU(cuDevicePrimaryCtxRetain, &ctx, dev);
  struct Release {
    CUdevice dev;
    ~Release() {
      auto d = GetDriver();
      if (d.ok()) (*d)->cuDevicePrimaryCtxRelease(dev);
    }
  } release{dev};
  ContextGuard guard(ctx);
  TOPK_RETURN_IF_ERROR(guard.status());
  TOPK_ASSIGN_OR_RETURN(auto module, Module::Load(std::vector<char>(kPtx, kPtx + sizeof(kPtx)), "topk_cluster_probe"));
  for (size_t i = 0; i < out->size(); ++i) {
    LaunchShape s;
    s.cluster = 1u << i;
    s.grid = s.cluster;
    s.block = 1024;
    s.smem_bytes = max_smem_optin;
    int n = 0;
    if (PrepareFunction(module->function(), s, max_smem_optin).ok()) {
      const StatusOr<int> r = ResidentClusters(module->function(), s);
      if (r.ok()) n = *r;
    }
    (*out)[i] = n;
  }
  return Status::Ok();
}

}  // namespace

StatusOr<DeviceInfo> QueryDevice(int ordinal) {
  DeviceInfo d;
  auto run = [&]() -> Status {
    CUdevice dev;
    TOPK_RETURN_IF_ERROR(DeviceOf("QueryDevice", ordinal, &dev));
    char name[256] = {0};
    TOPK_CU(cuDeviceGetName, name, sizeof(name) - 1, dev);
    d.ordinal = ordinal;
    d.name = name;
    auto attr = [&](CUdevice_attribute a, int* out) -> Status {
      TOPK_CU(cuDeviceGetAttribute, out, a, dev);
      return Status::Ok();
    };
    int l2 = 0;
    TOPK_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &d.cc_major));
    TOPK_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &d.cc_minor));
    TOPK_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &d.sm_count));
    TOPK_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, &l2));
    TOPK_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &d.max_smem_optin));
    TOPK_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, &d.max_smem_per_sm));
    d.l2_bytes = l2;
    size_t mem = 0;
    TOPK_CU(cuDeviceTotalMem, &mem, dev);
    d.total_mem = static_cast<int64_t>(mem);
    TOPK_CU(cuDriverGetVersion, &d.driver_version);
    CUuuid u;
    TOPK_CU(cuDeviceGetUuid, &u, dev);
    char hex[40];
    for (int i = 0; i < 16; ++i) std::snprintf(hex + 2 * i, 3, "%02x", static_cast<unsigned char>(u.bytes[i]));
    d.uuid = hex;
    d.compiler_version = NvrtcVersion();
    // Where the probe cannot run, the defaults use Arch's fit instead.
    if (d.cc_major >= 9) {
      if (Status st = QueryResidentClusters(dev, d.max_smem_optin, &d.resident_clusters); !st.ok()) {
        d.resident_clusters = DeviceInfo().resident_clusters;
        d.cluster_query_error = st.ToString();
      }
    }
    return Status::Ok();
  };
  TOPK_RETURN_IF_ERROR(run());
  return d;
}

StatusOr<std::shared_ptr<Context>> Context::Primary(int ordinal) {
  CUdevice dev;
  CUcontext ctx;
  auto run = [&]() -> Status {
    TOPK_RETURN_IF_ERROR(DeviceOf("Context::Primary", ordinal, &dev));
    TOPK_CU(cuDevicePrimaryCtxRetain, &ctx, dev);
    return Status::Ok();
  };
  TOPK_RETURN_IF_ERROR(run());
  return std::shared_ptr<Context>(new Context(ordinal, dev, ctx));
}

Context::~Context() {
  auto d = GetDriver();
  if (d.ok()) (*d)->cuDevicePrimaryCtxRelease(dev_);
}

Status Context::MakeCurrent() const {
  TOPK_CU(cuCtxSetCurrent, ctx_);
  return Status::Ok();
}

ContextGuard::ContextGuard(CUcontext ctx) {
  auto d = GetDriver();
  if (!d.ok()) {
    status_ = d.status();
    return;
  }
  CUcontext cur = nullptr;
  (*d)->cuCtxGetCurrent(&cur);
  if (cur == ctx) return;
  const CUresult r = (*d)->cuCtxPushCurrent(ctx);
  if (r != CUDA_SUCCESS) {
    status_ = CudaStatus(r, "cuCtxPushCurrent", __FILE__, __LINE__);
    return;
  }
  pushed_ = true;
}

ContextGuard::~ContextGuard() {
  if (!pushed_) return;
  CUcontext popped;
  (*GetDriver())->cuCtxPopCurrent(&popped);
}

StatusOr<std::unique_ptr<Module>> Module::Load(const std::vector<char>& cubin, const std::string& lowered_name) {
  CUmodule m = nullptr;
  CUfunction f = nullptr;
  CUcontext ctx = nullptr;
  auto run = [&]() -> Status {
    TOPK_CU(cuCtxGetCurrent, &ctx);
    TOPK_CU(cuModuleLoadData, &m, cubin.data());
    auto d = GetDriver();
    const CUresult r = (*d)->cuModuleGetFunction(&f, m, lowered_name.c_str());
    if (r != CUDA_SUCCESS) {
      (*d)->cuModuleUnload(m);
      m = nullptr;
      return CudaStatus(r, "cuModuleGetFunction", __FILE__, __LINE__);
    }
    return Status::Ok();
  };
  TOPK_RETURN_IF_ERROR(run());
  return std::unique_ptr<Module>(new Module(m, f, ctx));
}

Module::~Module() {
  auto d = GetDriver();
  if (!d.ok() || !mod_) return;
  // A library closed on a thread with another device's context, or none,
  // still unloads from its own (the guard restores the caller's).
  ContextGuard guard(ctx_);
  if (guard.status().ok()) (*d)->cuModuleUnload(mod_);
}

StatusOr<ResourceUsage> Module::Usage() const {
  ResourceUsage u;
  int regs = 0, local = 0, shared = 0;
  auto run = [&]() -> Status {
    TOPK_CU(cuFuncGetAttribute, &regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn_);
    TOPK_CU(cuFuncGetAttribute, &local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn_);
    TOPK_CU(cuFuncGetAttribute, &shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn_);
    return Status::Ok();
  };
  TOPK_RETURN_IF_ERROR(run());
  u.known = true;
  u.registers = regs;
  u.stack_bytes = local;
  u.static_smem = shared;
  return u;
}

LaunchShape StageShape(const gen::Stage& stage, int64_t batch) {
  LaunchShape s;
  s.grid = stage.Grid(batch);
  s.block = stage.block;
  s.cluster = stage.cluster;
  s.smem_bytes = stage.smem_bytes;
  s.cooperative = stage.cooperative;
  return s;
}

Status PrepareFunction(CUfunction f, const LaunchShape& s, int max_smem_optin) {
  // The attribute is a cap, not a reservation, and several plans may share
  // one function with different row-cache sizes: always raise it to what the
  // device allows, never to this launch's size (a later, smaller value would
  // break an earlier plan's larger launch).
  int static_smem = 0;
  TOPK_CU(cuFuncGetAttribute, &static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f);
  const int cap = std::max(s.smem_bytes, max_smem_optin - static_smem);
  TOPK_CU(cuFuncSetAttribute, f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, cap);
  if (s.cluster > 8) TOPK_CU(cuFuncSetAttribute, f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
  return Status::Ok();
}

Status CheckFits(CUfunction f, const LaunchShape& s, int sm_count) {
  if (s.cooperative && s.cluster > 1)
    return Status(Code::kInvalidArgument, "CheckFits",
                  "a launch is cooperative or clustered, not both (cluster " + std::to_string(s.cluster) + ")");
  if (s.cluster <= 1) {
    int blocks = 0;
    TOPK_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor, &blocks, f, static_cast<int>(s.block),
            static_cast<size_t>(s.smem_bytes));
    if (blocks < 1)
      return Status(Code::kResourceExhausted, "cuOccupancyMaxActiveBlocksPerMultiprocessor",
                    "a block of " + std::to_string(s.block) + " threads with " + std::to_string(s.smem_bytes) +
                        " B shared memory does not fit on one SM");
    if (s.cooperative && static_cast<int64_t>(blocks) * sm_count < s.grid)
      return Status(Code::kResourceExhausted, "cuOccupancyMaxActiveBlocksPerMultiprocessor",
                    "a cooperative grid of " + std::to_string(s.grid) + " CTAs of " + std::to_string(s.block) +
                        " threads does not fit at once: " + std::to_string(blocks) + " a SM on " +
                        std::to_string(sm_count) + " SMs");
    return Status::Ok();
  }
  TOPK_ASSIGN_OR_RETURN(const int clusters, ResidentClusters(f, s));
  if (clusters < 1)
    return Status(Code::kResourceExhausted, "cuOccupancyMaxActiveClusters",
                  "a cluster of " + std::to_string(s.cluster) + " x " + std::to_string(s.block) + " threads with " +
                      std::to_string(s.smem_bytes) + " B shared memory each does not fit on the device");
  return Status::Ok();
}

namespace {

// The launch configuration of a launch with its attributes (up to two, in
// attrs[]): cooperative or a cluster dimension (CheckFits refuses a shape
// with both), and programmatic stream serialization for a programmatic
// launch.
CUlaunchConfig ExConfig(const LaunchShape& s, unsigned grid, CUstream stream, CUlaunchAttribute (&attrs)[2]) {
  CUlaunchConfig cfg = {};
  cfg.gridDimX = grid;
  cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = s.block;
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.sharedMemBytes = static_cast<unsigned>(s.smem_bytes);
  cfg.hStream = stream;
  attrs[0] = {};
  attrs[1] = {};
  unsigned n = 0;
  if (s.cooperative) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attrs[n++].value.cooperative = 1;
  } else if (s.cluster > 1) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[n].value.clusterDim.x = s.cluster;
    attrs[n].value.clusterDim.y = 1;
    attrs[n++].value.clusterDim.z = 1;
  }
  if (s.programmatic) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs[n++].value.programmaticStreamSerializationAllowed = 1;
  }
  cfg.attrs = attrs;
  cfg.numAttrs = n;
  return cfg;
}

}  // namespace

StatusOr<int> ResidentClusters(CUfunction f, const LaunchShape& s) {
  LaunchShape one = s;
  one.cluster = std::max(s.cluster, 1u);
  one.cooperative = false;
  one.programmatic = false;
  CUlaunchAttribute attrs[2];
  CUlaunchConfig cfg = ExConfig(one, one.cluster, nullptr, attrs);
  if (one.cluster == 1) {  // the dimension attribute of a 1-CTA cluster
    attrs[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[0].value.clusterDim = {1, 1, 1};
    cfg.numAttrs = 1;
  }
  int clusters = 0;
  TOPK_CU(cuOccupancyMaxActiveClusters, &clusters, f, &cfg);
  return clusters;
}

Status Launch(CUfunction f, const LaunchShape& s, void* params, size_t params_size, CUstream stream) {
  (void)params_size;  // the kernels take one struct by value
  void* kernel_params[] = {params};
  if (s.grid == 0) return Status::Ok();
  if (s.cluster <= 1 && !s.cooperative && !s.programmatic) {
    TOPK_CU(cuLaunchKernel, f, s.grid, 1, 1, s.block, 1, 1, static_cast<unsigned>(s.smem_bytes), stream, kernel_params,
            nullptr);
    return Status::Ok();
  }
  CUlaunchAttribute attrs[2];
  const CUlaunchConfig cfg = ExConfig(s, s.grid, stream, attrs);
  TOPK_CU(cuLaunchKernelEx, &cfg, f, kernel_params, nullptr);
  return Status::Ok();
}

StatusOr<DeviceBuffer> DeviceBuffer::Alloc(size_t bytes) {
  DeviceBuffer b;
  if (bytes == 0) return b;
  auto run = [&]() -> Status {
    TOPK_CU(cuMemAlloc, &b.ptr_, bytes);
    return Status::Ok();
  };
  TOPK_RETURN_IF_ERROR(run());
  b.bytes_ = bytes;
  return b;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    this->~DeviceBuffer();
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = 0;
    o.bytes_ = 0;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (!ptr_) return;
  auto d = GetDriver();
  if (d.ok()) (*d)->cuMemFree(ptr_);
  ptr_ = 0;
}

}  // namespace topk::jit
