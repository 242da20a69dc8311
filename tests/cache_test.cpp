// Tests of the tuning cache (cache/cache.hpp): schema and migrations, every
// record type, refusal of files we must not touch, concurrent writers
// (threads and processes), export / import and merge. No GPU needed.
#include "cache/cache.hpp"
#include "generator/radix.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <regex>
#include <fstream>
#include <sstream>
#include <thread>
#include <tuple>

#include "support/test_support.hpp"

namespace topk::cache {
namespace {

namespace fs = std::filesystem;
using topk::testing::TempPath;

// ---- helpers ---------------------------------------------------------------

std::unique_ptr<Cache> OpenOrDie(const std::string& path) {
  auto c = Cache::Open(path);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : nullptr;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Runs SQL on a file with the plain SQLite API (to build fixtures and look
// at what the cache wrote, independently of the code under test).
void RawExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "") << " in: " << sql;
  sqlite3_free(err);
  sqlite3_close(db);
}

std::string RawQuery(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  std::string out;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW) {
    const auto* t = sqlite3_column_text(s, 0);
    out = t ? reinterpret_cast<const char*>(t) : "";
  } else {
    ADD_FAILURE() << sqlite3_errmsg(db) << " in: " << sql;
  }
  sqlite3_finalize(s);
  sqlite3_close(db);
  return out;
}

Problem MakeProblem(int64_t batch, int64_t n, int64_t k, DType dtype = DType::kF32) {
  Problem p;
  p.dtype = dtype;
  p.batch = batch;
  p.n = n;
  p.k = k;
  return p;
}

gen::Config MakeConfig(int block_threads, int cluster = 1) {
  gen::RadixParams c;
  c.block_threads = block_threads;
  c.cluster = cluster;
  return c;
}

DeviceRecord MakeDevice(const std::string& fingerprint) {
  DeviceRecord d;
  d.fingerprint = fingerprint;
  d.name = "NVIDIA H100 80GB HBM3";
  d.cc_major = 9;
  d.cc_minor = 0;
  d.sm_count = 132;
  d.l2_bytes = 50331648;
  d.driver_version = 13000;
  d.compiler_version = "nvrtc 13.0";
  d.info_json = R"({"clock_khz":1980000})";
  return d;
}

Measurement MakeMeasurement(const std::string& device, const gen::Config& c, const Problem& p, double median) {
  Measurement m;
  m.device_fingerprint = device;
  m.variant_id = c.Id();
  m.config = c;
  m.problem = p;
  m.median_us = median;
  m.p10_us = median * 0.9;
  m.p90_us = median * 1.2;
  m.min_us = median * 0.8;
  m.repetitions = 100;
  m.samples_us = {median * 0.8, median, median * 1.25};
  m.verified = true;
  m.tune_run = "run-1";
  return m;
}

Winner MakeWinner(const std::string& device, const gen::Config& c, const Problem& p, double median) {
  Winner w;
  w.device_fingerprint = device;
  w.problem = p;
  w.variant_id = c.Id();
  w.config = c;
  w.median_us = median;
  w.default_us = median * 1.5;
  w.baseline_us = median * 2;
  w.baseline_name = "torch.topk";
  return w;
}

BinaryRecord MakeBinary(const std::string& hash) {
  BinaryRecord b;
  b.source_hash = hash;
  b.arch = "sm_90";
  b.options = "-O3 --std=c++17";
  b.compiler_version = "nvrtc 13.0";
  b.kernel_key = "kernel_f32_b512_r11_c1_i0";
  b.lowered_name = "_Z10radix_topkILi512EEvv";
  // Zero bytes inside, and every byte value: a cubin is binary, not text.
  b.cubin = {'\x7f', 'E', 'L', 'F', '\0', '\0', '\x01', '\xff'};
  for (int i = 0; i < 256; ++i) b.cubin.push_back(static_cast<char>(i));
  b.registers = 64;
  b.spill_stores = 4;
  b.spill_loads = 8;
  b.stack_bytes = 16;
  b.compile_ms = 812.5;
  b.log = "ptxas info: Used 64 registers";
  return b;
}

void ExpectSameProblem(const Problem& a, const Problem& b) {
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.batch, b.batch);
  EXPECT_EQ(a.n, b.n);
  EXPECT_EQ(a.k, b.k);
  EXPECT_EQ(a.row_stride, b.row_stride);
  EXPECT_EQ(a.largest, b.largest);
  EXPECT_EQ(a.ranges, b.ranges);
  EXPECT_EQ(a.values, b.values);
  EXPECT_EQ(a.sorted, b.sorted);
}

// Every field but the id and the timestamp (set by the cache).
void ExpectSameMeasurement(const Measurement& a, const Measurement& b) {
  EXPECT_EQ(a.device_fingerprint, b.device_fingerprint);
  EXPECT_EQ(a.variant_id, b.variant_id);
  EXPECT_EQ(a.config, b.config);
  ExpectSameProblem(a.problem, b.problem);
  EXPECT_EQ(a.input_dist, b.input_dist);
  EXPECT_EQ(a.l2_mode, b.l2_mode);
  EXPECT_EQ(a.outcome, b.outcome);
  EXPECT_DOUBLE_EQ(a.median_us, b.median_us);
  EXPECT_DOUBLE_EQ(a.p10_us, b.p10_us);
  EXPECT_DOUBLE_EQ(a.p90_us, b.p90_us);
  EXPECT_DOUBLE_EQ(a.min_us, b.min_us);
  EXPECT_EQ(a.repetitions, b.repetitions);
  EXPECT_EQ(a.samples_us, b.samples_us);
  EXPECT_EQ(a.verified, b.verified);
  EXPECT_EQ(a.message, b.message);
  EXPECT_EQ(a.tune_run, b.tune_run);
}

void ExpectSameWinner(const Winner& a, const Winner& b) {
  EXPECT_EQ(a.device_fingerprint, b.device_fingerprint);
  ExpectSameProblem(a.problem, b.problem);
  EXPECT_EQ(a.variant_id, b.variant_id);
  EXPECT_EQ(a.config, b.config);
  EXPECT_DOUBLE_EQ(a.median_us, b.median_us);
  EXPECT_DOUBLE_EQ(a.default_us, b.default_us);
  EXPECT_DOUBLE_EQ(a.baseline_us, b.baseline_us);
  EXPECT_EQ(a.baseline_name, b.baseline_name);
}

void ExpectSameDevice(const DeviceRecord& a, const DeviceRecord& b) {
  EXPECT_EQ(a.fingerprint, b.fingerprint);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.cc_major, b.cc_major);
  EXPECT_EQ(a.cc_minor, b.cc_minor);
  EXPECT_EQ(a.sm_count, b.sm_count);
  EXPECT_EQ(a.l2_bytes, b.l2_bytes);
  EXPECT_EQ(a.driver_version, b.driver_version);
  EXPECT_EQ(a.compiler_version, b.compiler_version);
  EXPECT_EQ(a.info_json, b.info_json);
}

void ExpectSameBinary(const BinaryRecord& a, const BinaryRecord& b) {
  EXPECT_EQ(a.source_hash, b.source_hash);
  EXPECT_EQ(a.arch, b.arch);
  EXPECT_EQ(a.options, b.options);
  EXPECT_EQ(a.compiler_version, b.compiler_version);
  EXPECT_EQ(a.kernel_key, b.kernel_key);
  EXPECT_EQ(a.lowered_name, b.lowered_name);
  EXPECT_EQ(a.cubin, b.cubin);
  EXPECT_EQ(a.registers, b.registers);
  EXPECT_EQ(a.spill_stores, b.spill_stores);
  EXPECT_EQ(a.spill_loads, b.spill_loads);
  EXPECT_EQ(a.stack_bytes, b.stack_bytes);
  EXPECT_DOUBLE_EQ(a.compile_ms, b.compile_ms);
  EXPECT_EQ(a.log, b.log);
}

// Timestamps have millisecond resolution; "newer" tests need distinct ones.
void NextMillisecond() { std::this_thread::sleep_for(std::chrono::milliseconds(3)); }

// Fills a cache with one of everything (and a few failures).
void Populate(Cache& c, const std::string& device) {
  ASSERT_TRUE(c.PutDevice(MakeDevice(device)).ok());
  ASSERT_TRUE(c.PutBinary(MakeBinary("hash-" + device)).ok());
  const Problem p = MakeProblem(64, 32768, 2048);
  auto ok = c.PutMeasurement(MakeMeasurement(device, MakeConfig(512), p, 41.5));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  Measurement failed = MakeMeasurement(device, MakeConfig(1024, 8), p, 0);
  failed.outcome = Outcome::kResourceLimit;
  failed.samples_us.clear();
  failed.verified = false;
  failed.message = "shared memory 266240 B exceeds 232448 B";
  ASSERT_TRUE(c.PutMeasurement(failed).ok());
  Winner w = MakeWinner(device, MakeConfig(512), p, 41.5);
  w.measurement_id = *ok;
  ASSERT_TRUE(c.PutWinner(w).ok());
  Baseline b;
  b.device_fingerprint = device;
  b.problem = p;
  b.name = "torch.topk";
  b.median_us = 95.25;
  ASSERT_TRUE(c.PutBaseline(b).ok());
  ASSERT_TRUE(c.PutVariant(MakeConfig(512), "sha256:abc").ok());
}

