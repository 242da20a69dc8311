// The tuning cache: one SQLite file (WAL mode) holding devices, variants,
// compiled binaries, every measurement (failures too) and the winners derived
// from them. No CUDA calls: it builds and tests without a GPU.
//
// Safety: every write is a transaction; a process killed at any moment loses
// at most the write in flight; several processes may read and write one file
// at once (busy timeout plus retry). The schema version lives in
// PRAGMA user_version and older files are migrated forward on open. A file of
// a newer schema, or one that is not SQLite, is refused with a clear Status
// and left untouched.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "generator/config.hpp"
#include "topk/status.hpp"
#include "topk/topk.hpp"

namespace topk::cache {

// Current schema version written by this build.
constexpr int kSchemaVersion = 2;

// A device as recorded in the cache (the tuner fills it from
// jit::DeviceInfo; the cache does not depend on CUDA).
struct DeviceRecord {
  std::string fingerprint;  // unique key
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  int64_t l2_bytes = 0;
  int driver_version = 0;
  std::string compiler_version;
  std::string info_json;  // everything else, as JSON
  std::string ArchName() const { return "sm_" + std::to_string(cc_major * 10 + cc_minor); }
};

// A compiled kernel binary, keyed by (source_hash, arch, options,
// compiler_version).
struct BinaryRecord {
  std::string source_hash;
  std::string arch;
  std::string options;
  std::string compiler_version;
  std::string kernel_key;
  std::string lowered_name;
  std::vector<char> cubin;
  int registers = -1;
  int spill_stores = 0;
  int spill_loads = 0;
  int stack_bytes = 0;
  double compile_ms = 0;
  std::string log;
};

// Canonical key of a problem for the cache: dtype, batch, n, k, flags
// (stride is not part of it: the same kernel serves any stride >= n).
// e.g. "f32|b64|n32768|k2048|largest|ranges|novalues|unsorted".
std::string ProblemKey(const Problem& p);
StatusOr<Problem> ParseProblemKey(const std::string& key);
// The dtype-and-flags part of ProblemKey, used to find nearest shapes:
// "f32|largest|ranges|novalues|unsorted".
std::string FlagsKey(const Problem& p);

// How a measurement ended.
enum class Outcome : int {
  kOk = 0,
  kCompileError = 1,
  kResourceLimit = 2,
  kWrongResult = 3,
  kCrash = 4,
  kTimeout = 5,
  kSkipped = 6,  // e.g. invalid for the problem; recorded so resume skips it
};
const char* OutcomeName(Outcome o);
StatusOr<Outcome> ParseOutcome(const std::string& name);

// One timed (or failed) attempt of one variant on one problem.
struct Measurement {
  int64_t id = 0;               // assigned by the cache
  std::string device_fingerprint;
  std::string variant_id;       // gen::Config::Id()
  gen::Config config;
  Problem problem;
  std::string input_dist = "normal";  // "normal", "uniform", "all_equal", ...
  std::string l2_mode = "rotate";     // "rotate" (cold-ish) or "hot"
  Outcome outcome = Outcome::kOk;
  double median_us = 0;
  double p10_us = 0;
  double p90_us = 0;
  double min_us = 0;
  int repetitions = 0;           // kernel launches timed in total
  std::vector<double> samples_us;  // per-sample times (may be thinned)
  bool verified = false;
  std::string message;           // failure detail
  std::string tune_run;          // id of the tune run that made it
  std::string created;           // ISO-8601, filled by the cache
};

// The chosen variant for a (device, problem).
struct Winner {
  std::string device_fingerprint;
  Problem problem;
  std::string variant_id;
  gen::Config config;
  double median_us = 0;
  double default_us = 0;   // the default config's median, 0 if not measured
  double baseline_us = 0;  // an external baseline (torch.topk), 0 if none
  std::string baseline_name;
  int64_t measurement_id = 0;
  std::string updated;
};

// A baseline time recorded next to the tuning results (e.g. torch.topk
// measured by bench/compare_torch.py, or the CUB sort baseline).
struct Baseline {
  std::string device_fingerprint;
  Problem problem;
  std::string name;  // "torch.topk", "cub_segmented_sort", ...
  double median_us = 0;
  std::string created;
};

class Cache {
 public:
  // Opens (creating if missing, with parent directories) and migrates the
  // file. Errors: kDataLoss for a file that is not SQLite or fails
  // integrity checks, kFailedPrecondition for a newer schema version,
  // kUnavailable when the path cannot be created or opened. The file is
  // never modified when Open fails.
  static StatusOr<std::unique_ptr<Cache>> Open(const std::string& path);
  // Opens read-only (never creates or migrates; an older schema is read as
  // is when compatible).
  static StatusOr<std::unique_ptr<Cache>> OpenReadOnly(const std::string& path);
  virtual ~Cache() = default;

