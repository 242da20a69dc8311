// The grid family: one row spread over many CTAs of the grid, more than a
// thread-block cluster holds, which meet at grid barriers through a global
// workspace (templates/topk/grid/). Every CTA finds the same threshold from
// a sample of the row, reads its slice once into registers, and the CTAs
// finish the row together; a failed guess ends in an exact radix select
// over the same registers. For a few long rows, each of which must fill
// many SMs: the launch is cooperative, so the rows' CTAs must all be
// resident.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "generator/family.hpp"

namespace topk::gen {

// A grid-family config with named fields.
struct GridParams {
  DType dtype = DType::kF32;
  int block_threads = 256;  // [code] threads per CTA
  int items = 4;            // [code] 16-byte vectors of the slice a thread holds
  int ctas = 64;            // CTAs per row
  int sample = 256;         // 16-byte vectors of the row in the threshold's sample
  int candidates = 4096;    // room per row for the k-th key's bin (workspace and shared memory)
  int ties = 0;             // [code] 1: deterministic mode in the kernel (lowest-index ties, no tie pass)
  int per_sm = 1;           // [code] CTAs an SM the kernel is compiled for (batch x ctas <= SMs x per_sm)

  static GridParams Of(const Config& c);
  Config ToConfig() const;
  operator Config() const { return ToConfig(); }  // NOLINT(google-explicit-constructor)
  // Elements per 16-byte vector.
  int vec() const { return dtype == DType::kF32 ? 4 : 8; }
  // The longest row the config holds in its CTAs' registers.
  int64_t capacity() const { return static_cast<int64_t>(ctas) * block_threads * items * vec(); }
  int smem_bytes() const;
  // Workspace bytes for `batch` rows.
  size_t workspace_bytes(int64_t batch) const;
};

std::shared_ptr<const Family> MakeGridFamily();

}  // namespace topk::gen
