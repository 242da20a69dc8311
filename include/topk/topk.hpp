// topk-tune runtime library: exact top-k selection on NVIDIA GPUs, dispatched
// to the kernel variant tuned for each problem shape.
//
//   auto lib = topk::Library::Open({.device = 0, .cache_path = "tuning.db"});
//   auto plan = (*lib)->MakePlan({.dtype = topk::DType::kF32, .batch = 64,
//                                 .n = 32768, .k = 2048});
//   (*plan)->Run({.input = x, .indices = idx}, stream);
//
// Contract (see docs/API.md for the full text):
// - Errors are values: nothing here throws, prints or exits.
// - MakePlan does the cache lookup, module loading and any compilation once;
//   Plan::Run only launches: no allocation, no host synchronisation, no
//   SQLite; it may be captured in a CUDA graph and called concurrently from
//   several threads on several streams.
// - Results are exact: the multiset of selected values equals the multiset of
//   the k largest (smallest) values of the row's range. NaN ranks above +inf,
//   -0.0 equals +0.0. Ties at the k-th value are broken either way.
// - A range with fewer than k elements pads with index -1 (and the dtype's
//   lowest finite value when values are written).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "topk/status.hpp"

namespace topk {

enum class DType : int { kF32 = 0, kF16 = 1, kBF16 = 2 };

// "f32", "f16", "bf16".
const char* DTypeName(DType dtype);
// Bytes per element.
int DTypeSize(DType dtype);
// Accepts "f32"/"fp32"/"float32", "f16"/"fp16"/"float16"/"half",
// "bf16"/"bfloat16".
StatusOr<DType> ParseDType(std::string_view name);

// One top-k problem: a row-major [batch, n] matrix.
struct Problem {
  DType dtype = DType::kF32;
  int64_t batch = 1;
  int64_t n = 0;
  int64_t k = 0;
  int64_t row_stride = 0;  // elements between rows; 0 means n
  bool largest = true;     // false: the k smallest
  bool ranges = false;     // Run gets one int32 [start, end) pair per row
  bool values = false;     // Run writes the selected values too
  bool sorted = false;     // output sorted by value (descending for largest)
  // Among elements equal to the k-th value, the lowest indices are taken:
  // one input gives one index set on every call, stream and GPU (with
  // `sorted`, one output). A tie pass after the selection kernel does it
  // (templates/topk/ties.cuh), or the kernel itself (the resident family,
  // and the grid family's `ties` 1 kernel, which the grid default and a
  // tuned grid winner switch to in this mode: docs/API.md); tuning ignores
  // the flag.
  bool deterministic = false;

