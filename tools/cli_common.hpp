// Pieces every topk-tune subcommand shares: exit codes, error messages,
// argument parsing (shapes, shards, device lists), path checks and plain
// text tables. tools/ is the only layer that prints or exits; the functions
// here print only where their comment says so.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "topk/status.hpp"
#include "topk/topk.hpp"

namespace topk::cli {

// Exit codes (documented in docs/CLI.md and in the --help footer).
enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,    // anything else (worker cannot start, internal error)
  kExitUsage = 2,    // bad flags, shapes, paths: nothing was done
  kExitNoGpu = 3,    // the command needs an NVIDIA GPU and found none
  kExitCache = 4,    // the cache file is missing, corrupt or cannot be opened
  kExitPartial = 5,  // finished, but some shapes have no winner / some winners failed
  kExitInterrupted = 130,  // tune stopped by SIGINT/SIGTERM (128 + SIGINT, as shells report it)
};

extern const char* const kExitCodeHelp;

// Settings of the whole invocation, set once by main() before a command
// runs: --json, --quiet and the command's name (for the default hint).
struct GlobalOptions {
  bool json = false;
  bool quiet = false;
  std::string command;
};
GlobalOptions& Global();

// The one error path. Prints "topk-tune: error: <message>" and "  <hint>" to
// stderr (a usage error without a hint gets "run `topk-tune CMD --help`");
// with --json, prints {"ok":false,"exit_code":N,"error":...,"hint":...} on
// stdout instead. Returns `code`, so that handlers can `return Fail(...)`.
int Fail(int code, const std::string& message, const std::string& hint = "");
// With --json, prints `object` plus "ok" and "exit_code" on stdout as the
// command's one JSON object; returns `code`.
int JsonResult(nlohmann::json object, int code = 0);
// Prints "topk-tune: warning: <message>" to stderr (not with --quiet).
void Warn(const std::string& message);
// Prints an informational line to stderr (not with --quiet).
void Info(const std::string& line);

// One subcommand: its CLI11 app and what runs when it was chosen.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// The subcommands, each in its own file.
Command AddDevices(CLI::App& root);
Command AddSpace(CLI::App& root);
Command AddEmit(CLI::App& root);
Command AddTune(CLI::App& root);
Command AddShow(CLI::App& root);
Command AddReport(CLI::App& root);
Command AddVerify(CLI::App& root);
Command AddExport(CLI::App& root);
Command AddImport(CLI::App& root);
Command AddMerge(CLI::App& root);

// ---- arguments

// --json and --quiet, accepted by the root and by every command (both set
// Global()). main() also looks for --json before parsing, so that a parse
// error is reported as JSON too.
void AddGlobalFlags(CLI::App* app);

extern const char* const kShapeHelp;

// "[DTYPE:]BATCHxN:K[:FLAG...]" with flags ranges, values, sorted, smallest,
// largest, stride=S; e.g. "f32:64x32768:2048:ranges". Checks the result with
// tuner::ValidateTunable; errors are kInvalidArgument naming the spec.
StatusOr<Problem> ParseShape(const std::string& spec);
// Options whose value CLI11 would convert loosely: "nan" for a double,
// "-1" for an unsigned, a number that overflows. A finite number in
// (0, max]; an integer in [lo, hi]. Messages echo at most 24 characters.
CLI::Validator FinitePositive(double max);
CLI::Validator IntegerIn(int64_t lo, int64_t hi);
// The inverse of ParseShape: "f32:64x32768:2048:ranges".
std::string ShapeSpec(const Problem& p);
// "i/N" with 0 <= i < N.
StatusOr<std::pair<int, int>> ParseShard(const std::string& spec);
// "0,1,3": distinct non-negative ordinals.
StatusOr<std::vector<int>> ParseDeviceList(const std::string& spec);

// The --db option's help: the file and where it is by default
// (ResolveCachePath's order).
extern const char* const kDbHelp;

// Adds the --db option of a command: an explicit empty value is a usage
// error (without --db the default applies; see ResolveCachePath).
CLI::Option* AddDbOption(CLI::App* app, std::string* db, const std::string& help);

// The cache path of a command: the --db value, else
// topk::DefaultCachePath(). Refuses, printing the error and returning
// kExitUsage, a path that is not a file (":memory:", an SQLite "file:" URI)
// and the case where no default exists (no --db, no $TOPK_TUNE_DB, no
// absolute $XDG_CACHE_HOME, no $HOME). kExitOk with *db set otherwise.
int ResolveCachePath(const std::string& flag, std::string* db);

// Whether a cache file can be created or written at `path` without leaving
// anything behind: an existing file must be a writable regular file; a
// missing one needs a directory (or an ancestor in which the missing
// directories can be made) that accepts new entries. The probe creates and
// removes a temporary entry.
Status CheckWritableFile(const std::string& path);
// The same for an output directory (created later if missing).
Status CheckWritableDir(const std::string& dir);

// Message and exit code for a failed Cache::Open / OpenReadOnly.
int CacheOpenFailure(const Status& s, const std::string& path, bool read_only);

// `value` cut to `max` characters ("..." appended) for echoing user input.
std::string Clip(const std::string& value, size_t max = 24);

// ---- formatting

std::string FormatUs(double us);             // "41.2" (three significant digits)
std::string FormatSpeedup(double x);         // "1.34x", "-" when 0
std::string FormatDuration(double seconds);  // "42s", "3m05s", "1h02m"
std::string FormatBytes(int64_t bytes);      // "50 MiB"
// "1 baseline", "3 baselines", "0 winners": a count with its noun in the
// right number (the noun's plural is NOUN + "s").
std::string CountOf(int64_t n, const std::string& noun);

// A plain text table: columns padded to their widest cell.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.empty(); }
  void Print(std::ostream& os) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace topk::cli