// The version-1 schema exactly as that release wrote it: the fixture the
// migration test starts from (kept here, frozen, rather than shared with the
// code under test).
constexpr const char* kVersion1Schema = R"sql(
CREATE TABLE devices (fingerprint TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '',
  cc_major INTEGER NOT NULL DEFAULT 0, cc_minor INTEGER NOT NULL DEFAULT 0, sm_count INTEGER NOT NULL DEFAULT 0,
  l2_bytes INTEGER NOT NULL DEFAULT 0, driver_version INTEGER NOT NULL DEFAULT 0,
  compiler_version TEXT NOT NULL DEFAULT '', info_json TEXT NOT NULL DEFAULT '', updated TEXT NOT NULL);
CREATE TABLE variants (id TEXT PRIMARY KEY, kernel_key TEXT NOT NULL, config_json TEXT NOT NULL,
  source_hash TEXT NOT NULL DEFAULT '');
CREATE TABLE binaries (source_hash TEXT NOT NULL, arch TEXT NOT NULL, options TEXT NOT NULL,
  compiler_version TEXT NOT NULL, kernel_key TEXT NOT NULL DEFAULT '', lowered_name TEXT NOT NULL DEFAULT '',
  cubin BLOB NOT NULL, registers INTEGER NOT NULL DEFAULT -1, spill_stores INTEGER NOT NULL DEFAULT 0,
  spill_loads INTEGER NOT NULL DEFAULT 0, stack_bytes INTEGER NOT NULL DEFAULT 0, compile_ms REAL DEFAULT 0,
  log TEXT NOT NULL DEFAULT '', created TEXT NOT NULL,
  PRIMARY KEY (source_hash, arch, options, compiler_version));
CREATE TABLE measurements (id INTEGER PRIMARY KEY, device TEXT NOT NULL, variant_id TEXT NOT NULL,
  problem_key TEXT NOT NULL, flags_key TEXT NOT NULL, row_stride INTEGER NOT NULL DEFAULT 0,
  input_dist TEXT NOT NULL, l2_mode TEXT NOT NULL, outcome TEXT NOT NULL, median_us REAL DEFAULT 0,
  repetitions INTEGER NOT NULL DEFAULT 0, samples_json TEXT NOT NULL DEFAULT '[]',
  verified INTEGER NOT NULL DEFAULT 0, message TEXT NOT NULL DEFAULT '', tune_run TEXT NOT NULL DEFAULT '',
  created TEXT NOT NULL, UNIQUE (device, variant_id, problem_key, input_dist, l2_mode));
CREATE INDEX measurements_by_problem ON measurements (device, problem_key);
CREATE TABLE winners (device TEXT NOT NULL, problem_key TEXT NOT NULL, flags_key TEXT NOT NULL,
  row_stride INTEGER NOT NULL DEFAULT 0, variant_id TEXT NOT NULL, median_us REAL DEFAULT 0,
  default_us REAL DEFAULT 0, baseline_us REAL DEFAULT 0, baseline_name TEXT NOT NULL DEFAULT '',
  measurement_id INTEGER NOT NULL DEFAULT 0, updated TEXT NOT NULL, PRIMARY KEY (device, problem_key));
CREATE INDEX winners_by_flags ON winners (flags_key, device);
INSERT INTO devices VALUES ('gpu-v1', 'NVIDIA A100', 8, 0, 108, 41943040, 12040, 'nvrtc 12.4', '{}',
  '2024-01-01T00:00:00.000Z');
INSERT INTO variants VALUES ('radix_f32_b256_r11_s4096_c1_t1_m1_i0', 'kernel_f32_b256_r11_c1_i0',
  '{"block_threads":256,"cluster":1,"dtype":"f32","half_first":false,"items":0,"radix_bits":11,"rounds":1,"row_cache":true,"smem_buffer":4096}',
  'sha-v1');
INSERT INTO measurements (device, variant_id, problem_key, flags_key, row_stride, input_dist, l2_mode, outcome,
  median_us, repetitions, samples_json, verified, message, tune_run, created)
  VALUES ('gpu-v1', 'radix_f32_b256_r11_s4096_c1_t1_m1_i0', 'f32|b8|n4096|k64|largest|noranges|novalues|unsorted',
  'f32|largest|noranges|novalues|unsorted', 0, 'normal', 'rotate', 'ok', 12.5, 50, '[12.0,12.5,13.0]', 1, '',
  'old-run', '2024-01-01T00:00:01.000Z');
INSERT INTO winners VALUES ('gpu-v1', 'f32|b8|n4096|k64|largest|noranges|novalues|unsorted',
  'f32|largest|noranges|novalues|unsorted', 0, 'radix_f32_b256_r11_s4096_c1_t1_m1_i0', 12.5, 20.0, 0, '', 1,
  '2024-01-01T00:00:02.000Z');
PRAGMA user_version = 1;
)sql";

// ---- keys ------------------------------------------------------------------

TEST(CacheTest, ProblemKeyRoundTrips) {
  std::vector<Problem> problems = {MakeProblem(1, 1, 0), MakeProblem(64, 32768, 2048),
                                   MakeProblem(3, 1000003, 1000003, DType::kBF16),
                                   MakeProblem(2147483647, 2147483647, 2147483647, DType::kF16)};
  Problem flags = MakeProblem(7, 100, 5);
  flags.largest = false;
  flags.ranges = true;
  flags.values = true;
  flags.sorted = true;
  problems.push_back(flags);
  for (const Problem& p : problems) {
    const std::string key = ProblemKey(p);
    auto parsed = ParseProblemKey(key);
    ASSERT_TRUE(parsed.ok()) << key << ": " << parsed.status().ToString();
    ExpectSameProblem(*parsed, p);
    EXPECT_EQ(ProblemKey(*parsed), key);
  }
  EXPECT_EQ(ProblemKey(MakeProblem(64, 32768, 2048)), "f32|b64|n32768|k2048|largest|noranges|novalues|unsorted");
  EXPECT_EQ(ProblemKey(flags), "f32|b7|n100|k5|smallest|ranges|values|sorted");
  EXPECT_EQ(FlagsKey(flags), "f32|smallest|ranges|values|sorted");
  // The stride is not part of the key: one kernel serves any stride >= n.
  Problem strided = MakeProblem(64, 32768, 2048);
  strided.row_stride = 40000;
  EXPECT_EQ(ProblemKey(strided), ProblemKey(MakeProblem(64, 32768, 2048)));
}

TEST(CacheTest, ParseProblemKeyRejectsMalformedKeys) {
  const char* bad[] = {
      "",
      "f32",
      "f32|b64|n32768|k2048|largest|noranges|novalues",             // 7 fields
      "f32|b64|n32768|k2048|largest|noranges|novalues|unsorted|x",  // 9 fields
      "fp32|b64|n32768|k2048|largest|noranges|novalues|unsorted",   // alias, not canonical
      "f32|64|n32768|k2048|largest|noranges|novalues|unsorted",     // missing tag
      "f32|b-1|n32768|k2048|largest|noranges|novalues|unsorted",    // negative
      "f32|b64|n|k2048|largest|noranges|novalues|unsorted",         // no digits
      "f32|b64|n12x|k2048|largest|noranges|novalues|unsorted",      // trailing garbage
      "f32|b64|n0|k0|largest|noranges|novalues|unsorted",           // n must be >= 1
      "f32|b64|n32768|k2048|biggest|noranges|novalues|unsorted",
      "f32|b64|n32768|k2048|largest|range|novalues|unsorted",
      "f32|b64|n32768|k2048|largest|noranges|value|unsorted",
      "f32|b64|n32768|k2048|largest|noranges|novalues|sort",
      "f32|b99999999999999999999|n1|k1|largest|noranges|novalues|unsorted",  // overflow
  };
  for (const char* key : bad) {
    auto p = ParseProblemKey(key);
    ASSERT_FALSE(p.ok()) << "accepted '" << key << "'";
    EXPECT_EQ(p.status().code(), Code::kInvalidArgument);
    EXPECT_NE(p.status().message().find("'" + std::string(key) + "'"), std::string::npos) << p.status().ToString();
  }
}

TEST(CacheTest, OutcomeNamesRoundTrip) {
  for (Outcome o : {Outcome::kOk, Outcome::kCompileError, Outcome::kResourceLimit, Outcome::kWrongResult,
                    Outcome::kCrash, Outcome::kTimeout, Outcome::kSkipped}) {
    auto parsed = ParseOutcome(OutcomeName(o));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, o);
  }
  EXPECT_EQ(ParseOutcome("exploded").status().code(), Code::kInvalidArgument);
}

// ---- schema ----------------------------------------------------------------

TEST(CacheTest, CreatesSchemaWithVersionAndWal) {
  const std::string path = TempPath("new") + "/nested/dirs/tuning.db";  // parents do not exist
  auto c = OpenOrDie(path);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->path(), path);
  EXPECT_EQ(c->schema_version(), kSchemaVersion);
  EXPECT_TRUE(c->IntegrityCheck().ok());
  EXPECT_EQ(RawQuery(path, "PRAGMA user_version"), std::to_string(kSchemaVersion));
  EXPECT_EQ(RawQuery(path, "PRAGMA journal_mode"), "wal");
  for (const char* table : {"devices", "variants", "binaries", "measurements", "winners", "baselines", "meta"}) {
    EXPECT_EQ(RawQuery(path, std::string("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '") +
                                 table + "'"),
              "1")
        << table;
  }
  EXPECT_EQ(RawQuery(path, "SELECT value FROM meta WHERE key = 'application'"), "topk-tune");
  c.reset();
  // Reopening an up-to-date file changes nothing and works.
  auto again = OpenOrDie(path);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->schema_version(), kSchemaVersion);
  EXPECT_EQ(*again->CountMeasurements(), 0);
}

