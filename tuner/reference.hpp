// Host-side inputs, the exact CPU reference and the exactness checker. No
// CUDA: everything here runs and is tested without a GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topk/status.hpp"
#include "topk/topk.hpp"

namespace topk::tuner {

// fp16 / bf16 conversions (round to nearest even; NaN stays NaN).
float HalfToFloat(uint16_t h);
float BF16ToFloat(uint16_t b);
uint16_t FloatToHalf(float f);
uint16_t FloatToBF16(float f);

// The order key of one element, identical to the device's Keys<>::key:
// larger key = selected first. -0.0 and +0.0 share a key; every NaN gets one
// key above +inf (below everything when `smallest`).
uint32_t OrderKey(DType dtype, uint32_t raw, bool smallest);

// A [batch, stride] matrix of raw element bits.
struct HostMatrix {
  DType dtype = DType::kF32;
  int64_t batch = 0;
  int64_t n = 0;
  int64_t stride = 0;
  std::vector<uint8_t> bytes;  // batch * stride * DTypeSize(dtype)

  HostMatrix() = default;
  HostMatrix(DType d, int64_t b, int64_t n_, int64_t stride_);
  uint32_t raw(int64_t row, int64_t col) const;
  void set_raw(int64_t row, int64_t col, uint32_t v);
  void set_float(int64_t row, int64_t col, float v);
  float get_float(int64_t row, int64_t col) const;
};

// Input distributions. The adversarial ones are what break radix selects:
// all-equal rows, few distinct values, many ties at the k-th value, NaN /
// inf / -0.0 / denormals, sorted and reversed rows.
enum class Dist {
  kNormal,
  kUniform,
  kAllEqual,
  kFewDistinct,  // 7 distinct values
  kTiesAtK,      // a plateau of equal values straddling the k-th position
  kSpecial,      // NaN, +-inf, +-0.0, denormals mixed into normal data
  kSorted,       // ascending
  kReversed,     // descending
  kLogits,       // bf16-like vocabulary logits: heavy right tail
  kShifted,      // normal + 100: every key shares its top bits
  kPlateau,      // ReLU(normal - 0.52): about 70% exact zeros
  kDistinct16,   // 16 distinct values
  kDenseTop,     // 100 + log(uniform): within a binade, densest at its top
};
const char* DistName(Dist d);
StatusOr<Dist> ParseDist(const std::string& name);
std::vector<Dist> AllDists();

// Fills every element of `m` (padding columns between n and stride too).
void Fill(HostMatrix* m, Dist dist, uint64_t seed, int64_t k);

// Random [start, end) ranges per row covering the interesting cases (empty,
// start > end, at the row's end, odd lengths, out of bounds to be clamped,
// full rows).
std::vector<int32_t> MakeRanges(int64_t batch, int64_t n, uint64_t seed);

// Clamped range of row `r` as the kernels see it.
void RowRange(const Problem& p, const int32_t* ranges, int64_t r, int64_t* start, int64_t* end);

// The reference top-k keys of every row: for row r, the min(k, len) largest
// order keys of its range, sorted descending. Built with nth_element on a
// full copy of the row (the "full sort truncated to k" of the checker).
struct Reference {
  std::vector<std::vector<uint32_t>> row_keys;
};
Reference ComputeReference(const HostMatrix& m, const Problem& p, const int32_t* ranges);

// What the checker found.
struct CheckResult {
  int64_t rows_checked = 0;
  int64_t bad_rows = 0;
  std::string first_error;  // row and reason of the first bad row
  bool ok() const { return bad_rows == 0; }
};

// Accepts every valid top-k (ties in any order) and rejects everything else:
// index outside the range, duplicate index, wrong multiset of keys (NaN and
// -0.0 rules included), -1 padding missing or misplaced, a value that is
// not the input's value at its index, padding values other than the dtype's
// lowest, (sorted) keys out of order and (deterministic) a tie at the k-th
// value taken where a lower index of the same value was left. `values` is null unless the
// problem writes values.
CheckResult Check(const HostMatrix& m, const Problem& p, const int32_t* ranges, const Reference& ref,
                  const int32_t* indices, const uint8_t* values);

// The dtype's lowest finite value as raw bits (the padding value).
uint32_t LowestRaw(DType dtype);

}  // namespace topk::tuner
