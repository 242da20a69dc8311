// The SQL access of the cache: the public reads and writes, the
// transactions they run in, and the row writers and readers.
#include <sqlite3.h>

#include <chrono>
#include <string>
#include <thread>

#include "cache/cache_internal.hpp"

namespace topk::cache::detail {

Status SqliteCache::PutDevice(const DeviceRecord& d) {
  return Locked("PutDevice", [&]() -> Status {
    if (d.fingerprint.empty()) return InvalidArgument("PutDevice", "empty device fingerprint");
    return WriteTransaction("PutDevice", [&] { return WriteDevice(d, NowIso8601(), WriteMode::kPut); });
  });
}

StatusOr<std::vector<DeviceRecord>> SqliteCache::Devices() const {
  return Locked("Devices", [&]() -> StatusOr<std::vector<DeviceRecord>> {
    TOPK_ASSIGN_OR_RETURN(
        Stmt s, Stmt::Prepare(db(), std::string("SELECT ") + kDeviceColumns + " FROM devices ORDER BY fingerprint"));
    std::vector<DeviceRecord> out;
    while (true) {
      TOPK_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) return out;
      out.push_back(DeviceFromRow(s));
    }
  });
}

StatusOr<std::optional<DeviceRecord>> SqliteCache::FindDevice(const std::string& fingerprint) const {
  return Locked("FindDevice", [&]() -> StatusOr<std::optional<DeviceRecord>> {
    TOPK_ASSIGN_OR_RETURN(
        Stmt s, Stmt::Prepare(db(), std::string("SELECT ") + kDeviceColumns + " FROM devices WHERE fingerprint = ?"));
    TOPK_ASSIGN_OR_RETURN(bool row, s.Bind(fingerprint).Step());
    if (!row) return std::optional<DeviceRecord>();
    return std::optional<DeviceRecord>(DeviceFromRow(s));
  });
}

Status SqliteCache::PutVariant(const gen::Config& config, const std::string& source_hash) {
  return Locked("PutVariant", [&]() -> Status {
    const VariantRecord v{config.Id(), config.KernelKey(), config, source_hash};
    return WriteTransaction("PutVariant", [&] { return WriteVariant(v, WriteMode::kPut); });
  });
}

StatusOr<std::optional<VariantRecord>> SqliteCache::FindVariant(const std::string& variant_id) const {
  return Locked("FindVariant", [&]() -> StatusOr<std::optional<VariantRecord>> {
    TOPK_ASSIGN_OR_RETURN(
        Stmt s, Stmt::Prepare(db(), "SELECT id, kernel_key, config_json, source_hash FROM variants WHERE id = ?"));
    TOPK_ASSIGN_OR_RETURN(bool row, s.Bind(variant_id).Step());
    if (!row) return std::optional<VariantRecord>();
    VariantRecord v;
    v.id = s.Text(0);
    v.kernel_key = s.Text(1);
    TOPK_ASSIGN_OR_RETURN(v.config, ConfigFromRow(s, 2, v.id));
    v.source_hash = s.Text(3);
    return std::optional<VariantRecord>(std::move(v));
  });
}

Status SqliteCache::PutBinary(const BinaryRecord& b) {
  return Locked("PutBinary", [&]() -> Status {
    return WriteTransaction("PutBinary", [&] { return WriteBinary(b, NowIso8601(), WriteMode::kPut); });
  });
}

StatusOr<std::optional<BinaryRecord>> SqliteCache::FindBinary(const std::string& source_hash,
                                                              const std::string& arch, const std::string& options,
                                                              const std::string& compiler_version) const {
  return Locked("FindBinary", [&]() -> StatusOr<std::optional<BinaryRecord>> {
    TOPK_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db(), std::string("SELECT ") + kBinaryColumns +
                                                          " FROM binaries WHERE source_hash = ? AND arch = ? AND "
                                                          "options = ? AND compiler_version = ?"));
    TOPK_ASSIGN_OR_RETURN(bool row, s.Bind(source_hash, arch, options, compiler_version).Step());
    if (!row) return std::optional<BinaryRecord>();
    return std::optional<BinaryRecord>(BinaryFromRow(s));
  });
}

