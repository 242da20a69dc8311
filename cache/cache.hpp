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
#include <iosfwd>
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

// A variant as recorded in the cache. PutMeasurement and PutWinner record
// the variant of their Config (with an empty source hash) when it is new;
// PutVariant records the hash of its generated source as well.
struct VariantRecord {
  std::string id;          // gen::Config::Id()
  std::string kernel_key;  // gen::Config::KernelKey()
  gen::Config config;
  std::string source_hash;  // "" when not recorded
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

// Import and merge refuse winner and baseline times at or above this (an
// hour and more per call is a unit error or a corrupt row, not a kernel).
constexpr double kMaxPlausibleUs = 1e7;

// A baseline time recorded next to the tuning results (e.g. torch.topk
// measured by bench/compare_torch.py, or the CUB sort baseline).
struct Baseline {
  std::string device_fingerprint;
  Problem problem;
  std::string name;  // "torch.topk", "cub_segmented_sort", ...
  double median_us = 0;
  std::string created;
};

// Thread safety: one Cache object may be shared by threads (its calls are
// serialized); several Cache objects and processes may use one file at once.
// Nothing here throws, prints or exits.
//
// Timestamps (Measurement::created, Winner::updated, Baseline::created) are
// set by the cache when a row is written, as ISO-8601 UTC with milliseconds
// ("2025-01-31T12:00:00.123Z"), so that they order as strings.
class Cache {
 public:
  // Opens (creating if missing, with parent directories) and migrates the
  // file. Errors: kDataLoss for a file that is not SQLite or fails
  // integrity checks, kFailedPrecondition for a newer schema version,
  // kUnavailable when the path cannot be created or opened. The file is
  // never modified when Open fails.
  static StatusOr<std::unique_ptr<Cache>> Open(const std::string& path);
  // Opens read-only (never creates or migrates; an older schema is read as
  // is when compatible: a version-1 file reads with zero p10/p90/min and no
  // baselines). A missing file is kNotFound; writes return
  // kFailedPrecondition. Works where nothing may be written (a read-only
  // folder, mount or file) and leaves no -wal / -shm file beside the cache
  // that was not there before; never changes the journal mode. How: a file
  // another connection has open (its -wal exists) is shared read-only, so
  // its commits are seen; a WAL file nobody has open is read through an
  // ordinary connection that SQLite itself refuses to write (query_only),
  // whose -wal / -shm files SQLite removes at close, or, where the file or
  // folder is not writable, with immutable=1 (no locks, no files; a writer
  // that starts later is not seen by this reader).
  //
  // Both opens refuse "" and SQLite's special names (":memory:", "file:"
  // URIs) with kInvalidArgument: a cache is a file path, taken literally.
  static StatusOr<std::unique_ptr<Cache>> OpenReadOnly(const std::string& path);
  virtual ~Cache() = default;

  virtual const std::string& path() const = 0;
  virtual int schema_version() const = 0;

  // Devices.
  virtual Status PutDevice(const DeviceRecord& d) = 0;  // insert or update
  virtual StatusOr<std::vector<DeviceRecord>> Devices() const = 0;
  virtual StatusOr<std::optional<DeviceRecord>> FindDevice(const std::string& fingerprint) const = 0;

  // Variants. PutVariant inserts or updates (a non-empty source hash
  // replaces the stored one). Added after the first interface: they have
  // default bodies so that test doubles written against it still compile.
  virtual Status PutVariant(const gen::Config& config, const std::string& source_hash) {
    (void)config, (void)source_hash;
    return Status(Code::kUnimplemented, "Cache::PutVariant", "not implemented by this cache");
  }
  virtual StatusOr<std::optional<VariantRecord>> FindVariant(const std::string& variant_id) const {
    (void)variant_id;
    return Status(Code::kUnimplemented, "Cache::FindVariant", "not implemented by this cache");
  }

  // Binaries.
  virtual Status PutBinary(const BinaryRecord& b) = 0;  // insert or replace
  virtual StatusOr<std::optional<BinaryRecord>> FindBinary(const std::string& source_hash, const std::string& arch,
                                                           const std::string& options,
                                                           const std::string& compiler_version) const = 0;
  virtual StatusOr<int64_t> CountBinaries() const = 0;

  // Measurements. Put inserts one row in its own transaction and returns its
  // id; a later Put for the same (device, variant, problem key, dist,
  // l2_mode) replaces it (re-timing) and keeps its id. An empty variant_id
  // is taken from m.config.Id(). m.id and m.created are ignored.
  virtual StatusOr<int64_t> PutMeasurement(const Measurement& m) = 0;
  // Whether a finished measurement exists for this key (resume). Failures
  // count: they are recorded precisely so that a resumed run skips them.
  virtual StatusOr<bool> HasMeasurement(const std::string& device_fingerprint, const std::string& variant_id,
                                        const Problem& p, const std::string& input_dist,
                                        const std::string& l2_mode) const = 0;
  // Measurements of one device and problem (every variant), or of every
  // problem when `p` is null; of every device when the fingerprint is
  // empty. Ordered by id (insertion order).
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
  // dispatch), on the given device fingerprints (every device when the list
  // is empty).
  // Winners of the same dtype and flags as `p` (any shape) on these devices
  // (all when empty). Rows of a kernel family this build does not register
  // are left out.
  virtual StatusOr<std::vector<Winner>> WinnersLike(const std::vector<std::string>& device_fingerprints,
                                                    const Problem& p) const = 0;

  // Baselines, keyed by (device, problem key, name).
  virtual Status PutBaseline(const Baseline& b) = 0;  // insert or replace
  // Baselines of one device (every device when the fingerprint is empty).
  virtual StatusOr<std::vector<Baseline>> Baselines(const std::string& device_fingerprint) const = 0;

  // Export every row (devices, variants, binaries as base64, measurements,
  // winners, baselines) as JSON Lines, one object per line with a "table"
  // field; the first line is {"table":"meta","schema_version":N,...}.
  // Binaries are left out unless include_binaries. The file is written
  // beside out_path and renamed into place, so a failed export leaves no
  // partial file.
  virtual Status ExportJsonl(const std::string& out_path, bool include_binaries) const = 0;
  // The same lines written to `out` (the caller owns where they go and how
  // a failure is cleaned up). Added after the first interface: a default
  // body keeps test doubles compiling.
  virtual Status WriteJsonl(std::ostream& out, bool include_binaries) const {
    (void)out, (void)include_binaries;
    return Status(Code::kUnimplemented, "Cache::WriteJsonl", "not implemented by this cache");
  }
  // Import reads that format. Rows already present are kept; on a conflict
  // the Merge rule applies (a strictly newer measurement, winner or baseline
  // replaces the stored one). All lines go in one transaction: a malformed
  // line fails the import with kInvalidArgument naming the line number and
  // leaves the cache unchanged.
  virtual Status ImportJsonl(const std::string& in_path) = 0;
  // Copies every row of another cache file (opened read-only, never
  // modified) into this one, in one transaction; on conflicts the newer
  // measurement / winner / baseline (by `created` / `updated`) wins, ties
  // keep this cache's row; devices, variants and binaries already present
  // are kept. A missing, non-SQLite or newer-schema file fails with the
  // Status of OpenReadOnly and leaves this cache unchanged.
  virtual Status Merge(const std::string& other_path) = 0;

  // PRAGMA integrity_check == "ok".
  virtual Status IntegrityCheck() const = 0;
};

}  // namespace topk::cache
