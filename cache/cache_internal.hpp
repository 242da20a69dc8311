// Declarations shared by the files that implement the SQLite cache. Private
// to cache/: callers see only cache.hpp, which includes no SQLite header.
//
//   cache.cpp        open and migrate (Cache::Open, Cache::OpenReadOnly)
//   cache_sql.cpp    the public reads and writes, transactions, row writers
//   cache_rows.cpp   SQL rows to records
//   cache_json.cpp   JSON fields and records as JSON Lines objects
//   cache_jsonl.cpp  export, import and merge
//
// Merge is "read the other file's rows as export objects and import them",
// so the two paths cannot disagree about conflict rules.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cache/cache.hpp"
#include "cache/schema.hpp"
#include "cache/sqlite_util.hpp"

namespace topk::cache::detail {

using internal::BlobRef;
using internal::Exec;
using internal::QueryInt;
using internal::SqliteError;
using internal::Stmt;
using nlohmann::json;

// How long one SQLite call waits for another connection's lock before it
// returns SQLITE_BUSY. A tuner commits a row at a time, so 10 s only runs out
// when another process holds the write lock for long (a large merge or
// import); the write path then retries (kBusyRetries).
constexpr int kBusyTimeoutMs = 10000;
constexpr int kBusyRetries = 6;

// "2025-01-31T12:00:00.123Z": fixed width, so string order is time order.
std::string NowIso8601();

Status Unavailable(const std::string& where, const std::string& msg);
Status FailedPrecondition(const std::string& where, const std::string& msg);
Status DataLoss(const std::string& where, const std::string& msg);

struct DbCloser {
  // close_v2 defers the close until every statement is finalized instead of
  // failing with SQLITE_BUSY; our statements are RAII, so it closes now.
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using DbPtr = std::unique_ptr<sqlite3, DbCloser>;

// PRAGMA integrity_check / quick_check: Ok, or kDataLoss with the first
// problems SQLite lists, naming the file in the message.
Status CheckIntegrity(sqlite3* db, const char* pragma, const std::string& path);

// ---- JSON fields (cache_json.cpp) ----------------------------------------
//
// Import and merge read rows as JSON objects. A missing or mistyped field
// throws FieldError, which ApplyRow turns into a Status; the exception never
// leaves the cache library.

struct FieldError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const json& At(const json& j, const char* key);
std::string Str(const json& j, const char* key);
int64_t Int(const json& j, const char* key);
int Int32(const json& j, const char* key);
// JSON has no NaN: nlohmann writes it as null, so null reads back as NaN.
double NumberOrNaN(const json& v, const std::string& what);
double Real(const json& j, const char* key);
bool Bool(const json& j, const char* key);

// Throws FieldError with the Status's message when it is not ok.
template <typename T>
T ValueOrThrow(StatusOr<T> s) {
  if (!s.ok()) throw FieldError(s.status().message());
  return std::move(s).value();
}

// Dumps without throwing on invalid UTF-8 (a compiler log may hold any
// bytes): such bytes become U+FFFD.
std::string Dump(const json& j);
std::string SamplesToJson(const std::vector<double>& samples);
StatusOr<std::vector<double>> SamplesFromJson(const json& j);

// Identifies a measurement across files: row ids are local to one file, so
// a winner's measurement_id is carried through export and merge by key.
struct MeasurementKey {
  std::string device, variant_id, problem_key, input_dist, l2_mode;
};

// How a row writer resolves a conflict with a stored row.
enum class WriteMode {
  kPut,    // the public Put*: the new row replaces the stored one
  kMerge,  // import / merge: keep the stored row unless the new one is newer
};

// Column lists shared by the readers below; the *FromRow functions read
// these columns by position.
inline constexpr const char* kDeviceColumns =
    "fingerprint, name, cc_major, cc_minor, sm_count, l2_bytes, driver_version, compiler_version, info_json, "
    "updated";
inline constexpr const char* kBinaryColumns =
    "source_hash, arch, options, compiler_version, kernel_key, lowered_name, cubin, registers, spill_stores, "
    "spill_loads, stack_bytes, compile_ms, log, created";
inline constexpr const char* kWinnerSelect =
    "SELECT w.device, w.problem_key, w.row_stride, w.variant_id, v.config_json, w.median_us, w.default_us, "
    "w.baseline_us, w.baseline_name, w.measurement_id, w.updated, "
    "m.device, m.variant_id, m.problem_key, m.input_dist, m.l2_mode "
    "FROM winners w LEFT JOIN variants v ON v.id = w.variant_id "
    "LEFT JOIN measurements m ON m.id = w.measurement_id";
inline constexpr const char* kBaselineSelect =
    "SELECT device, problem_key, row_stride, name, median_us, created FROM baselines";

// ---- SQL rows to records (cache_rows.cpp) --------------------------------

DeviceRecord DeviceFromRow(const Stmt& s);
BinaryRecord BinaryFromRow(const Stmt& s);
// A stored problem: its key plus the stride column.
StatusOr<Problem> ProblemFromRow(const std::string& key, int64_t row_stride);
// The Config of a variant: from its variants row when there is one, else
// from the id (ids are built from every parameter, so they parse back).
StatusOr<gen::Config> ConfigFromRow(const Stmt& s, int json_col, const std::string& variant_id);
StatusOr<Winner> WinnerFromRow(const Stmt& s);
StatusOr<Baseline> BaselineFromRow(const Stmt& s);

// ---- records as JSON Lines objects (cache_json.cpp) ----------------------

json DeviceToJson(const DeviceRecord& d);
json BinaryToJson(const BinaryRecord& b);
json MeasurementToJson(const Measurement& m);
json WinnerToJson(const Winner& w, const std::optional<MeasurementKey>& key);
json BaselineToJson(const Baseline& b);
Problem ProblemFromJson(const json& j);

class SqliteCache final : public Cache {
 public:
  using RowFn = std::function<Status(const json&)>;

