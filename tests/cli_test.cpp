// Tests of the topk-tune command line (tools/): every subcommand's help,
// usage errors and their exit codes, `space` and `emit`, and `show`,
// `report`, `export`, `import`, `merge` on fixture caches built here through
// cache::Cache. No GPU needed: `tune`, `devices` and `verify` are checked to
// fail cleanly with the no-GPU exit code. The binary runs with HOME,
// XDG_CACHE_HOME and TOPK_TUNE_DB pointed into the test's temp dir, so
// nothing depends on (or writes to) the user's cache.
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "cache/cache.hpp"
#include "generator/config.hpp"
#include "support/test_support.hpp"

extern char** environ;

namespace topk {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using topk::testing::TempPath;

constexpr int kOk = 0, kUsage = 2, kNoGpu = 3, kCache = 4;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

// A per-process sandbox for $HOME and the default cache path.
const std::string& Sandbox() {
  static const std::string dir = [] {
    const std::string d = TempPath("cli_home");
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// The path TOPK_TUNE_DB points at; no test may create it by accident.
std::string DefaultDb() { return Sandbox() + "/default-from-env.db"; }

// env_over replaces variables; the names in env_unset are removed.
Result RunCli(const std::vector<std::string>& args, const std::map<std::string, std::string>& env_over = {},
              const std::vector<std::string>& env_unset = {}, const std::string& stdin_path = "/dev/null") {
  const std::string bin = topk::testing::BinDir() + "/topk-tune";
  const std::string out = TempPath("stdout.txt"), err = TempPath("stderr.txt");
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  env["HOME"] = Sandbox();
  env["XDG_CACHE_HOME"] = Sandbox() + "/xdg";
  env["TOPK_TUNE_DB"] = DefaultDb();
  env.erase("TERM");
  for (const auto& [k, v] : env_over) env[k] = v;
  for (const auto& k : env_unset) env.erase(k);
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_s = {bin};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, stdin_path.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  Result r;
  if (rc != 0) {
    ADD_FAILURE() << "cannot run " << bin << ": " << std::strerror(rc);
    return r;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  fs::remove(out);
  fs::remove(err);
  return r;
}

std::string Describe(const Result& r) {
  return "exit " + std::to_string(r.code) + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
}

bool Contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

// ---------------------------------------------------------------- fixtures

Problem Shape(DType dt, int64_t b, int64_t n, int64_t k, bool ranges) {
  Problem p;
  p.dtype = dt;
  p.batch = b;
  p.n = n;
  p.k = k;
  p.ranges = ranges;
  return p;
}

cache::DeviceRecord Device(const std::string& name) {
  cache::DeviceRecord d;
  d.name = name;
  d.cc_major = 9;
  d.cc_minor = 0;
  d.sm_count = 132;
  d.l2_bytes = 50 << 20;
  d.driver_version = 13000;
  d.compiler_version = "nvrtc 13.0";
  d.fingerprint = name + "|sm_90|132sm|L2=" + std::to_string(d.l2_bytes);
  d.info_json = R"({"total_mem": 85899345920})";
  return d;
}

// A cache with one device, the given shapes, a few measured variants per
// shape (one of each failure kind on the first), winners and a torch.topk
// baseline for the first shape.
void MakeFixture(const std::string& path, const cache::DeviceRecord& dev, const std::vector<Problem>& shapes) {
  auto c = cache::Cache::Open(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE((*c)->PutDevice(dev).ok());
  const gen::Arch arch = gen::Arch::Sm90();
  for (size_t si = 0; si < shapes.size(); ++si) {
    const Problem& p = shapes[si];
    std::vector<gen::Config> space = gen::Enumerate(p, arch);
    const gen::Config def = gen::DefaultConfig(p, arch);
    std::vector<gen::Config> pick = {def};
    for (size_t i = 0; i < space.size() && pick.size() < 8; i += std::max<size_t>(1, space.size() / 7))
      if (!(space[i] == def)) pick.push_back(space[i]);
    cache::Winner w;
    w.device_fingerprint = dev.fingerprint;
    w.problem = p;
    w.median_us = 1e30;
    const cache::Outcome fails[] = {cache::Outcome::kCompileError, cache::Outcome::kResourceLimit,
                                    cache::Outcome::kWrongResult, cache::Outcome::kCrash, cache::Outcome::kTimeout};
    for (size_t i = 0; i < pick.size(); ++i) {
      cache::Measurement m;
      m.device_fingerprint = dev.fingerprint;
      m.config = pick[i];
      m.variant_id = pick[i].Id();
      m.problem = p;
      m.l2_mode = "hot";
      m.input_dist = "normal";
      const bool failed = si == 0 && i >= 3;
      m.outcome = failed ? fails[(i - 3) % 5] : cache::Outcome::kOk;
      if (failed) {
        m.message = "fixture failure";
      } else {
        m.median_us = 10.0 + static_cast<double>((i * 7) % 5) + static_cast<double>(si);
        if (i == 0) m.median_us = 20.0 + static_cast<double>(si);  // the default is slower
        m.p10_us = m.median_us * 0.98;
        m.p90_us = m.median_us * 1.03;
        m.min_us = m.median_us * 0.97;
        m.repetitions = 400;
        m.samples_us = {m.median_us, m.median_us * 1.01, m.median_us * 0.99};
        m.verified = true;
      }
      m.tune_run = "fixture";
      auto id = (*c)->PutMeasurement(m);
      ASSERT_TRUE(id.ok()) << id.status().ToString();
      if (!failed && m.median_us < w.median_us) {
        w.median_us = m.median_us;
        w.variant_id = m.variant_id;
        w.config = m.config;
        w.measurement_id = *id;
      }
      if (i == 0) w.default_us = m.median_us;
    }
    ASSERT_TRUE((*c)->PutWinner(w).ok());
    if (si == 0) {
      cache::Baseline b;
      b.device_fingerprint = dev.fingerprint;
      b.problem = p;
      b.name = "torch.topk";
      b.median_us = 45.0;
      ASSERT_TRUE((*c)->PutBaseline(b).ok());
    }
  }
}

const std::vector<Problem>& FixtureShapes() {
  static const std::vector<Problem> s = {Shape(DType::kF32, 64, 32768, 2048, true),
                                         Shape(DType::kF32, 1, 131072, 512, true),
                                         Shape(DType::kBF16, 16, 32000, 50, false)};
  return s;
}

std::string Fixture() {
  static const std::string path = [] {
    const std::string p = TempPath("fixture.db");
    MakeFixture(p, Device("NVIDIA Fixture GPU"), FixtureShapes());
    return p;
  }();
  return path;
}

// ---------------------------------------------------------------- help

TEST(CliHelpTest, RootHelpListsEveryCommandAndTheExitCodes) {
  const Result r = RunCli({"--help"});
  EXPECT_EQ(r.code, kOk) << Describe(r);
  for (const char* c : {"devices", "space", "emit", "tune", "show", "report", "verify", "export", "import", "merge"})
    EXPECT_TRUE(Contains(r.out, c)) << c << "\n" << r.out;
  EXPECT_TRUE(Contains(r.out, "Exit codes")) << r.out;
  EXPECT_TRUE(Contains(r.out, "TOPK_TUNE_DB")) << r.out;
}

TEST(CliHelpTest, EverySubcommandHelpNamesItsKeyOptions) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> table = {
      {"devices", {"--json"}},
      {"space", {"--shape", "--arch", "--json"}},
      {"emit", {"--variant", "--default", "--shape", "--standalone", "--out", "--resources"}},
      {"tune",
       {"--preset", "--shapes", "--shape", "--budget", "--strategy", "--device", "--devices", "--shard", "--db",
        "--timeout", "--l2", "--dist", "--retime", "--max-candidates", "--no-resume", "--no-refine", "--json"}},
      {"show", {"--db", "--device-fingerprint", "--all", "--json"}},
      {"report", {"--db", "--out", "--device-fingerprint"}},
      {"verify", {"--db", "--device", "--json"}},
      {"export", {"--db", "--out", "--no-binaries"}},
      {"import", {"--db", "file"}},
      {"merge", {"--db", "files"}},
  };
  for (const auto& [cmd, options] : table) {
    const Result r = RunCli({cmd, "--help"});
    EXPECT_EQ(r.code, kOk) << cmd << ": " << Describe(r);
    EXPECT_TRUE(Contains(r.out, "Example")) << cmd << " help has no example:\n" << r.out;
    for (const auto& opt : options) EXPECT_TRUE(Contains(r.out, opt)) << cmd << " help lacks " << opt << ":\n" << r.out;
  }
  EXPECT_FALSE(Contains(RunCli({"tune", "--help"}).out, "inject")) << "test-only flag shown in help";
}

TEST(CliHelpTest, VersionExitsZero) {
  const Result r = RunCli({"--version"});
  EXPECT_EQ(r.code, kOk) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "topk-tune")) << r.out;
}

// ---------------------------------------------------------------- usage errors

TEST(CliUsageTest, UnknownCommandFlagOrNoCommandIsAUsageError) {
  Result r = RunCli({"frobnicate"});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "unknown command 'frobnicate'")) << r.err;
  EXPECT_TRUE(Contains(r.err, "--help")) << r.err;

