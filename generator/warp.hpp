// The warp family: one warp per row, several rows per CTA, the row held in
// registers (templates/topk/warp/warp_select.cuh). For short rows (MoE routers:
// 8 of 256 experts).
#pragma once

#include <cstdint>
#include <memory>

#include "generator/family.hpp"

namespace topk::gen {

// A warp-family config with named fields; every field is [code].
struct WarpParams {
  DType dtype = DType::kF32;
  int block_threads = 128;  // 32..512, multiple of 32: block_threads / 32 rows per CTA
  int items = 2;            // elements per lane: rows up to 32 * items
  // How the threshold is found: 0 = tournament (k <= 16) or one bit per
  // step over a strided row; 1 = fp32 only, up to 16 items: whole rows in
  // 16-byte loads and, for k <= 8, one bounding round from the lane maxima
  // before the exact steps (fast with many rows).
  int lane_bound = 0;

  static WarpParams Of(const Config& c);
  Config ToConfig() const;
  // So that a typed config passes wherever a gen::Config is taken.
  operator Config() const { return ToConfig(); }  // NOLINT(google-explicit-constructor)
  int key_bits() const { return dtype == DType::kF32 ? 32 : 16; }
};

// Elements per lane a warp kernel needs for rows of n: the smallest power
// of two >= 2 with 32 * items >= n.
int WarpItems(int64_t n);

std::shared_ptr<const Family> MakeWarpFamily();
// The registered warp family.
const Family& WarpFamily();

}  // namespace topk::gen
