// The SQLite implementation of topk::cache::Cache: opening a file (checks,
// read access, pragmas) and bringing it to the current schema. The other
// parts are listed in cache_internal.hpp.
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cache/cache_internal.hpp"

namespace topk::cache::detail {

namespace fs = std::filesystem;

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

namespace {

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
}  // namespace

Status CheckIntegrity(sqlite3* db, const char* pragma, const std::string& path) {
  Status s = RunIntegrityPragma(db, pragma);
  return s.ok() ? s : s.WithContext("cache '" + path + "'");
}

// Brings an older (or empty) file to kSchemaVersion at Open.
Status SqliteCache::MigrateOnOpen() {
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

Status SqliteCache::NewerSchema(const std::string& path, int64_t v, const char* where) {
  return FailedPrecondition(where, "cache '" + path + "' has schema version " + std::to_string(v) +
                                       ", newer than version " + std::to_string(kSchemaVersion) +
                                       " that this build reads; use a newer topk-tune or another cache file "
                                       "(the file was left untouched)");
}

Status SqliteCache::NotACache(const std::string& path, const char* where) {
  return FailedPrecondition(where, "'" + path +
                                       "' is an SQLite database but not a topk-tune cache (it has tables and "
                                       "no schema version); left untouched");
}

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

}  // namespace topk::cache::detail

namespace topk::cache {

using detail::SqliteCache;

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