  r = RunCli({"space", "--bogus-flag"});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "--bogus-flag")) << r.err;
  EXPECT_TRUE(Contains(r.err, "topk-tune space --help")) << r.err;

  r = RunCli({"--bogus-flag"});
  EXPECT_EQ(r.code, kUsage) << Describe(r);

  r = RunCli({});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "no command")) << r.err;

  r = RunCli({"space"});  // --shape is required
  EXPECT_EQ(r.code, kUsage) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "--shape")) << r.err;
}

// Each bad tune invocation is a usage error with a message, and writes
// neither the --db file nor the default cache.
TEST(CliUsageTest, BadTuneInputIsRefusedBeforeAnythingIsWritten) {
  const std::string db = TempPath("never.db");
  const std::string bad_json = TempPath("bad.json");
  const std::string not_json = TempPath("not.json");
  const std::string range_json = TempPath("range.json");
  std::ofstream(bad_json) << R"({"shapes": [{"batch": 4, "n": "many", "k": 2}]})";
  std::ofstream(not_json) << "this is not json";
  std::ofstream(range_json) << R"([{"batch": 4, "n": 1024, "k": 0}])";
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--shapes", bad_json}, "shape 0"},
      {{"--shapes", not_json}, "not valid JSON"},
      {{"--shapes", range_json}, "k must be >= 1"},
      {{"--shapes", TempPath("missing.json")}, "does not exist"},
      {{"--shape", "f32:1x0:5"}, "n must be >= 1"},
      {{"--shape", "f32:4x100:-1"}, "k must be >= 0"},
      {{"--shape", "f32:4x100:0"}, "k must be >= 1"},
      {{"--shape", "f64:4x100:5"}, "unknown dtype"},
      {{"--shape", "f32:4x100"}, "needs BATCHxN and K"},
      {{"--shape", "f32:4x100:5:bogus"}, "unknown flag 'bogus'"},
      {{"--shape", "f32:4x100:5:deterministic"}, "'deterministic' is not tuned"},
      {{"--shape", "f32:100000x100000:5"}, "2^31"},
      {{"--shard", "3/2"}, "bad shard '3/2'"},
      {{"--shard", "0/0"}, "N must be at least 1"},
      {{"--shard", "-1/4"}, "bad shard"},
      {{"--shard", "a/b"}, "bad shard"},
      {{"--preset", "nope"}, "nope"},
      {{"--strategy", "random"}, "random"},
      {{"--l2", "warm"}, "warm"},
      {{"--dist", "gaussian"}, "unknown input distribution"},
      {{"--devices", "0,0"}, "appears twice"},
      {{"--devices", "0,x"}, "not a device ordinal"},
      {{"--budget", "-3"}, "--budget"},
      {{"--preset", "smoke", "--shape", "f32:1x1024:8"}, "excludes"},
      {{"--inject-faults", "explode"}, "unknown fault"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"tune", "--db", db};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const Result r = RunCli(args);
    std::string line;
    for (const auto& a : c.args) line += a + " ";
    EXPECT_EQ(r.code, kUsage) << line << "\n" << Describe(r);
    EXPECT_TRUE(Contains(r.err, c.message)) << line << ": expected '" << c.message << "' in:\n" << r.err;
    EXPECT_FALSE(fs::exists(db)) << line << " created " << db;
  }
  EXPECT_FALSE(fs::exists(DefaultDb()));
}

TEST(CliUsageTest, UnwritableOrMissingCachePathsAreRefused) {
  // A directory that cannot exist: nothing may be created on the way.
  Result r = RunCli({"tune", "--db", "/proc/forbidden/x.db", "--preset", "smoke"});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "/proc/forbidden/x.db")) << r.err;
  EXPECT_TRUE(Contains(r.err, "--db")) << r.err;
  EXPECT_FALSE(fs::exists("/proc/forbidden"));

  // A directory where the file should be.
  const std::string dir = TempPath("a_dir");
  fs::create_directories(dir);
  r = RunCli({"tune", "--db", dir, "--preset", "smoke"});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "directory")) << r.err;

  // Readers never create a cache: a missing one is a cache error.
  const std::string missing = TempPath("missing.db");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"show", "--db", missing},
        std::vector<std::string>{"report", "--db", missing, "--out", TempPath("rep")},
        std::vector<std::string>{"export", "--db", missing, "--out", TempPath("x.jsonl")}}) {
    r = RunCli(args);
    EXPECT_EQ(r.code, kCache) << args[0] << ": " << Describe(r);
    EXPECT_TRUE(Contains(r.err, "no tuning cache at '" + missing + "'")) << r.err;
    EXPECT_TRUE(Contains(r.err, "topk-tune tune")) << r.err;
    EXPECT_FALSE(fs::exists(missing));
  }
  EXPECT_FALSE(fs::exists(DefaultDb()));

  // The default path comes from $TOPK_TUNE_DB.
  r = RunCli({"show"});
  EXPECT_EQ(r.code, kCache) << Describe(r);
  EXPECT_TRUE(Contains(r.err, DefaultDb())) << r.err;
}