StatusOr<int64_t> SqliteCache::CountBinaries() const {
  return Locked("CountBinaries", [&] { return QueryInt(db(), "SELECT count(*) FROM binaries"); });
}

StatusOr<int64_t> SqliteCache::PutMeasurement(const Measurement& m) {
  return Locked("PutMeasurement", [&]() -> StatusOr<int64_t> {
    if (m.device_fingerprint.empty()) return InvalidArgument("PutMeasurement", "empty device fingerprint");
    Measurement row = m;
    if (row.variant_id.empty()) row.variant_id = row.config.Id();
    row.created = NowIso8601();
    int64_t id = 0;
    TOPK_RETURN_IF_ERROR(WriteTransaction("PutMeasurement", [&]() -> Status {
      TOPK_RETURN_IF_ERROR(InsertVariantIfNew(row.variant_id, row.config));
      TOPK_ASSIGN_OR_RETURN(id, WriteMeasurement(row, WriteMode::kPut));
      return Status::Ok();
    }));
    return id;
  });
}

StatusOr<bool> SqliteCache::HasMeasurement(const std::string& device_fingerprint, const std::string& variant_id,
                                           const Problem& p, const std::string& input_dist,
                                           const std::string& l2_mode) const {
  return Locked("HasMeasurement", [&]() -> StatusOr<bool> {
    TOPK_ASSIGN_OR_RETURN(int64_t id,
                          FindMeasurementId({device_fingerprint, variant_id, ProblemKey(p), input_dist, l2_mode}));
    return id != 0;
  });
}

StatusOr<std::vector<Measurement>> SqliteCache::Measurements(const std::string& device_fingerprint,
                                                             const Problem* p) const {
  return Locked("Measurements", [&]() -> StatusOr<std::vector<Measurement>> {
    std::string sql = MeasurementSelect() + " WHERE 1";
    std::vector<std::string> args;
    if (!device_fingerprint.empty()) {
      sql += " AND m.device = ?";
      args.push_back(device_fingerprint);
    }
    if (p) {
      sql += " AND m.problem_key = ?";
      args.push_back(ProblemKey(*p));
    }
    sql += " ORDER BY m.id";
    std::vector<Measurement> out;
    TOPK_RETURN_IF_ERROR(ForEachMeasurement(sql, args, [&](Measurement m) {
      out.push_back(std::move(m));
      return Status::Ok();
    }));
    return out;
  });
}

StatusOr<int64_t> SqliteCache::CountMeasurements() const {
  return Locked("CountMeasurements", [&] { return QueryInt(db(), "SELECT count(*) FROM measurements"); });
}

Status SqliteCache::PutWinner(const Winner& w) {
  return Locked("PutWinner", [&]() -> Status {
    if (w.device_fingerprint.empty()) return InvalidArgument("PutWinner", "empty device fingerprint");
    Winner row = w;
    if (row.variant_id.empty()) row.variant_id = row.config.Id();
    row.updated = NowIso8601();
    return WriteTransaction("PutWinner", [&]() -> Status {
      TOPK_RETURN_IF_ERROR(InsertVariantIfNew(row.variant_id, row.config));
      return WriteWinner(row, WriteMode::kPut);
    });
  });
}

StatusOr<std::optional<Winner>> SqliteCache::FindWinner(const std::string& device_fingerprint, const Problem& p) const {
  return Locked("FindWinner", [&]() -> StatusOr<std::optional<Winner>> {
    std::vector<Winner> found;
    TOPK_RETURN_IF_ERROR(QueryWinners(std::string(kWinnerSelect) + " WHERE w.device = ? AND w.problem_key = ?",
                                      {device_fingerprint, ProblemKey(p)}, &found));
    if (found.empty()) return std::optional<Winner>();
    return std::optional<Winner>(std::move(found.front()));
  });
}

StatusOr<std::vector<Winner>> SqliteCache::Winners(const std::string& device_fingerprint) const {
  return Locked("Winners", [&]() -> StatusOr<std::vector<Winner>> {
    std::string sql = kWinnerSelect;
    std::vector<std::string> args;
    if (!device_fingerprint.empty()) {
      sql += " WHERE w.device = ?";
      args.push_back(device_fingerprint);
    }
    sql += " ORDER BY w.device, w.problem_key";
    std::vector<Winner> out;
    TOPK_RETURN_IF_ERROR(QueryWinners(sql, args, &out));
    return out;
  });
}