TEST(CacheTest, OpensEmptyFileAsNewCache) {
  const std::string path = TempPath("empty.db");
  WriteFile(path, "");
  auto c = OpenOrDie(path);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->schema_version(), kSchemaVersion);
}

TEST(CacheTest, MigratesVersion1KeepingRows) {
  const std::string path = TempPath("v1.db");
  RawExec(path, kVersion1Schema);
  ASSERT_EQ(RawQuery(path, "PRAGMA user_version"), "1");

  // Read-only opening reads a v1 file as it is, without migrating it.
  {
    auto ro = Cache::OpenReadOnly(path);
    ASSERT_TRUE(ro.ok()) << ro.status().ToString();
    EXPECT_EQ((*ro)->schema_version(), 1);
    auto ms = (*ro)->Measurements("gpu-v1", nullptr);
    ASSERT_TRUE(ms.ok()) << ms.status().ToString();
    ASSERT_EQ(ms->size(), 1u);
    EXPECT_EQ((*ms)[0].p10_us, 0);
    auto bs = (*ro)->Baselines("");
    ASSERT_TRUE(bs.ok()) << bs.status().ToString();
    EXPECT_TRUE(bs->empty());
  }
  EXPECT_EQ(RawQuery(path, "PRAGMA user_version"), "1");

  auto c = OpenOrDie(path);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->schema_version(), 2);
  EXPECT_EQ(RawQuery(path, "PRAGMA user_version"), "2");
  EXPECT_EQ(RawQuery(path, "SELECT value FROM meta WHERE key = 'migrated_from_v1'").size(), 24u);

  // Every v1 row survived, readable through the v2 API.
  auto dev = c->FindDevice("gpu-v1");
  ASSERT_TRUE(dev.ok() && dev->has_value());
  EXPECT_EQ((*dev)->name, "NVIDIA A100");
  EXPECT_EQ((*dev)->l2_bytes, 41943040);
  const Problem p = MakeProblem(8, 4096, 64);
  auto ms = c->Measurements("gpu-v1", &p);
  ASSERT_TRUE(ms.ok()) << ms.status().ToString();
  ASSERT_EQ(ms->size(), 1u);
  const Measurement& m = (*ms)[0];
  EXPECT_EQ(m.id, 1);
  EXPECT_EQ(m.config, MakeConfig(256));
  EXPECT_EQ(m.outcome, Outcome::kOk);
  EXPECT_DOUBLE_EQ(m.median_us, 12.5);
  EXPECT_EQ(m.p10_us, 0);  // v1 did not record the spread
  EXPECT_EQ(m.samples_us, (std::vector<double>{12.0, 12.5, 13.0}));
  EXPECT_EQ(m.tune_run, "old-run");
  EXPECT_EQ(m.created, "2024-01-01T00:00:01.000Z");
  auto w = c->FindWinner("gpu-v1", p);
  ASSERT_TRUE(w.ok() && w->has_value());
  EXPECT_EQ((*w)->variant_id, "radix_f32_b256_r11_s4096_c1_t1_m1_i0");
  EXPECT_EQ((*w)->measurement_id, 1);
  EXPECT_DOUBLE_EQ((*w)->default_us, 20.0);
  auto v = c->FindVariant("radix_f32_b256_r11_s4096_c1_t1_m1_i0");
  ASSERT_TRUE(v.ok() && v->has_value());
  EXPECT_EQ((*v)->source_hash, "sha-v1");

  // The v2 additions work on the migrated file.
  Baseline b;
  b.device_fingerprint = "gpu-v1";
  b.problem = p;
  b.name = "torch.topk";
  b.median_us = 30;
  EXPECT_TRUE(c->PutBaseline(b).ok());
  Measurement fresh = MakeMeasurement("gpu-v1", MakeConfig(512), p, 10);
  EXPECT_TRUE(c->PutMeasurement(fresh).ok());
  auto after = c->Measurements("gpu-v1", &p);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), 2u);
  EXPECT_DOUBLE_EQ((*after)[1].p10_us, fresh.p10_us);
  EXPECT_TRUE(c->IntegrityCheck().ok());
}

TEST(CacheTest, RefusesNewerSchema) {
  const std::string path = TempPath("future.db");
  RawExec(path, "CREATE TABLE things (x); INSERT INTO things VALUES (1); PRAGMA user_version = 3;");
  const std::string before = ReadFile(path);
  const auto mtime = fs::last_write_time(path);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // an mtime change would be visible

  for (bool read_only : {false, true}) {
    auto c = read_only ? Cache::OpenReadOnly(path) : Cache::Open(path);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), Code::kFailedPrecondition);
    const std::string& msg = c.status().message();
    EXPECT_NE(msg.find("version 3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("version 2"), std::string::npos) << msg;
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
  }
  EXPECT_EQ(ReadFile(path), before);
  EXPECT_EQ(fs::last_write_time(path), mtime);
  EXPECT_FALSE(fs::exists(path + "-wal"));
  EXPECT_FALSE(fs::exists(path + "-journal"));
}

TEST(CacheTest, RefusesGarbageFile) {
  const std::string path = TempPath("garbage.db");
  const std::string garbage = "this is not a database\n" + std::string(5000, 'x');
  WriteFile(path, garbage);
  const auto mtime = fs::last_write_time(path);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (bool read_only : {false, true}) {
    auto c = read_only ? Cache::OpenReadOnly(path) : Cache::Open(path);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), Code::kDataLoss) << c.status().ToString();
    EXPECT_NE(c.status().message().find(path), std::string::npos);
  }
  EXPECT_EQ(ReadFile(path), garbage);
  EXPECT_EQ(fs::last_write_time(path), mtime);
  EXPECT_FALSE(fs::exists(path + "-wal"));

  // Short garbage too (shorter than the SQLite header).
  const std::string tiny = TempPath("tiny.db");
  WriteFile(tiny, "hi");
  auto c = Cache::Open(tiny);
  EXPECT_EQ(c.status().code(), Code::kDataLoss);
  EXPECT_EQ(ReadFile(tiny), "hi");
}

TEST(CacheTest, RefusesCorruptSqliteFile) {
  const std::string path = TempPath("corrupt.db");
  {
    auto c = OpenOrDie(path);
    ASSERT_TRUE(c);
    Populate(*c, "gpu-a");
  }
  // Keep the header, smash every page after the first.
  std::string bytes = ReadFile(path);
  ASSERT_GT(bytes.size(), 4096u);
  for (size_t i = 4096; i < bytes.size(); ++i) bytes[i] = static_cast<char>(0xA5);
  WriteFile(path, bytes);
  auto c = Cache::Open(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kDataLoss) << c.status().ToString();
}

TEST(CacheTest, RefusesForeignSqliteDatabase) {
  const std::string path = TempPath("foreign.db");
  RawExec(path, "CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT);");
  const std::string before = ReadFile(path);
  auto c = Cache::Open(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kFailedPrecondition) << c.status().ToString();
  EXPECT_NE(c.status().message().find("not a topk-tune cache"), std::string::npos);
  EXPECT_EQ(ReadFile(path), before);
}

TEST(CacheTest, ReportsUnwritablePath) {
  // A regular file where a parent directory should be: creating the
  // directory fails whoever we run as (root ignores permission bits).
  const std::string blocker = TempPath("blocker");
  WriteFile(blocker, "a file");
  const std::string path = blocker + "/sub/tuning.db";
  auto c = Cache::Open(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kUnavailable);
  EXPECT_NE(c.status().message().find(path), std::string::npos) << c.status().ToString();

  auto dir = Cache::Open(TempPath("adir") + "/");
  EXPECT_FALSE(dir.ok());

  auto missing = Cache::OpenReadOnly(TempPath("missing.db"));
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_EQ(Cache::Open("").status().code(), Code::kInvalidArgument);
}

TEST(CacheTest, ReadOnlyCacheRefusesWrites) {
  const std::string path = TempPath("ro.db");
  {
    auto c = OpenOrDie(path);
    ASSERT_TRUE(c);
    Populate(*c, "gpu-a");
  }
  auto ro = Cache::OpenReadOnly(path);
  ASSERT_TRUE(ro.ok()) << ro.status().ToString();
  EXPECT_EQ(*(*ro)->CountMeasurements(), 2);
  EXPECT_EQ((*ro)->PutDevice(MakeDevice("gpu-b")).code(), Code::kFailedPrecondition);
  EXPECT_EQ((*ro)->PutMeasurement(MakeMeasurement("gpu-b", MakeConfig(256), MakeProblem(1, 10, 1), 1)).status().code(),
            Code::kFailedPrecondition);
  EXPECT_EQ(*(*ro)->CountMeasurements(), 2);
}

bool HasSideFiles(const std::string& path) {
  for (const char* suffix : {"-wal", "-shm", "-journal"})
    if (fs::exists(path + suffix)) return true;
  return false;
}