TEST(CliUsageTest, CorruptCacheIsACacheErrorAndLeftUntouched) {
  const std::string bad = TempPath("corrupt.db");
  std::ofstream(bad) << "definitely not sqlite, just some bytes that fill the header and more";
  const std::string before = ReadFile(bad);
  const Result r = RunCli({"show", "--db", bad});
  EXPECT_EQ(r.code, kCache) << Describe(r);
  EXPECT_TRUE(Contains(r.err, bad)) << r.err;
  EXPECT_TRUE(Contains(r.err, "move it aside")) << r.err;
  EXPECT_EQ(ReadFile(bad), before);
}

// ---------------------------------------------------------------- no GPU

TEST(CliNoGpuTest, TuneDevicesAndVerifyExitWithTheNoGpuCode) {
  std::string why;
  if (topk::testing::HaveGpu(&why)) GTEST_SKIP() << "a GPU is present: the no-GPU path cannot be checked here";
  const std::string db = TempPath("nogpu.db");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"tune", "--db", db}, std::vector<std::string>{"tune", "--preset", "smoke", "--db", db},
        std::vector<std::string>{"devices"}, std::vector<std::string>{"verify", "--db", db}}) {
    const Result r = RunCli(args);
    EXPECT_EQ(r.code, kNoGpu) << args[0] << ": " << Describe(r);
    EXPECT_TRUE(Contains(r.err, "needs an NVIDIA GPU")) << r.err;
    EXPECT_TRUE(Contains(r.err, "space, emit, show, report")) << r.err;
    EXPECT_FALSE(fs::exists(db)) << args[0] << " created the cache";
  }
  EXPECT_FALSE(fs::exists(DefaultDb()));
}

TEST(CliNoGpuTest, AnEmptyShardNeedsNoGpu) {
  const std::string db = TempPath("empty-shard.db");
  const Result r = RunCli({"tune", "--shape", "f32:1x4096:8", "--shard", "1/2", "--db", db});
  EXPECT_EQ(r.code, kOk) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "nothing to do")) << r.err;
  EXPECT_FALSE(fs::exists(db));
}

// ---------------------------------------------------------------- space / emit

TEST(CliSpaceTest, TableAndJsonMatchTheGenerator) {
  const std::string spec = "f32:64x32768:2048:ranges";
  Problem p = Shape(DType::kF32, 64, 32768, 2048, true);
  const auto space = gen::Enumerate(p, gen::Arch::Sm90());
  const std::string def = gen::DefaultConfig(p, gen::Arch::Sm90()).Id();

  Result r = RunCli({"space", "--shape", spec});
  ASSERT_EQ(r.code, kOk) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "variants " + std::to_string(space.size()))) << r.out;
  EXPECT_TRUE(Contains(r.out, "default  " + def)) << r.out;
  EXPECT_TRUE(Contains(r.out, def + " *")) << r.out;
  EXPECT_TRUE(Contains(r.out, "kernels")) << r.out;
  for (const auto& c : space) EXPECT_TRUE(Contains(r.out, c.Id())) << c.Id();

  r = RunCli({"space", "--shape", spec, "--json"});
  ASSERT_EQ(r.code, kOk) << Describe(r);
  const json j = json::parse(r.out);
  EXPECT_EQ(j["variants"].get<size_t>(), space.size());
  EXPECT_EQ(j["configs"].size(), space.size());
  EXPECT_EQ(j["default"], def);
  EXPECT_EQ(j["arch"], "sm_90");
  EXPECT_EQ(j["configs"][0]["id"], space[0].Id());

  // sm_80 has no clusters.
  r = RunCli({"space", "--shape", spec, "--arch", "sm_80", "--json"});
  ASSERT_EQ(r.code, kOk) << Describe(r);
  // The parsed document must outlive the loop (a range-for over a member of
  // a temporary reads freed memory: ASan, scripts/sanitize.sh).
  const json sm80 = json::parse(r.out);
  for (const auto& c : sm80["configs"]) EXPECT_LE(c.value("cluster", 1), 1) << c.dump();  // radix only

  r = RunCli({"space", "--shape", spec, "--limit", "3"});
  EXPECT_EQ(r.code, kOk);
  EXPECT_TRUE(Contains(r.out, "more (drop --limit")) << r.out;

  r = RunCli({"space", "--shape", spec, "--arch", "sm_70"});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "sm_70")) << r.err;
  r = RunCli({"space", "--shape", "f32:4x0:1"});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
}

TEST(CliEmitTest, PrintsTheSourceOfAVariantOrTheDefault) {
  const std::string id = "radix_f32_b512_r11_h0_s4096_c1_t2_m1";
  Result r = RunCli({"emit", "--variant", id});
  ASSERT_EQ(r.code, kOk) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "#include \"topk/kernels.cuh\"")) << r.out;
  EXPECT_TRUE(Contains(r.out, "template __global__")) << r.out;

  r = RunCli({"emit", "--default", "--shape", "f32:64x32768:2048:ranges"});
  ASSERT_EQ(r.code, kOk) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "template __global__")) << r.out;

  const std::string file = TempPath("kernel.cu");
  r = RunCli({"emit", "--variant", id, "--standalone", "-o", file});
  ASSERT_EQ(r.code, kOk) << Describe(r);
  EXPECT_TRUE(r.out.empty()) << r.out;
  const std::string text = ReadFile(file);
  EXPECT_FALSE(Contains(text, "#include \"topk/")) << "standalone source still includes the templates";
  EXPECT_TRUE(Contains(r.err, "wrote " + file)) << r.err;
}

// --resources compiles with NVRTC (no GPU) and reports ptxas's figures: a
// warp-mode kernel at its register cap without spills, and the sm_80 target.
TEST(CliEmitTest, ResourcesReportsRegistersAndSpills) {
  const std::string id = "warp_f32_b256_i8_l0";
  Result r = RunCli({"emit", "--variant", id, "--resources"});
  ASSERT_EQ(r.code, kOk) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "variant " + id + ") for sm_90, nvrtc ")) << r.out;
  EXPECT_TRUE(Contains(r.out, " registers, ")) << r.out;
  EXPECT_TRUE(Contains(r.out, " bytes spill loads")) << r.out;
  EXPECT_FALSE(Contains(r.out, "template __global__")) << "--resources prints the figures, not the source";
  r = RunCli({"emit", "--variant", id, "--resources", "--arch", "sm_80"});
  ASSERT_EQ(r.code, kOk) << Describe(r);
  EXPECT_TRUE(Contains(r.out, ") for sm_80, ")) << r.out;
  // A cluster kernel is not valid for sm_80: a usage error before compiling.
  r = RunCli({"emit", "--variant", "radix_f32_b512_r11_h0_s4096_c8_t2_m1", "--resources", "--arch", "sm_80"});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
}

TEST(CliEmitTest, RejectsBadIdsAndInvalidConfigs) {
  Result r = RunCli({"emit", "--variant", "radix_f32_b512"});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "malformed variant id")) << r.err;

  r = RunCli({"emit", "--variant", "radix_f32_b4096_r11_h0_s4096_c1_t2_m1"});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "constraint block")) << r.err;

  // Valid alone, but not for a problem of another dtype.
  r = RunCli({"emit", "--variant", "radix_f32_b512_r11_h0_s4096_c1_t2_m1", "--shape", "bf16:4x4096:8"});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "constraint")) << r.err;

  r = RunCli({"emit"});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "--variant")) << r.err;
  r = RunCli({"emit", "--default"});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "--shape")) << r.err;
  r = RunCli({"emit", "--variant", "radix_f32_b512_r11_h0_s4096_c1_t2_m1", "-o", "/proc/forbidden/k.cu"});
  EXPECT_EQ(r.code, kUsage) << Describe(r);

  // An unknown family names the known ones.
  r = RunCli({"emit", "--variant", "sorted_f32_b512"});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "unknown family 'sorted'")) << r.err;
  EXPECT_TRUE(Contains(r.err, "radix")) << r.err;
}

