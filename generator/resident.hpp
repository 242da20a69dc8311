// The resident family: a group of threads holds one row in registers and
// finds the k-th key digit by digit over them; several groups share a CTA
// when rows are short (templates/topk/resident/), or a thread-block cluster
// splits a longer row over its CTAs' registers. The row is read once and
// every pass costs the same whatever the values, so shifted and few-valued
// rows cost what normal ones do. Past 16 keys a thread the rest of the row
// lies in shared memory. For rows of 513 to 65536 elements in one CTA, up to
// 1048576 over a cluster of 16.
#pragma once

#include <cstdint>
#include <memory>

#include "generator/family.hpp"

namespace topk::gen {

// The longest row the resident family's default holds in one CTA; the filter
// family's default starts past it.
inline constexpr int64_t kResidentDefaultLongestCtaRow = 8192;

// A resident-family config with named fields.
struct ResidentParams {
  DType dtype = DType::kF32;
  int block_threads = 512;  // [code] a multiple of group_threads: block / group rows per CTA (at most 8)
  int group_threads = 512;  // [code] threads per row, a multiple of 32
  int items = 8;            // [code] keys per thread in registers
  int shared = 0;           // [code] and in shared memory: rows up to group_threads * (items + shared)
  // Cluster mode (cluster > 1, one binary for every size): the row split
  // over a thread-block cluster's CTAs, one group per CTA.
  int cluster = 1;          // [code: 1 or clustered] CTAs per row

  static ResidentParams Of(const Config& c);
  Config ToConfig() const;
  operator Config() const { return ToConfig(); }  // NOLINT(google-explicit-constructor)
  int rows_per_cta() const { return cluster > 1 ? 1 : block_threads / group_threads; }
  // Keys one group holds, and the longest row the config serves.
  int64_t max_row() const { return static_cast<int64_t>(group_threads) * (items + shared); }
  // The dynamic shared memory of a CTA (its groups' shared keys).
  int shared_bytes() const { return block_threads * shared * 4; }
  int64_t capacity() const { return max_row() * cluster; }
};

std::shared_ptr<const Family> MakeResidentFamily();

}  // namespace topk::gen
