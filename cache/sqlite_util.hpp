// Thin helpers over the SQLite C API for the cache: one way to turn a failing
// result code into a Status, and an RAII prepared statement. Internal to
// cache/ (not installed, not part of the public API).
#pragma once

#include <sqlite3.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <source_location>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "topk/status.hpp"

namespace topk::cache::internal {

// Status for a failed SQLite call: where() is the call name
// ("sqlite3_step"), the message holds sqlite3_errmsg, the numeric (extended)
// code, the caller's file:line and, when given, the SQL being run. The code
// follows the failure: corrupt / not-a-database -> kDataLoss, busy, locked,
// I/O, permission and read-only -> kUnavailable, full / out of memory ->
// kResourceExhausted, anything else -> kInternal.
Status SqliteError(sqlite3* db, int rc, std::string_view call, std::string_view sql = {},
                   std::source_location loc = std::source_location::current());

// Maps an SQLite result code to the Status code described above.
Code SqliteCode(int rc);

}  // namespace topk::cache::internal

// Runs an sqlite3_* call and returns its Status from the enclosing function
// when it does not return SQLITE_OK. The call name is taken from the
// expression text, e.g. TOPK_SQLITE(db, sqlite3_exec(db, ...)) reports
// "sqlite3_exec".
#define TOPK_SQLITE(db, expr)                                                                                \
  do {                                                                                                       \
    const int topk_sqlite_rc_ = (expr);                                                                      \
    if (topk_sqlite_rc_ != SQLITE_OK) {                                                                      \
      const std::string_view topk_sqlite_expr_ = #expr;                                                      \
      return ::topk::cache::internal::SqliteError((db), topk_sqlite_rc_,                                     \
                                                  topk_sqlite_expr_.substr(0, topk_sqlite_expr_.find('('))); \
    }                                                                                                        \
  } while (0)

namespace topk::cache::internal {

// A blob argument for Stmt::Bind (kept apart from strings so that a cubin
// with zero bytes is stored as a BLOB, never as TEXT).
struct BlobRef {
  const void* data;
  size_t size;
};

// A prepared statement that finalizes itself. Binding errors (only possible
// for a wrong index or out of memory) are remembered and reported by the
// next Step, so call sites chain Bind calls without checking each one.
class Stmt {
 public:
  static StatusOr<Stmt> Prepare(sqlite3* db, std::string_view sql,
                                std::source_location loc = std::source_location::current());
  Stmt(Stmt&& o) noexcept : db_(o.db_), stmt_(std::exchange(o.stmt_, nullptr)), bind_rc_(o.bind_rc_) {}
  Stmt& operator=(Stmt&&) = delete;
  Stmt(const Stmt&) = delete;
  ~Stmt() { sqlite3_finalize(stmt_); }

  // Binds the arguments to parameters 1..N in order.
  template <typename... Args>
  Stmt& Bind(const Args&... args) {
    int i = 1;
    (BindOne(i++, args), ...);
    return *this;
  }

  // Binds strings to parameters 1..N in order (for queries whose filters
  // are assembled at run time).
  Stmt& BindTexts(const std::vector<std::string>& texts) {
    for (size_t i = 0; i < texts.size(); ++i) BindOne(static_cast<int>(i + 1), texts[i]);
    return *this;
  }

  // One step: true when a row is available, false when the statement is done.
  StatusOr<bool> Step(std::source_location loc = std::source_location::current());
  // Steps to the end, ignoring any rows.
  Status Run(std::source_location loc = std::source_location::current());

  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  // NULL reads as NaN (see BindOne(double)).
  double Real(int col) const {
    return IsNull(col) ? std::numeric_limits<double>::quiet_NaN() : sqlite3_column_double(stmt_, col);
  }
  std::string Text(int col) const;  // NULL reads as ""
  std::vector<char> Blob(int col) const;
  std::string_view sql() const;

 private:
  Stmt(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  void Remember(int rc) {
    if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  }
  void BindOne(int i, int v) { Remember(sqlite3_bind_int64(stmt_, i, v)); }
  void BindOne(int i, int64_t v) { Remember(sqlite3_bind_int64(stmt_, i, v)); }
  void BindOne(int i, bool v) { Remember(sqlite3_bind_int64(stmt_, i, v ? 1 : 0)); }
  // SQLite has no NaN (it would store NULL anyway); bind NULL explicitly so
  // that the REAL columns, which allow NULL for this reason, read it back as
  // NaN.
  void BindOne(int i, double v) {
    Remember(std::isnan(v) ? sqlite3_bind_null(stmt_, i) : sqlite3_bind_double(stmt_, i, v));
  }
  void BindOne(int i, std::string_view v) {
    Remember(sqlite3_bind_text64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
  }
  void BindOne(int i, const std::string& v) { BindOne(i, std::string_view(v)); }
  void BindOne(int i, const char* v) { BindOne(i, std::string_view(v)); }
  void BindOne(int i, BlobRef v) {
    // A zero-length blob must still be a BLOB, not NULL: sqlite3_bind_blob64
    // with a null pointer binds NULL, so point at a static byte.
    static const char kEmpty = 0;
    Remember(sqlite3_bind_blob64(stmt_, i, v.size ? v.data : &kEmpty, v.size, SQLITE_TRANSIENT));
  }

  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  int bind_rc_ = SQLITE_OK;
};

// Runs one or more statements that return no rows we need (DDL, PRAGMAs
// that set values, BEGIN/COMMIT).
Status Exec(sqlite3* db, std::string_view sql, std::source_location loc = std::source_location::current());

// Runs a query that returns one integer (e.g. PRAGMA user_version).
StatusOr<int64_t> QueryInt(sqlite3* db, std::string_view sql,
                           std::source_location loc = std::source_location::current());

}  // namespace topk::cache::internal