  static StatusOr<std::unique_ptr<SqliteCache>> OpenFile(const std::string& path, bool read_only);

  const std::string& path() const override { return path_; }
  int schema_version() const override { return version_; }

  // The public reads and writes (cache_sql.cpp).
  Status PutDevice(const DeviceRecord& d) override;
  StatusOr<std::vector<DeviceRecord>> Devices() const override;
  StatusOr<std::optional<DeviceRecord>> FindDevice(const std::string& fingerprint) const override;
  Status PutVariant(const gen::Config& config, const std::string& source_hash) override;
  StatusOr<std::optional<VariantRecord>> FindVariant(const std::string& variant_id) const override;
  Status PutBinary(const BinaryRecord& b) override;
  StatusOr<std::optional<BinaryRecord>> FindBinary(const std::string& source_hash, const std::string& arch,
                                                   const std::string& options,
                                                   const std::string& compiler_version) const override;
  StatusOr<int64_t> CountBinaries() const override;
  StatusOr<int64_t> PutMeasurement(const Measurement& m) override;
  StatusOr<bool> HasMeasurement(const std::string& device_fingerprint, const std::string& variant_id, const Problem& p,
                                const std::string& input_dist, const std::string& l2_mode) const override;
  StatusOr<std::vector<Measurement>> Measurements(const std::string& device_fingerprint,
                                                  const Problem* p) const override;
  StatusOr<int64_t> CountMeasurements() const override;
  Status PutWinner(const Winner& w) override;
  StatusOr<std::optional<Winner>> FindWinner(const std::string& device_fingerprint, const Problem& p) const override;
  StatusOr<std::vector<Winner>> Winners(const std::string& device_fingerprint) const override;
  StatusOr<std::vector<Winner>> WinnersLike(const std::vector<std::string>& device_fingerprints,
                                            const Problem& p) const override;
  Status PutBaseline(const Baseline& b) override;
  StatusOr<std::vector<Baseline>> Baselines(const std::string& device_fingerprint) const override;
  Status IntegrityCheck() const override;