TEST(CacheTest, ReadOnlyOpenLeavesNoFilesAndChangesNothing) {
  const std::string path = TempPath("ro_nofiles.db");
  {
    auto c = OpenOrDie(path);
    ASSERT_TRUE(c);
    Populate(*c, "gpu-a");
  }
  ASSERT_FALSE(HasSideFiles(path));
  const std::string before = ReadFile(path);
  const auto mtime = fs::last_write_time(path);
  {
    auto ro = Cache::OpenReadOnly(path);
    ASSERT_TRUE(ro.ok()) << ro.status().ToString();
    EXPECT_EQ(*(*ro)->CountMeasurements(), 2);
    EXPECT_TRUE((*ro)->Winners("").ok());
    EXPECT_TRUE((*ro)->IntegrityCheck().ok());
    // Export reads every table.
    EXPECT_TRUE((*ro)->ExportJsonl(TempPath("ro_nofiles.jsonl"), true).ok());
  }
  EXPECT_FALSE(HasSideFiles(path));
  EXPECT_EQ(ReadFile(path), before);
  EXPECT_EQ(fs::last_write_time(path), mtime);
  // The journal mode stays what the writer set.
  EXPECT_EQ(RawQuery(path, "PRAGMA journal_mode"), "wal");
}

TEST(CacheTest, ReadOnlyOpenOfWriteProtectedFile) {
  const std::string dir = TempPath("ro_file_dir");
  fs::create_directories(dir);
  const std::string path = dir + "/tuning.db";
  {
    auto c = OpenOrDie(path);
    ASSERT_TRUE(c);
    Populate(*c, "gpu-a");
  }
  fs::permissions(path, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  {
    auto ro = Cache::OpenReadOnly(path);
    ASSERT_TRUE(ro.ok()) << ro.status().ToString();
    EXPECT_EQ(*(*ro)->CountMeasurements(), 2);
  }
  EXPECT_FALSE(HasSideFiles(path));
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
}

TEST(CacheTest, ReadOnlyOpenInWriteProtectedDirectory) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  const std::string dir = TempPath("ro_dir");
  fs::create_directories(dir);
  const std::string path = dir + "/tuning.db";
  {
    auto c = OpenOrDie(path);
    ASSERT_TRUE(c);
    Populate(*c, "gpu-a");
  }
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
  {
    auto ro = Cache::OpenReadOnly(path);
    ASSERT_TRUE(ro.ok()) << ro.status().ToString();
    EXPECT_EQ(*(*ro)->CountMeasurements(), 2);
    auto w = (*ro)->Winners("");
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    // Merge reads its input the same way.
    auto into = OpenOrDie(TempPath("ro_dir_into.db"));
    ASSERT_TRUE(into);
    EXPECT_TRUE(into->Merge(path).ok());
    EXPECT_EQ(*into->CountMeasurements(), 2);
  }
  // An older schema reads there too, without a migration.
  fs::permissions(dir, fs::perms::owner_all);
  const std::string v1 = dir + "/v1.db";
  RawExec(v1, kVersion1Schema);
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
  {
    auto ro = Cache::OpenReadOnly(v1);
    ASSERT_TRUE(ro.ok()) << ro.status().ToString();
    EXPECT_EQ((*ro)->schema_version(), 1);
    EXPECT_EQ(*(*ro)->CountMeasurements(), 1);
  }
  fs::permissions(dir, fs::perms::owner_all);
  EXPECT_FALSE(HasSideFiles(path));
  EXPECT_FALSE(HasSideFiles(v1));
}

TEST(CacheTest, ReadOnlyOpenOfVersion1FileLeavesNoFiles) {
  const std::string path = TempPath("v1_ro.db");
  RawExec(path, kVersion1Schema);
  RawExec(path, "PRAGMA journal_mode = WAL");  // as a v1 writer left it
  ASSERT_FALSE(HasSideFiles(path));
  const std::string before = ReadFile(path);
  {
    auto ro = Cache::OpenReadOnly(path);
    ASSERT_TRUE(ro.ok()) << ro.status().ToString();
    EXPECT_EQ((*ro)->schema_version(), 1);
    EXPECT_EQ(*(*ro)->CountMeasurements(), 1);
  }
  EXPECT_FALSE(HasSideFiles(path));
  EXPECT_EQ(ReadFile(path), before);
  EXPECT_EQ(RawQuery(path, "PRAGMA user_version"), "1");
}

TEST(CacheTest, ReadOnlyOpenSeesWhatAnOpenWriterCommitted) {
  const std::string path = TempPath("ro_with_writer.db");
  auto w = OpenOrDie(path);
  ASSERT_TRUE(w);
  Populate(*w, "gpu-a");  // committed, still in the writer's WAL
  {
    auto ro = Cache::OpenReadOnly(path);
    ASSERT_TRUE(ro.ok()) << ro.status().ToString();
    EXPECT_EQ(*(*ro)->CountMeasurements(), 2);
    // A later commit is seen by the next read.
    ASSERT_TRUE(w->PutMeasurement(MakeMeasurement("gpu-b", MakeConfig(256), MakeProblem(1, 10, 1), 1)).ok());
    EXPECT_EQ(*(*ro)->CountMeasurements(), 3);
  }
  w.reset();
  EXPECT_FALSE(HasSideFiles(path));  // the writer's close removed its files
}

TEST(CacheTest, InMemoryPathIsRefused) {
  for (const char* p : {":memory:", "file::memory:", "file:x.db?mode=memory", ""}) {
    auto c = Cache::Open(p);
    EXPECT_FALSE(c.ok()) << p;
    auto ro = Cache::OpenReadOnly(p);
    EXPECT_FALSE(ro.ok()) << p;
  }
  EXPECT_EQ(Cache::Open(":memory:").status().code(), Code::kInvalidArgument);
  EXPECT_FALSE(fs::exists(":memory:"));
}

// ---- record round trips ----------------------------------------------------

TEST(CacheTest, DevicesRoundTrip) {
  auto c = OpenOrDie(TempPath("devices.db"));
  ASSERT_TRUE(c);
  const DeviceRecord a = MakeDevice("gpu-a");
  DeviceRecord b = MakeDevice("gpu-b");
  b.name = "NVIDIA H200";
  b.sm_count = 132;
  ASSERT_TRUE(c->PutDevice(a).ok());
  ASSERT_TRUE(c->PutDevice(b).ok());
  auto found = c->FindDevice("gpu-a");
  ASSERT_TRUE(found.ok() && found->has_value());
  ExpectSameDevice(**found, a);
  EXPECT_EQ((*found)->ArchName(), "sm_90");
  auto none = c->FindDevice("gpu-x");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  b.driver_version = 13010;  // a Put of the same fingerprint updates it
  ASSERT_TRUE(c->PutDevice(b).ok());
  auto all = c->Devices();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  ExpectSameDevice((*all)[0], a);
  ExpectSameDevice((*all)[1], b);
  EXPECT_EQ(c->PutDevice(DeviceRecord{}).code(), Code::kInvalidArgument);
}

TEST(CacheTest, BinariesRoundTripWithZeroBytes) {
  auto c = OpenOrDie(TempPath("binaries.db"));
  ASSERT_TRUE(c);
  const BinaryRecord b = MakeBinary("hash1");
  ASSERT_TRUE(c->PutBinary(b).ok());
  auto found = c->FindBinary("hash1", "sm_90", b.options, b.compiler_version);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  ASSERT_TRUE(found->has_value());
  ExpectSameBinary(**found, b);
  EXPECT_EQ((*found)->cubin.size(), 264u);

  // Each part of the key matters.
  for (auto [hash, arch, options, compiler] : {std::tuple{"hash2", "sm_90", b.options, b.compiler_version},
                                               {"hash1", "sm_80", b.options, b.compiler_version},
                                               {"hash1", "sm_90", std::string("-O2"), b.compiler_version},
                                               {"hash1", "sm_90", b.options, std::string("x")}}) {
    auto miss = c->FindBinary(hash, arch, options, compiler);
    ASSERT_TRUE(miss.ok());
    EXPECT_FALSE(miss->has_value()) << hash << " " << arch << " " << options << " " << compiler;
  }

  // Put replaces; an empty cubin stays an (empty) blob.
  BinaryRecord empty = b;
  empty.cubin.clear();
  empty.log = "";
  ASSERT_TRUE(c->PutBinary(empty).ok());
  EXPECT_EQ(*c->CountBinaries(), 1);
  found = c->FindBinary("hash1", "sm_90", b.options, b.compiler_version);
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_TRUE((*found)->cubin.empty());
}