  int64_t stride() const { return row_stride == 0 ? n : row_stride; }
  // "f32 64x32768 k=2048 largest ranges values sorted"
  std::string ToString() const;
  // Checks the problem against the contract (k >= 0, n >= 1, batch >= 0,
  // stride >= n, n and k below 2^31, ...). The message names the field.
  Status Validate() const;
};

// Device pointers for one call. All must be device-accessible and aligned to
// their element size; `input` rows need no further alignment.
struct Args {
  const void* input = nullptr;        // [batch, stride] of problem.dtype
  const int32_t* ranges = nullptr;    // [batch][2] when problem.ranges; clamped to [0, n)
  int32_t* indices = nullptr;         // [batch, k] output: column indices
  void* values = nullptr;             // [batch, k] output when problem.values
  int64_t batch = -1;                 // rows this call; -1 means the planned batch
  // Global scratch of PlanInfo::workspace_bytes bytes, 16-byte aligned, for
  // plans that need one (a row spread over many CTAs); ignored when the plan
  // needs none. Zero it once before its first use (cudaMemset); every call
  // leaves it zero. Null: the plan's own, allocated and zeroed by MakePlan;
  // the plan orders the calls on it (a call on another stream than the last
  // waits on the GPU for it), but not calls captured into graphs, whose
  // replays must not overlap. Calls that share a caller's workspace must not
  // overlap on the GPU: the same stream, or streams ordered by events; to run
  // concurrently on several streams, pass each its own.
  void* workspace = nullptr;
};

// Where a plan's kernel came from.
enum class DispatchSource : int {
  kExact = 0,    // tuned for exactly this problem on this device
  kNearest = 1,  // tuned for the nearest shape with the same dtype and flags
  kDefault = 2,  // built-in default, known correct on this architecture
};
const char* DispatchSourceName(DispatchSource source);

struct PlanInfo {
  DispatchSource source = DispatchSource::kDefault;
  std::string variant_id;       // e.g. "radix_f32_b1024_r11_h0_s4096_c1_t2_m1"
  std::string tuned_shape;      // the tuned problem used (exact / nearest), else ""
  double tuned_median_us = 0;   // its stored median, 0 for the default
  // Every cubin came from memory, the shipped kernels, the tuning cache or
  // the kernel directory (no NVRTC).
  bool binary_from_cache = false;
  double plan_ms = 0;           // wall time MakePlan took
  // Global scratch a call needs (Args::workspace); 0 for most plans.
  size_t workspace_bytes = 0;
};

class Plan {
 public:
  virtual ~Plan() = default;
  // Launches the top-k on `stream` (a CUstream / cudaStream_t; nullptr is the
  // legacy default stream). Checks the pointers against the contract and
  // returns kInvalidArgument without launching when one is null or
  // misaligned, or when args.batch exceeds the planned batch. A batch or k of
  // 0 returns Ok and launches nothing. Thread-safe; graph-capturable; when
  // the plan has workspace_bytes > 0, calls on several streams run one after
  // another on the plan's own workspace unless each passes its own (see
  // Args::workspace).
  virtual Status Run(const Args& args, void* stream) const = 0;
  virtual const Problem& problem() const = 0;
  virtual const PlanInfo& info() const = 0;
};

struct Options {
  int device = 0;             // CUDA device ordinal
  std::string cache_path;     // tuning cache; "" runs on built-in defaults only
  // Use entries tuned on another device of the same architecture (compute
  // capability) when this device has none.
  bool allow_same_arch = false;
  // Store cubins compiled at plan time back into the cache file.
  bool write_back = true;
  // Kernels compiled at plan time are kept here for later processes (with
  // or without a tuning cache): "" is DefaultKernelDir(), "off" keeps none,
  // anything else is the directory to use.
  std::string kernel_dir;
  // Serve the default kernels compiled into the library (sm_80 and sm_90
  // unless built otherwise) before compiling them; off only to measure NVRTC.
  bool shipped_kernels = true;
  // Launch with programmatic dependent launch on sm_90 (other architectures:
  // plain launches, gen::Arch::programmatic): a call's
  // kernels are scheduled while the stream's previous kernel finishes and
  // wait on the GPU for it before touching memory (griddepcontrol.wait), so
  // back-to-back calls hide part of the launch latency. Off: plain launches.
  bool programmatic_launch = true;
};

class Library {
 public:
  virtual ~Library() = default;
  // Opens the library on a device. A cache file that is missing is created on
  // first write-back; one that is corrupt, of a newer schema or not SQLite is
  // ignored (the library runs on defaults) and reported by warnings().
  static StatusOr<std::unique_ptr<Library>> Open(const Options& options);
  // Chooses, loads (or compiles) and prepares the kernel for `problem`.
  // Thread-safe. The plan must not outlive the library.
  virtual StatusOr<std::unique_ptr<Plan>> MakePlan(const Problem& problem) = 0;
  // Problems with the cache file noticed at Open ("" when none).
  virtual const std::string& warnings() const = 0;
  // "NVIDIA H100 80GB HBM3 sm_90 132 SMs"
  virtual const std::string& device_description() const = 0;
};

// The cache path topk-tune uses by default: $TOPK_TUNE_DB, else
// $XDG_CACHE_HOME/topk-tune/tuning.db (only when XDG_CACHE_HOME is an
// absolute path, as the XDG base-directory spec requires), else
// $HOME/.cache/topk-tune/tuning.db. Empty variables count as unset; "" when
// none gives a location (no HOME): the caller must name a path.
std::string DefaultCachePath();

// The directory of compiled kernels that Library::Open uses by default:
// $TOPK_TUNE_KERNEL_DIR ("off": none), else
// $XDG_CACHE_HOME/topk-tune/kernels (absolute XDG_CACHE_HOME only), else
// $HOME/.cache/topk-tune/kernels. Empty variables count as unset; "" when
// disabled or when none gives a location.
std::string DefaultKernelDir();

}  // namespace topk