StatusOr<std::vector<Winner>> SqliteCache::WinnersLike(const std::vector<std::string>& device_fingerprints,
                                                       const Problem& p) const {
  return Locked("WinnersLike", [&]() -> StatusOr<std::vector<Winner>> {
    std::string sql = std::string(kWinnerSelect) + " WHERE w.flags_key = ?";
    std::vector<std::string> args = {FlagsKey(p)};
    if (!device_fingerprints.empty()) {
      sql += " AND w.device IN (";
      for (size_t i = 0; i < device_fingerprints.size(); ++i) {
        sql += i ? ", ?" : "?";
        args.push_back(device_fingerprints[i]);
      }
      sql += ")";
    }
    sql += " ORDER BY w.device, w.problem_key";
    std::vector<Winner> out;
    // Nearest dispatch over the group: a winner of a family this build
    // does not have is skipped, not a reason to drop the whole group.
    TOPK_RETURN_IF_ERROR(QueryWinners(sql, args, &out, nullptr, true));
    return out;
  });
}

Status SqliteCache::PutBaseline(const Baseline& b) {
  return Locked("PutBaseline", [&]() -> Status {
    if (b.device_fingerprint.empty()) return InvalidArgument("PutBaseline", "empty device fingerprint");
    if (b.name.empty()) return InvalidArgument("PutBaseline", "empty baseline name");
    Baseline row = b;
    row.created = NowIso8601();
    return WriteTransaction("PutBaseline", [&] { return WriteBaseline(row, WriteMode::kPut); });
  });
}

StatusOr<std::vector<Baseline>> SqliteCache::Baselines(const std::string& device_fingerprint) const {
  return Locked("Baselines", [&]() -> StatusOr<std::vector<Baseline>> {
    std::vector<Baseline> out;
    if (version_ < 2) return out;  // a version-1 file opened read-only has no baselines table
    std::string sql = kBaselineSelect;
    std::vector<std::string> args;
    if (!device_fingerprint.empty()) {
      sql += " WHERE device = ?";
      args.push_back(device_fingerprint);
    }
    sql += " ORDER BY device, problem_key, name";
    TOPK_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db(), sql));
    s.BindTexts(args);
    while (true) {
      TOPK_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) return out;
      TOPK_ASSIGN_OR_RETURN(Baseline b, BaselineFromRow(s));
      out.push_back(std::move(b));
    }
  });
}

Status SqliteCache::IntegrityCheck() const {
  return Locked("IntegrityCheck", [&] { return CheckIntegrity(db(), "integrity_check", path_); });
}

Status SqliteCache::CheckWritable(const char* where) const {
  if (read_only_) return FailedPrecondition(where, "cache '" + path_ + "' is opened read-only");
  return Status::Ok();
}

// Runs `body` in a write transaction. BEGIN IMMEDIATE takes the write lock
// up front: with a deferred BEGIN two writers could both read, then one
// would fail to upgrade its lock with SQLITE_BUSY mid-transaction, where
// waiting cannot help. The busy timeout waits for the lock; past it we
// retry a few times before giving up with kUnavailable.
Status SqliteCache::WriteTransaction(const char* where, const std::function<Status()>& body) {
  TOPK_RETURN_IF_ERROR(CheckWritable(where));
  for (int attempt = 0;; ++attempt) {
    const int rc = sqlite3_exec(db(), "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) break;
    if ((rc & 0xff) != SQLITE_BUSY || attempt + 1 >= kBusyRetries) {
      return SqliteError(db(), rc, "sqlite3_exec", "BEGIN IMMEDIATE").WithContext(std::string(where));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20 * (attempt + 1)));
  }
  Status s;
  try {
    s = body();
  } catch (...) {
    Rollback();
    throw;  // Locked turns it into a Status
  }
  if (s.ok()) {
    // In WAL mode COMMIT does not wait for readers; in rollback-journal
    // mode (WAL unavailable) it may, and a busy COMMIT can be retried.
    for (int attempt = 0;; ++attempt) {
      const int rc = sqlite3_exec(db(), "COMMIT", nullptr, nullptr, nullptr);
      if (rc == SQLITE_OK) return Status::Ok();
      if ((rc & 0xff) != SQLITE_BUSY || attempt + 1 >= kBusyRetries) {
        s = SqliteError(db(), rc, "sqlite3_exec", "COMMIT").WithContext(std::string(where));
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20 * (attempt + 1)));
    }
  }
  Rollback();
  return s;
}

