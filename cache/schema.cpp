#include "cache/schema.hpp"

#include <iterator>

#include "cache/cache.hpp"
#include "cache/sqlite_util.hpp"

namespace topk::cache::internal {

namespace {

// kMigrations[v] takes a file from version v to v + 1. A new file runs the
// whole chain from 0, so a fresh file and a migrated one have exactly the
// same tables and columns: there is no separate "current schema" text that
// could drift from the migrations.
//
// REAL columns allow NULL: it stands for NaN, which SQLite cannot store.
//
// No FOREIGN KEY constraints: measurements and winners name devices and
// variants by key, but rows arrive in any order through import and merge,
// and a measurement must be recordable even when its device row is not.
const char* const kMigrations[] = {
    // 0 -> 1: the first released schema.
    R"sql(
CREATE TABLE devices (
  fingerprint TEXT PRIMARY KEY,
  name TEXT NOT NULL DEFAULT '',
  cc_major INTEGER NOT NULL DEFAULT 0,
  cc_minor INTEGER NOT NULL DEFAULT 0,
  sm_count INTEGER NOT NULL DEFAULT 0,
  l2_bytes INTEGER NOT NULL DEFAULT 0,
  driver_version INTEGER NOT NULL DEFAULT 0,
  compiler_version TEXT NOT NULL DEFAULT '',
  info_json TEXT NOT NULL DEFAULT '',
  updated TEXT NOT NULL
);
CREATE TABLE variants (
  id TEXT PRIMARY KEY,             -- gen::Config::Id()
  kernel_key TEXT NOT NULL,        -- gen::Config::KernelKey()
  config_json TEXT NOT NULL,       -- gen::Config::ToJson()
  source_hash TEXT NOT NULL DEFAULT ''
);
CREATE TABLE binaries (
  source_hash TEXT NOT NULL,
  arch TEXT NOT NULL,
  options TEXT NOT NULL,
  compiler_version TEXT NOT NULL,
  kernel_key TEXT NOT NULL DEFAULT '',
  lowered_name TEXT NOT NULL DEFAULT '',
  cubin BLOB NOT NULL,
  registers INTEGER NOT NULL DEFAULT -1,
  spill_stores INTEGER NOT NULL DEFAULT 0,
  spill_loads INTEGER NOT NULL DEFAULT 0,
  stack_bytes INTEGER NOT NULL DEFAULT 0,
  compile_ms REAL DEFAULT 0,
  log TEXT NOT NULL DEFAULT '',
  created TEXT NOT NULL,
  PRIMARY KEY (source_hash, arch, options, compiler_version)
);
CREATE TABLE measurements (
  id INTEGER PRIMARY KEY,
  device TEXT NOT NULL,
  variant_id TEXT NOT NULL,
  problem_key TEXT NOT NULL,       -- ProblemKey()
  flags_key TEXT NOT NULL,         -- FlagsKey()
  row_stride INTEGER NOT NULL DEFAULT 0,
  input_dist TEXT NOT NULL,
  l2_mode TEXT NOT NULL,
  outcome TEXT NOT NULL,           -- OutcomeName()
  median_us REAL DEFAULT 0,
  repetitions INTEGER NOT NULL DEFAULT 0,
  samples_json TEXT NOT NULL DEFAULT '[]',
  verified INTEGER NOT NULL DEFAULT 0,
  message TEXT NOT NULL DEFAULT '',
  tune_run TEXT NOT NULL DEFAULT '',
  created TEXT NOT NULL,           -- ISO-8601 UTC with milliseconds
  UNIQUE (device, variant_id, problem_key, input_dist, l2_mode)
);
CREATE INDEX measurements_by_problem ON measurements (device, problem_key);
CREATE TABLE winners (
  device TEXT NOT NULL,
  problem_key TEXT NOT NULL,
  flags_key TEXT NOT NULL,
  row_stride INTEGER NOT NULL DEFAULT 0,
  variant_id TEXT NOT NULL,
  median_us REAL DEFAULT 0,
  default_us REAL DEFAULT 0,
  baseline_us REAL DEFAULT 0,
  baseline_name TEXT NOT NULL DEFAULT '',
  measurement_id INTEGER NOT NULL DEFAULT 0,
  updated TEXT NOT NULL,
  PRIMARY KEY (device, problem_key)
);
CREATE INDEX winners_by_flags ON winners (flags_key, device);
)sql",
    // 1 -> 2: measurement spread, baselines, meta.
    R"sql(
ALTER TABLE measurements ADD COLUMN p10_us REAL DEFAULT 0;
ALTER TABLE measurements ADD COLUMN p90_us REAL DEFAULT 0;
ALTER TABLE measurements ADD COLUMN min_us REAL DEFAULT 0;
CREATE TABLE baselines (
  device TEXT NOT NULL,
  problem_key TEXT NOT NULL,
  row_stride INTEGER NOT NULL DEFAULT 0,
  name TEXT NOT NULL,
  median_us REAL DEFAULT 0,
  created TEXT NOT NULL,
  PRIMARY KEY (device, problem_key, name)
);
-- Free-form facts about the file: who created it, when it was migrated.
CREATE TABLE meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
)sql",
};

static_assert(std::size(kMigrations) == kSchemaVersion, "one migration per schema version");

}  // namespace

Status MigrateToCurrent(sqlite3* db, int from_version, const std::string& now) {
  if (from_version < 0 || from_version > kSchemaVersion) {
    return Status(Code::kInternal, "MigrateToCurrent", "no migration from version " + std::to_string(from_version));
  }
  for (int v = from_version; v < kSchemaVersion; ++v) {
    if (Status s = Exec(db, kMigrations[v]); !s.ok()) {
      return s.WithContext("migrating the cache schema from version " + std::to_string(v) + " to " +
                           std::to_string(v + 1));
    }
  }
  if (from_version == kSchemaVersion) return Status::Ok();
  // The meta table exists from version 2 on, so it can be written here.
  TOPK_ASSIGN_OR_RETURN(auto stmt, Stmt::Prepare(db, "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?), (?, ?)"));
  const std::string event = from_version == 0 ? "created" : "migrated_from_v" + std::to_string(from_version);
  TOPK_RETURN_IF_ERROR(stmt.Bind("application", "topk-tune", event, now).Run());
  // user_version is part of the transaction: it commits with the tables.
  return Exec(db, "PRAGMA user_version = " + std::to_string(kSchemaVersion));
}

StatusOr<bool> HasAnySchemaObject(sqlite3* db) {
  TOPK_ASSIGN_OR_RETURN(int64_t n, QueryInt(db, "SELECT count(*) FROM sqlite_master"));
  return n > 0;
}

}  // namespace topk::cache::internal
