#include "tools/cli_common.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>

#include "tuner/presets.hpp"

namespace topk::cli {

namespace fs = std::filesystem;

const char* const kExitCodeHelp =
    "Exit codes: 0 ok, 1 other error, 2 usage error (nothing was done), 3 no NVIDIA GPU,\n"
    "            4 cache file missing/corrupt/unopenable, 5 partial failure\n"
    "            (some shapes have no winner, or some winners failed verification),\n"
    "            130 tune interrupted (SIGINT/SIGTERM; finished work is kept).\n"
    "Cache: --db PATH, else $TOPK_TUNE_DB, else $XDG_CACHE_HOME/topk-tune/tuning.db,\n"
    "       else ~/.cache/topk-tune/tuning.db.";

const char* const kDbHelp =
    "Tuning cache file (default: $TOPK_TUNE_DB, else $XDG_CACHE_HOME/topk-tune/tuning.db, else "
    "~/.cache/topk-tune/tuning.db)";

const char* const kShapeHelp =
    "[DTYPE:]BATCHxN:K[:FLAG...], DTYPE f32|f16|bf16 (default f32; any case), FLAGs: ranges, values, "
    "sorted, smallest, stride=S. Example: f32:64x32768:2048:ranges";

GlobalOptions& Global() {
  static GlobalOptions g;
  return g;
}

int Fail(int code, const std::string& message, const std::string& given_hint) {
  std::string hint = given_hint;
  if (hint.empty() && code == kExitUsage)
    hint = "run `topk-tune" + (Global().command.empty() ? "" : " " + Global().command) +
           " --help` for the options (docs/CLI.md has the details)";
  if (Global().json) {
    std::cout << nlohmann::json{{"ok", false}, {"exit_code", code}, {"error", message}, {"hint", hint}}.dump()
              << std::endl;
    return code;
  }
  std::cerr << "topk-tune: error: " << message << "\n";
  if (!hint.empty()) std::cerr << "  " << hint << "\n";
  return code;
}

int JsonResult(nlohmann::json object, int code) {
  object["ok"] = code == kExitOk;
  object["exit_code"] = code;
  std::cout << object.dump(2) << std::endl;
  return code;
}

void Warn(const std::string& message) {
  if (!Global().quiet) std::cerr << "topk-tune: warning: " << message << "\n";
}

void Info(const std::string& line) {
  if (!Global().quiet) std::cerr << line << "\n";
}

std::string Clip(const std::string& value, size_t max) {
  return value.size() <= max ? value : value.substr(0, max) + "...";
}

CLI::Validator FinitePositive(double max) {
  return CLI::Validator(
      [max](std::string& v) -> std::string {
        double d = 0;
        size_t used = 0;
        try {
          d = std::stod(v, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != v.size() || v.empty() || !std::isfinite(d) || d <= 0 || d > max) {
          char m[32];
          std::snprintf(m, sizeof m, "%g", max);
          return "'" + Clip(v) + "' is not a number in (0, " + m + "]";
        }
        return "";
      },
      "POSITIVE");
}

CLI::Validator IntegerIn(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& v) -> std::string {
        int64_t x = 0;
        const char* b = v.data();
        const char* e = b + v.size();
        auto [p, ec] = std::from_chars(b, e, x);
        if (v.empty() || ec != std::errc() || p != e || x < lo || x > hi)
          return "'" + Clip(v) + "' is not an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
        return "";
      },
      "INT");
}

// ---------------------------------------------------------------- arguments

namespace {

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

bool ParseInt(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  const char* b = s.data();
  const char* e = s.data() + s.size();
  if (*b == '+') ++b;
  auto [p, ec] = std::from_chars(b, e, *out);
  return ec == std::errc() && p == e;
}

}  // namespace

void AddGlobalFlags(CLI::App* app) {
  app->add_flag("--json", Global().json,
                "One JSON object on stdout, on success and on error (with \"ok\" and \"exit_code\")");
  app->add_flag("-q,--quiet", Global().quiet, "No progress or informational messages on stderr (errors remain)");
}

