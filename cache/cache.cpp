// The SQLite implementation of topk::cache::Cache.
//
// Layout of this file: helpers (time, JSON fields), the SqliteCache class
// (open and migrate, transactions, row readers and writers, the public
// methods), and the JSON Lines codec shared by export, import and merge:
// Merge is "read the other file's rows as export objects and import them",
// so the two paths cannot disagree about conflict rules.
#include "cache/cache.hpp"

#include <sqlite3.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <mutex>
#include <new>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "cache/base64.hpp"
#include "cache/schema.hpp"
#include "cache/sqlite_util.hpp"

namespace topk::cache {

namespace {

using internal::BlobRef;
using internal::Exec;
using internal::QueryInt;
using internal::SqliteError;
using internal::Stmt;
using nlohmann::json;
namespace fs = std::filesystem;

// How long one SQLite call waits for another connection's lock before it
// returns SQLITE_BUSY. A tuner commits a row at a time, so 10 s only runs out
// when another process holds the write lock for long (a large merge or
// import); the write path then retries (kBusyRetries).
constexpr int kBusyTimeoutMs = 10000;
constexpr int kBusyRetries = 6;

// "2025-01-31T12:00:00.123Z": fixed width, so string order is time order.
std::string NowIso8601() {
  using namespace std::chrono;
  const int64_t ms = duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char date[24];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
  const int frac = static_cast<int>(ms % 1000);
  std::string out = date;
  out += '.';
  out += static_cast<char>('0' + frac / 100);
  out += static_cast<char>('0' + frac / 10 % 10);
  out += static_cast<char>('0' + frac % 10);
  out += 'Z';
  return out;
}

Status Unavailable(const std::string& where, const std::string& msg) { return Status(Code::kUnavailable, where, msg); }
Status FailedPrecondition(const std::string& where, const std::string& msg) {
  return Status(Code::kFailedPrecondition, where, msg);
}
Status DataLoss(const std::string& where, const std::string& msg) { return Status(Code::kDataLoss, where, msg); }

struct DbCloser {
  // close_v2 defers the close until every statement is finalized instead of
  // failing with SQLITE_BUSY; our statements are RAII, so it closes now.
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using DbPtr = std::unique_ptr<sqlite3, DbCloser>;

// Refuses, before SQLite sees the file, anything that is not an SQLite
// database: SQLite would only notice at the first read, and a "repair" or a
// journal-mode change must never touch someone else's file.
Status CheckSqliteHeader(const std::string& path, const char* where) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Unavailable(where, "cannot read '" + path + "'");
  static constexpr char kMagic[16] = {'S', 'Q', 'L', 'i', 't', 'e', ' ', 'f', 'o', 'r', 'm', 'a', 't', ' ', '3', '\0'};
  char head[16] = {};
  in.read(head, sizeof head);
  const std::streamsize got = in.gcount();
  if (got == 0) return Status::Ok();  // an empty file is an empty database
  if (got < 16 || std::memcmp(head, kMagic, sizeof kMagic) != 0) {
    return DataLoss(where, "'" + path + "' is not an SQLite database (no 'SQLite format 3' header); left untouched");
  }
  return Status::Ok();
}

// Whether the file's header says WAL mode (bytes 18 and 19, the write and
// read format versions, are 2; 1 is the rollback journal). An empty file or
// one too short to say is not.
bool HeaderSaysWal(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[20] = {};
  in.read(head, sizeof head);
  return in.gcount() == sizeof head && head[18] == 2 && head[19] == 2;
}

// The SQLite URI of a file-system path: every byte outside the unreserved
// set is percent-encoded, so that nothing in a path ('?', '#', '%', a
// leading "file:" or ":memory:") is read as URI syntax. An absolute path
// gets an empty authority ("file:///a/b"), so "//x" cannot name a host.
std::string FileUri(const std::string& path, const std::string& query) {
  static const char* const kHex = "0123456789ABCDEF";
  std::string uri = path.empty() || path[0] != '/' ? "file:" : "file://";
  for (const unsigned char ch : path) {
    if (std::isalnum(ch) || ch == '/' || ch == '.' || ch == '_' || ch == '-' || ch == '~') {
      uri += static_cast<char>(ch);
    } else {
      uri += '%';
      uri += kHex[ch >> 4];
      uri += kHex[ch & 15];
    }
  }
  if (!query.empty()) uri += "?" + query;
  return uri;
}

// Whether this process may write both the file and its directory (where
// SQLite keeps the -wal and -shm files). access(2) also answers EROFS for a
// read-only mount.
bool CanWriteFileAndDir(const std::string& path) {
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  return ::access(path.c_str(), W_OK) == 0 && ::access(dir.c_str(), W_OK) == 0;
}

// How a read-only open reaches the file. Each leaves nothing beside a file
// that it did not find there:
//   kShared     a -wal file exists: another connection has the file open
//               (or one stopped without cleaning up). mode=ro shares its WAL
//               and shared memory, so every committed row is seen.
//   kNoWrites   a WAL file with no -wal, in a folder we may write: an
//               ordinary connection with query_only set. SQLite makes the
//               -wal and -shm files while it is open and, as the last
//               connection, removes them at close (a read-only connection
//               could not, and would leave them behind). A writer that
//               starts meanwhile shares them and sees this reader.
//   kImmutable  a WAL file with no -wal that we may not write (read-only
//               folder or mount, write-protected file): without a -wal
//               every commit is in the main file, and immutable=1 reads it
//               with no lock and no -shm. The price: a writer (someone with
//               write permission) that starts later is not seen.
//   kRollback   a rollback-journal file: mode=ro takes shared locks and
//               creates nothing.
enum class ReadAccess { kShared, kNoWrites, kImmutable, kRollback };

ReadAccess ChooseReadAccess(const std::string& path) {
  std::error_code ec;
  if (fs::exists(path + "-wal", ec)) return ReadAccess::kShared;
  if (!HeaderSaysWal(path)) return ReadAccess::kRollback;
  return CanWriteFileAndDir(path) ? ReadAccess::kNoWrites : ReadAccess::kImmutable;
}

// PRAGMA integrity_check / quick_check: Ok, or kDataLoss with the first
// problems SQLite lists.
Status RunIntegrityPragma(sqlite3* db, const char* pragma) {
  TOPK_ASSIGN_OR_RETURN(Stmt stmt, Stmt::Prepare(db, std::string("PRAGMA ") + pragma));
  std::string problems;
  int rows = 0;
  while (true) {
    TOPK_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    const std::string line = stmt.Text(0);
    if (line == "ok") continue;
    if (++rows <= 5) problems += (problems.empty() ? "" : "; ") + line;
  }
  if (rows == 0) return Status::Ok();
  return DataLoss(pragma, std::string("failed ") + pragma + " (" + std::to_string(rows) + " problems): " + problems);
}

// The same, naming the file in the message.
Status CheckIntegrity(sqlite3* db, const char* pragma, const std::string& path) {
  Status s = RunIntegrityPragma(db, pragma);
  return s.ok() ? s : s.WithContext("cache '" + path + "'");
}

// ---- JSON fields ---------------------------------------------------------
//
// Import and merge read rows as JSON objects. A missing or mistyped field
// throws FieldError, which ApplyRow turns into a Status; the exception never
// leaves this file.

struct FieldError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const json& At(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) throw FieldError(std::string("missing field '") + key + "'");
  return *it;
}

std::string Str(const json& j, const char* key) {
  const json& v = At(j, key);
  if (!v.is_string()) throw FieldError(std::string("field '") + key + "' must be a string");
  return v.get<std::string>();
}

int64_t Int(const json& j, const char* key) {
  const json& v = At(j, key);
  if (!v.is_number_integer()) throw FieldError(std::string("field '") + key + "' must be an integer");
  return v.get<int64_t>();
}

int Int32(const json& j, const char* key) {
  const int64_t v = Int(j, key);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    throw FieldError(std::string("field '") + key + "' is out of range");
  }
  return static_cast<int>(v);
}

