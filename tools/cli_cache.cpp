// The subcommands that only read or combine cache files: `show`, `report`,
// `export`, `import` and `merge`. None needs a GPU.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "cache/cache.hpp"
#include "tools/atomic_file.hpp"
#include "tools/cli_common.hpp"
#include "tools/report.hpp"

namespace topk::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Closes `c` and removes the cache file `db` (and SQLite's side files) that
// this command created, after a failure wrote nothing into it.
void RemoveNewCache(std::unique_ptr<cache::Cache>* c, const std::string& db) {
  c->reset();
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(db + suffix, ec);
}

StatusOr<std::unique_ptr<cache::Cache>> OpenForReading(const std::string& db, int* code) {
  auto c = cache::Cache::OpenReadOnly(db);
  if (!c.ok()) *code = CacheOpenFailure(c.status(), db, true);
  return c;
}

// Counts shown before and after import / merge.
struct Counts {
  int64_t devices = 0, measurements = 0, winners = 0, baselines = 0;
};

Counts CountRows(const cache::Cache& c) {
  Counts n;
  if (auto d = c.Devices(); d.ok()) n.devices = static_cast<int64_t>(d->size());
  if (auto m = c.CountMeasurements(); m.ok()) n.measurements = *m;
  if (auto w = c.Winners(""); w.ok()) n.winners = static_cast<int64_t>(w->size());
  if (auto b = c.Baselines(""); b.ok()) n.baselines = static_cast<int64_t>(b->size());
  return n;
}

std::string CountsLine(const Counts& a, const Counts& b) {
  auto d = [](int64_t before, int64_t after, const std::string& noun) {
    // "3 (+3) winners": the count, what this command added, the noun.
    const std::string counted = CountOf(after, noun);
    const size_t space = counted.find(' ');
    return counted.substr(0, space) + (after != before ? " (+" + std::to_string(after - before) + ")" : "") +
           counted.substr(space);
  };
  return d(a.devices, b.devices, "device") + ", " + d(a.measurements, b.measurements, "measurement") + ", " +
         d(a.winners, b.winners, "winner") + ", " + d(a.baselines, b.baselines, "baseline");
}

json CountsJson(const Counts& n) {
  return {{"devices", n.devices}, {"measurements", n.measurements}, {"winners", n.winners}, {"baselines", n.baselines}};
}

std::string UtcNow() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

bool ShapeLess(const Problem& a, const Problem& b) {
  auto key = [](const Problem& p) {
    return std::make_tuple(static_cast<int>(p.dtype), !p.largest, p.ranges, p.values, p.sorted, p.n, p.k, p.batch);
  };
  return key(a) < key(b);
}

// kExitOk when `fingerprint` is empty or names a device of the cache (or
// one that has winners); else the usage error listing the known ones.
int RequireKnownDevice(const cache::Cache& c, const std::string& fingerprint, const std::string& db) {
  if (fingerprint.empty()) return kExitOk;
  auto devices = c.Devices();
  auto winners = c.Winners(fingerprint);
  if (!devices.ok()) return Fail(kExitCache, "cannot read '" + db + "': " + devices.status().ToString());
  if (!winners.ok()) return Fail(kExitCache, "cannot read '" + db + "': " + winners.status().ToString());
  std::string known;
  for (const auto& d : *devices) {
    if (d.fingerprint == fingerprint) return kExitOk;
    known += "\n  " + d.fingerprint;
  }
  if (!winners->empty()) return kExitOk;
  return Fail(kExitUsage, "no device with fingerprint '" + Clip(fingerprint, 80) + "' in '" + db + "'",
              known.empty() ? "the cache has no devices yet" : "the cache has:" + known);
}

// A path or "-": stdin / stdout.
bool IsStdio(const std::string& path) { return path == "-"; }

}  // namespace

// ---------------------------------------------------------------- show