// Ids written by earlier releases still name their variant: one radix
// family whose cluster 0 was one warp per row.
TEST(CliEmitTest, EarlierReleasesIdsStillWork) {
  Result r = RunCli({"emit", "--variant", "radix_f32_b256_r1_s0_c0_t0_m0_i8", "-o", TempPath("old.cu")});
  ASSERT_EQ(r.code, kOk) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "variant warp_f32_b256_i8_l0")) << r.err;
  r = RunCli({"emit", "--variant", "radix_f32_b512_r11h_s4096_c1_t2_m1_i0", "-o", TempPath("old.cu")});
  ASSERT_EQ(r.code, kOk) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "variant radix_f32_b512_r11_h1_s4096_c1_t2_m1")) << r.err;
}

TEST(CliTuneTest, UnknownFamilyIsAUsageError) {
  const Result r = RunCli({"tune", "--family", "nope", "--shape", "f32:4x4096:8", "--db", TempPath("fam.db")});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "unknown kernel family 'nope'")) << r.err;
  EXPECT_TRUE(Contains(r.err, "radix")) << r.err;
}

TEST(CliSpaceTest, FamilyFilterAndOneTablePerFamily) {
  Result r = RunCli({"space", "--shape", "f32:4096x256:8"});
  ASSERT_EQ(r.code, kOk) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "family warp:")) << r.out;
  EXPECT_TRUE(Contains(r.out, "family radix:")) << r.out;
  EXPECT_TRUE(Contains(r.out, "lane_bound")) << r.out;
  r = RunCli({"space", "--shape", "f32:4096x256:8", "--family", "warp"});
  ASSERT_EQ(r.code, kOk) << Describe(r);
  EXPECT_FALSE(Contains(r.out, "family radix:")) << r.out;
  r = RunCli({"space", "--shape", "f32:4096x256:8", "--family", "nope"});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "unknown kernel family 'nope'")) << r.err;
}

TEST(CliEmitTest, StandaloneSourceCompilesWithNvcc) {
  const std::string nvcc = testing::FirstExisting({"/usr/local/cuda/bin/nvcc", "/usr/bin/nvcc"});
  if (nvcc.empty()) GTEST_SKIP() << "nvcc not found";
  const std::string file = TempPath("standalone.cu");
  const Result r = RunCli({"emit", "--default", "--shape", "f32:8x8192:256:ranges", "--standalone", "-o", file});
  ASSERT_EQ(r.code, kOk) << Describe(r);
  const std::string cubin = TempPath("standalone.cubin");
  const std::string cmd = nvcc + " -arch=sm_90 -cubin -o " + cubin + " " + file + " 2>&1";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd;
  EXPECT_GT(fs::exists(cubin) ? fs::file_size(cubin) : 0, 1000u);
}

// ---------------------------------------------------------------- show / report

TEST(CliShowTest, TableAndJsonListTheWinners) {
  const std::string db = Fixture();
  Result r = RunCli({"show", "--db", db});
  ASSERT_EQ(r.code, kOk) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "NVIDIA Fixture GPU")) << r.out;
  for (const auto& p : FixtureShapes()) EXPECT_TRUE(Contains(r.out, p.ToString())) << p.ToString() << "\n" << r.out;
  EXPECT_TRUE(Contains(r.out, "3 winners")) << r.out;
  EXPECT_TRUE(Contains(r.out, "torch.topk")) << r.out;

  r = RunCli({"show", "--db", db, "--json"});
  ASSERT_EQ(r.code, kOk) << Describe(r);
  const json j = json::parse(r.out);
  ASSERT_EQ(j["devices"].size(), 1u);
  ASSERT_EQ(j["devices"][0]["winners"].size(), 3u);
  for (const auto& w : j["devices"][0]["winners"]) {
    EXPECT_GT(w["median_us"].get<double>(), 0);
    EXPECT_GT(w["speedup_default"].get<double>(), 1.0) << w.dump();
  }

  // Through $TOPK_TUNE_DB, and filtered by fingerprint.
  const std::string fp = Device("NVIDIA Fixture GPU").fingerprint;
  r = RunCli({"show", "--device-fingerprint", fp}, {{"TOPK_TUNE_DB", db}});
  EXPECT_EQ(r.code, kOk) << Describe(r);
  EXPECT_TRUE(Contains(r.out, fp)) << r.out;
  r = RunCli({"show", "--db", db, "--device-fingerprint", "no-such-gpu"});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
  EXPECT_TRUE(Contains(r.err, fp)) << "the message should list the known devices:\n" << r.err;
}

TEST(CliShowTest, AnEmptyCacheSaysWhatToDo) {
  const std::string db = TempPath("empty.db");
  ASSERT_TRUE(cache::Cache::Open(db).ok());
  const Result r = RunCli({"show", "--db", db});
  EXPECT_EQ(r.code, kOk) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "No winners")) << r.out;
  EXPECT_TRUE(Contains(r.out, "topk-tune tune")) << r.out;
}

TEST(CliReportTest, WritesSelfContainedHtmlMarkdownAndJson) {
  const std::string db = Fixture();
  const std::string out = TempPath("report") + "/nested";
  const Result r = RunCli({"report", "--db", db, "--out", out, "--title", "Fixture report"});
  ASSERT_EQ(r.code, kOk) << Describe(r);
  const std::string html = ReadFile(out + "/report.html");
  const std::string md = ReadFile(out + "/report.md");
  const std::string js = ReadFile(out + "/report.json");
  ASSERT_FALSE(html.empty());
  EXPECT_TRUE(Contains(html, "Fixture report"));
  EXPECT_FALSE(Contains(html, "http://")) << "the HTML must not reference the network";
  EXPECT_FALSE(Contains(html, "https://"));
  EXPECT_FALSE(Contains(html, "<script"));
  EXPECT_TRUE(Contains(html, "<svg"));
  EXPECT_TRUE(Contains(html, "d0-speedup"));
  EXPECT_TRUE(Contains(html, "d0-outcomes"));
  for (const auto& p : FixtureShapes()) {
    EXPECT_TRUE(Contains(html, p.ToString())) << p.ToString();
    EXPECT_TRUE(Contains(md, p.ToString())) << p.ToString();
  }
  const json j = json::parse(js);
  ASSERT_EQ(j["devices"].size(), 1u);
  EXPECT_EQ(j["devices"][0]["shapes"].size(), 3u);
  EXPECT_EQ(j["devices"][0]["outcomes"]["crash"], 1);
  EXPECT_TRUE(Contains(r.out, out + "/report.html")) << r.out;
  // Counts agree with their nouns ("1 baselines" once).
  EXPECT_TRUE(Contains(r.out, "3 winners, ")) << r.out;
  EXPECT_TRUE(Contains(r.out, ", 1 baseline from ")) << r.out;

  // An output directory that cannot be made: a usage error, nothing read.
  const Result bad = RunCli({"report", "--db", db, "--out", "/proc/forbidden/rep"});
  EXPECT_EQ(bad.code, kUsage) << Describe(bad);
  EXPECT_TRUE(Contains(bad.err, "/proc/forbidden/rep")) << bad.err;
}

