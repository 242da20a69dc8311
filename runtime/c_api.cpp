// The C API: thin wrappers that turn Status into codes and messages.
#include "topk/topk.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "topk/topk.hpp"

struct topk_library {
  std::unique_ptr<topk::Library> lib;
};

struct topk_plan {
  std::unique_ptr<topk::Plan> plan;
};

namespace {

char* Dup(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p) std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

int Fail(const topk::Status& s, char** err) {
  if (err) *err = Dup(s.ToString());
  return static_cast<int>(s.code());
}

int Fail(int code, const char* msg, char** err) {
  if (err) *err = Dup(std::string(topk::CodeName(static_cast<topk::Code>(code))) + ": " + msg);
  return code;
}

// `f()`, with no C++ exception reaching the C caller: the library returns
// errors as values, and one that throws anyway (a bug, or host memory
// running out) becomes TOPK_INTERNAL / TOPK_RESOURCE_EXHAUSTED.
template <class F>
int Guarded(const char* where, char** err, F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return Fail(TOPK_RESOURCE_EXHAUSTED, (std::string(where) + ": out of host memory").c_str(), err);
  } catch (const std::exception& e) {
    return Fail(TOPK_INTERNAL, (std::string(where) + ": unexpected exception: " + e.what()).c_str(), err);
  } catch (...) {
    return Fail(TOPK_INTERNAL, (std::string(where) + ": unexpected exception").c_str(), err);
  }
}

int Run(const topk_plan& plan, const void* input, const int32_t* ranges, int32_t* indices, void* values, int64_t batch,
        void* workspace, void* stream, char** err) {
  topk::Args a;
  a.input = input;
  a.ranges = ranges;
  a.indices = indices;
  a.values = values;
  a.batch = batch;
  a.workspace = workspace;
  topk::Status s = plan.plan->Run(a, stream);
  if (!s.ok()) return Fail(s, err);
  return TOPK_OK;
}

}  // namespace

extern "C" {

void topk_options_init(topk_options* o) {
  if (!o) return;
  o->device = 0;
  o->cache_path = nullptr;
  o->allow_same_arch = 0;
  o->write_back = 1;
  o->programmatic_launch = 1;
}

void topk_problem_init(topk_problem* p) {
  if (!p) return;
  std::memset(p, 0, sizeof(*p));
  p->dtype = TOPK_F32;
  p->batch = 1;
  p->largest = 1;
}

int topk_library_open(const topk_options* options, topk_library** out, char** err) {
  if (!options) return Fail(TOPK_INVALID_ARGUMENT, "topk_library_open: options is NULL", err);
  if (!out) return Fail(TOPK_INVALID_ARGUMENT, "topk_library_open: out is NULL", err);
  topk::Options o;
  o.device = options->device;
  o.cache_path = options->cache_path ? options->cache_path : "";
  o.allow_same_arch = options->allow_same_arch != 0;
  o.write_back = options->write_back != 0;
  o.programmatic_launch = options->programmatic_launch != 0;
  return Guarded("topk_library_open", err, [&] {
    auto lib = topk::Library::Open(o);
    if (!lib.ok()) return Fail(lib.status(), err);
    auto* h = new (std::nothrow) topk_library;
    if (!h) return Fail(TOPK_RESOURCE_EXHAUSTED, "out of host memory", err);
    h->lib = std::move(*lib);
    *out = h;
    return static_cast<int>(TOPK_OK);
  });
}

void topk_library_close(topk_library* lib) { delete lib; }

const char* topk_library_warnings(const topk_library* lib) { return lib ? lib->lib->warnings().c_str() : ""; }
const char* topk_library_device(const topk_library* lib) { return lib ? lib->lib->device_description().c_str() : ""; }

int topk_plan_create(topk_library* lib, const topk_problem* problem, topk_plan** out, char** err) {
  if (!lib) return Fail(TOPK_INVALID_ARGUMENT, "topk_plan_create: lib is NULL", err);
  if (!problem) return Fail(TOPK_INVALID_ARGUMENT, "topk_plan_create: problem is NULL", err);
  if (!out) return Fail(TOPK_INVALID_ARGUMENT, "topk_plan_create: out is NULL", err);
  if (problem->dtype < TOPK_F32 || problem->dtype > TOPK_BF16)
    return Fail(TOPK_INVALID_ARGUMENT, "topk_plan_create: dtype must be TOPK_F32, TOPK_F16 or TOPK_BF16", err);
  topk::Problem p;
  p.dtype = static_cast<topk::DType>(problem->dtype);
  p.batch = problem->batch;
  p.n = problem->n;
  p.k = problem->k;
  p.row_stride = problem->row_stride;
  p.largest = problem->largest != 0;
  p.ranges = problem->ranges != 0;
  p.values = problem->values != 0;
  p.sorted = problem->sorted != 0;
  p.deterministic = problem->deterministic != 0;
  return Guarded("topk_plan_create", err, [&] {
    auto plan = lib->lib->MakePlan(p);
    if (!plan.ok()) return Fail(plan.status(), err);
    auto* h = new (std::nothrow) topk_plan;
    if (!h) return Fail(TOPK_RESOURCE_EXHAUSTED, "out of host memory", err);
    h->plan = std::move(*plan);
    *out = h;
    return static_cast<int>(TOPK_OK);
  });
}

void topk_plan_destroy(topk_plan* plan) { delete plan; }

int topk_plan_run(const topk_plan* plan, const void* input, const int32_t* ranges, int32_t* indices, void* values,
                  int64_t batch, void* stream, char** err) {
  if (!plan) return Fail(TOPK_INVALID_ARGUMENT, "topk_plan_run: plan is NULL", err);
  return Guarded("topk_plan_run", err,
                 [&] { return Run(*plan, input, ranges, indices, values, batch, nullptr, stream, err); });
}

int topk_plan_run_workspace(const topk_plan* plan, const void* input, const int32_t* ranges, int32_t* indices,
                            void* values, int64_t batch, void* workspace, void* stream, char** err) {
  if (!plan) return Fail(TOPK_INVALID_ARGUMENT, "topk_plan_run_workspace: plan is NULL", err);
  return Guarded("topk_plan_run_workspace", err,
                 [&] { return Run(*plan, input, ranges, indices, values, batch, workspace, stream, err); });
}

int topk_plan_dispatch(const topk_plan* plan) { return plan ? static_cast<int>(plan->plan->info().source) : -1; }
const char* topk_plan_variant(const topk_plan* plan) { return plan ? plan->plan->info().variant_id.c_str() : ""; }
const char* topk_plan_tuned_shape(const topk_plan* plan) { return plan ? plan->plan->info().tuned_shape.c_str() : ""; }
double topk_plan_tuned_median_us(const topk_plan* plan) { return plan ? plan->plan->info().tuned_median_us : 0; }
int topk_plan_binary_from_cache(const topk_plan* plan) { return plan && plan->plan->info().binary_from_cache; }
double topk_plan_ms(const topk_plan* plan) { return plan ? plan->plan->info().plan_ms : 0; }
size_t topk_plan_workspace_bytes(const topk_plan* plan) { return plan ? plan->plan->info().workspace_bytes : 0; }

const char* topk_code_name(int code) {
  if (code < 0 || code > TOPK_UNIMPLEMENTED) return "unknown";
  return topk::CodeName(static_cast<topk::Code>(code));
}

char* topk_default_cache_path(void) { return Dup(topk::DefaultCachePath()); }

void topk_free(void* p) { std::free(p); }

}  // extern "C"
