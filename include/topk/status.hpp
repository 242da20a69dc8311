// Errors as values. Every fallible function in topk returns a Status or a
// StatusOr<T>; the library never throws, prints or exits.
//
// A Status carries a code, the failing call (e.g. "cuModuleLoadData" or
// "sqlite3_prepare_v2") and a human-readable message. Status objects are
// cheap to copy when ok() and safe to pass between threads.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace topk {

enum class Code : int {
  kOk = 0,
  kInvalidArgument = 1,   // the caller passed something the contract forbids
  kNotFound = 2,          // no such file, device, variant or entry
  kOutOfRange = 3,        // a size or index outside what is supported
  kFailedPrecondition = 4,  // wrong state (e.g. cache of another schema)
  kUnavailable = 5,       // no GPU, driver or NVRTC missing
  kResourceExhausted = 6,  // too much shared memory, registers, device memory
  kDataLoss = 7,          // a corrupt cache file
  kCompileError = 8,      // NVRTC rejected a source; the message holds its log
  kCudaError = 9,         // a CUDA driver call failed
  kWrongResult = 10,      // a variant produced a result the checker rejected
  kCrash = 11,            // a worker process died (illegal address, abort)
  kTimeout = 12,          // a worker exceeded its watchdog
  kInternal = 13,         // a bug in topk-tune
  kUnimplemented = 14,    // a valid request this build does not support
};

// Stable lowercase name of a code ("invalid_argument", ...).
const char* CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string where, std::string message)
      : code_(code), where_(std::move(where)), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  // The call or component that failed ("" when unknown).
  const std::string& where() const { return where_; }
  const std::string& message() const { return message_; }
  // "code_name: where: message" (or "ok").
  std::string ToString() const;

  // Prepends context to the message ("while tuning x: <old message>").
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, where_, context + ": " + message_);
  }

 private:
  Code code_ = Code::kOk;
  std::string where_;
  std::string message_;
};

inline Status InvalidArgument(std::string where, std::string message) {
  return Status(Code::kInvalidArgument, std::move(where), std::move(message));
}

// Either a value or a non-ok Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = Status(Code::kInternal, "StatusOr", "constructed from an ok Status");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  // Precondition: ok().
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

inline const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "ok";
    case Code::kInvalidArgument: return "invalid_argument";
    case Code::kNotFound: return "not_found";
    case Code::kOutOfRange: return "out_of_range";
    case Code::kFailedPrecondition: return "failed_precondition";
    case Code::kUnavailable: return "unavailable";
    case Code::kResourceExhausted: return "resource_exhausted";
    case Code::kDataLoss: return "data_loss";
    case Code::kCompileError: return "compile_error";
    case Code::kCudaError: return "cuda_error";
    case Code::kWrongResult: return "wrong_result";
    case Code::kCrash: return "crash";
    case Code::kTimeout: return "timeout";
    case Code::kInternal: return "internal";
    case Code::kUnimplemented: return "unimplemented";
  }
  return "unknown";
}

inline std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string s = CodeName(code_);
  if (!where_.empty()) s += ": " + where_;
  s += ": " + message_;
  return s;
}

}  // namespace topk

// Internal helpers (also usable by callers): return early on error.
#define TOPK_CONCAT_INNER_(a, b) a##b
#define TOPK_CONCAT_(a, b) TOPK_CONCAT_INNER_(a, b)

#define TOPK_RETURN_IF_ERROR(expr)              \
  do {                                          \
    ::topk::Status topk_status_ = (expr);       \
    if (!topk_status_.ok()) return topk_status_; \
  } while (0)

#define TOPK_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

#define TOPK_ASSIGN_OR_RETURN(lhs, expr) \
  TOPK_ASSIGN_OR_RETURN_IMPL_(TOPK_CONCAT_(topk_statusor_, __LINE__), lhs, expr)