void SqliteCache::Rollback() {
  // Fails harmlessly when SQLite already rolled back (e.g. on SQLITE_FULL).
  if (!sqlite3_get_autocommit(db())) sqlite3_exec(db(), "ROLLBACK", nullptr, nullptr, nullptr);
}

// A read transaction gives multi-statement reads (export) one snapshot.
Status SqliteCache::ReadTransaction(const std::function<Status()>& body) const {
  TOPK_RETURN_IF_ERROR(Exec(db(), "BEGIN"));
  Status s;
  try {
    s = body();
  } catch (...) {
    sqlite3_exec(db(), "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  if (s.ok()) s = Exec(db(), "COMMIT");
  if (!sqlite3_get_autocommit(db())) sqlite3_exec(db(), "ROLLBACK", nullptr, nullptr, nullptr);
  return s;
}

// ---- row writers: run inside a write transaction ----

Status SqliteCache::WriteDevice(const DeviceRecord& d, const std::string& updated, WriteMode mode) {
  const std::string sql =
      std::string("INSERT INTO devices (") + kDeviceColumns +
      ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (fingerprint) DO " +
      (mode == WriteMode::kPut
           ? "UPDATE SET name = excluded.name, cc_major = excluded.cc_major, cc_minor = excluded.cc_minor, "
             "sm_count = excluded.sm_count, l2_bytes = excluded.l2_bytes, driver_version = "
             "excluded.driver_version, compiler_version = excluded.compiler_version, info_json = "
             "excluded.info_json, updated = excluded.updated"
           // A fingerprint covers what identifies the device, so the
           // stored row already describes it.
           : "NOTHING");
  TOPK_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db(), sql));
  return s
      .Bind(d.fingerprint, d.name, d.cc_major, d.cc_minor, d.sm_count, d.l2_bytes, d.driver_version,
            d.compiler_version, d.info_json, updated)
      .Run();
}

Status SqliteCache::WriteVariant(const VariantRecord& v, WriteMode mode) {
  const std::string sql =
      std::string(
          "INSERT INTO variants (id, kernel_key, config_json, source_hash) VALUES (?, ?, ?, ?) "
          "ON CONFLICT (id) DO ") +
      (mode == WriteMode::kPut ? "UPDATE SET kernel_key = excluded.kernel_key, config_json = excluded.config_json, "
                                 "source_hash = CASE WHEN excluded.source_hash <> '' THEN excluded.source_hash ELSE "
                                 "variants.source_hash END"
                               // Merging only fills in a hash this file did not know.
                               : "UPDATE SET source_hash = excluded.source_hash WHERE variants.source_hash = '' AND "
                                 "excluded.source_hash <> ''");
  TOPK_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db(), sql));
  return s.Bind(v.id, v.kernel_key, Dump(v.config.ToJson()), v.source_hash).Run();
}

// Measurements and winners name their variant; record it when new so the
// variants table can answer "which config is this id".
Status SqliteCache::InsertVariantIfNew(const std::string& id, const gen::Config& c) {
  TOPK_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db(),
                                              "INSERT INTO variants (id, kernel_key, config_json, source_hash) "
                                              "VALUES (?, ?, ?, '') ON CONFLICT (id) DO NOTHING"));
  return s.Bind(id, c.KernelKey(), Dump(c.ToJson())).Run();
}