  virtual const std::string& path() const = 0;
  virtual int schema_version() const = 0;

  // Devices.
  virtual Status PutDevice(const DeviceRecord& d) = 0;  // insert or update
  virtual StatusOr<std::vector<DeviceRecord>> Devices() const = 0;
  virtual StatusOr<std::optional<DeviceRecord>> FindDevice(const std::string& fingerprint) const = 0;

  // Binaries.
  virtual Status PutBinary(const BinaryRecord& b) = 0;  // insert or replace
  virtual StatusOr<std::optional<BinaryRecord>> FindBinary(const std::string& source_hash, const std::string& arch,
                                                           const std::string& options,
                                                           const std::string& compiler_version) const = 0;
  virtual StatusOr<int64_t> CountBinaries() const = 0;

  // Measurements. Put inserts one row in its own transaction and returns its
  // id; a later Put for the same (device, variant, problem key, dist,
  // l2_mode) replaces it (re-timing).
  virtual StatusOr<int64_t> PutMeasurement(const Measurement& m) = 0;
  // Whether a finished measurement exists for this key (resume).
  virtual StatusOr<bool> HasMeasurement(const std::string& device_fingerprint, const std::string& variant_id,
                                        const Problem& p, const std::string& input_dist,
                                        const std::string& l2_mode) const = 0;
  // Measurements of one device and problem (every variant), or of every
  // problem when `p` is null.
  virtual StatusOr<std::vector<Measurement>> Measurements(const std::string& device_fingerprint,
                                                          const Problem* p) const = 0;
  virtual StatusOr<int64_t> CountMeasurements() const = 0;

  // Winners.
  virtual Status PutWinner(const Winner& w) = 0;  // insert or replace
  virtual StatusOr<std::optional<Winner>> FindWinner(const std::string& device_fingerprint,
                                                     const Problem& p) const = 0;
  // Winners of one device (every device when the fingerprint is empty).
  virtual StatusOr<std::vector<Winner>> Winners(const std::string& device_fingerprint) const = 0;
  // Winners with the same dtype and flags as `p` (for nearest-shape
  // dispatch), on the given device fingerprints.
  virtual StatusOr<std::vector<Winner>> WinnersLike(const std::vector<std::string>& device_fingerprints,
                                                    const Problem& p) const = 0;

  // Baselines.
  virtual Status PutBaseline(const Baseline& b) = 0;  // insert or replace
  virtual StatusOr<std::vector<Baseline>> Baselines(const std::string& device_fingerprint) const = 0;

  // Export every row (devices, variants, binaries as base64, measurements,
  // winners, baselines) as JSON Lines, one object per line with a "table"
  // field; Import reads that format (rows already present are kept).
  virtual Status ExportJsonl(const std::string& out_path, bool include_binaries) const = 0;
  virtual Status ImportJsonl(const std::string& in_path) = 0;
  // Copies every row of another cache file into this one; on conflicts the
  // newer measurement / winner (by `created` / `updated`) wins.
  virtual Status Merge(const std::string& other_path) = 0;

  // PRAGMA integrity_check == "ok".
  virtual Status IntegrityCheck() const = 0;
};

}  // namespace topk::cache
