#include "cache/sqlite_util.hpp"

#include <string>

namespace topk::cache::internal {

namespace {

std::string_view Basename(std::string_view file) {
  const size_t slash = file.find_last_of('/');
  return slash == std::string_view::npos ? file : file.substr(slash + 1);
}

}  // namespace

Code SqliteCode(int rc) {
  switch (rc & 0xff) {  // the primary code of an extended one
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return Code::kDataLoss;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_PROTOCOL: return Code::kUnavailable;
    case SQLITE_FULL:
    case SQLITE_NOMEM: return Code::kResourceExhausted;
    default: return Code::kInternal;
  }
}

Status SqliteError(sqlite3* db, int rc, std::string_view call, std::string_view sql, std::source_location loc) {
  // sqlite3_errmsg describes the most recent failure on the connection, which
  // is this one as long as we are called right after the failing call.
  std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  msg += " (sqlite code " + std::to_string(rc) + ") at ";
  msg += Basename(loc.file_name());
  msg += ":" + std::to_string(loc.line());
  if (!sql.empty()) {
    constexpr size_t kMaxSql = 160;
    msg += "; sql: ";
    msg += sql.substr(0, kMaxSql);
    if (sql.size() > kMaxSql) msg += "...";
  }
  return Status(SqliteCode(rc), std::string(call), std::move(msg));
}

StatusOr<Stmt> Stmt::Prepare(sqlite3* db, std::string_view sql, std::source_location loc) {
  sqlite3_stmt* s = nullptr;
  const int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &s, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(s);
    return SqliteError(db, rc, "sqlite3_prepare_v2", sql, loc);
  }
  return Stmt(db, s);
}

StatusOr<bool> Stmt::Step(std::source_location loc) {
  if (bind_rc_ != SQLITE_OK) return SqliteError(db_, bind_rc_, "sqlite3_bind", sql(), loc);
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteError(db_, rc, "sqlite3_step", sql(), loc);
}

Status Stmt::Run(std::source_location loc) {
  while (true) {
    auto row = Step(loc);
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
  }
}

std::string Stmt::Text(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
  // Length after the text conversion above, as the SQLite docs require.
  return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col))) : std::string();
}

std::vector<char> Stmt::Blob(int col) const {
  const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_, col));
  const int n = sqlite3_column_bytes(stmt_, col);
  return p ? std::vector<char>(p, p + n) : std::vector<char>();
}

std::string_view Stmt::sql() const {
  const char* s = sqlite3_sql(stmt_);
  return s ? std::string_view(s) : std::string_view();
}

Status Exec(sqlite3* db, std::string_view sql, std::source_location loc) {
  // sqlite3_exec needs a NUL-terminated string.
  const std::string text(sql);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, text.c_str(), nullptr, nullptr, &err);
  sqlite3_free(err);  // sqlite3_errmsg(db) holds the same text
  if (rc != SQLITE_OK) return SqliteError(db, rc, "sqlite3_exec", sql, loc);
  return Status::Ok();
}

StatusOr<int64_t> QueryInt(sqlite3* db, std::string_view sql, std::source_location loc) {
  auto stmt = Stmt::Prepare(db, sql, loc);
  if (!stmt.ok()) return stmt.status();
  auto row = stmt->Step(loc);
  if (!row.ok()) return row.status();
  if (!*row) return Status(Code::kInternal, "QueryInt", "no row from: " + std::string(sql));
  return stmt->Int(0);
}

}  // namespace topk::cache::internal
