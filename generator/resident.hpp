// The resident family: a group of threads holds one row in registers and
// finds the k-th key digit by digit over them; several groups share a CTA
// when rows are short (templates/topk/resident/). The row is read once and
// every pass costs the same whatever the values, so shifted and few-valued
// rows cost what normal ones do. For rows of 513 to 16384 elements.
#pragma once

#include <cstdint>
#include <memory>

#include "generator/family.hpp"

namespace topk::gen {

// A resident-family config with named fields.
struct ResidentParams {
  DType dtype = DType::kF32;
  int block_threads = 512;  // [code] a multiple of group_threads: block / group rows per CTA (at most 8)
  int group_threads = 512;  // [code] threads per row, a multiple of 32
  int items = 8;            // [code] keys per thread: rows up to group_threads * items

  static ResidentParams Of(const Config& c);
  Config ToConfig() const;
  operator Config() const { return ToConfig(); }  // NOLINT(google-explicit-constructor)
  int rows_per_cta() const { return block_threads / group_threads; }
  int64_t max_row() const { return static_cast<int64_t>(group_threads) * items; }
};

std::shared_ptr<const Family> MakeResidentFamily();

}  // namespace topk::gen
