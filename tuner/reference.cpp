#include "tuner/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>

namespace topk::tuner {
namespace {

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// xoshiro256** seeded by splitmix64: fast and reproducible across platforms.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& s : s_) {
      seed += 0x9e3779b97f4a7c15ULL;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      s = z ^ (z >> 31);
    }
  }
  uint64_t next() {
    const uint64_t r = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return r;
  }
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  double normal() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(6.283185307179586 * u2);
    have_spare_ = true;
    return r * std::cos(6.283185307179586 * u2);
  }
  uint64_t below(uint64_t n) { return n == 0 ? 0 : next() % n; }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
  bool have_spare_ = false;
  double spare_ = 0;
};

}  // namespace

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return BitsFloat(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    if (man == 0) return BitsFloat(sign);
    int e = -1;
    do {
      man <<= 1;
      ++e;
    } while ((man & 0x400u) == 0);
    return BitsFloat(sign | static_cast<uint32_t>(127 - 15 - e) << 23 | ((man & 0x3ffu) << 13));
  }
  return BitsFloat(sign | (exp + 127 - 15) << 23 | (man << 13));
}

float BF16ToFloat(uint16_t b) { return BitsFloat(static_cast<uint32_t>(b) << 16); }

uint16_t FloatToHalf(float f) {
  const uint32_t x = FloatBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t mag = x & 0x7fffffffu;
  if (mag > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
  const int e = static_cast<int>(mag >> 23) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    const uint32_t m = (mag & 0x7fffffu) | 0x800000u;
    const int shift = 14 - e;
    uint32_t h = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = static_cast<uint32_t>(e) << 10 | ((mag >> 13) & 0x3ffu);
  const uint32_t rem = mag & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent, up to inf
  return static_cast<uint16_t>(sign | h);
}

uint16_t FloatToBF16(float f) {
  const uint32_t x = FloatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>(((x >> 16) & 0x8000u) | 0x7fc0u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

uint32_t OrderKey(DType dtype, uint32_t raw, bool smallest) {
  if (dtype == DType::kF32) {
    const uint32_t mag = raw & 0x7fffffffu;
    uint32_t c = raw;
    if (mag > 0x7f800000u) c = 0x7fffffffu;
    else if (mag == 0) c = 0;
    const uint32_t k = (c & 0x80000000u) ? ~c : (c | 0x80000000u);
    return smallest ? ~k : k;
  }
  const uint32_t nan_above = dtype == DType::kF16 ? 0x7c00u : 0x7f80u;
  const uint32_t mag = raw & 0x7fffu;
  uint32_t c = raw & 0xffffu;
  if (mag > nan_above) c = 0x7fffu;
  else if (mag == 0) c = 0;
  const uint32_t k = (c & 0x8000u) ? (~c & 0xffffu) : (c | 0x8000u);
  return smallest ? (~k & 0xffffu) : k;
}

uint32_t LowestRaw(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 0xff7fffffu;
    case DType::kF16: return 0xfbffu;
    case DType::kBF16: return 0xff7fu;
  }
  return 0;
}

HostMatrix::HostMatrix(DType d, int64_t b, int64_t n_, int64_t stride_)
    : dtype(d), batch(b), n(n_), stride(stride_), bytes(static_cast<size_t>(b * stride_ * DTypeSize(d)), 0) {}

uint32_t HostMatrix::raw(int64_t row, int64_t col) const {
  const size_t i = static_cast<size_t>(row * stride + col);
  if (dtype == DType::kF32) {
    uint32_t v;
    std::memcpy(&v, bytes.data() + 4 * i, 4);
    return v;
  }
  uint16_t v;
  std::memcpy(&v, bytes.data() + 2 * i, 2);
  return v;
}

void HostMatrix::set_raw(int64_t row, int64_t col, uint32_t v) {
  const size_t i = static_cast<size_t>(row * stride + col);
  if (dtype == DType::kF32) {
    std::memcpy(bytes.data() + 4 * i, &v, 4);
  } else {
    const uint16_t h = static_cast<uint16_t>(v);
    std::memcpy(bytes.data() + 2 * i, &h, 2);
  }
}

void HostMatrix::set_float(int64_t row, int64_t col, float v) {
  switch (dtype) {
    case DType::kF32: set_raw(row, col, FloatBits(v)); break;
    case DType::kF16: set_raw(row, col, FloatToHalf(v)); break;
    case DType::kBF16: set_raw(row, col, FloatToBF16(v)); break;
  }
}

float HostMatrix::get_float(int64_t row, int64_t col) const {
  const uint32_t r = raw(row, col);
  switch (dtype) {
    case DType::kF32: return BitsFloat(r);
    case DType::kF16: return HalfToFloat(static_cast<uint16_t>(r));
    case DType::kBF16: return BF16ToFloat(static_cast<uint16_t>(r));
  }
  return 0;
}

const char* DistName(Dist d) {
  switch (d) {
    case Dist::kNormal: return "normal";
    case Dist::kUniform: return "uniform";
    case Dist::kAllEqual: return "all_equal";
    case Dist::kFewDistinct: return "few_distinct";
    case Dist::kTiesAtK: return "ties_at_k";
    case Dist::kSpecial: return "special";
    case Dist::kSorted: return "sorted";
    case Dist::kReversed: return "reversed";
    case Dist::kLogits: return "logits";
    case Dist::kShifted: return "shifted";
    case Dist::kPlateau: return "plateau";
    case Dist::kDistinct16: return "distinct16";
    case Dist::kDenseTop: return "dense_top";
  }
  return "unknown";
}

std::vector<Dist> AllDists() {
  return {Dist::kNormal,  Dist::kUniform, Dist::kAllEqual, Dist::kFewDistinct, Dist::kTiesAtK,
          Dist::kSpecial, Dist::kSorted,  Dist::kReversed, Dist::kLogits, Dist::kShifted, Dist::kPlateau,
          Dist::kDistinct16, Dist::kDenseTop};
}

StatusOr<Dist> ParseDist(const std::string& name) {
  for (Dist d : AllDists())
    if (name == DistName(d)) return d;
  std::string names;
  for (Dist d : AllDists()) names += std::string(names.empty() ? "" : ", ") + DistName(d);
  return Status(Code::kInvalidArgument, "ParseDist", "unknown input distribution '" + name + "' (" + names + ")");
}

void Fill(HostMatrix* m, Dist dist, uint64_t seed, int64_t k) {
  Rng rng(seed * 0x2545f4914f6cdd1dULL + static_cast<uint64_t>(dist) + 1);
  const int64_t cols = m->stride;
  for (int64_t r = 0; r < m->batch; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      float v = 0;
      switch (dist) {
        case Dist::kNormal: v = static_cast<float>(rng.normal()); break;
        case Dist::kUniform: v = static_cast<float>(2.0 * rng.uniform() - 1.0); break;
        case Dist::kAllEqual: v = 0.5f; break;
        case Dist::kFewDistinct: v = static_cast<float>(static_cast<int>(rng.below(7)) - 3); break;
        case Dist::kTiesAtK: v = std::round(static_cast<float>(rng.normal()) * 8.0f) / 8.0f; break;
        case Dist::kSorted: v = static_cast<float>(c - cols / 2) * 0.001f; break;
        case Dist::kReversed: v = static_cast<float>(cols / 2 - c) * 0.001f; break;
        case Dist::kLogits:
          v = static_cast<float>(rng.normal() * 2.0);
          if (rng.below(1000) == 0) v += 10.0f + static_cast<float>(rng.uniform() * 10.0);
          break;
        case Dist::kSpecial: v = static_cast<float>(rng.normal()); break;
        case Dist::kShifted: v = static_cast<float>(rng.normal() + 100.0); break;
        case Dist::kPlateau: v = std::max(0.0f, static_cast<float>(rng.normal() - 0.52)); break;
        case Dist::kDistinct16: v = static_cast<float>(static_cast<int>(rng.below(16)) - 8) * 0.25f; break;
        // Keys within one binade (84 to 100), the largest crowded near 100:
        // a select whose window spans the keys finds many distinct keys in
        // the top bin (the resident family's passes below the window).
        case Dist::kDenseTop: v = static_cast<float>(100.0 + std::log(1.0 - rng.uniform() * (1.0 - 1e-7))); break;
      }
      m->set_float(r, c, v);
      if (dist != Dist::kSpecial) continue;
      const uint64_t pick = rng.below(100);
      const bool f32 = m->dtype == DType::kF32;
      const bool f16 = m->dtype == DType::kF16;
      const uint32_t sign = f32 ? 0x80000000u : 0x8000u;
      const uint32_t inf = f32 ? 0x7f800000u : (f16 ? 0x7c00u : 0x7f80u);
      const uint32_t man_mask = f32 ? 0x7fffffu : (f16 ? 0x3ffu : 0x7fu);
      uint32_t raw = 0;
      if (pick < 5) {  // NaN of either sign, any payload
        raw = inf | (1u + static_cast<uint32_t>(rng.below(man_mask)));
        if (rng.below(2)) raw |= sign;
      } else if (pick < 8) {
        raw = inf;
      } else if (pick < 11) {
        raw = inf | sign;
      } else if (pick < 16) {
        raw = 0;
      } else if (pick < 21) {
        raw = sign;
      } else if (pick < 26) {  // denormal of either sign
        raw = 1u + static_cast<uint32_t>(rng.below(man_mask));
        if (rng.below(2)) raw |= sign;
      } else {
        continue;
      }
      m->set_raw(r, c, raw);
    }
  }
  (void)k;
}

std::vector<int32_t> MakeRanges(int64_t batch, int64_t n, uint64_t seed) {
  Rng rng(seed ^ 0x5bd1e995u);
  std::vector<int32_t> out(static_cast<size_t>(2 * batch));
  const int32_t N = static_cast<int32_t>(n);
  for (int64_t r = 0; r < batch; ++r) {
    int32_t s = 0, e = N;
    const int32_t a = static_cast<int32_t>(rng.below(static_cast<uint64_t>(N) + 1));
    switch (r % 8) {
      case 0: break;                                           // full row
      case 1: s = e = a; break;                                // empty
      case 2: s = N / 2 + 1; e = N / 3; break;                 // start > end: empty
      case 3: {                                                // at the row's end, odd length
        int32_t len = static_cast<int32_t>(rng.below(static_cast<uint64_t>(N) + 1)) | 1;
        if (len > N) len = N;
        s = N - len;
        e = N;
        break;
      }
      case 4: {                                                // odd length in the middle
        s = a / 2;
        int32_t len = (static_cast<int32_t>(rng.below(static_cast<uint64_t>(N - s) + 1))) | 1;
        e = std::min(N, s + len);
        break;
      }
      case 5: s = -5; e = N + 7; break;                        // clamped to the row
      case 6: s = a; e = std::min(N, a + 3); break;            // short
      default: s = a; e = a + static_cast<int32_t>(rng.below(static_cast<uint64_t>(N - a) + 1)); break;
    }
    out[2 * r] = s;
    out[2 * r + 1] = e;
  }
  return out;
}

void RowRange(const Problem& p, const int32_t* ranges, int64_t r, int64_t* start, int64_t* end) {
  int64_t s = 0, e = p.n;
  if (p.ranges && ranges) {
    s = std::clamp<int64_t>(ranges[2 * r], 0, p.n);
    e = std::clamp<int64_t>(ranges[2 * r + 1], s, p.n);
  }
  *start = s;
  *end = e;
}

Reference ComputeReference(const HostMatrix& m, const Problem& p, const int32_t* ranges) {
  Reference ref;
  ref.row_keys.resize(static_cast<size_t>(p.batch));
  std::vector<uint32_t> keys;
  for (int64_t r = 0; r < p.batch; ++r) {
    int64_t s, e;
    RowRange(p, ranges, r, &s, &e);
    keys.clear();
    for (int64_t c = s; c < e; ++c) keys.push_back(OrderKey(p.dtype, m.raw(r, c), !p.largest));
    const size_t want = static_cast<size_t>(std::min<int64_t>(p.k, e - s));
    std::nth_element(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(want), keys.end(),
                     std::greater<uint32_t>());
    keys.resize(want);
    std::sort(keys.begin(), keys.end(), std::greater<uint32_t>());
    ref.row_keys[static_cast<size_t>(r)] = keys;
  }
  return ref;
}

CheckResult Check(const HostMatrix& m, const Problem& p, const int32_t* ranges, const Reference& ref,
                  const int32_t* indices, const uint8_t* values) {
  CheckResult res;
  const int es = DTypeSize(p.dtype);
  const uint32_t lowest = LowestRaw(p.dtype);
  std::vector<uint32_t> keys;
  std::vector<int32_t> seen;
  for (int64_t r = 0; r < p.batch; ++r) {
    ++res.rows_checked;
    int64_t s, e;
    RowRange(p, ranges, r, &s, &e);
    const int64_t want = std::min<int64_t>(p.k, e - s);
    const int32_t* idx = indices + r * p.k;
    std::string err;
    keys.clear();
    seen.clear();
    for (int64_t j = 0; j < p.k && err.empty(); ++j) {
      const int32_t c = idx[j];
      uint32_t val = 0;
      if (values) {
        val = 0;
        std::memcpy(&val, values + static_cast<size_t>((r * p.k + j) * es), static_cast<size_t>(es));
      }
      std::ostringstream why;
      if (j < want) {
        if (c < s || c >= e) {
          why << "position " << j << " holds index " << c << " outside the range [" << s << ", " << e << ")";
        } else {
          const uint32_t raw = m.raw(r, c);
          keys.push_back(OrderKey(p.dtype, raw, !p.largest));
          seen.push_back(c);
          if (values && val != raw)
            why << "position " << j << " value bits 0x" << std::hex << val << " != input[" << std::dec << c
                << "] bits 0x" << std::hex << raw;
        }
      } else {
        if (c != -1)
          why << "position " << j << " should be -1 padding (range holds " << (e - s) << " < k) but is " << c;
        else if (values && val != lowest)
          why << "padding value at position " << j << " is 0x" << std::hex << val << ", not the lowest value";
      }
      err = why.str();
    }
    if (err.empty()) {
      std::vector<int32_t> sorted_idx = seen;
      std::sort(sorted_idx.begin(), sorted_idx.end());
      auto dup = std::adjacent_find(sorted_idx.begin(), sorted_idx.end());
      if (dup != sorted_idx.end()) err = "index " + std::to_string(*dup) + " selected twice";
    }
    if (err.empty() && p.sorted) {
      for (size_t j = 1; j < keys.size(); ++j)
        if (keys[j] > keys[j - 1]) {
          err = "not sorted at position " + std::to_string(j);
          break;
        }
    }
    if (err.empty()) {
      std::vector<uint32_t> got = keys;
      std::sort(got.begin(), got.end(), std::greater<uint32_t>());
      const auto& want_keys = ref.row_keys[static_cast<size_t>(r)];
      if (got != want_keys) {
        size_t j = 0;
        while (j < got.size() && j < want_keys.size() && got[j] == want_keys[j]) ++j;
        std::ostringstream why;
        why << "selected keys differ from the reference at rank " << j << " of " << want_keys.size();
        if (j < got.size() && j < want_keys.size())
          why << " (got key 0x" << std::hex << got[j] << ", want 0x" << want_keys[j] << ")";
        err = why.str();
      }
    }
    // Deterministic mode: the ties at the k-th key taken are the row's
    // lowest-index ones.
    if (err.empty() && p.deterministic && e - s > p.k && want > 0) {
      const uint32_t kth = ref.row_keys[static_cast<size_t>(r)].back();
      std::vector<int32_t> taken;
      for (size_t j = 0; j < keys.size(); ++j)
        if (keys[j] == kth) taken.push_back(seen[j]);
      std::sort(taken.begin(), taken.end());
      size_t t = 0;
      for (int64_t c = s; c < e && t < taken.size() && err.empty(); ++c)
        if (OrderKey(p.dtype, m.raw(r, c), !p.largest) == kth) {
          if (c != taken[t])
            err = "deterministic: the ties at the k-th value should be the lowest indices, but index " +
                  std::to_string(taken[t]) + " was taken where " + std::to_string(c) + " is lower";
          ++t;
        }
    }
    if (!err.empty()) {
      if (res.bad_rows == 0) res.first_error = "row " + std::to_string(r) + ": " + err;
      ++res.bad_rows;
    }
  }
  return res;
}

}  // namespace topk::tuner