// ---------------------------------------------------------------- export / import / merge

json ShowJson(const std::string& db) {
  const Result r = RunCli({"show", "--db", db, "--json"});
  EXPECT_EQ(r.code, kOk) << Describe(r);
  return r.code == kOk ? json::parse(r.out) : json();
}

TEST(CliExportImportTest, RoundTripsThroughJsonLines) {
  const std::string db = Fixture();
  const std::string jsonl = TempPath("export.jsonl");
  Result r = RunCli({"export", "--db", db, "--out", jsonl, "--no-binaries"});
  ASSERT_EQ(r.code, kOk) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "exported")) << r.out;
  std::ifstream in(jsonl);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(json::parse(first)["table"], "meta");

  const std::string copy = TempPath("imported.db");
  r = RunCli({"import", jsonl, "--db", copy});
  ASSERT_EQ(r.code, kOk) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "3 (+3) winners")) << r.out;
  EXPECT_EQ(ShowJson(copy)["devices"], ShowJson(db)["devices"]);

  // Importing again adds nothing.
  r = RunCli({"import", jsonl, "--db", copy});
  ASSERT_EQ(r.code, kOk) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "3 winners")) << r.out;
  EXPECT_FALSE(Contains(r.out, "(+")) << r.out;
}

TEST(CliExportImportTest, BadFilesAreRefusedAndNothingIsWritten) {
  const std::string target = TempPath("target.db");
  Result r = RunCli({"import", TempPath("missing.jsonl"), "--db", target});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
  EXPECT_FALSE(fs::exists(target));

  const std::string bad = TempPath("bad.jsonl");
  std::ofstream(bad) << "{\"table\":\"meta\",\"schema_version\":2}\nnot json at all\n";
  r = RunCli({"import", bad, "--db", target});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "line 2")) << r.err;
  EXPECT_FALSE(fs::exists(target));

  // Well-formed JSON the cache rejects: the new file is removed again.
  const std::string wrong = TempPath("wrong.jsonl");
  std::ofstream(wrong) << "{\"table\":\"meta\",\"schema_version\":2}\n{\"table\":\"winners\",\"nonsense\":1}\n";
  r = RunCli({"import", wrong, "--db", target});
  EXPECT_NE(r.code, kOk) << Describe(r);
  EXPECT_FALSE(fs::exists(target));

  r = RunCli({"export", "--db", Fixture(), "--out", "/proc/forbidden/x.jsonl"});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
  r = RunCli({"export", "--db", Fixture()});
  EXPECT_EQ(r.code, kUsage) << Describe(r);  // --out is required
}

TEST(CliMergeTest, CombinesShardCaches) {
  const std::string a = TempPath("shard-0.db"), b = TempPath("shard-1.db");
  MakeFixture(a, Device("NVIDIA Shard GPU"), {FixtureShapes()[0], FixtureShapes()[2]});
  MakeFixture(b, Device("NVIDIA Shard GPU"), {FixtureShapes()[1]});
  const std::string all = TempPath("merged") + "/all.db";
  Result r = RunCli({"merge", "--db", all, a, b});
  ASSERT_EQ(r.code, kOk) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "merged " + a)) << r.out;
  const json j = ShowJson(all);
  ASSERT_EQ(j["devices"].size(), 1u);
  EXPECT_EQ(j["devices"][0]["winners"].size(), 3u);

  // Merging again changes nothing.
  r = RunCli({"merge", "--db", all, a, b});
  ASSERT_EQ(r.code, kOk) << Describe(r);
  EXPECT_EQ(ShowJson(all), j);
}

TEST(CliMergeTest, BadInputsAreRefusedBeforeTheTargetIsTouched) {
  const std::string target = TempPath("merge-target.db");
  Result r = RunCli({"merge", "--db", target, TempPath("missing.db")});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
  EXPECT_FALSE(fs::exists(target));

  const std::string junk = TempPath("junk.db");
  std::ofstream(junk) << "not a database, not at all, certainly not sqlite format 3";
  r = RunCli({"merge", "--db", target, Fixture(), junk});
  EXPECT_EQ(r.code, kCache) << Describe(r);
  EXPECT_TRUE(Contains(r.err, junk)) << r.err;
  EXPECT_FALSE(fs::exists(target)) << "a bad second input must stop the merge before the first is written";

  r = RunCli({"merge", "--db", Fixture(), Fixture()});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "target cache itself")) << r.err;

  r = RunCli({"merge", "--db", target});
  EXPECT_EQ(r.code, kUsage) << Describe(r);  // no files
}


// ---------------------------------------------------------------- files the CLI writes

// The entries of a directory, for "nothing else was left behind" checks.
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A private copy of the fixture in its own directory.
std::string FixtureCopy(const std::string& dir_name) {
  const std::string dir = TempPath(dir_name);
  fs::create_directories(dir);
  const std::string db = dir + "/tuning.db";
  fs::copy_file(Fixture(), db);
  return db;
}

TEST(CliExportImportTest, ExportRefusesToOverwriteTheCacheItself) {
  const std::string db = FixtureCopy("export_self");
  const std::string dir = fs::path(db).parent_path().string();
  const std::string before = ReadFile(db);
  const std::string link = dir + "/link.db", hard = dir + "/hard.db";
  fs::create_symlink("tuning.db", link);
  fs::create_hard_link(db, hard);
  // The same path, a symbolic link to it, a hard link to it, and the same
  // file named through "./" and "..".
  for (const std::string& out : {db, link, hard, dir + "/./tuning.db", dir + "/../" + fs::path(dir).filename().string() + "/tuning.db"}) {
    const Result r = RunCli({"export", "--db", db, "--out", out});
    EXPECT_EQ(r.code, kUsage) << out << ": " << Describe(r);
    EXPECT_TRUE(Contains(r.err, "'" + out + "'")) << r.err;
    EXPECT_TRUE(Contains(r.err, "'" + db + "'")) << r.err;
    EXPECT_EQ(ReadFile(db), before) << out;
  }
  // Also when the cache is named through the link.
  const Result r = RunCli({"export", "--db", link, "--out", db});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
  EXPECT_EQ(ReadFile(db), before);
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(ShowJson(db)["devices"].size(), 1u);
  EXPECT_EQ(Entries(dir), (std::vector<std::string>{"hard.db", "link.db", "tuning.db"}));
}

