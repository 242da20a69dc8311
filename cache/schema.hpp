// The cache's SQL schema and its forward migrations. Internal to cache/.
//
// Version history (PRAGMA user_version):
//   0  an empty file: the current schema is created.
//   1  devices, variants, binaries, measurements, winners; measurements kept
//      only the median (no p10_us / p90_us / min_us), no baselines, no meta.
//   2  adds measurements.p10_us, p90_us, min_us (0 for rows migrated from 1:
//      v1 never recorded them), the baselines table and the meta table.
#pragma once

#include <sqlite3.h>

#include <string>

#include "topk/status.hpp"

namespace topk::cache::internal {

// Brings the schema of `db` from `from_version` (0 = empty file) to
// kSchemaVersion and sets PRAGMA user_version. Must run inside a write
// transaction that the caller commits or rolls back, so that a failed or
// interrupted migration leaves the file at its old version. `now` is the
// timestamp recorded in the meta table.
Status MigrateToCurrent(sqlite3* db, int from_version, const std::string& now);

// Whether the file has any table, index or view (a user_version of 0 with
// tables means someone else's database, not an empty file).
StatusOr<bool> HasAnySchemaObject(sqlite3* db);

}  // namespace topk::cache::internal
