#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cub/device/device_segmented_radix_sort.cuh>

#include "bench/cub_baseline.hpp"

namespace topk::bench {

struct CubTopk {
  std::string dtype;
  int batch = 0, n = 0, k = 0;
  void* keys_out = nullptr;
  int32_t* vals_in = nullptr;
  int32_t* vals_out = nullptr;
  int32_t* offsets = nullptr;
  void* temp = nullptr;
  size_t temp_bytes = 0;
};

namespace {

__global__ void iota_rows(int32_t* v, int batch, int n) {
  const long long total = static_cast<long long>(batch) * n;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    v[i] = static_cast<int32_t>(i % n);
}

__global__ void fill_offsets(int32_t* o, int batch, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= batch) o[i] = i * n;
}

__global__ void take_k(const int32_t* sorted, int32_t* out, int batch, int n, int k) {
  const long long total = static_cast<long long>(batch) * k;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    out[i] = sorted[(i / k) * n + i % k];
}

template <typename T>
cudaError_t Sort(CubTopk* t, const void* in, cudaStream_t s) {
  size_t bytes = t->temp_bytes;
  const long long items = static_cast<long long>(t->batch) * t->n;
  return cub::DeviceSegmentedRadixSort::SortPairsDescending(
      t->temp, bytes, static_cast<const T*>(in), static_cast<T*>(t->keys_out), t->vals_in, t->vals_out,
      static_cast<int>(items), t->batch, t->offsets, t->offsets + 1, 0, sizeof(T) * 8, s);
}

template <typename T>
cudaError_t TempBytes(CubTopk* t) {
  const long long items = static_cast<long long>(t->batch) * t->n;
  return cub::DeviceSegmentedRadixSort::SortPairsDescending(
      nullptr, t->temp_bytes, static_cast<const T*>(nullptr), static_cast<T*>(nullptr), t->vals_in, t->vals_out,
      static_cast<int>(items), t->batch, t->offsets, t->offsets + 1, 0, sizeof(T) * 8, 0);
}

}  // namespace

CubTopk* CubTopkCreate(const std::string& dtype, int batch, int n, int k, std::string* error) {
  auto* t = new CubTopk;
  t->dtype = dtype;
  t->batch = batch;
  t->n = n;
  t->k = k;
  const size_t items = static_cast<size_t>(batch) * n;
  const size_t es = dtype == "f32" ? 4 : 2;
  cudaError_t e = cudaMalloc(&t->keys_out, items * es);
  if (e == cudaSuccess) e = cudaMalloc(&t->vals_in, items * 4);
  if (e == cudaSuccess) e = cudaMalloc(&t->vals_out, items * 4);
  if (e == cudaSuccess) e = cudaMalloc(&t->offsets, (batch + 1) * 4);
  if (e == cudaSuccess) {
    iota_rows<<<1024, 256>>>(t->vals_in, batch, n);
    fill_offsets<<<(batch + 256) / 256, 256>>>(t->offsets, batch, n);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess)
    e = dtype == "f32" ? TempBytes<float>(t) : (dtype == "f16" ? TempBytes<__half>(t) : TempBytes<__nv_bfloat16>(t));
  if (e == cudaSuccess) e = cudaMalloc(&t->temp, t->temp_bytes);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    *error = cudaGetErrorString(e);
    CubTopkDestroy(t);
    return nullptr;
  }
  return t;
}

void CubTopkDestroy(CubTopk* t) {
  if (!t) return;
  cudaFree(t->keys_out);
  cudaFree(t->vals_in);
  cudaFree(t->vals_out);
  cudaFree(t->offsets);
  cudaFree(t->temp);
  delete t;
}

std::string CubTopkRun(CubTopk* t, const void* input, int32_t* indices, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  cudaError_t e = t->dtype == "f32" ? Sort<float>(t, input, s)
                                    : (t->dtype == "f16" ? Sort<__half>(t, input, s) : Sort<__nv_bfloat16>(t, input, s));
  if (e == cudaSuccess) {
    take_k<<<1024, 256, 0, s>>>(t->vals_out, indices, t->batch, t->n, t->k);
    e = cudaGetLastError();
  }
  return e == cudaSuccess ? std::string() : std::string(cudaGetErrorString(e));
}

}  // namespace topk::bench