TEST(CacheTest, MeasurementsRoundTripIncludingFailures) {
  auto c = OpenOrDie(TempPath("measurements.db"));
  ASSERT_TRUE(c);
  const Problem p = MakeProblem(64, 32768, 2048);
  Problem q = MakeProblem(1, 100, 10, DType::kF16);
  q.row_stride = 128;
  q.sorted = true;

  std::vector<Measurement> written;
  written.push_back(MakeMeasurement("gpu-a", MakeConfig(512), p, 41.5));
  const Outcome failures[] = {Outcome::kCompileError, Outcome::kResourceLimit, Outcome::kWrongResult,
                              Outcome::kCrash,        Outcome::kTimeout,       Outcome::kSkipped};
  int block = 128;
  for (Outcome o : failures) {
    Measurement m = MakeMeasurement("gpu-a", MakeConfig(block), p, 0);
    block += 32;
    m.outcome = o;
    m.verified = false;
    m.samples_us.clear();
    m.message = std::string("failed: ") + OutcomeName(o) + " \"quoted\"\nsecond line";
    written.push_back(m);
  }
  Measurement other_problem = MakeMeasurement("gpu-a", MakeConfig(256), q, 3.25);
  other_problem.input_dist = "all_equal";
  other_problem.l2_mode = "hot";
  other_problem.median_us = std::nan("");  // NaN survives (stored as NULL)
  written.push_back(other_problem);
  written.push_back(MakeMeasurement("gpu-b", MakeConfig(512), p, 40.0));

  std::vector<int64_t> ids;
  for (const Measurement& m : written) {
    auto id = c->PutMeasurement(m);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ids.push_back(*id);
  }
  EXPECT_EQ(*c->CountMeasurements(), static_cast<int64_t>(written.size()));

  auto of_p = c->Measurements("gpu-a", &p);
  ASSERT_TRUE(of_p.ok()) << of_p.status().ToString();
  ASSERT_EQ(of_p->size(), 1u + std::size(failures));
  for (size_t i = 0; i < of_p->size(); ++i) {
    ExpectSameMeasurement((*of_p)[i], written[i]);
    EXPECT_EQ((*of_p)[i].id, ids[i]);
    EXPECT_EQ((*of_p)[i].created.size(), 24u) << (*of_p)[i].created;  // 2025-01-31T12:00:00.123Z
    EXPECT_EQ((*of_p)[i].created.back(), 'Z');
  }

  auto of_q = c->Measurements("gpu-a", &q);
  ASSERT_TRUE(of_q.ok());
  ASSERT_EQ(of_q->size(), 1u);
  EXPECT_TRUE(std::isnan((*of_q)[0].median_us));
  (*of_q)[0].median_us = 0;
  other_problem.median_us = 0;
  ExpectSameMeasurement((*of_q)[0], other_problem);

  EXPECT_EQ(c->Measurements("gpu-a", nullptr)->size(), written.size() - 1);
  EXPECT_EQ(c->Measurements("", nullptr)->size(), written.size());
  EXPECT_EQ(c->Measurements("gpu-b", &q)->size(), 0u);

  // Re-timing the same key replaces the row and keeps its id.
  NextMillisecond();
  Measurement retimed = written[0];
  retimed.median_us = 39.0;
  retimed.samples_us = {39.0};
  retimed.tune_run = "run-2";
  auto id = c->PutMeasurement(retimed);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, ids[0]);
  EXPECT_EQ(*c->CountMeasurements(), static_cast<int64_t>(written.size()));
  auto again = c->Measurements("gpu-a", &p);
  ASSERT_TRUE(again.ok());
  ExpectSameMeasurement((*again)[0], retimed);
  EXPECT_GT((*again)[0].created, (*of_p)[0].created);

  // A missing variant id is taken from the config.
  Measurement anonymous = MakeMeasurement("gpu-c", MakeConfig(640), p, 1);
  anonymous.variant_id.clear();
  ASSERT_TRUE(c->PutMeasurement(anonymous).ok());
  EXPECT_EQ(c->Measurements("gpu-c", nullptr)->at(0).variant_id, MakeConfig(640).Id());
  EXPECT_EQ(c->PutMeasurement(Measurement{}).status().code(), Code::kInvalidArgument);
}

TEST(CacheTest, HasMeasurementForResume) {
  auto c = OpenOrDie(TempPath("resume.db"));
  ASSERT_TRUE(c);
  const Problem p = MakeProblem(64, 32768, 2048);
  Measurement crashed = MakeMeasurement("gpu-a", MakeConfig(512), p, 0);
  crashed.outcome = Outcome::kCrash;
  ASSERT_TRUE(c->PutMeasurement(crashed).ok());
  const std::string v = MakeConfig(512).Id();

  auto has = [&](const std::string& dev, const std::string& variant, const Problem& prob, const std::string& dist,
                 const std::string& l2) {
    auto r = c->HasMeasurement(dev, variant, prob, dist, l2);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() && *r;
  };
  EXPECT_TRUE(has("gpu-a", v, p, "normal", "rotate"));  // a failure counts: resume skips it
  Problem strided = p;
  strided.row_stride = 40000;
  EXPECT_TRUE(has("gpu-a", v, strided, "normal", "rotate"));
  EXPECT_FALSE(has("gpu-b", v, p, "normal", "rotate"));
  EXPECT_FALSE(has("gpu-a", MakeConfig(256).Id(), p, "normal", "rotate"));
  EXPECT_FALSE(has("gpu-a", v, MakeProblem(64, 32768, 1024), "normal", "rotate"));
  EXPECT_FALSE(has("gpu-a", v, p, "uniform", "rotate"));
  EXPECT_FALSE(has("gpu-a", v, p, "normal", "hot"));
}

TEST(CacheTest, WinnersRoundTrip) {
  auto c = OpenOrDie(TempPath("winners.db"));
  ASSERT_TRUE(c);
  const Problem p = MakeProblem(64, 32768, 2048);
  auto mid = c->PutMeasurement(MakeMeasurement("gpu-a", MakeConfig(512), p, 41.5));
  ASSERT_TRUE(mid.ok());
  Winner w = MakeWinner("gpu-a", MakeConfig(512), p, 41.5);
  w.measurement_id = *mid;
  ASSERT_TRUE(c->PutWinner(w).ok());
  auto found = c->FindWinner("gpu-a", p);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  ASSERT_TRUE(found->has_value());
  ExpectSameWinner(**found, w);
  EXPECT_EQ((*found)->measurement_id, *mid);
  EXPECT_EQ((*found)->updated.size(), 24u);
  EXPECT_FALSE(c->FindWinner("gpu-b", p)->has_value());
  EXPECT_FALSE(c->FindWinner("gpu-a", MakeProblem(64, 32768, 1024))->has_value());

  // Replacing the winner of a problem.
  NextMillisecond();
  Winner better = MakeWinner("gpu-a", MakeConfig(1024), p, 30.0);
  ASSERT_TRUE(c->PutWinner(better).ok());
  ExpectSameWinner(**c->FindWinner("gpu-a", p), better);
  ASSERT_TRUE(c->PutWinner(MakeWinner("gpu-b", MakeConfig(256), p, 50.0)).ok());
  EXPECT_EQ(c->Winners("gpu-a")->size(), 1u);
  EXPECT_EQ(c->Winners("")->size(), 2u);
  // The winner's config is recorded as a variant.
  auto v = c->FindVariant(MakeConfig(1024).Id());
  ASSERT_TRUE(v.ok() && v->has_value());
  EXPECT_EQ((*v)->config, MakeConfig(1024));
  EXPECT_EQ((*v)->kernel_key, MakeConfig(1024).KernelKey());
}

TEST(CacheTest, WinnersLikeFiltersByDtypeFlagsAndDevices) {
  auto c = OpenOrDie(TempPath("like.db"));
  ASSERT_TRUE(c);
  Problem sorted = MakeProblem(8, 4096, 64);
  sorted.sorted = true;
  Problem smallest = MakeProblem(8, 4096, 64);
  smallest.largest = false;
  const std::vector<std::pair<std::string, Problem>> rows = {
      {"gpu-a", MakeProblem(64, 32768, 2048)},
      {"gpu-a", MakeProblem(1, 1000, 10)},
      {"gpu-b", MakeProblem(4, 65536, 256)},
      {"gpu-c", MakeProblem(4, 65536, 256)},
      {"gpu-a", MakeProblem(64, 32768, 2048, DType::kF16)},  // other dtype
      {"gpu-a", sorted},                                     // other flags
      {"gpu-a", smallest},
  };
  for (const auto& [dev, p] : rows) ASSERT_TRUE(c->PutWinner(MakeWinner(dev, MakeConfig(512), p, 1)).ok());

  const Problem query = MakeProblem(2, 50000, 100);
  auto on_a = c->WinnersLike({"gpu-a"}, query);
  ASSERT_TRUE(on_a.ok()) << on_a.status().ToString();
  ASSERT_EQ(on_a->size(), 2u);
  for (const Winner& w : *on_a) {
    EXPECT_EQ(w.device_fingerprint, "gpu-a");
    EXPECT_EQ(FlagsKey(w.problem), FlagsKey(query));
  }
  EXPECT_EQ(c->WinnersLike({"gpu-a", "gpu-b"}, query)->size(), 3u);
  EXPECT_EQ(c->WinnersLike({"gpu-x"}, query)->size(), 0u);
  EXPECT_EQ(c->WinnersLike({}, query)->size(), 4u);  // every device
  EXPECT_EQ(c->WinnersLike({"gpu-a"}, MakeProblem(1, 10, 1, DType::kF16))->size(), 1u);
  auto like_sorted = c->WinnersLike({"gpu-a"}, sorted);
  ASSERT_EQ(like_sorted->size(), 1u);
  EXPECT_TRUE((*like_sorted)[0].problem.sorted);
}