TEST(CliEmitTest, OutputReplacesTheFileByRenameLeavingNoTemporaries) {
  const std::string dir = TempPath("emit_atomic");
  fs::create_directories(dir);
  const std::string out = dir + "/kernel.cu", old_link = dir + "/old.cu";
  std::ofstream(out) << "old contents\n";
  fs::create_hard_link(out, old_link);
  const Result r = RunCli({"emit", "--default", "--shape", "f32:64x32768:2048", "-o", out});
  ASSERT_EQ(r.code, kOk) << Describe(r);
  EXPECT_TRUE(Contains(ReadFile(out), "__global__")) << ReadFile(out).substr(0, 200);
  // The old file was never truncated or written in place: a reader that
  // holds it (here: another name of it) still sees the old bytes whole.
  EXPECT_EQ(ReadFile(old_link), "old contents\n");
  EXPECT_EQ(Entries(dir), (std::vector<std::string>{"kernel.cu", "old.cu"}));

  // A failed write leaves the old file as it was and no temporary.
  const Result bad = RunCli({"emit", "--default", "--shape", "f32:64x32768:2048", "-o", dir + "/missing-dir/kernel.cu"});
  EXPECT_EQ(bad.code, kUsage) << Describe(bad);
  EXPECT_EQ(Entries(dir), (std::vector<std::string>{"kernel.cu", "old.cu"}));
}

TEST(CliReportTest, ReportFilesReplaceOldOnesByRename) {
  const std::string dir = TempPath("report_atomic");
  fs::create_directories(dir);
  std::ofstream(dir + "/report.md") << "old report\n";
  fs::create_hard_link(dir + "/report.md", dir + "/old.md");
  const Result r = RunCli({"report", "--db", Fixture(), "--out", dir});
  ASSERT_EQ(r.code, kOk) << Describe(r);
  EXPECT_EQ(ReadFile(dir + "/old.md"), "old report\n");
  EXPECT_NE(ReadFile(dir + "/report.md"), "old report\n");
  EXPECT_EQ(Entries(dir), (std::vector<std::string>{"old.md", "report.html", "report.json", "report.md"}));
}

TEST(CliReportTest, ReportRefusesToOverwriteTheCache) {
  // A cache that happens to sit where a report file goes.
  const std::string dir = TempPath("report_over_db");
  fs::create_directories(dir);
  const std::string db = dir + "/report.json";
  fs::copy_file(Fixture(), db);
  const std::string before = ReadFile(db);
  const Result r = RunCli({"report", "--db", db, "--out", dir});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
  EXPECT_TRUE(Contains(r.err, db)) << r.err;
  EXPECT_EQ(ReadFile(db), before);
  EXPECT_EQ(Entries(dir), (std::vector<std::string>{"report.json"}));
}

// ---------------------------------------------------------------- reading without writing

const char* const kSqliteSideFiles[] = {"-wal", "-shm", "-journal"};

void ExpectNoSideFiles(const std::string& db) {
  for (const char* suffix : kSqliteSideFiles) EXPECT_FALSE(fs::exists(db + suffix)) << db + suffix;
}

TEST(CliReadOnlyTest, ReadersLeaveNoFilesBesideTheCache) {
  const std::string db = FixtureCopy("readers_leave_nothing");
  const std::string dir = fs::path(db).parent_path().string();
  const std::string before = ReadFile(db);
  const std::vector<std::vector<std::string>> commands = {
      {"show", "--db", db},
      {"show", "--db", db, "--json"},
      {"report", "--db", db, "--out", TempPath("ro_report")},
      {"export", "--db", db, "--out", TempPath("ro.jsonl")},
      {"merge", "--db", TempPath("ro_merged.db"), db}};
  for (const auto& args : commands) {
    const Result r = RunCli(args);
    EXPECT_EQ(r.code, kOk) << args[0] << ": " << Describe(r);
    ExpectNoSideFiles(db);
    EXPECT_EQ(Entries(dir), std::vector<std::string>{"tuning.db"}) << args[0];
    EXPECT_EQ(ReadFile(db), before) << args[0];
  }
}

TEST(CliReadOnlyTest, ShowReadsACacheFileWithoutWritePermission) {
  const std::string db = FixtureCopy("file_0444");
  const std::string dir = fs::path(db).parent_path().string();
  fs::permissions(db, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  const Result r = RunCli({"show", "--db", db, "--json"});
  EXPECT_EQ(r.code, kOk) << Describe(r);
  if (r.code == kOk) {
    EXPECT_EQ(json::parse(r.out)["devices"].size(), 1u);
  }
  EXPECT_EQ(Entries(dir), std::vector<std::string>{"tuning.db"});
  fs::permissions(db, fs::perms::owner_read | fs::perms::owner_write);
}

TEST(CliReadOnlyTest, ReadersWorkInADirectoryWithoutWritePermission) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  const std::string db = FixtureCopy("dir_0555");
  const std::string dir = fs::path(db).parent_path().string();
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                           fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  const std::vector<std::vector<std::string>> commands = {
      {"show", "--db", db, "--json"},
      {"report", "--db", db, "--out", TempPath("ro_dir_report")},
      {"export", "--db", db, "--out", TempPath("ro_dir.jsonl")},
      {"merge", "--db", TempPath("ro_dir_merged.db"), db}};
  for (const auto& args : commands) {
    const Result r = RunCli(args);
    EXPECT_EQ(r.code, kOk) << args[0] << ": " << Describe(r);
    EXPECT_FALSE(Contains(r.err, "readonly")) << r.err;
  }
  EXPECT_EQ(Entries(dir), std::vector<std::string>{"tuning.db"});
  fs::permissions(dir, fs::perms::owner_all);
}

// ---------------------------------------------------------------- where the cache is

TEST(CliCachePathTest, InMemoryAndEmptyPathsAreRefused) {
  const std::string jsonl = TempPath("mem.jsonl");
  ASSERT_EQ(RunCli({"export", "--db", Fixture(), "--out", jsonl}).code, kOk);
  const std::string cwd = fs::current_path().string();
  Result r = RunCli({"import", jsonl}, {{"TOPK_TUNE_DB", ":memory:"}});
  EXPECT_EQ(r.code, kUsage) << Describe(r);
  EXPECT_TRUE(Contains(r.err, ":memory:")) << r.err;
  EXPECT_TRUE(Contains(r.err, "TOPK_TUNE_DB")) << r.err;
  EXPECT_FALSE(Contains(r.out, "imported")) << r.out;
  EXPECT_FALSE(fs::exists(cwd + "/:memory:"));
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"import", jsonl, "--db", ":memory:"},
        std::vector<std::string>{"merge", "--db", ":memory:", Fixture()},
        std::vector<std::string>{"tune", "--db", ":memory:", "--preset", "smoke"},
        std::vector<std::string>{"show", "--db", ":memory:"},
        std::vector<std::string>{"import", jsonl, "--db", ""},
        std::vector<std::string>{"merge", "--db", "", Fixture()}}) {
    r = RunCli(args);
    EXPECT_EQ(r.code, kUsage) << args[0] << " " << args[args.size() - 2] << ": " << Describe(r);
    EXPECT_TRUE(Contains(r.err, "--db")) << r.err;
    EXPECT_FALSE(fs::exists(cwd + "/:memory:"));
  }
  EXPECT_FALSE(fs::exists(DefaultDb()));
}