// JSON has no NaN: nlohmann writes it as null, so null reads back as NaN.
double NumberOrNaN(const json& v, const std::string& what) {
  if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (!v.is_number()) throw FieldError(what + " must be a number");
  return v.get<double>();
}

double Real(const json& j, const char* key) { return NumberOrNaN(At(j, key), std::string("field '") + key + "'"); }

bool Bool(const json& j, const char* key) {
  const json& v = At(j, key);
  if (!v.is_boolean()) throw FieldError(std::string("field '") + key + "' must be true or false");
  return v.get<bool>();
}

// Throws FieldError with the Status's message when it is not ok.
template <typename T>
T ValueOrThrow(StatusOr<T> s) {
  if (!s.ok()) throw FieldError(s.status().message());
  return std::move(s).value();
}

// Dumps without throwing on invalid UTF-8 (a compiler log may hold any
// bytes): such bytes become U+FFFD.
std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string SamplesToJson(const std::vector<double>& samples) { return Dump(json(samples)); }

StatusOr<std::vector<double>> SamplesFromJson(const json& j) {
  if (!j.is_array()) return DataLoss("samples", "samples must be a JSON array");
  std::vector<double> out;
  out.reserve(j.size());
  for (const json& v : j) {
    if (!v.is_number() && !v.is_null()) return DataLoss("samples", "samples must be numbers");
    out.push_back(v.is_null() ? std::numeric_limits<double>::quiet_NaN() : v.get<double>());
  }
  return out;
}

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
constexpr const char* kDeviceColumns =
    "fingerprint, name, cc_major, cc_minor, sm_count, l2_bytes, driver_version, compiler_version, info_json, "
    "updated";
constexpr const char* kBinaryColumns =
    "source_hash, arch, options, compiler_version, kernel_key, lowered_name, cubin, registers, spill_stores, "
    "spill_loads, stack_bytes, compile_ms, log, created";
constexpr const char* kWinnerSelect =
    "SELECT w.device, w.problem_key, w.row_stride, w.variant_id, v.config_json, w.median_us, w.default_us, "
    "w.baseline_us, w.baseline_name, w.measurement_id, w.updated, "
    "m.device, m.variant_id, m.problem_key, m.input_dist, m.l2_mode "
    "FROM winners w LEFT JOIN variants v ON v.id = w.variant_id "
    "LEFT JOIN measurements m ON m.id = w.measurement_id";
constexpr const char* kBaselineSelect =
    "SELECT device, problem_key, row_stride, name, median_us, created FROM baselines";

DeviceRecord DeviceFromRow(const Stmt& s) {
  DeviceRecord d;
  d.fingerprint = s.Text(0);
  d.name = s.Text(1);
  d.cc_major = static_cast<int>(s.Int(2));
  d.cc_minor = static_cast<int>(s.Int(3));
  d.sm_count = static_cast<int>(s.Int(4));
  d.l2_bytes = s.Int(5);
  d.driver_version = static_cast<int>(s.Int(6));
  d.compiler_version = s.Text(7);
  d.info_json = s.Text(8);
  return d;
}

BinaryRecord BinaryFromRow(const Stmt& s) {
  BinaryRecord b;
  b.source_hash = s.Text(0);
  b.arch = s.Text(1);
  b.options = s.Text(2);
  b.compiler_version = s.Text(3);
  b.kernel_key = s.Text(4);
  b.lowered_name = s.Text(5);
  b.cubin = s.Blob(6);
  b.registers = static_cast<int>(s.Int(7));
  b.spill_stores = static_cast<int>(s.Int(8));
  b.spill_loads = static_cast<int>(s.Int(9));
  b.stack_bytes = static_cast<int>(s.Int(10));
  b.compile_ms = s.Real(11);
  b.log = s.Text(12);
  return b;
}

// A stored problem: its key plus the stride column.
StatusOr<Problem> ProblemFromRow(const std::string& key, int64_t row_stride) {
  auto p = ParseProblemKey(key);
  if (!p.ok()) return DataLoss("cache row", p.status().message());
  p->row_stride = row_stride;
  return p;
}