StatusOr<Problem> ParseShape(const std::string& spec) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("--shape", "bad shape '" + Clip(spec, 80) + "': " + why + " (expected " + kShapeHelp + ")");
  };
  std::vector<std::string> parts = Split(spec, ':');
  Problem p;
  size_t i = 0;
  if (!parts.empty() && parts[0].find('x') == std::string::npos) {
    auto dt = ParseDType(parts[0]);
    if (!dt.ok()) return bad(dt.status().message());
    p.dtype = *dt;
    i = 1;
  }
  if (parts.size() < i + 2) return bad("needs BATCHxN and K");
  const std::vector<std::string> bn = Split(parts[i], 'x');
  if (bn.size() != 2 || !ParseInt(bn[0], &p.batch) || !ParseInt(bn[1], &p.n))
    return bad("'" + Clip(parts[i]) + "' is not BATCHxN (two integers, e.g. 64x32768)");
  if (!ParseInt(parts[i + 1], &p.k)) return bad("K '" + Clip(parts[i + 1]) + "' is not an integer");
  std::set<std::string> seen;
  for (size_t j = i + 2; j < parts.size(); ++j) {
    const std::string& f = parts[j];
    const std::string name = f.rfind("stride=", 0) == 0 ? "stride" : f;
    if (!seen.insert(name).second) return bad("flag '" + Clip(name) + "' appears twice");
    if ((name == "smallest" && seen.count("largest")) || (name == "largest" && seen.count("smallest")))
      return bad("'smallest' and 'largest' contradict each other");
    if (f == "ranges") {
      p.ranges = true;
    } else if (f == "values") {
      p.values = true;
    } else if (f == "sorted") {
      p.sorted = true;
    } else if (f == "deterministic") {
      p.deterministic = true;
    } else if (f == "smallest") {
      p.largest = false;
    } else if (f == "largest") {
      p.largest = true;
    } else if (f.rfind("stride=", 0) == 0) {
      if (!ParseInt(f.substr(7), &p.row_stride)) return bad("stride '" + Clip(f.substr(7)) + "' is not an integer");
    } else {
      return bad("unknown flag '" + Clip(f) + "'");
    }
  }
  // Out of range: the syntax was fine, so the message is only the limit.
  Status v = tuner::ValidateTunable(p);
  if (!v.ok()) return InvalidArgument("--shape", "bad shape '" + Clip(spec, 80) + "': " + v.message());
  return p;
}

std::string ShapeSpec(const Problem& p) {
  std::string s = std::string(DTypeName(p.dtype)) + ":" + std::to_string(p.batch) + "x" + std::to_string(p.n) + ":" +
                  std::to_string(p.k);
  if (p.ranges) s += ":ranges";
  if (p.values) s += ":values";
  if (p.sorted) s += ":sorted";
  if (p.deterministic) s += ":deterministic";
  if (!p.largest) s += ":smallest";
  if (p.row_stride != 0 && p.row_stride != p.n) s += ":stride=" + std::to_string(p.row_stride);
  return s;
}

StatusOr<std::pair<int, int>> ParseShard(const std::string& spec) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("--shard", "bad shard '" + spec + "': " + why +
                                          " (expected i/N with 0 <= i < N, e.g. 0/4 for the first of four)");
  };
  const std::vector<std::string> parts = Split(spec, '/');
  int64_t i = 0, n = 0;
  if (parts.size() != 2 || !ParseInt(parts[0], &i) || !ParseInt(parts[1], &n)) return bad("not two integers");
  if (n < 1) return bad("N must be at least 1");
  if (i < 0 || i >= n) return bad("i must be in [0, N)");
  if (n > 1000000) return bad("N is too large");
  return std::make_pair(static_cast<int>(i), static_cast<int>(n));
}

