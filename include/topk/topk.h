/* topk-tune runtime library, C API.
 *
 * Opaque handles, integer status codes (topk_code) and malloc'd error
 * messages: every function that can fail takes `char** err`; on failure it
 * returns a non-zero code and, when err is not NULL, stores a message the
 * caller frees with topk_free(). On success *err is left untouched. Nothing
 * here prints, aborts or exits. Same contract as topk.hpp: plan once, run
 * many times; topk_plan_run only launches (no allocation, no host
 * synchronisation) and is safe from several threads on several streams
 * (a plan with a workspace orders the calls on its own one across streams;
 * to run them concurrently, pass one workspace per stream:
 * topk_plan_run_workspace).
 */
#ifndef TOPK_TOPK_H_
#define TOPK_TOPK_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes: the same numbers as topk::Code. */
enum topk_code {
  TOPK_OK = 0,
  TOPK_INVALID_ARGUMENT = 1,
  TOPK_NOT_FOUND = 2,
  TOPK_OUT_OF_RANGE = 3,
  TOPK_FAILED_PRECONDITION = 4,
  TOPK_UNAVAILABLE = 5,
  TOPK_RESOURCE_EXHAUSTED = 6,
  TOPK_DATA_LOSS = 7,
  TOPK_COMPILE_ERROR = 8,
  TOPK_CUDA_ERROR = 9,
  TOPK_WRONG_RESULT = 10,
  TOPK_CRASH = 11,
  TOPK_TIMEOUT = 12,
  TOPK_INTERNAL = 13,
  TOPK_UNIMPLEMENTED = 14
};

enum topk_dtype { TOPK_F32 = 0, TOPK_F16 = 1, TOPK_BF16 = 2 };

/* Where a plan's kernel came from. */
enum topk_dispatch { TOPK_DISPATCH_EXACT = 0, TOPK_DISPATCH_NEAREST = 1, TOPK_DISPATCH_DEFAULT = 2 };

typedef struct topk_library topk_library;
typedef struct topk_plan topk_plan;

typedef struct topk_options {
  int device;             /* CUDA device ordinal */
  const char* cache_path; /* tuning cache file, or NULL / "" for defaults only */
  int allow_same_arch;    /* use entries tuned on another device of the same compute capability */
  int write_back;         /* store binaries compiled at plan time in the cache */
  int programmatic_launch; /* 1: programmatic dependent launch on sm_90 (topk::Options) */
} topk_options;

typedef struct topk_problem {
  int dtype;          /* enum topk_dtype */
  int64_t batch;
  int64_t n;
  int64_t k;
  int64_t row_stride; /* elements between rows; 0 means n */
  int largest;        /* 1: k largest, 0: k smallest */
  int ranges;         /* per-row int32 [start, end) pairs are passed to run */
  int values;         /* write the selected values too */
  int sorted;         /* sort each row's output by value */
  int deterministic;  /* ties at the k-th value: the lowest indices win (same set on every call) */
} topk_problem;

/* Defaults: device 0, no cache, write_back 1, programmatic_launch 1 / largest 1. */
void topk_options_init(topk_options* o);
void topk_problem_init(topk_problem* p);

/* Opens the library on a device. *out is set on success. */
int topk_library_open(const topk_options* options, topk_library** out, char** err);
void topk_library_close(topk_library* lib);
/* Problems with the cache file noticed at open ("" when none); owned by lib. */
const char* topk_library_warnings(const topk_library* lib);
/* Device name and architecture; owned by lib. */
const char* topk_library_device(const topk_library* lib);

/* Chooses, loads or compiles the kernel for `problem`. Thread-safe. The plan
 * must be destroyed before its library. */
int topk_plan_create(topk_library* lib, const topk_problem* problem, topk_plan** out, char** err);
void topk_plan_destroy(topk_plan* plan);

/* Launches on `stream` (CUstream / cudaStream_t, NULL = legacy default).
 * `ranges` and `values` may be NULL when the problem does not use them;
 * batch < 0 means the planned batch. A plan with a workspace
 * (topk_plan_workspace_bytes > 0) uses its own here: a call on another
 * stream than the previous one waits on the GPU for it; calls captured into
 * CUDA graphs are not ordered so, and such graphs must not replay
 * concurrently. */
int topk_plan_run(const topk_plan* plan, const void* input, const int32_t* ranges, int32_t* indices, void* values,
                  int64_t batch, void* stream, char** err);

/* topk_plan_run with the caller's global scratch: `workspace` is device
 * memory of topk_plan_workspace_bytes(plan) bytes, 16-byte aligned, zeroed
 * once before its first use (every call leaves it zero). NULL uses the
 * plan's own, as topk_plan_run does; ignored when the plan needs none.
 * Calls that share a workspace must not overlap on the GPU; concurrent calls
 * on other streams each pass their own. A misaligned workspace returns
 * TOPK_INVALID_ARGUMENT without launching. */
int topk_plan_run_workspace(const topk_plan* plan, const void* input, const int32_t* ranges, int32_t* indices,
                            void* values, int64_t batch, void* workspace, void* stream, char** err);

/* Plan details; strings are owned by the plan. */
int topk_plan_dispatch(const topk_plan* plan);      /* enum topk_dispatch */
const char* topk_plan_variant(const topk_plan* plan);  /* variant id */
const char* topk_plan_tuned_shape(const topk_plan* plan);
double topk_plan_tuned_median_us(const topk_plan* plan);
int topk_plan_binary_from_cache(const topk_plan* plan);
double topk_plan_ms(const topk_plan* plan);
/* Bytes of global scratch a call needs (see topk_plan_run_workspace); 0 for
 * most plans. */
size_t topk_plan_workspace_bytes(const topk_plan* plan);

/* "ok", "invalid_argument", ... for a code. */
const char* topk_code_name(int code);
/* The default cache path of topk-tune (see topk::DefaultCachePath; "" when
   neither TOPK_TUNE_DB, an absolute XDG_CACHE_HOME nor HOME is set); the
   caller frees it with topk_free. */
char* topk_default_cache_path(void);
void topk_free(void* p);

#ifdef __cplusplus
}
#endif

#endif /* TOPK_TOPK_H_ */