TEST(CacheTest, BaselinesRoundTrip) {
  auto c = OpenOrDie(TempPath("baselines.db"));
  ASSERT_TRUE(c);
  const Problem p = MakeProblem(64, 32768, 2048);
  Baseline torch{"gpu-a", p, "torch.topk", 95.5, ""};
  Baseline cub{"gpu-a", p, "cub_segmented_sort", 300.25, ""};
  Baseline other{"gpu-b", p, "torch.topk", 90.0, ""};
  for (const Baseline& b : {torch, cub, other}) ASSERT_TRUE(c->PutBaseline(b).ok());
  torch.median_us = 94.0;  // re-measured: replaces
  ASSERT_TRUE(c->PutBaseline(torch).ok());
  auto on_a = c->Baselines("gpu-a");
  ASSERT_TRUE(on_a.ok()) << on_a.status().ToString();
  ASSERT_EQ(on_a->size(), 2u);
  EXPECT_EQ((*on_a)[0].name, "cub_segmented_sort");  // ordered by name
  EXPECT_DOUBLE_EQ((*on_a)[0].median_us, 300.25);
  EXPECT_EQ((*on_a)[1].name, "torch.topk");
  EXPECT_DOUBLE_EQ((*on_a)[1].median_us, 94.0);
  ExpectSameProblem((*on_a)[1].problem, p);
  EXPECT_EQ((*on_a)[1].created.size(), 24u);
  EXPECT_EQ(c->Baselines("")->size(), 3u);
  EXPECT_EQ(c->PutBaseline(Baseline{"gpu-a", p, "", 1, ""}).code(), Code::kInvalidArgument);
}

TEST(CacheTest, VariantsKeepTheirSourceHash) {
  auto c = OpenOrDie(TempPath("variants.db"));
  ASSERT_TRUE(c);
  const gen::Config cfg = MakeConfig(768);
  ASSERT_TRUE(c->PutVariant(cfg, "sha256:1234").ok());
  // Later measurements of the variant do not clear the hash.
  ASSERT_TRUE(c->PutMeasurement(MakeMeasurement("gpu-a", cfg, MakeProblem(1, 100, 5), 2)).ok());
  ASSERT_TRUE(c->PutVariant(cfg, "").ok());
  auto v = c->FindVariant(cfg.Id());
  ASSERT_TRUE(v.ok() && v->has_value());
  EXPECT_EQ((*v)->id, cfg.Id());
  EXPECT_EQ((*v)->config, cfg);
  EXPECT_EQ((*v)->source_hash, "sha256:1234");
  ASSERT_TRUE(c->PutVariant(cfg, "sha256:5678").ok());
  EXPECT_EQ((*c->FindVariant(cfg.Id()))->source_hash, "sha256:5678");
  EXPECT_FALSE(c->FindVariant("radix_nope")->has_value());
}

// ---- concurrency -----------------------------------------------------------

constexpr int kWritesPerWriter = 150;

// Writes kWritesPerWriter measurements with distinct keys through its own
// Cache object; returns how many failed.
int WriteMany(const std::string& path, const std::string& device) {
  auto c = Cache::Open(path);
  if (!c.ok()) {
    // Say why: a failure here is a race in Open that a rerun may not show.
    std::fprintf(stderr, "%s: Cache::Open failed: %s\n", device.c_str(), c.status().ToString().c_str());
    return kWritesPerWriter;
  }
  int failed = 0;
  for (int i = 0; i < kWritesPerWriter; ++i) {
    auto id = (*c)->PutMeasurement(MakeMeasurement(device, MakeConfig(512), MakeProblem(1, 1000 + i, 10), i));
    if (!id.ok()) {
      std::fprintf(stderr, "%s: write %d failed: %s\n", device.c_str(), i, id.status().ToString().c_str());
      ++failed;
    }
    if (i % 10 == 0) {
      // Readers interleave with the writers too.
      if (!(*c)->CountMeasurements().ok()) ++failed;
    }
  }
  return failed;
}

TEST(CacheTest, TwoWritersInThreads) {
  const std::string path = TempPath("threads.db");
  ASSERT_TRUE(OpenOrDie(path));  // create it first so both see the schema
  int failed_a = -1, failed_b = -1;
  std::thread a([&] { failed_a = WriteMany(path, "gpu-a"); });
  std::thread b([&] { failed_b = WriteMany(path, "gpu-b"); });
  a.join();
  b.join();
  EXPECT_EQ(failed_a, 0);
  EXPECT_EQ(failed_b, 0);
  auto c = OpenOrDie(path);
  ASSERT_TRUE(c);
  EXPECT_EQ(*c->CountMeasurements(), 2 * kWritesPerWriter);
  EXPECT_TRUE(c->IntegrityCheck().ok());
}

TEST(CacheTest, OneCacheSharedByThreads) {
  auto c = OpenOrDie(TempPath("shared.db"));
  ASSERT_TRUE(c);
  std::vector<std::thread> threads;
  std::atomic<int> failed{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        if (!c->PutMeasurement(
                  MakeMeasurement("gpu-" + std::to_string(t), MakeConfig(512), MakeProblem(1, 10 + i, 1), i))
                 .ok()) {
          ++failed;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(*c->CountMeasurements(), 200);
}

TEST(CacheTest, TwoWriterProcesses) {
  // A fresh file, opened first by both processes at once: creation and
  // migration race too.
  const std::string path = TempPath("processes.db");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // No gtest assertions in the child: it reports through its exit code.
    _exit(WriteMany(path, "gpu-child") == 0 ? 0 : 1);
  }
  const int failed = WriteMany(path, "gpu-parent");
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child process failed some writes";
  EXPECT_EQ(failed, 0);
  auto c = OpenOrDie(path);
  ASSERT_TRUE(c);
  EXPECT_EQ(*c->CountMeasurements(), 2 * kWritesPerWriter);
  EXPECT_EQ(c->Measurements("gpu-child", nullptr)->size(), static_cast<size_t>(kWritesPerWriter));
  EXPECT_TRUE(c->IntegrityCheck().ok());
}

// ---- export / import / merge -------------------------------------------------

TEST(CacheTest, ExportImportReproducesRows) {
  const std::string src_path = TempPath("src.db");
  auto src = OpenOrDie(src_path);
  ASSERT_TRUE(src);
  Populate(*src, "gpu-a");
  Populate(*src, "gpu-b");
  Measurement nan_sample = MakeMeasurement("gpu-a", MakeConfig(256), MakeProblem(3, 33, 3), 1);
  nan_sample.samples_us = {1.0, std::nan(""), 0.1 + 0.2};  // exact doubles survive JSON
  nan_sample.message = std::string("bytes \xff\xfe and a \0 zero", 22);
  ASSERT_TRUE(src->PutMeasurement(nan_sample).ok());

  const std::string jsonl = TempPath("out") + "/dump.jsonl";  // parent created by export
  ASSERT_TRUE(src->ExportJsonl(jsonl, /*include_binaries=*/true).ok());
  const std::vector<std::string> lines = ReadLines(jsonl);
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines[0].find(R"("table":"meta")"), std::string::npos);
  EXPECT_NE(ReadFile(jsonl).find(R"("table":"binaries")"), std::string::npos);

  auto dst = OpenOrDie(TempPath("dst.db"));
  ASSERT_TRUE(dst);
  ASSERT_TRUE(dst->ImportJsonl(jsonl).ok());

  auto src_devices = src->Devices();
  auto dst_devices = dst->Devices();
  ASSERT_EQ(dst_devices->size(), src_devices->size());
  for (size_t i = 0; i < src_devices->size(); ++i) ExpectSameDevice((*dst_devices)[i], (*src_devices)[i]);

  for (const char* dev : {"gpu-a", "gpu-b"}) {
    const BinaryRecord b = MakeBinary(std::string("hash-") + dev);
    auto got = dst->FindBinary(b.source_hash, b.arch, b.options, b.compiler_version);
    ASSERT_TRUE(got.ok() && got->has_value());
    ExpectSameBinary(**got, b);
  }
  auto src_ms = src->Measurements("", nullptr);
  auto dst_ms = dst->Measurements("", nullptr);
  ASSERT_EQ(dst_ms->size(), src_ms->size());
  for (size_t i = 0; i < src_ms->size(); ++i) {
    Measurement a = (*src_ms)[i], b = (*dst_ms)[i];
    EXPECT_EQ(a.created, b.created);  // timestamps are kept, not renewed
    if (a.samples_us.size() == 3 && std::isnan(a.samples_us[1])) {
      ASSERT_TRUE(std::isnan(b.samples_us[1]));
      EXPECT_EQ(b.samples_us[2], 0.1 + 0.2);
      a.samples_us[1] = b.samples_us[1] = 0;
      a.message = b.message;  // invalid UTF-8 is replaced in JSON
    }
    ExpectSameMeasurement(a, b);
  }
  auto src_w = src->Winners("");
  auto dst_w = dst->Winners("");
  ASSERT_EQ(dst_w->size(), src_w->size());
  for (size_t i = 0; i < src_w->size(); ++i) {
    ExpectSameWinner((*dst_w)[i], (*src_w)[i]);
    EXPECT_EQ((*dst_w)[i].updated, (*src_w)[i].updated);
    // The winner still points at its measurement (ids are per file).
    auto ms = dst->Measurements((*dst_w)[i].device_fingerprint, &(*dst_w)[i].problem);
    bool found = false;
    for (const Measurement& m : *ms)
      found |= m.id == (*dst_w)[i].measurement_id && m.variant_id == (*dst_w)[i].variant_id;
    EXPECT_TRUE(found);
  }
  EXPECT_EQ(dst->Baselines("")->size(), src->Baselines("")->size());
  EXPECT_EQ((*dst->FindVariant(MakeConfig(512).Id()))->source_hash, "sha256:abc");

  // Exporting the copy gives the same lines (but the export time).
  const std::string again = TempPath("again.jsonl");
  ASSERT_TRUE(dst->ExportJsonl(again, true).ok());
  std::vector<std::string> lines2 = ReadLines(again);
  ASSERT_EQ(lines2.size(), lines.size());
  for (size_t i = 1; i < lines.size(); ++i) EXPECT_EQ(lines2[i], lines[i]);

  // Importing the same file again changes nothing.
  ASSERT_TRUE(dst->ImportJsonl(jsonl).ok());
  EXPECT_EQ(*dst->CountMeasurements(), *src->CountMeasurements());
  EXPECT_TRUE(dst->IntegrityCheck().ok());
}