  // Export, import and merge (cache_jsonl.cpp).
  Status ExportJsonl(const std::string& out_path, bool include_binaries) const override;
  Status WriteJsonl(std::ostream& out, bool include_binaries) const override;
  Status ImportJsonl(const std::string& in_path) override;
  Status Merge(const std::string& other_path) override;
  Status ForEachRow(bool include_binaries, const RowFn& fn) const;

 private:
  SqliteCache(std::string path, DbPtr db, bool read_only, int version)
      : path_(std::move(path)), db_(std::move(db)), read_only_(read_only), version_(version) {}

  sqlite3* db() const { return db_.get(); }

  // Serializes calls on this object (one SQLite connection cannot interleave
  // two transactions) and keeps exceptions (bad_alloc, a JSON surprise)
  // inside the library.
  template <typename F>
  auto Locked(const char* where, F&& f) const -> decltype(f()) {
    std::lock_guard<std::mutex> lock(mu_);
    try {
      return f();
    } catch (const std::bad_alloc&) {
      return Status(Code::kResourceExhausted, where, "out of memory");
    } catch (const std::exception& e) {
      return Status(Code::kInternal, where, std::string("unexpected exception: ") + e.what());
    }
  }

  // Transactions (cache_sql.cpp).
  Status CheckWritable(const char* where) const;
  Status WriteTransaction(const char* where, const std::function<Status()>& body);
  void Rollback();
  Status ReadTransaction(const std::function<Status()>& body) const;

  // Open and migrate (cache.cpp).
  Status MigrateOnOpen();
  static Status NewerSchema(const std::string& path, int64_t v, const char* where);
  static Status NotACache(const std::string& path, const char* where);

  // Row writers, run inside a write transaction (cache_sql.cpp).
  Status WriteDevice(const DeviceRecord& d, const std::string& updated, WriteMode mode);
  Status WriteVariant(const VariantRecord& v, WriteMode mode);
  Status InsertVariantIfNew(const std::string& id, const gen::Config& c);
  Status WriteBinary(const BinaryRecord& b, const std::string& created, WriteMode mode);
  StatusOr<int64_t> WriteMeasurement(const Measurement& m, WriteMode mode);
  Status WriteWinner(const Winner& w, WriteMode mode);
  Status WriteBaseline(const Baseline& b, WriteMode mode);

  // Row readers (cache_sql.cpp).
  StatusOr<int64_t> FindMeasurementId(const MeasurementKey& k) const;
  std::string MeasurementSelect() const;
  Status ForEachMeasurement(const std::string& sql, const std::vector<std::string>& args,
                            const std::function<Status(Measurement)>& fn) const;
  Status QueryWinners(
      const std::string& sql, const std::vector<std::string>& args, std::vector<Winner>* out,
      const std::function<Status(const Winner&, const std::optional<MeasurementKey>&)>& fn = nullptr,
      bool skip_unreadable = false) const;

  // JSON Lines (cache_jsonl.cpp).
  Status ForEachRowUnlocked(bool include_binaries, const RowFn& fn) const;
  Status ApplyRow(const json& j);
  static Status CheckImportedTime(const std::string& what, double us, bool zero_ok);
  gen::Arch StoredDeviceArch(const std::string& fingerprint) const;
  Status CheckImportedWinner(const Winner& w) const;
  Status WriteRows(std::ostream& out, bool include_binaries, const std::string& what) const;
  Status Export(const std::string& out_path, bool include_binaries) const;
  Status Import(const std::string& in_path);

  const std::string path_;
  const DbPtr db_;
  const bool read_only_;
  int version_;
  mutable std::mutex mu_;
};

}  // namespace topk::cache::detail
