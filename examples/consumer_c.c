/* The same consumer through the C API (topk/topk.h):
 *
 *   consumer_c [cache.db]
 *
 * Plans 64 x 32768 fp32, k = 2048, with values, runs it on the legacy
 * default stream and checks that row 0's values are the values at its
 * indices, in range and no larger than the row's maximum. Without a GPU it
 * prints the message of topk_library_open and "skipped: no GPU", and exits 0.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "topk/topk.h"

static int check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return 1;
  fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return 0;
}

int main(int argc, char** argv) {
  topk_options options;
  topk_options_init(&options);
  options.device = 0;
  options.cache_path = argc > 1 ? argv[1] : NULL;

  topk_library* lib = NULL;
  char* err = NULL;
  int code = topk_library_open(&options, &lib, &err);
  if (code != TOPK_OK) {
    printf("topk_library_open: %s\n", err ? err : topk_code_name(code));
    topk_free(err);
    if (code == TOPK_UNAVAILABLE || code == TOPK_NOT_FOUND) {
      printf("skipped: no GPU\n");
      return 0;
    }
    if (code == TOPK_UNIMPLEMENTED) {
      printf("skipped: GPU not supported\n");
      return 0;
    }
    return 1;
  }
  printf("device: %s\n", topk_library_device(lib));
  if (topk_library_warnings(lib)[0]) printf("warning: %s\n", topk_library_warnings(lib));

  topk_problem problem;
  topk_problem_init(&problem);
  problem.dtype = TOPK_F32;
  problem.batch = 64;
  problem.n = 32768;
  problem.k = 2048;
  problem.values = 1;

  topk_plan* plan = NULL;
  code = topk_plan_create(lib, &problem, &plan, &err);
  if (code != TOPK_OK) {
    fprintf(stderr, "topk_plan_create: %s\n", err);
    topk_free(err);
    topk_library_close(lib);
    return 1;
  }
  static const char* const kSources[] = {"exact", "nearest", "default"};
  printf("variant: %s (dispatch %s) plan %.1f ms\n", topk_plan_variant(plan), kSources[topk_plan_dispatch(plan)],
         topk_plan_ms(plan));

  const size_t elems = (size_t)(problem.batch * problem.n), outs = (size_t)(problem.batch * problem.k);
  float* host = (float*)malloc(elems * sizeof(float));
  float* vals = (float*)malloc(outs * sizeof(float));
  int32_t* idx = (int32_t*)malloc(outs * sizeof(int32_t));
  unsigned state = 12345;
  for (size_t i = 0; i < elems; ++i) {
    state = state * 1664525u + 1013904223u;
    host[i] = (float)(state >> 8) / (float)(1u << 24) - 0.5f;
  }
  float *d_in = NULL, *d_vals = NULL;
  int32_t* d_idx = NULL;
  int ok = check(cudaMalloc((void**)&d_in, elems * sizeof(float)), "cudaMalloc") &&
           check(cudaMalloc((void**)&d_vals, outs * sizeof(float)), "cudaMalloc") &&
           check(cudaMalloc((void**)&d_idx, outs * sizeof(int32_t)), "cudaMalloc") &&
           check(cudaMemcpy(d_in, host, elems * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  if (ok) {
    code = topk_plan_run(plan, d_in, NULL, d_idx, d_vals, -1, NULL, &err);
    if (code != TOPK_OK) {
      fprintf(stderr, "topk_plan_run: %s\n", err);
      topk_free(err);
      ok = 0;
    }
  }
  ok = ok && check(cudaMemcpy(idx, d_idx, outs * sizeof(int32_t), cudaMemcpyDeviceToHost), "cudaMemcpy") &&
       check(cudaMemcpy(vals, d_vals, outs * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  if (ok) {
    float row_max = host[0];
    for (int64_t j = 1; j < problem.n; ++j)
      if (host[j] > row_max) row_max = host[j];
    int found_max = 0;
    for (int64_t j = 0; j < problem.k && ok; ++j) {
      const int32_t i = idx[j];
      if (i < 0 || i >= problem.n || vals[j] != host[i]) ok = 0;
      if (ok && host[i] == row_max) found_max = 1;
    }
    ok = ok && found_max;
    printf("row 0: %s\n", ok ? "indices and values agree, maximum selected" : "MISMATCH");
  }
  cudaFree(d_idx);
  cudaFree(d_vals);
  cudaFree(d_in);
  free(idx);
  free(vals);
  free(host);
  topk_plan_destroy(plan); /* before its library */
  topk_library_close(lib);
  return ok ? 0 : 1;
}