Command AddShow(CLI::App& root) {
  struct Opts {
    std::string db;
    std::string fingerprint;
    bool all = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* app = root.add_subcommand("show", "Show the tuned winners stored in the cache (no GPU needed)");
  AddDbOption(app, &o->db, kDbHelp);
  auto* fp = app->add_option("--device-fingerprint", o->fingerprint, "Only this device (see `topk-tune devices`)");
  auto* all = app->add_flag("--all", o->all, "Every device in the cache (the default)");
  fp->excludes(all);
  app->footer("Example: topk-tune show --db tuning.db\nOpens the cache read-only: never creates or changes a file.");
  auto run = [o]() -> int {
    std::string db;
    if (const int rc = ResolveCachePath(o->db, &db); rc != kExitOk) return rc;
    int code = kExitOk;
    auto c = OpenForReading(db, &code);
    if (!c.ok()) return code;
    auto devices = (*c)->Devices();
    auto winners = (*c)->Winners(o->fingerprint);
    auto baselines = (*c)->Baselines(o->fingerprint);
    for (const Status* s : {&devices.status(), &winners.status(), &baselines.status()})
      if (!s->ok()) return Fail(kExitCache, "cannot read '" + db + "': " + s->ToString());
    if (const int rc = RequireKnownDevice(**c, o->fingerprint, db); rc != kExitOk) return rc;
    std::map<std::string, cache::DeviceRecord> by_fp;
    for (const auto& d : *devices) by_fp[d.fingerprint] = d;
    // Winners grouped by device, in shape order.
    std::map<std::string, std::vector<cache::Winner>> groups;
    for (const auto& w : *winners) groups[w.device_fingerprint].push_back(w);
    for (auto& [f, list] : groups)
      std::sort(list.begin(), list.end(),
                [](const cache::Winner& a, const cache::Winner& b) { return ShapeLess(a.problem, b.problem); });
    std::map<std::string, double> torch;  // fingerprint|problem key -> us
    for (const auto& b : *baselines)
      if (b.name == report::kTorchBaseline)
        torch[b.device_fingerprint + "|" + cache::ProblemKey(b.problem)] = b.median_us;
    auto torch_of = [&](const cache::Winner& w) {
      auto it = torch.find(w.device_fingerprint + "|" + cache::ProblemKey(w.problem));
      if (it != torch.end()) return it->second;
      return w.baseline_name == report::kTorchBaseline ? w.baseline_us : 0.0;
    };
    if (Global().json) {
      json out = {{"db", db}, {"devices", json::array()}};
      for (auto& [f, list] : groups) {
        json d = {{"fingerprint", f}};
        if (by_fp.count(f)) {
          d["name"] = by_fp[f].name;
          d["arch"] = by_fp[f].ArchName();
          d["sm_count"] = by_fp[f].sm_count;
        }
        json ws = json::array();
        for (const auto& w : list) {
          const double t = torch_of(w);
          ws.push_back({{"shape", w.problem.ToString()},
                        {"spec", ShapeSpec(w.problem)},
                        {"key", cache::ProblemKey(w.problem)},
                        {"winner", w.variant_id},
                        {"config", w.config.ToJson()},
                        {"median_us", w.median_us},
                        {"default_us", w.default_us},
                        {"speedup_default", w.default_us > 0 && w.median_us > 0 ? w.default_us / w.median_us : 0},
                        {"torch_us", t},
                        {"speedup_torch", t > 0 && w.median_us > 0 ? t / w.median_us : 0},
                        {"updated", w.updated}});
        }
        d["winners"] = std::move(ws);
        out["devices"].push_back(std::move(d));
      }
      return JsonResult(std::move(out));
    }
    if (groups.empty()) {
      std::cout << "No winners in " << db << (o->fingerprint.empty() ? "" : " for " + o->fingerprint)
                << " yet. Run `topk-tune tune --db " << db << "` on a GPU.\n";
      return kExitOk;
    }
    bool first = true;
    for (auto& [f, list] : groups) {
      if (!first) std::cout << "\n";
      first = false;
      const auto d = by_fp.find(f);
      if (d != by_fp.end())
        std::cout << d->second.name << " (" << d->second.ArchName() << ", " << d->second.sm_count << " SMs)\n";
      std::cout << "fingerprint " << f << "\n\n";
      Table t({"shape", "winner", "median us", "default us", "vs default", "torch.topk us", "vs torch", "updated"});
      for (const auto& w : list) {
        const double tt = torch_of(w);
        t.Add({w.problem.ToString(), w.variant_id, FormatUs(w.median_us), FormatUs(w.default_us),
               w.default_us > 0 && w.median_us > 0 ? FormatSpeedup(w.default_us / w.median_us) : "-", FormatUs(tt),
               tt > 0 && w.median_us > 0 ? FormatSpeedup(tt / w.median_us) : "-", w.updated.substr(0, 16)});
      }
      t.Print(std::cout);
      std::cout << CountOf(static_cast<int64_t>(list.size()), "winner") << "\n";
    }
    return kExitOk;
  };
  return {app, run};
}

// ---------------------------------------------------------------- report

Command AddReport(CLI::App& root) {
  struct Opts {
    std::string db;
    std::string out = "topk-report";
    std::string fingerprint;
    std::string title = "topk-tune report";
  };
  auto o = std::make_shared<Opts>();
  CLI::App* app = root.add_subcommand(
      "report", "Write an HTML report with charts, a Markdown summary and JSON from the cache (no GPU needed)");
  AddDbOption(app, &o->db, kDbHelp);
  app->add_option("--out", o->out, "Directory for report.html, report.md and report.json")->capture_default_str();
  app->add_option("--device-fingerprint", o->fingerprint, "Only this device (default: every device)");
  app->add_option("--title", o->title, "Title of the report")->capture_default_str();
  app->footer(
      "Example: topk-tune report --db tuning.db --out topk-report && xdg-open topk-report/report.html\n"
      "The HTML is self-contained (inline CSS and SVG, no scripts, no network). docs/REPORTS.md explains the "
      "charts.");
  auto run = [o]() -> int {
    std::string db;
    if (const int rc = ResolveCachePath(o->db, &db); rc != kExitOk) return rc;
    if (Status w = CheckWritableDir(o->out); !w.ok()) return Fail(kExitUsage, w.message(), "pass --out DIR");
    for (const char* name : report::kReportFileNames) {
      const std::string file = (fs::path(o->out) / name).string();
      if (SameFile(file, db))
        return Fail(kExitUsage, "the report file '" + file + "' would replace the tuning cache '" + db + "' itself",
                    "pass --out with another directory, or move the cache");
    }
    int code = kExitOk;
    auto c = OpenForReading(db, &code);
    if (!c.ok()) return code;
    if (const int rc = RequireKnownDevice(**c, o->fingerprint, db); rc != kExitOk) return rc;
    auto in = report::LoadReportInput(**c, o->fingerprint);
    if (!in.ok()) return Fail(kExitCache, "cannot read '" + db + "': " + in.status().ToString());
    in->title = o->title;
    in->generated = UtcNow();
    const report::ReportFiles files = report::RenderReport(*in);
    std::vector<std::string> written;
    if (Status s = report::WriteReport(files, o->out, &written); !s.ok())
      return Fail(kExitError, s.message(), "pass --out with a writable directory");
    if (Global().json)
      return JsonResult({{"db", db},
                         {"files", written},
                         {"winners", in->winners.size()},
                         {"measurements", in->measurements.size()},
                         {"baselines", in->baselines.size()}});
    for (const auto& p : written) std::cout << "wrote " << p << "\n";
    std::cout << CountOf(static_cast<int64_t>(in->winners.size()), "winner") << ", "
              << CountOf(static_cast<int64_t>(in->measurements.size()), "measurement") << ", "
              << CountOf(static_cast<int64_t>(in->baselines.size()), "baseline") << " from " << db << ". Open "
              << written[0] << " in a browser.\n";
    return kExitOk;
  };
  return {app, run};
}

// ---------------------------------------------------------------- export / import / merge

Command AddExport(CLI::App& root) {
  struct Opts {
    std::string db;
    std::string out;
    bool no_binaries = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* app = root.add_subcommand("export", "Write the cache as JSON Lines (for sharing or review)");
  AddDbOption(app, &o->db, kDbHelp);
  app->add_option("-o,--out", o->out, "The .jsonl file to write (required; - for stdout)");
  app->add_flag("--no-binaries", o->no_binaries, "Leave the compiled cubins out (much smaller; they recompile)");
  app->footer("Example: topk-tune export --db tuning.db --out tuning.jsonl --no-binaries");
  auto run = [o]() -> int {
    std::string db;
    if (const int rc = ResolveCachePath(o->db, &db); rc != kExitOk) return rc;
    if (o->out.empty())
      return Fail(kExitUsage, "export needs --out FILE.jsonl", "pass --out FILE.jsonl, or --out - for stdout");
    if (IsStdio(o->out)) {
      if (Global().json)
        return Fail(kExitUsage, "--out - writes the rows to stdout, where --json puts its result",
                    "pass --out FILE.jsonl with --json, or drop --json");
      int code = kExitOk;
      auto c = OpenForReading(db, &code);
      if (!c.ok()) return code;
      if (Status s = (*c)->WriteJsonl(std::cout, !o->no_binaries); !s.ok())
        return Fail(kExitCache, "export of '" + db + "' failed: " + s.ToString(), "the output is incomplete");
      std::cout.flush();
      const Counts n = CountRows(**c);
      Info("topk-tune: exported " + CountsLine(n, n) + " to stdout");
      return kExitOk;
    }
    // Same device and inode: the same path, a symbolic or a hard link.
    if (SameFile(o->out, db))
      return Fail(kExitUsage, "--out '" + o->out + "' is the tuning cache '" + db + "' itself: the export would replace it",
                  "pass --out with another path, e.g. tuning.jsonl");
    if (Status w = CheckWritableFile(o->out); !w.ok())
      return Fail(kExitUsage, "cannot write '" + o->out + "': " + w.message(), "pass --out with a writable path");
    int code = kExitOk;
    auto c = OpenForReading(db, &code);
    if (!c.ok()) return code;
    std::error_code ec;
    if (const fs::path parent = fs::path(o->out).parent_path(); !parent.empty()) fs::create_directories(parent, ec);
    Status s = WriteFileAtomically(
        o->out, [&](std::ostream& out) { return (*c)->WriteJsonl(out, !o->no_binaries); });
    if (!s.ok()) return Fail(kExitCache, "export of '" + db + "' failed: " + s.ToString(), "no file was written");
    const Counts n = CountRows(**c);
    const auto size = fs::file_size(o->out, ec);
    if (Global().json)
      return JsonResult({{"db", db},
                         {"out", o->out},
                         {"counts", CountsJson(n)},
                         {"binaries", !o->no_binaries},
                         {"bytes", ec ? 0 : static_cast<int64_t>(size)}});
    std::cout << "exported " << CountsLine(n, n) << (o->no_binaries ? "" : " and the binaries") << " to " << o->out
              << " (" << FormatBytes(ec ? 0 : static_cast<int64_t>(size)) << ")\n";
    return kExitOk;
  };
  return {app, run};
}

Command AddImport(CLI::App& root) {
  struct Opts {
    std::string db;
    std::string in;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* app = root.add_subcommand("import", "Add the rows of an exported .jsonl file to the cache");
  app->add_option("file", o->in, "The .jsonl file (from `topk-tune export`; required; - for stdin)");
  AddDbOption(app, &o->db, kDbHelp);
  app->footer(
      "Example: topk-tune import tuning.jsonl --db tuning.db\n"
      "One transaction: a malformed line changes nothing. Where both have a row, the newer measurement, winner "
      "or baseline wins.");
  auto run = [o]() -> int {
    std::string db;
    if (const int rc = ResolveCachePath(o->db, &db); rc != kExitOk) return rc;
    std::error_code ec;
    if (o->in.empty())
      return Fail(kExitUsage, "import needs the FILE.jsonl to read", "pass a file written by `topk-tune export`, or -");
    // stdin is copied to a temporary file first: the import is one
    // transaction that may have to read its input again.
    std::string in = o->in;
    struct Remove {
      std::string path;
      ~Remove() {
        std::error_code e;
        if (!path.empty()) fs::remove(path, e);
      }
    } stdin_copy;
    if (IsStdio(o->in)) {
      std::string tmpl = (fs::temp_directory_path() / "topk-import-XXXXXX").string();
      const int fd = ::mkstemp(tmpl.data());
      if (fd < 0) return Fail(kExitError, "cannot create a temporary file for stdin");
      ::close(fd);
      stdin_copy.path = in = tmpl;
      std::ofstream copy(in, std::ios::binary);
      // Not `copy << std::cin.rdbuf()`: it sets failbit when stdin is empty,
      // which imports as an empty file does.
      std::copy(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>(),
                std::ostreambuf_iterator<char>(copy));
      copy.close();
      if (!copy || std::cin.bad()) return Fail(kExitError, "cannot copy stdin to '" + in + "'");
    }
    if (!fs::is_regular_file(in, ec))
      return Fail(kExitUsage, "no file '" + o->in + "' to import", "pass a .jsonl file written by topk-tune export");
    // Every line must be a JSON object with a "table" before the cache is
    // opened (and perhaps created).
    {
      std::ifstream f(in);
      std::string line;
      for (int no = 1; std::getline(f, line); ++no) {
        if (line.empty()) continue;
        const json j = json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object() || !j.contains("table"))
          return Fail(kExitUsage,
                      "cannot import '" + o->in + "': line " + std::to_string(no) +
                          " is not a JSON object with a \"table\" field",
                      "pass a file written by `topk-tune export`; nothing was written");
      }
    }
    if (Status w = CheckWritableFile(db); !w.ok())
      return Fail(kExitUsage, w.message(), "pass --db with a writable path");
    const bool existed = fs::exists(db, ec);
    auto c = cache::Cache::Open(db);
    if (!c.ok()) return CacheOpenFailure(c.status(), db, false);
    const Counts before = CountRows(**c);
    if (Status s = (*c)->ImportJsonl(in); !s.ok()) {
      if (!existed) RemoveNewCache(&*c, db);  // leave nothing behind for a failed import into a new file
      if (s.code() == Code::kInvalidArgument || s.code() == Code::kNotFound)
        return Fail(kExitUsage, "cannot import '" + in + "': " + s.message(),
                    "the cache is unchanged; fix the file or export it again");
      return Fail(kExitCache, "import into '" + db + "' failed: " + s.ToString(), "the cache is unchanged");
    }
    const Counts after = CountRows(**c);
    if (Global().json)
      return JsonResult({{"db", db}, {"in", o->in}, {"before", CountsJson(before)}, {"after", CountsJson(after)}});
    std::cout << "imported " << (IsStdio(o->in) ? "stdin" : o->in) << " into " << db << ": "
              << CountsLine(before, after) << "\n";
    return kExitOk;
  };
  return {app, run};
}

Command AddMerge(CLI::App& root) {
  struct Opts {
    std::string db;
    std::vector<std::string> others;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* app = root.add_subcommand("merge", "Merge other cache files (e.g. the shards of a tune) into the cache");
  app->add_option("files", o->others, "Cache files to merge (read-only; never changed; at least one)");
  AddDbOption(app, &o->db, "The cache to merge into (created if missing). " + std::string(kDbHelp));
  app->footer(
      "Example: topk-tune merge --db tuning.db shard-*.db\n"
      "Each file is checked before anything is written; on conflicts the newer measurement, winner or baseline "
      "wins. Merging the same file twice changes nothing.");
  auto run = [o]() -> int {
    std::string db;
    if (const int rc = ResolveCachePath(o->db, &db); rc != kExitOk) return rc;
    std::error_code ec;
    if (o->others.empty())
      return Fail(kExitUsage, "merge needs at least one cache file to merge", "pass the .db files written by tune --db");
    // Every input must be a readable cache before the target is touched.
    for (const auto& f : o->others) {
      if (!fs::is_regular_file(f, ec))
        return Fail(kExitUsage, "no cache file '" + f + "' to merge", "pass the .db files written by tune --db");
      if (SameFile(f, db))
        return Fail(kExitUsage, "'" + f + "' is the target cache itself", "pass --db with another path");
      auto other = cache::Cache::OpenReadOnly(f);
      if (!other.ok()) return CacheOpenFailure(other.status(), f, true);
    }
    if (Status w = CheckWritableFile(db); !w.ok())
      return Fail(kExitUsage, w.message(), "pass --db with a writable path");
    const bool existed = fs::exists(db, ec);
    auto c = cache::Cache::Open(db);
    if (!c.ok()) return CacheOpenFailure(c.status(), db, false);
    const Counts before = CountRows(**c);
    for (size_t i = 0; i < o->others.size(); ++i) {
      const Counts b = CountRows(**c);
      if (Status s = (*c)->Merge(o->others[i]); !s.ok()) {
        if (i == 0 && !existed) RemoveNewCache(&*c, db);  // nothing merged: no new empty cache either
        return Fail(kExitCache, "merging '" + o->others[i] + "' into '" + db + "' failed: " + s.ToString(),
                    i == 0 ? "nothing was merged" : "the files before it were merged; merging again is safe");
      }
      if (!Global().json) std::cout << "merged " << o->others[i] << ": " << CountsLine(b, CountRows(**c)) << "\n";
    }
    if (Global().json)
      return JsonResult(
          {{"db", db}, {"merged", o->others}, {"before", CountsJson(before)}, {"after", CountsJson(CountRows(**c))}});
    std::cout << db << ": " << CountsLine(before, CountRows(**c)) << "\n";
    return kExitOk;
  };
  return {app, run};
}

}  // namespace topk::cli
