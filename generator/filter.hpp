// The filter family: one CTA per row reads the row once and keeps the
// elements above a running threshold in shared memory, cutting the list back
// to k by an exact select when it fills; or a thread-block cluster per row
// keeps its slices in shared memory, guesses a threshold from a merged sample
// and finishes exactly on the keys above it (templates/topk/filter/). Robust
// to shifted and few-valued inputs, where a digit-by-digit radix select is not.
#pragma once

#include <memory>

#include "generator/family.hpp"

namespace topk::gen {

// A filter-family config with named fields.
struct FilterParams {
  DType dtype = DType::kF32;
  int block_threads = 512;  // [code] 256..1024
  int unroll = 2;           // [code] 16-byte loads per thread per step of the row
  int radix_bits = 11;      // [code] digit width of the exact select that cuts the list
  int slack = 2;            // steps of the row (room()) the list holds beyond k (capacity, a launch argument)
  // Cluster mode (cluster > 1; one binary serves every size): the row split
  // over a thread-block cluster, a threshold guessed from a merged sample.
  int cluster = 1;          // [code: 1 or clustered] CTAs per row
  int sample = 4096;        // keys in the merged sample, split over the CTAs (cluster mode)
  int margin = 50;          // over-selection of the guess in percent of k (cluster mode)
  int recovery = 2;         // retries along the sample before the key interval halves (cluster mode, 0-4)
  // One CTA per row: 1 starts from a threshold guessed from a sample of the
  // row (one 16-byte vector per thread, evenly spaced), 0 lets every key
  // enter until the first cut, 2 guesses too high on purpose and 3 streams
  // without barriers whatever the sample (tests). A launch argument
  // (TopkArgs::rounds).
  int guess = 0;
  // Not in cluster mode: rows per CTA, each served by a group of
  // block_threads / rows threads with its own list (short rows, many of them).
  int rows = 1;             // [code]
  // One CTA per row: CTAs an SM the kernel is compiled to hold (1 or 2; 2
  // caps the registers so that two 512-thread CTAs share an SM).
  int ctas = 1;             // [code]

  static FilterParams Of(const Config& c);
  Config ToConfig() const;
  operator Config() const { return ToConfig(); }  // NOLINT(google-explicit-constructor)

  int vec() const { return 16 / DTypeSize(dtype); }
  int group() const { return block_threads / (rows > 0 ? rows : 1); }  // threads per row
  int tile() const { return group() * vec() * unroll; }        // elements per step
  // What a stream with cuts makes room for at once, k plus which must fit
  // the list: a step, or one 16-byte load a thread where a step is the whole
  // list (one CTA a row; filter_select.cuh, Policy::kStepInParts).
  int room() const { return cluster == 1 && tile() >= max_capacity() ? group() * vec() : tile(); }
  int max_capacity() const;                                    // what the threads can hold while cutting
  // Candidate capacity for k: k + slack x room(), at most max_capacity().
  int capacity(int64_t k) const;
  int hist_smem_bytes() const { return (1 << radix_bits) * 4; }
  // Dynamic shared memory: a row's histogram and list; with several rows
  // per CTA one such area a row, each rounded to 16 bytes.
  int smem_bytes(int64_t k) const;
  // Cluster mode: shared memory before the slice cache, and the slice
  // length of a row of n (what the cache must hold to keep it all).
  int cluster_base_smem(int64_t k) const;
  int64_t slice(int64_t n) const { return ((n + cluster - 1) / cluster + 7) / 8 * 8; }
};

std::shared_ptr<const Family> MakeFilterFamily();

// The filter family's default with several rows per CTA for p, if it takes
// p: many short rows (at least 4 per SM) of 512 16-byte vectors (the
// guess's sample) up to the resident default's one-CTA limit, k at most n /
// 8, and the config fits the architecture (its shared memory: on GPUs of 99
// KB a block the 8-row config of 16-bit keys does not). The resident
// family's default declines exactly those problems.
std::optional<Config> FilterShortRowDefault(const Problem& p, const Arch& arch);

}  // namespace topk::gen