TEST(CliCachePathTest, NoHomeAndNoSettingIsRefused) {
  const std::string cwd = fs::current_path().string();
  const std::string jsonl = TempPath("nohome.jsonl");
  ASSERT_EQ(RunCli({"export", "--db", Fixture(), "--out", jsonl}).code, kOk);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"import", jsonl}, std::vector<std::string>{"show"},
        std::vector<std::string>{"merge", Fixture()}}) {
    const Result r = RunCli(args, {}, {"HOME", "XDG_CACHE_HOME", "TOPK_TUNE_DB"});
    EXPECT_EQ(r.code, kUsage) << args[0] << ": " << Describe(r);
    EXPECT_TRUE(Contains(r.err, "--db")) << r.err;
    EXPECT_TRUE(Contains(r.err, "TOPK_TUNE_DB")) << r.err;
    EXPECT_FALSE(fs::exists(cwd + "/topk-tune-tuning.db"));
  }
}

TEST(CliCachePathTest, RelativeXdgCacheHomeIsIgnored) {
  const std::string cwd = fs::current_path().string();
  const std::string jsonl = TempPath("xdg.jsonl");
  ASSERT_EQ(RunCli({"export", "--db", Fixture(), "--out", jsonl}).code, kOk);
  const std::string home = TempPath("xdg_home");
  fs::create_directories(home);
  const Result r = RunCli({"import", jsonl}, {{"HOME", home}, {"XDG_CACHE_HOME", "relative/cache"}}, {"TOPK_TUNE_DB"});
  EXPECT_EQ(r.code, kOk) << Describe(r);
  EXPECT_TRUE(fs::exists(home + "/.cache/topk-tune/tuning.db"));
  EXPECT_FALSE(fs::exists(cwd + "/relative"));
}

// ---------------------------------------------------------------- bounded input

TEST(CliInputTest, ShapeFilesMustBeSmallRegularFilesWithKnownKeys) {
  const std::string db = TempPath("never-shapes.db");
  const std::string big = TempPath("big.json");
  {
    std::ofstream f(big);
    f << "[" << std::string(2 << 20, ' ') << "]";
  }
  const std::string typo = TempPath("typo.json");
  std::ofstream(typo) << R"({"l2mode": "rotate", "shapes": [{"batch": 4, "n": 1024, "k": 8}]})";
  const std::string dist = TempPath("dist.json");
  std::ofstream(dist) << R"({"dist": "gaussian", "shapes": [{"batch": 4, "n": 1024, "k": 8}]})";
  const std::string empty = TempPath("empty-shapes.json");
  std::ofstream(empty) << "";
  struct Case {
    std::string file;
    std::vector<std::string> messages;
    std::vector<std::string> absent;
  };
  const std::vector<Case> cases = {
      {"/dev/zero", {"not a regular file"}, {}},
      {big, {"limit is 1048576"}, {}},
      {TempPath("missing.json"), {"does not exist"}, {"format"}},
      {typo, {"unknown key \"l2mode\"", "l2_mode"}, {}},
      {dist, {dist, "\"dist\""}, {"--dist"}},
      {empty, {"empty"}, {}},
  };
  for (const auto& c : cases) {
    const auto t0 = std::chrono::steady_clock::now();
    const Result r = RunCli({"tune", "--db", db, "--shapes", c.file});
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << c.file;
    EXPECT_EQ(r.code, kUsage) << c.file << "\n" << Describe(r);
    for (const auto& m : c.messages) EXPECT_TRUE(Contains(r.err, m)) << c.file << ": no '" << m << "' in\n" << r.err;
    for (const auto& m : c.absent) EXPECT_FALSE(Contains(r.err, m)) << c.file << ": '" << m << "' in\n" << r.err;
    EXPECT_FALSE(fs::exists(db));
  }
}

TEST(CliInputTest, ArgumentsOutOfRangeAreUsageErrors) {
  const std::string db = TempPath("never-args.db");
  const std::string huge(400, '9');
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"space", "--shape", "f32:4x1024:8", "--arch", "sm_999"}, "sm_120"},
      {{"space", "--shape", "f32:4x1024:8", "--limit", "-5"}, "--limit"},
      {{"space", "--shape", "f32:4x1024:8", "--limit", "99999999999999999999"}, "--limit"},
      {{"space", "--shape", "f32:4x1024:8:smallest:largest"}, "contradict"},
      {{"space", "--shape", "f32:4x1024:8:ranges:ranges"}, "appears twice"},
      {{"space", "--shape", "f32:4x1024:8:stride=2048:stride=4096"}, "appears twice"},
      {{"space", "--shape", "f32:4x32768:20000:sorted"}, "16384"},
      {{"tune", "--db", db, "--budget", "nan"}, "--budget"},
      {{"tune", "--db", db, "--budget", "inf"}, "--budget"},
      {{"tune", "--db", db, "--seed", "-1"}, "--seed"},
      {{"tune", "--db", db, "--seed", "99999999999999999999999"}, "--seed"},
      {{"tune", "--db", db, "--retime", huge}, "--retime"},
      {{"tune", "--db", db, "--timeout", huge}, "--timeout"},
      {{"tune", "--db", db, "--max-candidates", "-1"}, "--max-candidates"},
  };
  for (const auto& c : cases) {
    const Result r = RunCli(c.args);
    std::string line;
    for (const auto& a : c.args) line += a.substr(0, 30) + " ";
    EXPECT_EQ(r.code, kUsage) << line << "\n" << Describe(r);
    EXPECT_TRUE(Contains(r.err, c.message)) << line << ": expected '" << c.message << "' in:\n" << r.err;
    EXPECT_FALSE(Contains(r.err, std::string(40, '9'))) << line << ": echoes the whole value:\n" << r.err;
    EXPECT_LT(r.err.size(), 1200u) << line << "\n" << r.err;
    // Every usage error says what to do next on a second line.
    EXPECT_TRUE(Contains(r.err, "\n  ")) << line << ": no hint in\n" << r.err;
  }
  EXPECT_FALSE(fs::exists(db));
}

TEST(CliInputTest, DtypeNamesAreCaseInsensitive) {
  for (const std::string dt : {"F32", "Float32", "BF16", "bfloat16", "FP16", "half"}) {
    const Result r = RunCli({"space", "--shape", dt + ":4x1024:8", "--json"});
    EXPECT_EQ(r.code, kOk) << dt << "\n" << Describe(r);
  }
}

TEST(CliInputTest, UsageErrorsSayWhatToDoNext) {
  const std::vector<std::vector<std::string>> cases = {
      {"export", "--db", Fixture()},
      {"import", "--db", TempPath("x.db")},
      {"merge", "--db", TempPath("x.db")},
      {"emit", "--default"},
      {"emit", "--variant", "radix_f32_b512_r11_h0_s4096_c1_t1_m1", "--arch", "sm_70"},
      {"space", "--shape", "f32:4x1024:8", "--arch", "sm_999"},
  };
  for (const auto& args : cases) {
    const Result r = RunCli(args);
    EXPECT_EQ(r.code, kUsage) << args[0] << "\n" << Describe(r);
    EXPECT_TRUE(Contains(r.err, "\n  ")) << args[0] << ": no hint line in\n" << r.err;
  }
}

// ---------------------------------------------------------------- messages

TEST(CliMessagesTest, AnEmptyCacheFileIsCalledEmpty) {
  const std::string empty = TempPath("empty.db");
  std::ofstream(empty) << "";
  const Result r = RunCli({"show", "--db", empty});
  EXPECT_EQ(r.code, kCache) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "empty")) << r.err;
  EXPECT_FALSE(Contains(r.err, "newer")) << r.err;
}

