// The public value types of include/topk/topk.hpp that every layer uses.
#include <cctype>
#include <cstdlib>
#include <sstream>

#include "topk/topk.hpp"

namespace topk {

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
  }
  return "unknown";
}

int DTypeSize(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

StatusOr<DType> ParseDType(std::string_view raw) {
  // Case-insensitive: "F32", "BFloat16" and "bf16" name the same type.
  std::string lower(raw);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string_view name = lower;
  if (name == "f32" || name == "fp32" || name == "float32" || name == "float") return DType::kF32;
  if (name == "f16" || name == "fp16" || name == "float16" || name == "half") return DType::kF16;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  return Status(Code::kInvalidArgument, "ParseDType",
                "unknown dtype '" + std::string(raw).substr(0, 32) +
                    "' (use f32, f16 or bf16; aliases fp32, float32, float, fp16, float16, half, bfloat16)");
}

const char* DispatchSourceName(DispatchSource source) {
  switch (source) {
    case DispatchSource::kExact: return "exact";
    case DispatchSource::kNearest: return "nearest";
    case DispatchSource::kDefault: return "default";
  }
  return "unknown";
}

std::string Problem::ToString() const {
  std::ostringstream s;
  s << DTypeName(dtype) << ' ' << batch << 'x' << n << " k=" << k;
  if (row_stride != 0 && row_stride != n) s << " stride=" << row_stride;
  s << (largest ? " largest" : " smallest");
  if (ranges) s << " ranges";
  if (values) s << " values";
  if (sorted) s << " sorted";
  if (deterministic) s << " deterministic";
  return s.str();
}

Status Problem::Validate() const {
  constexpr int64_t kMax = (1LL << 31) - 1;
  auto bad = [](const std::string& m) { return Status(Code::kInvalidArgument, "Problem", m); };
  // An enum read from a file or cast from an integer may hold any value.
  const int dt = static_cast<int>(dtype);
  if (dt != static_cast<int>(DType::kF32) && dt != static_cast<int>(DType::kF16) &&
      dt != static_cast<int>(DType::kBF16))
    return bad("dtype " + std::to_string(dt) + " is not f32, f16 or bf16");
  if (batch < 0) return bad("batch must be >= 0, got " + std::to_string(batch));
  if (batch > kMax) return bad("batch must be < 2^31, got " + std::to_string(batch));
  if (n < 1) return bad("n must be >= 1, got " + std::to_string(n));
  if (n > kMax) return bad("n must be < 2^31, got " + std::to_string(n));
  if (k < 0) return bad("k must be >= 0, got " + std::to_string(k));
  if (k > kMax) return bad("k must be < 2^31, got " + std::to_string(k));
  if (row_stride != 0 && row_stride < n)
    return bad("row_stride " + std::to_string(row_stride) + " is smaller than n " + std::to_string(n));
  if (row_stride < 0) return bad("row_stride must be >= 0");
  return Status::Ok();
}

std::string DefaultCachePath() {
  if (const char* p = std::getenv("TOPK_TUNE_DB"); p && *p) return p;
  // The XDG base-directory spec: a relative XDG_CACHE_HOME is invalid and
  // must be ignored (it would put the cache wherever the process happens to
  // run).
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && x[0] == '/') return std::string(x) + "/topk-tune/tuning.db";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/topk-tune/tuning.db";
  // No location: a file in the current directory would scatter caches over
  // every directory a job starts in. The caller asks for a path instead.
  return "";
}

std::string DefaultKernelDir() {
  if (const char* p = std::getenv("TOPK_TUNE_KERNEL_DIR"); p && *p) return std::string(p) == "off" ? "" : p;
  // As DefaultCachePath: a relative XDG_CACHE_HOME is ignored, and no
  // location means no directory rather than one in the working directory.
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && x[0] == '/') return std::string(x) + "/topk-tune/kernels";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/topk-tune/kernels";
  return "";
}

}  // namespace topk