TEST(CacheTest, ExportWithoutBinariesLeavesThemOut) {
  auto c = OpenOrDie(TempPath("nobin.db"));
  ASSERT_TRUE(c);
  Populate(*c, "gpu-a");
  const std::string jsonl = TempPath("nobin.jsonl");
  ASSERT_TRUE(c->ExportJsonl(jsonl, /*include_binaries=*/false).ok());
  EXPECT_EQ(ReadFile(jsonl).find(R"("table":"binaries")"), std::string::npos);
  auto dst = OpenOrDie(TempPath("nobin2.db"));
  ASSERT_TRUE(dst->ImportJsonl(jsonl).ok());
  EXPECT_EQ(*dst->CountBinaries(), 0);
  EXPECT_EQ(*dst->CountMeasurements(), 2);
}

TEST(CacheTest, ImportKeepsExistingRows) {
  auto src = OpenOrDie(TempPath("a.db"));
  ASSERT_TRUE(src);
  Populate(*src, "gpu-a");
  const std::string jsonl = TempPath("a.jsonl");
  ASSERT_TRUE(src->ExportJsonl(jsonl, true).ok());
  auto dst = OpenOrDie(TempPath("b.db"));
  ASSERT_TRUE(dst);
  Populate(*dst, "gpu-b");
  ASSERT_TRUE(dst->ImportJsonl(jsonl).ok());
  EXPECT_EQ(*dst->CountMeasurements(), 4);
  EXPECT_EQ(*dst->CountBinaries(), 2);
  EXPECT_EQ(dst->Devices()->size(), 2u);
  EXPECT_EQ(dst->Winners("")->size(), 2u);
  EXPECT_EQ(dst->Baselines("")->size(), 2u);
}

TEST(CacheTest, ImportRejectsMalformedLineAndLeavesCacheUnchanged) {
  auto src = OpenOrDie(TempPath("src.db"));
  ASSERT_TRUE(src);
  Populate(*src, "gpu-a");
  const std::string good = TempPath("good.jsonl");
  ASSERT_TRUE(src->ExportJsonl(good, true).ok());
  std::vector<std::string> lines = ReadLines(good);
  ASSERT_GE(lines.size(), 6u);

  auto dst = OpenOrDie(TempPath("dst.db"));
  ASSERT_TRUE(dst);
  Populate(*dst, "gpu-b");
  const std::string before = TempPath("before.jsonl");
  ASSERT_TRUE(dst->ExportJsonl(before, true).ok());

  // Each broken file has valid rows before the bad line: they must not stay.
  std::vector<std::pair<std::string, std::string>> broken = {
      {"{not json", "not valid JSON"},
      {R"({"table":"measurements","device":"gpu-z"})", "missing field"},
      {R"({"table":"nonsense"})", "unknown table 'nonsense'"},
      {R"({"table":"winners","device":"gpu-z","problem":"f32|b1","row_stride":0})", "malformed problem key"},
      {R"([1,2,3])", "expected a JSON object"},
      {R"({"table":"meta","schema_version":99})", "newer"},
  };
  // Rows a later read could not serve: a measurement of a variant that is
  // neither an id nor a variants row (every export and report would fail on
  // it), and a variants row whose config is another id's.
  auto with_field = [&](const std::string& table, const std::string& field, const std::string& value) {
    for (const std::string& l : lines)
      if (l.find("\"table\":\"" + table + "\"") != std::string::npos)
        return std::regex_replace(l, std::regex("\"" + field + "\":\"[^\"]*\""), "\"" + field + "\":\"" + value + "\"",
                                  std::regex_constants::format_first_only);
    return std::string("no " + table + " row");
  };
  broken.push_back({with_field("measurements", "variant_id", "bogus_variant"), "neither a variant id nor"});
  broken.push_back({with_field("variants", "id", MakeConfig(256, 4).Id()), "has the config of"});
  for (const auto& [bad, expected] : broken) {
    std::vector<std::string> with_bad = lines;
    with_bad.insert(with_bad.end() - 1, bad);  // the bad line is the second to last
    const std::string path = TempPath("bad.jsonl");
    std::string text;
    for (const std::string& l : with_bad) text += l + "\n";
    WriteFile(path, text);
    Status s = dst->ImportJsonl(path);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    const std::string line_ref = path + ":" + std::to_string(with_bad.size() - 1) + ":";
    EXPECT_NE(s.message().find(line_ref), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find(expected), std::string::npos) << s.ToString();
  }
  EXPECT_EQ(dst->ImportJsonl(TempPath("nothing.jsonl")).code(), Code::kNotFound);

  // Not a single row changed.
  const std::string after = TempPath("after.jsonl");
  ASSERT_TRUE(dst->ExportJsonl(after, true).ok());
  std::vector<std::string> a = ReadLines(before), b = ReadLines(after);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 1; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]);
}

TEST(CacheTest, MergeTakesNewerRowsOnConflict) {
  const Problem p = MakeProblem(64, 32768, 2048);
  const Problem q = MakeProblem(8, 4096, 64);
  const std::string a_path = TempPath("merge_a.db");
  const std::string b_path = TempPath("merge_b.db");
  auto a = OpenOrDie(a_path);
  auto b = OpenOrDie(b_path);
  ASSERT_TRUE(a && b);

  // Key p: A measures first, B later (B is newer). Key q: the reverse.
  ASSERT_TRUE(a->PutMeasurement(MakeMeasurement("gpu", MakeConfig(512), p, 50)).ok());
  ASSERT_TRUE(a->PutWinner(MakeWinner("gpu", MakeConfig(512), p, 50)).ok());
  NextMillisecond();
  auto b_p = b->PutMeasurement(MakeMeasurement("gpu", MakeConfig(512), p, 45));
  ASSERT_TRUE(b_p.ok());
  Winner b_wp = MakeWinner("gpu", MakeConfig(512), p, 45);
  b_wp.measurement_id = *b_p;
  ASSERT_TRUE(b->PutWinner(b_wp).ok());
  ASSERT_TRUE(b->PutMeasurement(MakeMeasurement("gpu", MakeConfig(256), q, 9)).ok());
  ASSERT_TRUE(b->PutWinner(MakeWinner("gpu", MakeConfig(256), q, 9)).ok());
  Baseline old_base{"gpu", p, "torch.topk", 100, ""};
  ASSERT_TRUE(b->PutBaseline(old_base).ok());
  NextMillisecond();
  ASSERT_TRUE(a->PutMeasurement(MakeMeasurement("gpu", MakeConfig(256), q, 8)).ok());
  ASSERT_TRUE(a->PutWinner(MakeWinner("gpu", MakeConfig(256), q, 8)).ok());
  Baseline new_base{"gpu", p, "torch.topk", 90, ""};
  ASSERT_TRUE(a->PutBaseline(new_base).ok());
  // Rows only B has.
  ASSERT_TRUE(b->PutDevice(MakeDevice("gpu")).ok());
  ASSERT_TRUE(b->PutBinary(MakeBinary("only-b")).ok());
  ASSERT_TRUE(b->PutMeasurement(MakeMeasurement("gpu", MakeConfig(1024), p, 60)).ok());
  // Some unrelated rows in A so that ids differ between the files.
  ASSERT_TRUE(a->PutMeasurement(MakeMeasurement("gpu-a", MakeConfig(1024), q, 1)).ok());
  const int64_t b_count = *b->CountMeasurements();
  b.reset();
  const std::string b_bytes = ReadFile(b_path);

  ASSERT_TRUE(a->Merge(b_path).ok());

  EXPECT_EQ(ReadFile(b_path), b_bytes);  // the other file is only read
  auto wp = a->FindWinner("gpu", p);
  ASSERT_TRUE(wp.ok() && wp->has_value());
  EXPECT_DOUBLE_EQ((*wp)->median_us, 45);  // B's newer winner
  auto wq = a->FindWinner("gpu", q);
  EXPECT_DOUBLE_EQ((*wq)->median_us, 8);  // A's newer winner kept
  auto mp = a->Measurements("gpu", &p);
  ASSERT_EQ(mp->size(), 2u);
  EXPECT_DOUBLE_EQ((*mp)[0].median_us, 45);
  EXPECT_DOUBLE_EQ((*mp)[1].median_us, 60);
  auto mq = a->Measurements("gpu", &q);
  ASSERT_EQ(mq->size(), 1u);
  EXPECT_DOUBLE_EQ((*mq)[0].median_us, 8);
  // B's winner pointed at B's row id; in A it points at A's row of that key.
  EXPECT_EQ((*wp)->measurement_id, (*mp)[0].id);
  EXPECT_EQ(*a->CountMeasurements(), 4);
  EXPECT_EQ(*a->CountBinaries(), 1);
  EXPECT_TRUE(a->FindDevice("gpu")->has_value());
  auto bases = a->Baselines("gpu");
  ASSERT_EQ(bases->size(), 1u);
  EXPECT_DOUBLE_EQ((*bases)[0].median_us, 90);
  EXPECT_TRUE(a->IntegrityCheck().ok());

  // Merging again (or merging a file into itself) changes nothing.
  ASSERT_TRUE(a->Merge(b_path).ok());
  ASSERT_TRUE(a->Merge(a_path).ok());
  EXPECT_EQ(*a->CountMeasurements(), 4);
  EXPECT_EQ(b_count, 3);
}

