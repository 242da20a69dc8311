#include "jit/driver.hpp"

#include <dlfcn.h>

#include <mutex>

namespace topk::jit {

#define TOPK_STR2(x) #x
#define TOPK_STR(x) TOPK_STR2(x)

namespace {

struct Loaded {
  Driver driver;
  Status status;
};

Loaded Load() {
  Loaded l;
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) h = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    l.status = Status(Code::kUnavailable, "dlopen(libcuda.so.1)",
                      std::string("no CUDA driver on this machine (") + (e ? e : "unknown") + ")");
    return l;
  }
  // The stub library in the toolkit loads but cannot initialise; the error
  // from cuInit below says so.
#define TOPK_DRIVER_LOAD(name)                                                                            \
  l.driver.name = reinterpret_cast<decltype(l.driver.name)>(dlsym(h, TOPK_STR(name)));                   \
  if (!l.driver.name) {                                                                                   \
    l.status = Status(Code::kUnavailable, "dlsym", "the CUDA driver lacks " TOPK_STR(name) " (too old?)"); \
    return l;                                                                                             \
  }
  TOPK_DRIVER_FUNCTIONS(TOPK_DRIVER_LOAD)
#undef TOPK_DRIVER_LOAD
  const CUresult r = l.driver.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    l.driver.cuGetErrorName(r, &name);
    l.status = Status(Code::kUnavailable, "cuInit",
                      std::string("the CUDA driver did not initialise (") + (name ? name : "?") +
                          "); is there a GPU and a driver?");
  }
  return l;
}

}  // namespace

StatusOr<const Driver*> GetDriver() {
  static const Loaded loaded = Load();
  if (!loaded.status.ok()) return loaded.status;
  return &loaded.driver;
}

Status CudaStatus(CUresult r, const char* call, const char* file, int line) {
  const char* name = "CUDA_ERROR_UNKNOWN";
  const char* text = "";
  auto d = GetDriver();
  if (d.ok()) {
    (*d)->cuGetErrorName(r, &name);
    (*d)->cuGetErrorString(r, &text);
  }
  std::string where = std::string(call) + " (" + file + ":" + std::to_string(line) + ")";
  Code code = Code::kCudaError;
  if (r == CUDA_ERROR_OUT_OF_MEMORY || r == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES ||
      r == CUDA_ERROR_INVALID_CLUSTER_SIZE || r == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE)
    code = Code::kResourceExhausted;
  if (r == CUDA_ERROR_NO_DEVICE || r == CUDA_ERROR_NOT_INITIALIZED) code = Code::kUnavailable;
  return Status(code, where, std::string(name ? name : "?") + ": " + (text ? text : ""));
}

}  // namespace topk::jit