// The Config of a variant: from its variants row when there is one, else
// from the id (ids are built from every parameter, so they parse back).
StatusOr<gen::Config> ConfigFromRow(const Stmt& s, int json_col, const std::string& variant_id) {
  if (!s.IsNull(json_col)) {
    const json j = json::parse(s.Text(json_col), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return DataLoss("cache row", "variant '" + variant_id + "' has malformed config JSON");
    auto c = gen::Config::FromJson(j);
    if (!c.ok()) return DataLoss("cache row", "variant '" + variant_id + "': " + c.status().message());
    return c;
  }
  auto c = gen::Config::FromId(variant_id);
  if (!c.ok()) {
    return DataLoss("cache row", "variant '" + variant_id +
                                     "' has no variants row and its id does not parse: " + c.status().message());
  }
  return c;
}

StatusOr<Winner> WinnerFromRow(const Stmt& s) {
  Winner w;
  w.device_fingerprint = s.Text(0);
  TOPK_ASSIGN_OR_RETURN(w.problem, ProblemFromRow(s.Text(1), s.Int(2)));
  w.variant_id = s.Text(3);
  TOPK_ASSIGN_OR_RETURN(w.config, ConfigFromRow(s, 4, w.variant_id));
  w.median_us = s.Real(5);
  w.default_us = s.Real(6);
  w.baseline_us = s.Real(7);
  w.baseline_name = s.Text(8);
  w.measurement_id = s.Int(9);
  w.updated = s.Text(10);
  return w;
}

StatusOr<Baseline> BaselineFromRow(const Stmt& s) {
  Baseline b;
  b.device_fingerprint = s.Text(0);
  TOPK_ASSIGN_OR_RETURN(b.problem, ProblemFromRow(s.Text(1), s.Int(2)));
  b.name = s.Text(3);
  b.median_us = s.Real(4);
  b.created = s.Text(5);
  return b;
}

// ---- rows as JSON Lines objects ------------------------------------------

json DeviceToJson(const DeviceRecord& d) {
  return {{"table", "devices"},
          {"fingerprint", d.fingerprint},
          {"name", d.name},
          {"cc_major", d.cc_major},
          {"cc_minor", d.cc_minor},
          {"sm_count", d.sm_count},
          {"l2_bytes", d.l2_bytes},
          {"driver_version", d.driver_version},
          {"compiler_version", d.compiler_version},
          {"info_json", d.info_json}};
}

json BinaryToJson(const BinaryRecord& b) {
  return {{"table", "binaries"},
          {"source_hash", b.source_hash},
          {"arch", b.arch},
          {"options", b.options},
          {"compiler_version", b.compiler_version},
          {"kernel_key", b.kernel_key},
          {"lowered_name", b.lowered_name},
          {"registers", b.registers},
          {"spill_stores", b.spill_stores},
          {"spill_loads", b.spill_loads},
          {"stack_bytes", b.stack_bytes},
          {"compile_ms", b.compile_ms},
          {"log", b.log},
          {"cubin_base64", internal::Base64Encode(b.cubin)}};
}

json MeasurementToJson(const Measurement& m) {
  return {{"table", "measurements"},
          {"id", m.id},
          {"device", m.device_fingerprint},
          {"variant_id", m.variant_id},
          {"problem", ProblemKey(m.problem)},
          {"row_stride", m.problem.row_stride},
          {"input_dist", m.input_dist},
          {"l2_mode", m.l2_mode},
          {"outcome", OutcomeName(m.outcome)},
          {"median_us", m.median_us},
          {"p10_us", m.p10_us},
          {"p90_us", m.p90_us},
          {"min_us", m.min_us},
          {"repetitions", m.repetitions},
          {"samples_us", m.samples_us},
          {"verified", m.verified},
          {"message", m.message},
          {"tune_run", m.tune_run},
          {"created", m.created}};
}

json WinnerToJson(const Winner& w, const std::optional<MeasurementKey>& key) {
  json j = {{"table", "winners"},
            {"device", w.device_fingerprint},
            {"problem", ProblemKey(w.problem)},
            {"row_stride", w.problem.row_stride},
            {"variant_id", w.variant_id},
            {"median_us", w.median_us},
            {"default_us", w.default_us},
            {"baseline_us", w.baseline_us},
            {"baseline_name", w.baseline_name},
            {"measurement_id", w.measurement_id},
            {"updated", w.updated}};
  if (key) {
    j["measurement"] = {{"device", key->device},
                        {"variant_id", key->variant_id},
                        {"problem", key->problem_key},
                        {"input_dist", key->input_dist},
                        {"l2_mode", key->l2_mode}};
  }
  return j;
}

json BaselineToJson(const Baseline& b) {
  return {{"table", "baselines"},
          {"device", b.device_fingerprint},
          {"problem", ProblemKey(b.problem)},
          {"row_stride", b.problem.row_stride},
          {"name", b.name},
          {"median_us", b.median_us},
          {"created", b.created}};
}

Problem ProblemFromJson(const json& j) {
  Problem p = ValueOrThrow(ParseProblemKey(Str(j, "problem")));
  p.row_stride = j.contains("row_stride") ? Int(j, "row_stride") : 0;
  return p;
}

class SqliteCache final : public Cache {
 public:
  using RowFn = std::function<Status(const json&)>;

  static StatusOr<std::unique_ptr<SqliteCache>> OpenFile(const std::string& path, bool read_only);

  const std::string& path() const override { return path_; }
  int schema_version() const override { return version_; }

  Status PutDevice(const DeviceRecord& d) override {
    return Locked("PutDevice", [&]() -> Status {
      if (d.fingerprint.empty()) return InvalidArgument("PutDevice", "empty device fingerprint");
      return WriteTransaction("PutDevice", [&] { return WriteDevice(d, NowIso8601(), WriteMode::kPut); });
    });
  }

  StatusOr<std::vector<DeviceRecord>> Devices() const override {
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

  StatusOr<std::optional<DeviceRecord>> FindDevice(const std::string& fingerprint) const override {
    return Locked("FindDevice", [&]() -> StatusOr<std::optional<DeviceRecord>> {
      TOPK_ASSIGN_OR_RETURN(
          Stmt s, Stmt::Prepare(db(), std::string("SELECT ") + kDeviceColumns + " FROM devices WHERE fingerprint = ?"));
      TOPK_ASSIGN_OR_RETURN(bool row, s.Bind(fingerprint).Step());
      if (!row) return std::optional<DeviceRecord>();
      return std::optional<DeviceRecord>(DeviceFromRow(s));
    });
  }

  Status PutVariant(const gen::Config& config, const std::string& source_hash) override {
    return Locked("PutVariant", [&]() -> Status {
      const VariantRecord v{config.Id(), config.KernelKey(), config, source_hash};
      return WriteTransaction("PutVariant", [&] { return WriteVariant(v, WriteMode::kPut); });
    });
  }

  StatusOr<std::optional<VariantRecord>> FindVariant(const std::string& variant_id) const override {
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

  Status PutBinary(const BinaryRecord& b) override {
    return Locked("PutBinary", [&]() -> Status {
      return WriteTransaction("PutBinary", [&] { return WriteBinary(b, NowIso8601(), WriteMode::kPut); });
    });
  }

  StatusOr<std::optional<BinaryRecord>> FindBinary(const std::string& source_hash, const std::string& arch,
                                                   const std::string& options,
                                                   const std::string& compiler_version) const override {
    return Locked("FindBinary", [&]() -> StatusOr<std::optional<BinaryRecord>> {
      TOPK_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db(), std::string("SELECT ") + kBinaryColumns +
                                                            " FROM binaries WHERE source_hash = ? AND arch = ? AND "
                                                            "options = ? AND compiler_version = ?"));
      TOPK_ASSIGN_OR_RETURN(bool row, s.Bind(source_hash, arch, options, compiler_version).Step());
      if (!row) return std::optional<BinaryRecord>();
      return std::optional<BinaryRecord>(BinaryFromRow(s));
    });
  }

  StatusOr<int64_t> CountBinaries() const override {
    return Locked("CountBinaries", [&] { return QueryInt(db(), "SELECT count(*) FROM binaries"); });
  }

  StatusOr<int64_t> PutMeasurement(const Measurement& m) override {
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

  StatusOr<bool> HasMeasurement(const std::string& device_fingerprint, const std::string& variant_id, const Problem& p,
                                const std::string& input_dist, const std::string& l2_mode) const override {
    return Locked("HasMeasurement", [&]() -> StatusOr<bool> {
      TOPK_ASSIGN_OR_RETURN(int64_t id,
                            FindMeasurementId({device_fingerprint, variant_id, ProblemKey(p), input_dist, l2_mode}));
      return id != 0;
    });
  }

  StatusOr<std::vector<Measurement>> Measurements(const std::string& device_fingerprint,
                                                  const Problem* p) const override {
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

  StatusOr<int64_t> CountMeasurements() const override {
    return Locked("CountMeasurements", [&] { return QueryInt(db(), "SELECT count(*) FROM measurements"); });
  }

  Status PutWinner(const Winner& w) override {
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

  StatusOr<std::optional<Winner>> FindWinner(const std::string& device_fingerprint, const Problem& p) const override {
    return Locked("FindWinner", [&]() -> StatusOr<std::optional<Winner>> {
      std::vector<Winner> found;
      TOPK_RETURN_IF_ERROR(QueryWinners(std::string(kWinnerSelect) + " WHERE w.device = ? AND w.problem_key = ?",
                                        {device_fingerprint, ProblemKey(p)}, &found));
      if (found.empty()) return std::optional<Winner>();
      return std::optional<Winner>(std::move(found.front()));
    });
  }

  StatusOr<std::vector<Winner>> Winners(const std::string& device_fingerprint) const override {
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

  StatusOr<std::vector<Winner>> WinnersLike(const std::vector<std::string>& device_fingerprints,
                                            const Problem& p) const override {
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

  Status PutBaseline(const Baseline& b) override {
    return Locked("PutBaseline", [&]() -> Status {
      if (b.device_fingerprint.empty()) return InvalidArgument("PutBaseline", "empty device fingerprint");
      if (b.name.empty()) return InvalidArgument("PutBaseline", "empty baseline name");
      Baseline row = b;
      row.created = NowIso8601();
      return WriteTransaction("PutBaseline", [&] { return WriteBaseline(row, WriteMode::kPut); });
    });
  }

  StatusOr<std::vector<Baseline>> Baselines(const std::string& device_fingerprint) const override {
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

  Status ExportJsonl(const std::string& out_path, bool include_binaries) const override {
    return Locked("ExportJsonl", [&]() -> Status { return Export(out_path, include_binaries); });
  }
  Status WriteJsonl(std::ostream& out, bool include_binaries) const override {
    return Locked("WriteJsonl", [&]() -> Status { return WriteRows(out, include_binaries, "the output stream"); });
  }

  Status ImportJsonl(const std::string& in_path) override {
    return Locked("ImportJsonl", [&]() -> Status { return Import(in_path); });
  }

  Status Merge(const std::string& other_path) override {
    return Locked("Merge", [&]() -> Status {
      TOPK_RETURN_IF_ERROR(CheckWritable("Merge"));
      // Read-only: the other file is never created, migrated or modified,
      // and its version / format checks are the ones Open makes.
      auto other = OpenFile(other_path, /*read_only=*/true);
      if (!other.ok()) return other.status().WithContext("cannot merge '" + other_path + "'");
      // One transaction: a merge that fails half-way leaves no half.
      return WriteTransaction("Merge", [&] {
        return (*other)->ForEachRow(/*include_binaries=*/true, [&](const json& row) -> Status {
          Status s = ApplyRow(row);
          return s.ok() ? s : s.WithContext("merging '" + other_path + "'");
        });
      });
    });
  }

  Status IntegrityCheck() const override {
    return Locked("IntegrityCheck", [&] { return CheckIntegrity(db(), "integrity_check", path_); });
  }

  // Calls `fn` with every row as its JSON Lines object (the first a "meta"
  // object), table by table, from one read snapshot.
  Status ForEachRow(bool include_binaries, const RowFn& fn) const {
    return Locked("ForEachRow", [&] { return ForEachRowUnlocked(include_binaries, fn); });
  }

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

  Status CheckWritable(const char* where) const {
    if (read_only_) return FailedPrecondition(where, "cache '" + path_ + "' is opened read-only");
    return Status::Ok();
  }

  // Runs `body` in a write transaction. BEGIN IMMEDIATE takes the write lock
  // up front: with a deferred BEGIN two writers could both read, then one
  // would fail to upgrade its lock with SQLITE_BUSY mid-transaction, where
  // waiting cannot help. The busy timeout waits for the lock; past it we
  // retry a few times before giving up with kUnavailable.
  Status WriteTransaction(const char* where, const std::function<Status()>& body) {
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

  void Rollback() {
    // Fails harmlessly when SQLite already rolled back (e.g. on SQLITE_FULL).
    if (!sqlite3_get_autocommit(db())) sqlite3_exec(db(), "ROLLBACK", nullptr, nullptr, nullptr);
  }

  // A read transaction gives multi-statement reads (export) one snapshot.
  Status ReadTransaction(const std::function<Status()>& body) const {
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

  // Brings an older (or empty) file to kSchemaVersion at Open.
  Status MigrateOnOpen() {
    return WriteTransaction("Cache::Open", [&]() -> Status {
      // Read again under the write lock: another process may have migrated
      // the file between our first look and now.
      TOPK_ASSIGN_OR_RETURN(int64_t v, QueryInt(db(), "PRAGMA user_version"));
      if (v > kSchemaVersion) return NewerSchema(path_, v, "Cache::Open");
      if (v == kSchemaVersion) return Status::Ok();
      if (v == 0) {
        TOPK_ASSIGN_OR_RETURN(bool has_tables, internal::HasAnySchemaObject(db()));
        if (has_tables) return NotACache(path_, "Cache::Open");
      }
      return internal::MigrateToCurrent(db(), static_cast<int>(v), NowIso8601());
    });
  }

  static Status NewerSchema(const std::string& path, int64_t v, const char* where) {
    return FailedPrecondition(where, "cache '" + path + "' has schema version " + std::to_string(v) +
                                         ", newer than version " + std::to_string(kSchemaVersion) +
                                         " that this build reads; use a newer topk-tune or another cache file "
                                         "(the file was left untouched)");
  }
  static Status NotACache(const std::string& path, const char* where) {
    return FailedPrecondition(where, "'" + path +
                                         "' is an SQLite database but not a topk-tune cache (it has tables and "
                                         "no schema version); left untouched");
  }

  // ---- row writers: run inside a write transaction ----

  Status WriteDevice(const DeviceRecord& d, const std::string& updated, WriteMode mode) {
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

  Status WriteVariant(const VariantRecord& v, WriteMode mode) {
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
  Status InsertVariantIfNew(const std::string& id, const gen::Config& c) {
    TOPK_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db(),
                                                "INSERT INTO variants (id, kernel_key, config_json, source_hash) "
                                                "VALUES (?, ?, ?, '') ON CONFLICT (id) DO NOTHING"));
    return s.Bind(id, c.KernelKey(), Dump(c.ToJson())).Run();
  }

  Status WriteBinary(const BinaryRecord& b, const std::string& created, WriteMode mode) {
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
  StatusOr<int64_t> WriteMeasurement(const Measurement& m, WriteMode mode) {
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

  Status WriteWinner(const Winner& w, WriteMode mode) {
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

  Status WriteBaseline(const Baseline& b, WriteMode mode) {
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
  StatusOr<int64_t> FindMeasurementId(const MeasurementKey& k) const {
    TOPK_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db(),
                                                "SELECT id FROM measurements WHERE device = ? AND variant_id = ? AND "
                                                "problem_key = ? AND input_dist = ? AND l2_mode = ?"));
    TOPK_ASSIGN_OR_RETURN(bool row, s.Bind(k.device, k.variant_id, k.problem_key, k.input_dist, k.l2_mode).Step());
    return row ? s.Int(0) : int64_t{0};
  }

  // A version-1 file (read-only) has no spread columns: they read as 0.
  std::string MeasurementSelect() const {
    return std::string(
               "SELECT m.id, m.device, m.variant_id, v.config_json, m.problem_key, m.row_stride, m.input_dist, "
               "m.l2_mode, m.outcome, m.median_us, ") +
           (version_ >= 2 ? "m.p10_us, m.p90_us, m.min_us" : "0, 0, 0") +
           ", m.repetitions, m.samples_json, m.verified, m.message, m.tune_run, m.created "
           "FROM measurements m LEFT JOIN variants v ON v.id = m.variant_id";
  }

  Status ForEachMeasurement(const std::string& sql, const std::vector<std::string>& args,
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
  Status QueryWinners(
      const std::string& sql, const std::vector<std::string>& args, std::vector<Winner>* out,
      const std::function<Status(const Winner&, const std::optional<MeasurementKey>&)>& fn = nullptr,
      bool skip_unreadable = false) const {
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

  // ---- JSON Lines ----

  Status ForEachRowUnlocked(bool include_binaries, const RowFn& fn) const {
    return ReadTransaction([&]() -> Status {
      TOPK_RETURN_IF_ERROR(fn(json{
          {"table", "meta"}, {"application", "topk-tune"}, {"schema_version", version_}, {"exported", NowIso8601()}}));
      {
        TOPK_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db(), std::string("SELECT ") + kDeviceColumns +
                                                              " FROM devices ORDER BY fingerprint"));
        while (true) {
          TOPK_ASSIGN_OR_RETURN(bool row, s.Step());
          if (!row) break;
          json j = DeviceToJson(DeviceFromRow(s));
          j["updated"] = s.Text(9);
          TOPK_RETURN_IF_ERROR(fn(j));
        }
      }
      {
        TOPK_ASSIGN_OR_RETURN(
            Stmt s, Stmt::Prepare(db(), "SELECT id, kernel_key, config_json, source_hash FROM variants ORDER BY id"));
        while (true) {
          TOPK_ASSIGN_OR_RETURN(bool row, s.Step());
          if (!row) break;
          const std::string id = s.Text(0);
          TOPK_ASSIGN_OR_RETURN(gen::Config c, ConfigFromRow(s, 2, id));
          TOPK_RETURN_IF_ERROR(fn(json{{"table", "variants"},
                                       {"id", id},
                                       {"kernel_key", s.Text(1)},
                                       {"config", c.ToJson()},
                                       {"source_hash", s.Text(3)}}));
        }
      }
      if (include_binaries) {
        TOPK_ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db(), std::string("SELECT ") + kBinaryColumns +
                                                              " FROM binaries ORDER BY source_hash, arch, options, "
                                                              "compiler_version"));
        while (true) {
          TOPK_ASSIGN_OR_RETURN(bool row, s.Step());
          if (!row) break;
          json j = BinaryToJson(BinaryFromRow(s));
          j["created"] = s.Text(13);
          TOPK_RETURN_IF_ERROR(fn(j));
        }
      }
      TOPK_RETURN_IF_ERROR(ForEachMeasurement(MeasurementSelect() + " ORDER BY m.id", {},
                                              [&](Measurement m) { return fn(MeasurementToJson(m)); }));
      TOPK_RETURN_IF_ERROR(QueryWinners(
          std::string(kWinnerSelect) + " ORDER BY w.device, w.problem_key", {}, nullptr,
          [&](const Winner& w, const std::optional<MeasurementKey>& key) { return fn(WinnerToJson(w, key)); }));
      if (version_ >= 2) {
        TOPK_ASSIGN_OR_RETURN(
            Stmt s, Stmt::Prepare(db(), std::string(kBaselineSelect) + " ORDER BY device, problem_key, name"));
        while (true) {
          TOPK_ASSIGN_OR_RETURN(bool row, s.Step());
          if (!row) break;
          TOPK_ASSIGN_OR_RETURN(Baseline b, BaselineFromRow(s));
          TOPK_RETURN_IF_ERROR(fn(BaselineToJson(b)));
        }
      }
      return Status::Ok();
    });
  }

  // Writes one exported row into this cache with the merge rule. Runs inside
  // the caller's write transaction. A malformed row is kInvalidArgument.
  Status ApplyRow(const json& j) {
    try {
      if (!j.is_object()) throw FieldError("expected a JSON object");
      const std::string table = Str(j, "table");
      if (table == "meta") {
        const int64_t v = Int(j, "schema_version");
        if (v > kSchemaVersion) {
          throw FieldError("exported from schema version " + std::to_string(v) + ", newer than " +
                           std::to_string(kSchemaVersion));
        }
        return Status::Ok();
      }
      if (table == "devices") {
        DeviceRecord d;
        d.fingerprint = Str(j, "fingerprint");
        if (d.fingerprint.empty()) throw FieldError("empty device fingerprint");
        d.name = Str(j, "name");
        d.cc_major = Int32(j, "cc_major");
        d.cc_minor = Int32(j, "cc_minor");
        d.sm_count = Int32(j, "sm_count");
        d.l2_bytes = Int(j, "l2_bytes");
        d.driver_version = Int32(j, "driver_version");
        d.compiler_version = Str(j, "compiler_version");
        d.info_json = Str(j, "info_json");
        return WriteDevice(d, j.contains("updated") ? Str(j, "updated") : NowIso8601(), WriteMode::kMerge);
      }
      if (table == "variants") {
        VariantRecord v;
        v.id = Str(j, "id");
        v.config = ValueOrThrow(gen::Config::FromJson(At(j, "config")));
        v.kernel_key = Str(j, "kernel_key");
        v.source_hash = Str(j, "source_hash");
        return WriteVariant(v, WriteMode::kMerge);
      }
      if (table == "binaries") {
        BinaryRecord b;
        b.source_hash = Str(j, "source_hash");
        b.arch = Str(j, "arch");
        b.options = Str(j, "options");
        b.compiler_version = Str(j, "compiler_version");
        b.kernel_key = Str(j, "kernel_key");
        b.lowered_name = Str(j, "lowered_name");
        auto cubin = internal::Base64Decode(Str(j, "cubin_base64"));
        if (!cubin) throw FieldError("field 'cubin_base64' is not valid base64");
        b.cubin = std::move(*cubin);
        b.registers = Int32(j, "registers");
        b.spill_stores = Int32(j, "spill_stores");
        b.spill_loads = Int32(j, "spill_loads");
        b.stack_bytes = Int32(j, "stack_bytes");
        b.compile_ms = Real(j, "compile_ms");
        b.log = Str(j, "log");
        return WriteBinary(b, Str(j, "created"), WriteMode::kMerge);
      }
      if (table == "measurements") {
        Measurement m;
        m.device_fingerprint = Str(j, "device");
        if (m.device_fingerprint.empty()) throw FieldError("empty device fingerprint");
        m.variant_id = Str(j, "variant_id");
        m.problem = ProblemFromJson(j);
        m.input_dist = Str(j, "input_dist");
        m.l2_mode = Str(j, "l2_mode");
        m.outcome = ValueOrThrow(ParseOutcome(Str(j, "outcome")));
        m.median_us = Real(j, "median_us");
        m.p10_us = Real(j, "p10_us");
        m.p90_us = Real(j, "p90_us");
        m.min_us = Real(j, "min_us");
        m.repetitions = Int32(j, "repetitions");
        const json& samples = At(j, "samples_us");
        if (!samples.is_array()) throw FieldError("field 'samples_us' must be an array");
        for (const json& v : samples) m.samples_us.push_back(NumberOrNaN(v, "field 'samples_us'"));
        m.verified = Bool(j, "verified");
        m.message = Str(j, "message");
        m.tune_run = Str(j, "tune_run");
        m.created = Str(j, "created");
        return WriteMeasurement(m, WriteMode::kMerge).status();
      }
      if (table == "winners") {
        Winner w;
        w.device_fingerprint = Str(j, "device");
        if (w.device_fingerprint.empty()) throw FieldError("empty device fingerprint");
        w.problem = ProblemFromJson(j);
        w.variant_id = Str(j, "variant_id");
        w.median_us = Real(j, "median_us");
        w.default_us = Real(j, "default_us");
        w.baseline_us = Real(j, "baseline_us");
        w.baseline_name = Str(j, "baseline_name");
        w.updated = Str(j, "updated");
        TOPK_RETURN_IF_ERROR(CheckImportedWinner(w));
        // The source's measurement id means nothing here: find the same
        // measurement in this file by its key (rows were applied in table
        // order, so it is already in), else record no measurement.
        if (auto it = j.find("measurement"); it != j.end() && it->is_object()) {
          const json& k = *it;
          TOPK_ASSIGN_OR_RETURN(w.measurement_id,
                                FindMeasurementId({Str(k, "device"), Str(k, "variant_id"), Str(k, "problem"),
                                                   Str(k, "input_dist"), Str(k, "l2_mode")}));
        }
        return WriteWinner(w, WriteMode::kMerge);
      }
      if (table == "baselines") {
        Baseline b;
        b.device_fingerprint = Str(j, "device");
        if (b.device_fingerprint.empty()) throw FieldError("empty device fingerprint");
        b.problem = ProblemFromJson(j);
        b.name = Str(j, "name");
        b.median_us = Real(j, "median_us");
        b.created = Str(j, "created");
        TOPK_RETURN_IF_ERROR(CheckImportedTime("baseline " + b.name + " median_us", b.median_us, false));
        return WriteBaseline(b, WriteMode::kMerge);
      }
      throw FieldError("unknown table '" + table + "'");
    } catch (const FieldError& e) {
      return InvalidArgument("ApplyRow", e.what());
    } catch (const json::exception& e) {
      return InvalidArgument("ApplyRow", e.what());
    }
  }

  // A time from another file: finite, below kMaxPlausibleUs, and > 0 (or,
  // where `zero_ok`, 0 for "not measured").
  static Status CheckImportedTime(const std::string& what, double us, bool zero_ok) {
    if (std::isfinite(us) && us < kMaxPlausibleUs && (us > 0 || (zero_ok && us == 0))) return Status::Ok();
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", us);
    return InvalidArgument("ApplyRow", what + " " + buf + " is not a plausible time (finite, > 0" +
                                           std::string(zero_ok ? " or 0" : "") + ", below 1e7 us)");
  }

  // The arch a row of device `fingerprint` was tuned for: sm_XY from the
  // stored compute capability; sm_90 when the device is not stored (yet) or
  // its capability is not one the generator knows.
  gen::Arch StoredDeviceArch(const std::string& fingerprint) const {
    auto s = Stmt::Prepare(db(), "SELECT cc_major, cc_minor FROM devices WHERE fingerprint = ?");
    if (!s.ok()) return gen::Arch::Sm90();
    auto row = s->Bind(fingerprint).Step();
    if (!row.ok() || !*row) return gen::Arch::Sm90();
    auto a = gen::Arch::FromName("sm_" + std::to_string(s->Int(0) * 10 + s->Int(1)));
    return a.ok() ? *a : gen::Arch::Sm90();
  }

  // A winner from another file is held to what a tune would store: a valid
  // problem, a variant valid for it on the device's arch, plausible times.
  Status CheckImportedWinner(const Winner& w) const {
    auto bad = [&](const std::string& why) {
      return InvalidArgument("ApplyRow", "winner " + w.variant_id.substr(0, 80) + " for " + w.problem.ToString() +
                                             ": " + why);
    };
    if (Status p = w.problem.Validate(); !p.ok()) return bad(p.message());
    auto config = gen::Config::FromId(w.variant_id);
    if (!config.ok()) return bad(config.status().message());
    const gen::Arch arch = StoredDeviceArch(w.device_fingerprint);
    if (Status v = gen::ValidateFor(*config, arch, w.problem); !v.ok())
      return bad("variant not valid on " + arch.Name() + ": " + (v.where().empty() ? "" : v.where() + ": ") +
                 v.message());
    if (Status t = CheckImportedTime("median_us", w.median_us, false); !t.ok()) return bad(t.message());
    if (Status t = CheckImportedTime("default_us", w.default_us, true); !t.ok()) return bad(t.message());
    if (Status t = CheckImportedTime("baseline_us", w.baseline_us, true); !t.ok()) return bad(t.message());
    return Status::Ok();
  }

  // Every row as one JSON line; `what` names the destination in errors.
  Status WriteRows(std::ostream& out, bool include_binaries, const std::string& what) const {
    return ForEachRowUnlocked(include_binaries, [&](const json& row) -> Status {
      out << Dump(row) << '\n';
      if (!out) return Unavailable("ExportJsonl", "write to " + what + " failed");
      return Status::Ok();
    });
  }

  Status Export(const std::string& out_path, bool include_binaries) const {
    const fs::path target(out_path);
    std::error_code ec;
    if (target.has_parent_path()) {
      fs::create_directories(target.parent_path(), ec);
      if (ec) {
        return Unavailable("ExportJsonl", "cannot create directory '" + target.parent_path().string() + "' for '" +
                                              out_path + "': " + ec.message());
      }
    }
    // Written beside the target and renamed into place: a reader (or a
    // crash) never sees half an export.
    const std::string tmp = out_path + ".tmp" + std::to_string(::getpid());
    Status s = [&]() -> Status {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      if (!out) return Unavailable("ExportJsonl", "cannot write '" + tmp + "'");
      TOPK_RETURN_IF_ERROR(WriteRows(out, include_binaries, "'" + tmp + "'"));
      out.close();
      if (!out) return Unavailable("ExportJsonl", "closing '" + tmp + "' failed");
      fs::rename(tmp, target, ec);
      if (ec) return Unavailable("ExportJsonl", "cannot rename '" + tmp + "' to '" + out_path + "': " + ec.message());
      return Status::Ok();
    }();
    if (!s.ok()) fs::remove(tmp, ec);
    return s;
  }

  Status Import(const std::string& in_path) {
    TOPK_RETURN_IF_ERROR(CheckWritable("ImportJsonl"));
    // The body reads the file itself, so a retried transaction starts over.
    return WriteTransaction("ImportJsonl", [&]() -> Status {
      std::ifstream in(in_path, std::ios::binary);
      if (!in) {
        std::error_code ec;
        const Code code = fs::exists(in_path, ec) ? Code::kUnavailable : Code::kNotFound;
        return Status(code, "ImportJsonl", "cannot read '" + in_path + "'");
      }
      std::string line;
      for (int64_t number = 1; std::getline(in, line); ++number) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank lines are fine
        const std::string where = in_path + ":" + std::to_string(number);
        const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (j.is_discarded()) return InvalidArgument("ImportJsonl", where + ": not valid JSON");
        Status s = ApplyRow(j);
        if (!s.ok()) return Status(s.code(), "ImportJsonl", where + ": " + s.message());
      }
      if (in.bad()) return Unavailable("ImportJsonl", "reading '" + in_path + "' failed");
      return Status::Ok();
    });
  }

  const std::string path_;
  const DbPtr db_;
  const bool read_only_;
  int version_;
  mutable std::mutex mu_;
};

StatusOr<std::unique_ptr<SqliteCache>> SqliteCache::OpenFile(const std::string& path, bool read_only) {
  const char* where = read_only ? "Cache::OpenReadOnly" : "Cache::Open";
  if (path.empty()) return InvalidArgument(where, "empty cache path");
  // SQLite reads these as its in-memory database or as URIs; a cache is a
  // file (an in-memory one would take every write and keep none).
  if (path == ":memory:" || path.rfind("file:", 0) == 0) {
    return InvalidArgument(where, "'" + path +
                                      "' is an SQLite in-memory database or URI, not a file path: a tuning cache "
                                      "must be a file");
  }
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::exists(st)) {
    if (fs::is_directory(st)) return Unavailable(where, "'" + path + "' is a directory, not a cache file");
    TOPK_RETURN_IF_ERROR(CheckSqliteHeader(path, where));
  } else if (read_only) {
    return Status(Code::kNotFound, where, "no cache file at '" + path + "'");
  } else if (const fs::path parent = fs::path(path).parent_path(); !parent.empty()) {
    fs::create_directories(parent, ec);
    if (ec) {
      return Unavailable(where,
                         "cannot create directory '" + parent.string() + "' for cache '" + path + "': " + ec.message());
    }
  }

  // NOMUTEX: SqliteCache serializes its own calls, so SQLite's per-call
  // connection mutex would only add cost. The path always goes in as a URI
  // of its own bytes (FileUri), whatever SQLite's URI default.
  std::string uri = FileUri(path, "");
  int flags = SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX;
  const ReadAccess access = read_only ? ChooseReadAccess(path) : ReadAccess::kNoWrites;
  if (!read_only) {
    flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  } else if (access == ReadAccess::kNoWrites) {
    flags |= SQLITE_OPEN_READWRITE;  // never CREATE; writes are refused below
  } else {
    flags |= SQLITE_OPEN_READONLY;
    uri = FileUri(path, access == ReadAccess::kImmutable ? "immutable=1" : "mode=ro");
  }
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(uri.c_str(), &raw, flags, nullptr);
  DbPtr db(raw);  // sqlite3_open_v2 allocates a handle even when it fails
  if (rc != SQLITE_OK) {
    Status s = SqliteError(db.get(), rc, "sqlite3_open_v2").WithContext("cannot open cache '" + path + "'");
    return Status(Code::kUnavailable, s.where(), s.message());
  }
  auto with_path = [&](const Status& s) { return s.WithContext("cache '" + path + "'"); };
  {
    // TOPK_SQLITE returns a Status; give the lambda that return type so the
    // caller can attach the path.
    Status s = [&]() -> Status {
      TOPK_SQLITE(db.get(), sqlite3_extended_result_codes(db.get(), 1));
      TOPK_SQLITE(db.get(), sqlite3_busy_timeout(db.get(), kBusyTimeoutMs));
      return Status::Ok();
    }();
    if (!s.ok()) return with_path(s);
  }
  // A read-only cache on a read-write connection: SQLite itself refuses
  // any write, on top of SqliteCache's own check.
  if (read_only && access == ReadAccess::kNoWrites) {
    if (Status s = Exec(db.get(), "PRAGMA query_only = 1"); !s.ok()) return with_path(s);
  }

  // Look before touching anything: the version decides whether we may write.
  // The version and the table list are read in one transaction, so both come
  // from one snapshot: read one by one, another process could commit its
  // migration in between, and we would see tables without a version and
  // call a new cache "not a cache" (seen in the two-process test).
  int64_t version = 0;
  bool has_tables = false;
  {
    Status s = [&]() -> Status {
      TOPK_RETURN_IF_ERROR(Exec(db.get(), "BEGIN"));
      auto v = QueryInt(db.get(), "PRAGMA user_version");
      StatusOr<bool> t = v.ok() && *v == 0 ? internal::HasAnySchemaObject(db.get()) : StatusOr<bool>(false);
      // Read-only: nothing to lose, so end it whichever way works.
      if (sqlite3_exec(db.get(), "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK && !sqlite3_get_autocommit(db.get()))
        sqlite3_exec(db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
      if (!v.ok()) return v.status();
      if (!t.ok()) return t.status();
      version = *v;
      has_tables = *t;
      return Status::Ok();
    }();
    if (!s.ok()) return with_path(s);
  }
  if (version > kSchemaVersion) return NewerSchema(path, version, where);
  if (version < 0) return NotACache(path, where);
  if (version == 0) {
    if (has_tables) return NotACache(path, where);
    if (read_only) return FailedPrecondition(where, "'" + path + "' is an empty database, not a topk-tune cache");
  } else {
    // quick_check is O(file size) without the index cross-checks of
    // integrity_check: cheap next to a tuning run, and it turns a damaged
    // file into kDataLoss here rather than odd errors later.
    if (Status s = CheckIntegrity(db.get(), "quick_check", path); !s.ok()) return s;
  }

  std::unique_ptr<SqliteCache> cache(new SqliteCache(path, std::move(db), read_only, static_cast<int>(version)));
  if (read_only) return cache;

  // Migrate before switching to WAL: if the migration fails, its
  // transaction rolls back and the file keeps its old bytes and mode.
  if (cache->version_ < kSchemaVersion) {
    if (Status s = cache->MigrateOnOpen(); !s.ok()) return with_path(s);
    cache->version_ = kSchemaVersion;
  }
  // WAL lets readers (the runtime) work while a tuner writes, and a commit
  // costs one append. It is persistent, so this is a no-op after the first
  // open. Where WAL is impossible (no shared memory, e.g. some network file
  // systems) SQLite keeps the rollback journal: slower, equally safe, so
  // that is not an error. synchronous stays FULL: every commit is durable.
  //
  // The switch needs the file to itself: when another process opens the same
  // new file at the same moment it fails with SQLITE_BUSY at once (the busy
  // handler does not cover it; seen in the two-process test). Retry for as
  // long as a write would wait; once either process has switched, the mode
  // is recorded in the file and the pragma succeeds for the other.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  for (int attempt = 0;; ++attempt) {
    auto mode = Stmt::Prepare(cache->db(), "PRAGMA journal_mode = WAL");
    if (!mode.ok()) return with_path(mode.status());
    auto row = mode->Step();
    if (row.ok()) break;
    const int code = sqlite3_extended_errcode(cache->db()) & 0xff;
    if ((code != SQLITE_BUSY && code != SQLITE_LOCKED) || std::chrono::steady_clock::now() > deadline)
      return with_path(row.status());
    std::this_thread::sleep_for(std::chrono::milliseconds(1 << std::min(attempt, 5)));
  }
  return cache;
}

}  // namespace

StatusOr<std::unique_ptr<Cache>> Cache::Open(const std::string& path) {
  try {
    auto c = SqliteCache::OpenFile(path, /*read_only=*/false);
    if (!c.ok()) return c.status();
    return std::unique_ptr<Cache>(std::move(c).value());
  } catch (const std::exception& e) {
    return Status(Code::kInternal, "Cache::Open", std::string("unexpected exception: ") + e.what());
  }
}

StatusOr<std::unique_ptr<Cache>> Cache::OpenReadOnly(const std::string& path) {
  try {
    auto c = SqliteCache::OpenFile(path, /*read_only=*/true);
    if (!c.ok()) return c.status();
    return std::unique_ptr<Cache>(std::move(c).value());
  } catch (const std::exception& e) {
    return Status(Code::kInternal, "Cache::OpenReadOnly", std::string("unexpected exception: ") + e.what());
  }
}

}  // namespace topk::cache