TEST(CliMessagesTest, ReportRefusesAnUnknownFingerprintLikeShow) {
  const std::string out = TempPath("report-nope");
  const Result show = RunCli({"show", "--db", Fixture(), "--device-fingerprint", "nope"});
  const Result report = RunCli({"report", "--db", Fixture(), "--out", out, "--device-fingerprint", "nope"});
  EXPECT_EQ(show.code, kUsage) << Describe(show);
  EXPECT_EQ(report.code, kUsage) << Describe(report);
  EXPECT_EQ(report.err, show.err);
  EXPECT_FALSE(fs::exists(out + "/report.html"));
}

// ---------------------------------------------------------------- import validation

// The fixture exported, with its first winner row changed by `edit`.
std::string ExportWithEditedWinner(const std::string& name, const std::function<void(json&)>& edit, int* line_no) {
  const std::string jsonl = TempPath(name + ".src.jsonl");
  EXPECT_EQ(RunCli({"export", "--db", Fixture(), "--out", jsonl, "--no-binaries"}).code, kOk);
  std::ifstream in(jsonl);
  std::ostringstream out;
  std::string line;
  bool done = false;
  for (int no = 1; std::getline(in, line); ++no) {
    json j = json::parse(line);
    if (!done && j["table"] == "winners") {
      edit(j);
      line = j.dump();
      done = true;
      *line_no = no;
    }
    out << line << "\n";
  }
  const std::string path = TempPath(name + ".jsonl");
  std::ofstream(path) << out.str();
  return path;
}

TEST(CliImportValidationTest, ImplausibleWinnersAreRefusedNamingTheLine) {
  struct Case {
    std::string name;
    std::function<void(json&)> edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"negative", [](json& j) { j["median_us"] = -5.0; }, "median_us"},
      {"huge", [](json& j) { j["median_us"] = 1e308; }, "median_us"},
      {"block1000", [](json& j) {
         j["variant_id"] = std::regex_replace(j["variant_id"].get<std::string>(), std::regex("_b[0-9]+_"), "_b1000_");
       }, "not valid"},
      {"dtype", [](json& j) {
         // The same variant for the same shape in the other dtype.
         std::string key = j["problem"];
         const size_t f = key.find("f32");
         j["problem"] = f != std::string::npos ? key.replace(f, 3, "bf16") : key.replace(key.find("bf16"), 4, "f32");
       }, "not valid"},
  };
  for (const auto& c : cases) {
    int line_no = 0;
    const std::string file = ExportWithEditedWinner(c.name, c.edit, &line_no);
    const std::string target = TempPath("validated-" + c.name + ".db");
    const Result r = RunCli({"import", file, "--db", target});
    EXPECT_EQ(r.code, kUsage) << c.name << "\n" << Describe(r);
    EXPECT_TRUE(Contains(r.err, ":" + std::to_string(line_no) + ":")) << c.name << " line " << line_no << "\n" << r.err;
    EXPECT_TRUE(Contains(r.err, c.message)) << c.name << "\n" << r.err;
    EXPECT_FALSE(fs::exists(target)) << c.name;
    // Atomic: an existing cache keeps its rows.
    const std::string existing = TempPath("existing-" + c.name + ".db");
    fs::copy_file(Fixture(), existing, fs::copy_options::overwrite_existing);
    const json before = ShowJson(existing);
    EXPECT_EQ(RunCli({"import", file, "--db", existing}).code, kUsage) << c.name;
    EXPECT_EQ(ShowJson(existing)["devices"], before["devices"]) << c.name;
  }
}

// ---------------------------------------------------------------- --json, --quiet, stdio

TEST(CliJsonTest, EveryOutcomeIsOneJsonObjectWithTheExitCode) {
  const std::string db = TempPath("never-json.db");
  struct Case {
    std::vector<std::string> args;
    int code;
  };
  const std::vector<Case> cases = {
      {{"show", "--db", Fixture(), "--json"}, kOk},
      {{"space", "--shape", "f32:4x1024:8", "--json"}, kOk},
      {{"emit", "--default", "--shape", "f32:4x1024:8", "--json"}, kOk},
      {{"show", "--db", TempPath("missing.db"), "--json"}, kCache},
      {{"tune", "--db", db, "--shape", "f32:4x100:0", "--json"}, kUsage},
      {{"tune", "--db", db, "--no-such-flag", "--json"}, kUsage},
      {{"--json", "nonsense"}, kUsage},
      {{"tune", "--db", db, "--shape", "f32:4x1024:8", "--json"}, kNoGpu},
      {{"devices", "--json"}, kNoGpu},
      {{"tune", "--db", db, "--preset", "smoke", "--shard", "5/8", "--json"}, kOk},
      {{"--json", "report", "--db", Fixture(), "--out", TempPath("json-report")}, kOk},
  };
  for (const auto& c : cases) {
    const Result r = RunCli(c.args);
    std::string line;
    for (const auto& a : c.args) line += a + " ";
    EXPECT_EQ(r.code, c.code) << line << "\n" << Describe(r);
    const json j = json::parse(r.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << line << ": stdout is not one JSON object:\n" << r.out;
    EXPECT_EQ(j.value("exit_code", -1), c.code) << line;
    EXPECT_EQ(j.value("ok", c.code != kOk), c.code == kOk) << line;
    if (c.code != kOk) {
      EXPECT_FALSE(j.value("error", "").empty()) << line;
      EXPECT_FALSE(j.value("hint", "").empty()) << line;
    }
  }
  EXPECT_FALSE(fs::exists(db));
}

TEST(CliJsonTest, QuietSilencesInformationalMessages) {
  const std::string out = TempPath("quiet.cu");
  Result r = RunCli({"emit", "--default", "--shape", "f32:4x1024:8", "-o", out, "--quiet"});
  EXPECT_EQ(r.code, kOk) << Describe(r);
  EXPECT_EQ(r.err, "");
  r = RunCli({"--quiet", "emit", "--default", "--shape", "f32:4x1024:8", "-o", out});
  EXPECT_EQ(r.code, kOk) << Describe(r);
  EXPECT_EQ(r.err, "");
  r = RunCli({"emit", "--default", "--shape", "f32:4x1024:8", "-o", out});
  EXPECT_TRUE(Contains(r.err, "wrote")) << r.err;
}

TEST(CliJsonTest, ExportToStdoutAndImportFromStdin) {
  const std::string jsonl = TempPath("stdout-export.jsonl");
  Result r = RunCli({"export", "--db", Fixture(), "--out", "-", "--no-binaries"});
  ASSERT_EQ(r.code, kOk) << Describe(r);
  EXPECT_EQ(json::parse(r.out.substr(0, r.out.find('\n')))["table"], "meta");
  std::ofstream(jsonl) << r.out;
  const std::string copy = TempPath("from-stdin.db");
  r = RunCli({"import", "-", "--db", copy}, {}, {}, jsonl);
  ASSERT_EQ(r.code, kOk) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "3 (+3) winners")) << r.out;
  EXPECT_EQ(ShowJson(copy)["devices"], ShowJson(Fixture())["devices"]);
}

}  // namespace
}  // namespace topk
