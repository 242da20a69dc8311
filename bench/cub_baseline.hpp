// A top-k baseline built on CUB's segmented radix sort: sort every row's
// (key, index) pairs descending and keep the first k. Compiled by nvcc
// (bench/cub_baseline.cu); plain C++ interface for the benchmark.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace topk::bench {

struct CubTopk;

// Allocates the sort's buffers for `batch` rows of `n` elements of `dtype`
// ("f32", "f16" or "bf16"). Returns null and sets *error on failure.
CubTopk* CubTopkCreate(const std::string& dtype, int batch, int n, int k, std::string* error);
void CubTopkDestroy(CubTopk* t);
// Top-k of `input` ([batch, n] on the device) into `indices` ([batch, k]),
// on `stream`. Returns a CUDA error string, empty on success.
std::string CubTopkRun(CubTopk* t, const void* input, int32_t* indices, void* stream);

}  // namespace topk::bench
