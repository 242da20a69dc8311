// JSON Lines export, import and merge. Merge is "read the other file's rows
// as export objects and import them", so the two paths cannot disagree
// about conflict rules.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "cache/base64.hpp"
#include "cache/cache_internal.hpp"

namespace topk::cache::detail {

namespace fs = std::filesystem;

namespace {

// "sm_90", "sm_90a", "sm_100f": the architectures NVRTC compiles for.
bool PlainArch(const std::string& a) {
  if (a.size() < 5 || a.size() > 8 || a.compare(0, 3, "sm_") != 0) return false;
  size_t i = 3;
  while (i < a.size() && a[i] >= '0' && a[i] <= '9') ++i;
  return i > 3 && (i == a.size() || (i + 1 == a.size() && (a[i] == 'a' || a[i] == 'f')));
}

}  // namespace

Status SqliteCache::ExportJsonl(const std::string& out_path, bool include_binaries) const {
  return Locked("ExportJsonl", [&]() -> Status { return Export(out_path, include_binaries); });
}

Status SqliteCache::WriteJsonl(std::ostream& out, bool include_binaries) const {
  return Locked("WriteJsonl", [&]() -> Status { return WriteRows(out, include_binaries, "the output stream"); });
}

Status SqliteCache::ImportJsonl(const std::string& in_path) {
  return Locked("ImportJsonl", [&]() -> Status { return Import(in_path); });
}

Status SqliteCache::Merge(const std::string& other_path) {
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

// Calls `fn` with every row as its JSON Lines object (the first a "meta"
// object), table by table, from one read snapshot.
Status SqliteCache::ForEachRow(bool include_binaries, const RowFn& fn) const {
  return Locked("ForEachRow", [&] { return ForEachRowUnlocked(include_binaries, fn); });
}

Status SqliteCache::ForEachRowUnlocked(bool include_binaries, const RowFn& fn) const {
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
Status SqliteCache::ApplyRow(const json& j) {
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
      // The config is what dispatch and the tuner run under this id: an id
      // that names another config is refused. (Ids that do not parse, the
      // tuner's injected test faults, keep the config they were stored with.)
      if (auto named = gen::Config::FromId(v.id); named.ok() && !(*named == v.config))
        throw FieldError("variant '" + v.id.substr(0, 80) + "' has the config of '" + v.config.Id().substr(0, 80) +
                         "'");
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
      // The runtime loads these cubins and runs them: a row that could not
      // have come from a compile is refused rather than served.
      if (b.source_hash.empty()) throw FieldError("binary with an empty source_hash");
      if (!PlainArch(b.arch)) throw FieldError("binary arch '" + b.arch.substr(0, 24) + "' is not sm_<digits>");
      if (b.lowered_name.empty()) throw FieldError("binary with an empty lowered_name");
      if (b.cubin.size() < 4 || std::string(b.cubin.data(), 4) != "\x7f" "ELF")
        throw FieldError("binary for " + b.arch + " is not an ELF cubin");
      return WriteBinary(b, Str(j, "created"), WriteMode::kMerge);
    }
    if (table == "measurements") {
      Measurement m;
      m.device_fingerprint = Str(j, "device");
      if (m.device_fingerprint.empty()) throw FieldError("empty device fingerprint");
      m.variant_id = Str(j, "variant_id");
      // Every later read of the row needs its config: from the id, or from
      // a variants row (exports write those first).
      if (!gen::Config::FromId(m.variant_id).ok()) {
        auto s = Stmt::Prepare(db(), "SELECT 1 FROM variants WHERE id = ?");
        if (!s.ok()) return s.status();
        auto row = s->Bind(m.variant_id).Step();
        if (!row.ok()) return row.status();
        if (!*row)
          throw FieldError("measurement of variant '" + m.variant_id.substr(0, 80) +
                           "', which is neither a variant id nor in a variants row");
      }
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
Status SqliteCache::CheckImportedTime(const std::string& what, double us, bool zero_ok) {
  if (std::isfinite(us) && us < kMaxPlausibleUs && (us > 0 || (zero_ok && us == 0))) return Status::Ok();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", us);
  return InvalidArgument("ApplyRow", what + " " + buf + " is not a plausible time (finite, > 0" +
                                         std::string(zero_ok ? " or 0" : "") + ", below 1e7 us)");
}

// The arch a row of device `fingerprint` was tuned for: sm_XY from the
// stored compute capability; sm_90 when the device is not stored (yet) or
// its capability is not one the generator knows.
gen::Arch SqliteCache::StoredDeviceArch(const std::string& fingerprint) const {
  auto s = Stmt::Prepare(db(), "SELECT cc_major, cc_minor FROM devices WHERE fingerprint = ?");
  if (!s.ok()) return gen::Arch::Sm90();
  auto row = s->Bind(fingerprint).Step();
  if (!row.ok() || !*row) return gen::Arch::Sm90();
  auto a = gen::Arch::FromName("sm_" + std::to_string(s->Int(0) * 10 + s->Int(1)));
  return a.ok() ? *a : gen::Arch::Sm90();
}

// A winner from another file is held to what a tune would store: a valid
// problem, a variant valid for it on the device's arch, plausible times.
Status SqliteCache::CheckImportedWinner(const Winner& w) const {
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
Status SqliteCache::WriteRows(std::ostream& out, bool include_binaries, const std::string& what) const {
  return ForEachRowUnlocked(include_binaries, [&](const json& row) -> Status {
    out << Dump(row) << '\n';
    if (!out) return Unavailable("ExportJsonl", "write to " + what + " failed");
    return Status::Ok();
  });
}

Status SqliteCache::Export(const std::string& out_path, bool include_binaries) const {
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

Status SqliteCache::Import(const std::string& in_path) {
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

}  // namespace topk::cache::detail