StatusOr<std::vector<int>> ParseDeviceList(const std::string& spec) {
  std::vector<int> out;
  std::set<int> seen;
  for (const std::string& s : Split(spec, ',')) {
    int64_t d = 0;
    if (!ParseInt(s, &d) || d < 0 || d > 1024)
      return InvalidArgument(
          "--devices", "bad device list '" + spec + "': '" + s + "' is not a device ordinal (expected e.g. 0,1,2,3)");
    if (!seen.insert(static_cast<int>(d)).second)
      return InvalidArgument("--devices", "bad device list '" + spec + "': device " + s + " appears twice");
    out.push_back(static_cast<int>(d));
  }
  return out;
}

CLI::Option* AddDbOption(CLI::App* app, std::string* db, const std::string& help) {
  return app->add_option("--db", *db, help)->check(
      [](const std::string& v) { return v.empty() ? std::string("empty path: pass --db with a cache file") : ""; });
}

int ResolveCachePath(const std::string& flag, std::string* db) {
  const bool from_env = flag.empty();
  *db = from_env ? DefaultCachePath() : flag;
  if (db->empty())
    return Fail(kExitUsage,
                "no tuning cache path: $HOME is not set, and neither is $TOPK_TUNE_DB nor an absolute "
                "$XDG_CACHE_HOME",
                "pass --db PATH or set TOPK_TUNE_DB=PATH");
  const bool memory = *db == ":memory:";
  if (memory || db->rfind("file:", 0) == 0) {
    const char* what =
        memory ? "is SQLite's in-memory database" : "is an SQLite URI, not a file path";
    const std::string source = !from_env                     ? "--db '" + *db + "'"
                               : std::getenv("TOPK_TUNE_DB")  ? "$TOPK_TUNE_DB='" + *db + "'"
                                                             : "the default cache path '" + *db + "'";
    return Fail(kExitUsage, source + " " + what + ": a tuning cache must be a file (nothing would be kept)",
                "pass --db PATH or set TOPK_TUNE_DB to a file path");
  }
  return kExitOk;
}

namespace {

// Creates and removes a uniquely named entry in `dir`: the only reliable
// test (access(2) says yes to root on read-only or virtual file systems).
Status ProbeDir(const fs::path& dir, const std::string& what) {
  const fs::path probe = dir / (".topk-tune-probe-" + std::to_string(::getpid()));
  if (::mkdir(probe.c_str(), 0700) != 0) {
    const int err = errno;
    return InvalidArgument(
        "path", what + ": cannot create entries in directory '" + dir.string() + "' (" + std::strerror(err) + ")");
  }
  ::rmdir(probe.c_str());
  return Status::Ok();
}

// The nearest existing ancestor of `p` (p itself excluded), "." for a bare
// relative name.
StatusOr<fs::path> ExistingAncestor(const fs::path& p, const std::string& what) {
  fs::path dir = p.parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  while (!fs::exists(dir, ec)) {
    const fs::path up = dir.parent_path();
    if (up.empty()) {
      dir = ".";
      break;
    }
    if (up == dir) break;  // a root that does not exist: reported below
    dir = up;
  }
  if (!fs::is_directory(dir, ec)) return InvalidArgument("path", what + ": '" + dir.string() + "' is not a directory");
  return dir;
}

}  // namespace

Status CheckWritableFile(const std::string& path) {
  const std::string what = "cannot write a cache at '" + path + "'";
  if (path.empty()) return InvalidArgument("path", "empty cache path");
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::exists(st)) {
    if (fs::is_directory(st)) return InvalidArgument("path", what + ": it is a directory");
    if (!fs::is_regular_file(st)) return InvalidArgument("path", what + ": not a regular file");
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      return InvalidArgument("path", what + ": " + std::strerror(err));
    }
    ::close(fd);
    // SQLite puts its -wal and -shm files beside the database.
    fs::path dir = fs::path(path).parent_path();
    return ProbeDir(dir.empty() ? fs::path(".") : dir, what);
  }
  TOPK_ASSIGN_OR_RETURN(fs::path dir, ExistingAncestor(fs::path(path), what));
  return ProbeDir(dir, what);
}