TEST(CacheTest, MergeFromVersion1File) {
  const std::string v1 = TempPath("v1.db");
  RawExec(v1, kVersion1Schema);
  auto c = OpenOrDie(TempPath("into.db"));
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->Merge(v1).ok());
  EXPECT_EQ(*c->CountMeasurements(), 1);
  EXPECT_TRUE(c->FindWinner("gpu-v1", MakeProblem(8, 4096, 64))->has_value());
  EXPECT_EQ(RawQuery(v1, "PRAGMA user_version"), "1");  // not migrated
}

TEST(CacheTest, MergeOfBadFileFailsWithoutChangingCache) {
  auto c = OpenOrDie(TempPath("target.db"));
  ASSERT_TRUE(c);
  Populate(*c, "gpu-a");
  const std::string before = TempPath("before.jsonl");
  ASSERT_TRUE(c->ExportJsonl(before, true).ok());

  const std::string garbage = TempPath("garbage.db");
  WriteFile(garbage, "definitely not sqlite, but long enough to have a header");
  const std::string newer = TempPath("newer.db");
  RawExec(newer, "CREATE TABLE measurements (x); PRAGMA user_version = 7;");
  const std::string newer_bytes = ReadFile(newer);

  Status s = c->Merge(garbage);
  EXPECT_EQ(s.code(), Code::kDataLoss) << s.ToString();
  EXPECT_NE(s.message().find(garbage), std::string::npos);
  s = c->Merge(newer);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("version 7"), std::string::npos);
  EXPECT_EQ(c->Merge(TempPath("absent.db")).code(), Code::kNotFound);
  EXPECT_EQ(ReadFile(newer), newer_bytes);

  const std::string after = TempPath("after.jsonl");
  ASSERT_TRUE(c->ExportJsonl(after, true).ok());
  std::vector<std::string> a = ReadLines(before), b = ReadLines(after);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 1; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]);
}

TEST(CacheTest, IntegrityCheckPassesOnHealthyFile) {
  auto c = OpenOrDie(TempPath("integrity.db"));
  ASSERT_TRUE(c);
  Populate(*c, "gpu-a");
  Status s = c->IntegrityCheck();
  EXPECT_TRUE(s.ok()) << s.ToString();
}

// Import and merge hold winners to what a tune would store: a variant valid
// for the shape on the device's arch, and plausible times.
TEST(CacheImportValidationTest, ImplausibleWinnersAreRefusedAndNothingChanges) {
  const Problem p = MakeProblem(64, 32768, 2048);
  struct Case {
    std::string name;
    Winner w;
    std::string expected;
  };
  std::vector<Case> cases;
  cases.push_back({"negative", MakeWinner("gpu-v", MakeConfig(512), p, -5), "median_us"});
  cases.push_back({"huge", MakeWinner("gpu-v", MakeConfig(512), p, 1e308), "median_us"});
  cases.push_back({"nan-default", MakeWinner("gpu-v", MakeConfig(512), p, 40), "default_us"});
  cases.back().w.default_us = std::nan("");
  cases.push_back({"block1000", MakeWinner("gpu-v", MakeConfig(1000), p, 40), "not valid on sm_90"});
  cases.push_back({"dtype", MakeWinner("gpu-v", MakeConfig(512), MakeProblem(64, 32768, 2048, DType::kBF16), 40),
                   "not valid"});
  for (const auto& c : cases) {
    const std::string src_path = TempPath("valid-src-" + c.name + ".db");
    auto src = OpenOrDie(src_path);
    ASSERT_TRUE(src);
    ASSERT_TRUE(src->PutDevice(MakeDevice("gpu-v")).ok());
    ASSERT_TRUE(src->PutWinner(c.w).ok()) << c.name;  // the writer's own API does not judge
    const std::string jsonl = TempPath("valid-" + c.name + ".jsonl");
    ASSERT_TRUE(src->ExportJsonl(jsonl, false).ok());
    int line = 0;
    const std::vector<std::string> lines = ReadLines(jsonl);
    for (size_t i = 0; i < lines.size(); ++i)
      if (lines[i].find(R"("table":"winners")") != std::string::npos) line = static_cast<int>(i) + 1;
    ASSERT_GT(line, 0);

    auto dst = OpenOrDie(TempPath("valid-dst-" + c.name + ".db"));
    ASSERT_TRUE(dst);
    Status s = dst->ImportJsonl(jsonl);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << c.name << ": " << s.ToString();
    EXPECT_NE(s.message().find(jsonl + ":" + std::to_string(line) + ":"), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find(c.expected), std::string::npos) << c.name << ": " << s.ToString();
    Status m = dst->Merge(src_path);
    EXPECT_EQ(m.code(), Code::kInvalidArgument) << c.name << ": " << m.ToString();
    EXPECT_NE(m.message().find(c.expected), std::string::npos) << c.name << ": " << m.ToString();
    // All or nothing: not even the device row went in.
    auto devices = dst->Devices();
    ASSERT_TRUE(devices.ok());
    EXPECT_TRUE(devices->empty()) << c.name;
    auto winners = dst->Winners("");
    ASSERT_TRUE(winners.ok());
    EXPECT_TRUE(winners->empty()) << c.name;
  }
}

// Imported and merged binaries are cubins the runtime will load and run:
// rows that could not come from a compile are refused, nothing goes in.
TEST(CacheImportValidationTest, ImplausibleBinariesAreRefused) {
  struct Case {
    std::string name;
    std::function<void(BinaryRecord*)> spoil;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"arch", [](BinaryRecord* b) { b->arch = "x86"; }, "not sm_<digits>"},
      {"arch-suffix", [](BinaryRecord* b) { b->arch = "sm_90zz"; }, "not sm_<digits>"},
      {"not-elf", [](BinaryRecord* b) { b->cubin = {'M', 'Z', 0, 0, 1}; }, "not an ELF cubin"},
      {"empty", [](BinaryRecord* b) { b->cubin.clear(); }, "not an ELF cubin"},
      {"no-name", [](BinaryRecord* b) { b->lowered_name.clear(); }, "empty lowered_name"},
  };
  for (const auto& c : cases) {
    const std::string src_path = TempPath("bin-src-" + c.name + ".db");
    auto src = OpenOrDie(src_path);
    ASSERT_TRUE(src);
    BinaryRecord b = MakeBinary("hash-" + c.name);
    c.spoil(&b);
    ASSERT_TRUE(src->PutBinary(b).ok()) << c.name;
    const std::string jsonl = TempPath("bin-" + c.name + ".jsonl");
    ASSERT_TRUE(src->ExportJsonl(jsonl, /*include_binaries=*/true).ok());
    auto dst = OpenOrDie(TempPath("bin-dst-" + c.name + ".db"));
    ASSERT_TRUE(dst);
    Status s = dst->ImportJsonl(jsonl);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << c.name << ": " << s.ToString();
    EXPECT_NE(s.message().find(c.expected), std::string::npos) << c.name << ": " << s.ToString();
    Status m = dst->Merge(src_path);
    EXPECT_EQ(m.code(), Code::kInvalidArgument) << c.name << ": " << m.ToString();
    auto found = dst->FindBinary(b.source_hash, b.arch, b.options, b.compiler_version);
    ASSERT_TRUE(found.ok());
    EXPECT_FALSE(found->has_value()) << c.name;
  }
  // The well-formed one (sm_90a too) goes in.
  BinaryRecord good = MakeBinary("hash-good");
  good.arch = "sm_90a";
  auto src = OpenOrDie(TempPath("bin-src-good.db"));
  ASSERT_TRUE(src->PutBinary(good).ok());
  const std::string jsonl = TempPath("bin-good.jsonl");
  ASSERT_TRUE(src->ExportJsonl(jsonl, true).ok());
  auto dst = OpenOrDie(TempPath("bin-dst-good.db"));
  EXPECT_TRUE(dst->ImportJsonl(jsonl).ok());
}

TEST(CacheImportValidationTest, TheDevicesArchDecidesValidity) {
  // A cluster of 8 needs sm_90; on an sm_80 device the same winner is refused.
  const Problem p = MakeProblem(64, 32768, 2048);
  for (const auto& [cc, ok] : std::vector<std::pair<int, bool>>{{90, true}, {80, false}}) {
    const std::string src_path = TempPath("arch-src-" + std::to_string(cc) + ".db");
    auto src = OpenOrDie(src_path);
    ASSERT_TRUE(src);
    DeviceRecord d = MakeDevice("gpu-arch");
    d.cc_major = cc / 10;
    d.cc_minor = 0;
    ASSERT_TRUE(src->PutDevice(d).ok());
    ASSERT_TRUE(src->PutWinner(MakeWinner("gpu-arch", MakeConfig(512, 2), p, 40)).ok());
    auto dst = OpenOrDie(TempPath("arch-dst-" + std::to_string(cc) + ".db"));
    ASSERT_TRUE(dst);
    Status s = dst->Merge(src_path);
    EXPECT_EQ(s.ok(), ok) << cc << ": " << s.ToString();
  }
}

}  // namespace
}  // namespace topk::cache