Status SqliteCache::WriteBinary(const BinaryRecord& b, const std::string& created, WriteMode mode) {
  // The key (source hash, arch, options, compiler) determines the cubin,
  // so a merge keeps the stored one; Put replaces (e.g. a fixed log).
  const std::string sql = std::string(mode == WriteMode::kPut ? "INSERT OR REPLACE" : "INSERT OR IGNORE") +
                          " INTO binaries (" + kBinaryColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
  TOPK_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db(), sql));
  return s
      .Bind(b.source_hash, b.arch, b.options, b.compiler_version, b.kernel_key, b.lowered_name,
            BlobRef{b.cubin.data(), b.cubin.size()}, b.registers, b.spill_stores, b.spill_loads, b.stack_bytes,
            b.compile_ms, b.log, created)
      .Run();
}

// Inserts or updates by the unique key and returns the row id. An update
// keeps the id, so winners that point at the row stay valid (INSERT OR
// REPLACE would delete and re-insert it under a new id).
StatusOr<int64_t> SqliteCache::WriteMeasurement(const Measurement& m, WriteMode mode) {
  std::string sql =
      "INSERT INTO measurements (device, variant_id, problem_key, flags_key, row_stride, input_dist, l2_mode, "
      "outcome, median_us, p10_us, p90_us, min_us, repetitions, samples_json, verified, message, tune_run, "
      "created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
      "ON CONFLICT (device, variant_id, problem_key, input_dist, l2_mode) DO UPDATE SET "
      "flags_key = excluded.flags_key, row_stride = excluded.row_stride, outcome = excluded.outcome, "
      "median_us = excluded.median_us, p10_us = excluded.p10_us, p90_us = excluded.p90_us, "
      "min_us = excluded.min_us, repetitions = excluded.repetitions, samples_json = excluded.samples_json, "
      "verified = excluded.verified, message = excluded.message, tune_run = excluded.tune_run, "
      "created = excluded.created";
  if (mode == WriteMode::kMerge) sql += " WHERE excluded.created > measurements.created";
  sql += " RETURNING id";
  TOPK_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db(), sql));
  s.Bind(m.device_fingerprint, m.variant_id, ProblemKey(m.problem), FlagsKey(m.problem), m.problem.row_stride,
         m.input_dist, m.l2_mode, OutcomeName(m.outcome), m.median_us, m.p10_us, m.p90_us, m.min_us, m.repetitions,
         SamplesToJson(m.samples_us), m.verified, m.message, m.tune_run, m.created);
  TOPK_ASSIGN_OR_RETURN(bool row, s.Step());
  if (row) {
    const int64_t id = s.Int(0);
    TOPK_RETURN_IF_ERROR(s.Run());  // finish the statement
    return id;
  }
  // A merge that kept the stored (newer) row returns nothing.
  return FindMeasurementId({m.device_fingerprint, m.variant_id, ProblemKey(m.problem), m.input_dist, m.l2_mode});
}

Status SqliteCache::WriteWinner(const Winner& w, WriteMode mode) {
  std::string sql =
      "INSERT INTO winners (device, problem_key, flags_key, row_stride, variant_id, median_us, default_us, "
      "baseline_us, baseline_name, measurement_id, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
      "ON CONFLICT (device, problem_key) DO UPDATE SET flags_key = excluded.flags_key, "
      "row_stride = excluded.row_stride, variant_id = excluded.variant_id, median_us = excluded.median_us, "
      "default_us = excluded.default_us, baseline_us = excluded.baseline_us, "
      "baseline_name = excluded.baseline_name, measurement_id = excluded.measurement_id, "
      "updated = excluded.updated";
  if (mode == WriteMode::kMerge) sql += " WHERE excluded.updated > winners.updated";
  TOPK_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db(), sql));
  return s
      .Bind(w.device_fingerprint, ProblemKey(w.problem), FlagsKey(w.problem), w.problem.row_stride, w.variant_id,
            w.median_us, w.default_us, w.baseline_us, w.baseline_name, w.measurement_id, w.updated)
      .Run();
}

Status SqliteCache::WriteBaseline(const Baseline& b, WriteMode mode) {
  std::string sql =
      "INSERT INTO baselines (device, problem_key, row_stride, name, median_us, created) "
      "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (device, problem_key, name) DO UPDATE SET "
      "row_stride = excluded.row_stride, median_us = excluded.median_us, created = excluded.created";
  if (mode == WriteMode::kMerge) sql += " WHERE excluded.created > baselines.created";
  TOPK_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db(), sql));
  return s.Bind(b.device_fingerprint, ProblemKey(b.problem), b.problem.row_stride, b.name, b.median_us, b.created)
      .Run();
}