Status CheckWritableDir(const std::string& dir) {
  const std::string what = "cannot write to '" + dir + "'";
  if (dir.empty()) return InvalidArgument("path", "empty output directory");
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st)) return InvalidArgument("path", what + ": it exists and is not a directory");
    return ProbeDir(dir, what);
  }
  TOPK_ASSIGN_OR_RETURN(fs::path anc, ExistingAncestor(fs::path(dir), what));
  return ProbeDir(anc, what);
}

int CacheOpenFailure(const Status& s, const std::string& path, bool read_only) {
  switch (s.code()) {
    case Code::kNotFound:
      return Fail(kExitCache, "no tuning cache at '" + path + "'",
                  "run `topk-tune tune --db " + path + "` first, or pass --db with an existing cache");
    case Code::kDataLoss:
      return Fail(kExitCache, "'" + path + "' is not a usable tuning cache: " + s.message(),
                  "move it aside (it is left untouched) or pass --db with another path");
    case Code::kFailedPrecondition:
      if (std::error_code ec; fs::is_regular_file(path, ec) && fs::file_size(path, ec) == 0 && !ec)
        return Fail(kExitCache, "'" + path + "' is an empty file, not a tuning cache",
                    "remove it (an import or tune then creates the cache), or pass --db with another path");
      if (s.message().find("not a topk-tune cache") != std::string::npos)
        return Fail(kExitCache, "cannot use '" + path + "': " + s.message(),
                    "it belongs to another program: pass --db with another path");
      return Fail(kExitCache, "cannot use the cache '" + path + "': " + s.message(),
                  "it was written by a newer topk-tune: upgrade, or pass --db with another path");
    default:
      return Fail(
          kExitCache,
          std::string("cannot open the cache '") + path + "'" + (read_only ? " for reading" : "") + ": " + s.message(),
          "check the path and its permissions, or pass --db with another path");
  }
}

// ---------------------------------------------------------------- formatting

std::string FormatUs(double us) {
  if (!(us > 0)) return "-";
  char buf[32];
  if (us >= 1000)
    std::snprintf(buf, sizeof buf, "%.0f", us);
  else if (us >= 100)
    std::snprintf(buf, sizeof buf, "%.1f", us);
  else if (us >= 10)
    std::snprintf(buf, sizeof buf, "%.2f", us);
  else
    std::snprintf(buf, sizeof buf, "%.3f", us);
  return buf;
}

std::string FormatSpeedup(double x) {
  if (!(x > 0)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", x);
  return buf;
}

std::string FormatDuration(double seconds) {
  if (!(seconds >= 0) || std::isinf(seconds)) return "?";
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  char buf[48];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>((s % 3600) / 60));
  return buf;
}

std::string CountOf(int64_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

std::string FormatBytes(int64_t bytes) {
  char buf[48];
  const double b = static_cast<double>(bytes);
  if (bytes >= (int64_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", b / (1 << 30));
  else if (bytes >= (1 << 20))
    std::snprintf(buf, sizeof buf, "%.0f MiB", b / (1 << 20));
  else if (bytes >= (1 << 10))
    std::snprintf(buf, sizeof buf, "%.0f KiB", b / (1 << 10));
  else
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  return buf;
}

void Table::Print(std::ostream& os) const {
  std::vector<size_t> w(header_.size(), 0);
  auto widen = [&](const std::vector<std::string>& r) {
    for (size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
  };
  widen(header_);
  for (const auto& r : rows_) widen(r);
  auto line = [&](const std::vector<std::string>& r) {
    std::string s;
    for (size_t i = 0; i < w.size(); ++i) {
      const std::string cell = i < r.size() ? r[i] : "";
      s += cell;
      if (i + 1 < w.size()) s += std::string(w[i] - cell.size() + 2, ' ');
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    os << s << "\n";
  };
  line(header_);
  std::vector<std::string> rule;
  for (size_t x : w) rule.push_back(std::string(x, '-'));
  line(rule);
  for (const auto& r : rows_) line(r);
}

}  // namespace topk::cli