// ---- row readers ----

// 0 when there is no such measurement.
StatusOr<int64_t> SqliteCache::FindMeasurementId(const MeasurementKey& k) const {
  TOPK_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db(),
                                              "SELECT id FROM measurements WHERE device = ? AND variant_id = ? AND "
                                              "problem_key = ? AND input_dist = ? AND l2_mode = ?"));
  TOPK_ASSIGN_OR_RETURN(bool row, s.Bind(k.device, k.variant_id, k.problem_key, k.input_dist, k.l2_mode).Step());
  return row ? s.Int(0) : int64_t{0};
}

// A version-1 file (read-only) has no spread columns: they read as 0.
std::string SqliteCache::MeasurementSelect() const {
  return std::string(
             "SELECT m.id, m.device, m.variant_id, v.config_json, m.problem_key, m.row_stride, m.input_dist, "
             "m.l2_mode, m.outcome, m.median_us, ") +
         (version_ >= 2 ? "m.p10_us, m.p90_us, m.min_us" : "0, 0, 0") +
         ", m.repetitions, m.samples_json, m.verified, m.message, m.tune_run, m.created "
         "FROM measurements m LEFT JOIN variants v ON v.id = m.variant_id";
}

Status SqliteCache::ForEachMeasurement(const std::string& sql, const std::vector<std::string>& args,
                                       const std::function<Status(Measurement)>& fn) const {
  TOPK_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db(), sql));
  s.BindTexts(args);
  while (true) {
    TOPK_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return Status::Ok();
    Measurement m;
    m.id = s.Int(0);
    m.device_fingerprint = s.Text(1);
    m.variant_id = s.Text(2);
    TOPK_ASSIGN_OR_RETURN(m.config, ConfigFromRow(s, 3, m.variant_id));
    TOPK_ASSIGN_OR_RETURN(m.problem, ProblemFromRow(s.Text(4), s.Int(5)));
    m.input_dist = s.Text(6);
    m.l2_mode = s.Text(7);
    auto outcome = ParseOutcome(s.Text(8));
    if (!outcome.ok())
      return DataLoss("Measurements", "row " + std::to_string(m.id) + ": " + outcome.status().message());
    m.outcome = *outcome;
    m.median_us = s.Real(9);
    m.p10_us = s.Real(10);
    m.p90_us = s.Real(11);
    m.min_us = s.Real(12);
    m.repetitions = static_cast<int>(s.Int(13));
    const json samples = json::parse(s.Text(14), nullptr, /*allow_exceptions=*/false);
    auto parsed = SamplesFromJson(samples);
    if (!parsed.ok()) return parsed.status().WithContext("measurement row " + std::to_string(m.id));
    m.samples_us = std::move(parsed).value();
    m.verified = s.Int(15) != 0;
    m.message = s.Text(16);
    m.tune_run = s.Text(17);
    m.created = s.Text(18);
    TOPK_RETURN_IF_ERROR(fn(std::move(m)));
  }
}

// `skip_unreadable`: rows whose config does not parse (a kernel family
// this build does not have) are left out instead of failing the query.
Status SqliteCache::QueryWinners(
    const std::string& sql, const std::vector<std::string>& args, std::vector<Winner>* out,
    const std::function<Status(const Winner&, const std::optional<MeasurementKey>&)>& fn,
    bool skip_unreadable) const {
  TOPK_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db(), sql));
  s.BindTexts(args);
  while (true) {
    TOPK_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return Status::Ok();
    StatusOr<Winner> parsed = WinnerFromRow(s);
    if (!parsed.ok() && skip_unreadable) continue;
    TOPK_ASSIGN_OR_RETURN(Winner w, std::move(parsed));
    if (fn) {
      std::optional<MeasurementKey> key;
      if (!s.IsNull(11)) key = MeasurementKey{s.Text(11), s.Text(12), s.Text(13), s.Text(14), s.Text(15)};
      TOPK_RETURN_IF_ERROR(fn(w, key));
    }
    if (out) out->push_back(std::move(w));
  }
}

}  // namespace topk::cache::detail
