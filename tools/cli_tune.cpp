// `topk-tune tune`: tunes a list of shapes on one or more GPUs.
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <iostream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "cache/cache.hpp"
#include "cache/jit_adapter.hpp"
#include "generator/family.hpp"
#include "generator/source.hpp"
#include "jit/compiler.hpp"
#include "jit/device.hpp"
#include "jit/kernel_store.hpp"
#include "tools/atomic_file.hpp"
#include "tools/cli_common.hpp"
#include "tools/cli_gpu.hpp"
#include "tools/cli_progress.hpp"
#include "tuner/presets.hpp"
#include "tuner/reference.hpp"
#include "tuner/tuner.hpp"
#include "tuner/work_queue.hpp"
#include "tuner/worker.hpp"

namespace topk::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string UtcNow(bool compact) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, compact ? "%Y%m%dT%H%M%SZ" : "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t p = s.find(',', start);
    const std::string part = s.substr(start, p == std::string::npos ? std::string::npos : p - start);
    if (!part.empty()) out.push_back(part);
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

// Ctrl-C or SIGTERM during a tune. Every thread (the compile threads
// included) blocks both and one watcher thread takes them with sigwait: it
// kills the workers, removes the tune's scratch folders and exits 130. A
// signal handler could not remove a folder safely (nothing in
// std::filesystem is async-signal-safe). The cache keeps every finished
// measurement: an unfinished transaction is rolled back on the next open.
// SIGUSR2 from the destructor ends the watcher when the tune finishes.
class InterruptWatcher {
 public:
  // Before the first CUDA call: a thread the driver starts inherits the
  // mask, so no thread of the process takes the signals but the watcher.
  InterruptWatcher() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
    thread_ = std::thread([this] { Watch(); });
  }
  ~InterruptWatcher() {
    done_ = true;
    pthread_kill(thread_.native_handle(), SIGUSR2);
    thread_.join();
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  // The scratch folders to remove, once they are known.
  void SetScratch(std::vector<std::string> dirs) {
    std::lock_guard<std::mutex> l(mu_);
    dirs_ = std::move(dirs);
  }
  InterruptWatcher(const InterruptWatcher&) = delete;
  InterruptWatcher& operator=(const InterruptWatcher&) = delete;

 private:
  void Watch() {
    int sig = 0;
    while (sigwait(&set_, &sig) == 0) {
      if (sig == SIGUSR2) {
        if (done_) return;
        continue;  // someone else's SIGUSR2: keep watching
      }
      const int killed = tuner::KillAllWorkers();
      std::error_code ec;
      {
        std::lock_guard<std::mutex> l(mu_);
        for (const auto& d : dirs_) fs::remove_all(d, ec);
      }
      const std::string what = std::string(sig == SIGINT ? "SIGINT" : "SIGTERM") + ": stopped " +
                               CountOf(killed, "worker") + " and removed the scratch folders";
      if (Global().json) {
        std::cout << json{{"ok", false},
                          {"exit_code", kExitInterrupted},
                          {"error", "interrupted (" + what + ")"},
                          {"hint", "every finished measurement is in the cache: run the same command to resume"}}
                         .dump()
                  << std::endl;
      } else {
        std::cerr << "\ntopk-tune: interrupted (" << what
                  << "). Every finished measurement is in the cache: run the same command again to resume.\n";
      }
      std::cout.flush();
      _exit(kExitInterrupted);
    }
  }

  std::mutex mu_;
  std::vector<std::string> dirs_;
  sigset_t set_{}, old_{};
  std::atomic<bool> done_{false};
  std::thread thread_;
};

struct TuneOpts {
  std::string preset;
  std::string shapes_file;
  std::vector<std::string> shapes;
  double budget = 30;
  std::string strategy = "auto";
  int device = 0;
  std::string devices;
  std::string shard;
  std::string db;
  double timeout = 120;
  std::string l2;
  std::string dist;
  int retime = 3;
  int max_candidates = 0;
  bool no_resume = false;
  bool no_refine = false;
  int compile_threads = 0;
  uint64_t seed = 1;
  std::string inject_faults;
  std::vector<std::string> families;
  std::string objective = "robust";
};

struct ShapeOutcome {
  bool ran = false;
  int device = -1;
  tuner::ShapeSummary summary;
  Status error;
};

int RunTune(const TuneOpts& o) {
  const auto t0 = std::chrono::steady_clock::now();
  // 1. Everything that can be checked without a GPU or the cache file.
  const int sources = !o.preset.empty() + !o.shapes_file.empty() + !o.shapes.empty();
  if (sources > 1)
    return Fail(kExitUsage, "choose one of --preset, --shapes FILE and --shape SPEC",
                "to tune several sets, run tune once per set into the same --db");
  tuner::ShapeSet set;
  bool defaulted = false;
  if (!o.shapes_file.empty()) {
    auto s = tuner::ShapesFromJsonFile(o.shapes_file);
    if (!s.ok() && s.status().code() == Code::kNotFound)
      return Fail(kExitUsage, "shape file '" + o.shapes_file + "' " + s.status().message(),
                  "pass --shapes with an existing JSON file");
    if (!s.ok())
      return Fail(kExitUsage, "bad shape file: " + s.status().where() + ": " + s.status().message(),
                  "see docs/CLI.md for the format: {\"shapes\": [{\"dtype\": \"f32\", \"batch\": 64, \"n\": 32768, "
                  "\"k\": 2048, \"ranges\": true}]}");
    set = std::move(s).value();
  } else if (!o.shapes.empty()) {
    set.name = "command line";
    for (const auto& spec : o.shapes) {
      auto p = ParseShape(spec);
      if (!p.ok()) return Fail(kExitUsage, p.status().message());
      set.problems.push_back(*p);
    }
  } else {
    defaulted = o.preset.empty();
    auto s = tuner::Preset(defaulted ? "dsa" : o.preset);
    if (!s.ok()) return Fail(kExitUsage, s.status().message(), "presets: dsa, sampling, moe, smoke");
    set = std::move(s).value();
  }
  tuner::TuneOptions to;
  to.strategy = o.strategy;
  to.budget_s = o.budget;
  to.retime_top = o.retime;
  to.max_candidates = o.max_candidates;
  to.seed = o.seed;
  to.resume = !o.no_resume;
  to.refine = !o.no_refine;
  to.compile_threads = o.compile_threads;
  to.dist = o.dist.empty() ? set.dist : o.dist;
  to.measure.l2_mode = o.l2.empty() ? set.l2_mode : o.l2;
  // A shape file's "dist" was checked with the file; this is --dist.
  if (auto d = tuner::ParseDist(to.dist); !d.ok())
    return Fail(kExitUsage, "--dist: " + d.status().message(), "pass --dist with one of the names above");
  for (const std::string& f : o.families)
    if (!gen::FindFamily(f)) {
      std::string known;
      for (const gen::Family* k : gen::Families()) known += (known.empty() ? "" : ", ") + k->name();
      return Fail(kExitUsage, "--family: unknown kernel family '" + f + "'", "the families are: " + known);
    }
  to.families = o.families;
  to.objective = o.objective;
  for (const auto& f : SplitComma(o.inject_faults)) {
    if (f != "crash" && f != "hang" && f != "wrong")
      return Fail(kExitUsage, "--inject-faults: unknown fault '" + Clip(f) + "' (crash, hang, wrong)",
                  "pass a comma-separated list of crash, hang, wrong");
    to.inject_faults.push_back(f);
  }
  std::pair<int, int> shard = {0, 1};
  if (!o.shard.empty()) {
    auto s = ParseShard(o.shard);
    if (!s.ok()) return Fail(kExitUsage, s.status().message());
    shard = *s;
  }
  std::vector<int> devices = {o.device};
  if (!o.devices.empty()) {
    auto d = ParseDeviceList(o.devices);
    if (!d.ok()) return Fail(kExitUsage, d.status().message());
    devices = *d;
  }
  std::vector<Problem> jobs;
  for (size_t i = 0; i < set.problems.size(); ++i)
    if (static_cast<int>(i % static_cast<size_t>(shard.second)) == shard.first) jobs.push_back(set.problems[i]);
  std::string db;
  if (const int rc = ResolveCachePath(o.db, &db); rc != kExitOk) return rc;
  if (Status w = CheckWritableFile(db); !w.ok())
    return Fail(kExitUsage, w.message(), "pass --db with a writable path (or set TOPK_TUNE_DB)");
  if (jobs.empty()) {
    const std::string msg = "shard " + std::to_string(shard.first) + "/" + std::to_string(shard.second) + " of " +
                            std::to_string(set.problems.size()) + " shapes is empty: nothing to do";
    if (Global().json) return JsonResult({{"event", "summary"}, {"db", db}, {"shapes", json::array()}, {"message", msg}});
    Info("topk-tune: " + msg);
    return kExitOk;
  }

  // 2. The GPUs.
  std::optional<InterruptWatcher> watcher;
  watcher.emplace();
  auto count = RequireGpus("tune");
  if (!count.ok()) return Fail(kExitNoGpu, count.status().message(), kNoGpuHint);
  for (int d : devices)
    if (d >= *count)
      return Fail(kExitUsage, "there is no GPU " + std::to_string(d) + ": this machine has " + std::to_string(*count),
                  "`topk-tune devices` lists them");
  std::vector<jit::DeviceInfo> infos;
  for (int d : devices) {
    auto info = jit::QueryDevice(d);
    if (!info.ok()) return Fail(kExitError, "cannot query GPU " + std::to_string(d) + ": " + info.status().ToString());
    infos.push_back(*info);
  }

  // 3. The cache.
  auto cache = cache::Cache::Open(db);
  if (!cache.ok()) return CacheOpenFailure(cache.status(), db, false);
  for (const auto& info : infos) {
    if (Status s = (*cache)->PutDevice(cache::RecordOf(info)); !s.ok())
      return Fail(kExitCache, "cannot record the device in '" + db + "': " + s.ToString(),
                  "check the file is writable, or pass --db with another path");
  }

  const Progress::Mode mode = Progress::Detect(Global().json, Global().quiet);
  Progress progress(mode, static_cast<int>(jobs.size()), static_cast<int>(devices.size()));
  {
    std::string head =
        "topk-tune: tuning " + CountOf(static_cast<int64_t>(jobs.size()), "shape") + " of " + set.name;
    if (defaulted) head += " (the default preset; choose others with --preset, --shapes or --shape)";
    if (shard.second > 1)
      head += ", shard " + std::to_string(shard.first) + "/" + std::to_string(shard.second) + " of " +
              std::to_string(set.problems.size());
    head += "\n  cache " + db + ", strategy " + o.strategy + ", input " + to.dist + ", L2 " + to.measure.l2_mode +
            (to.resume ? ", resuming past finished variants" : ", not resuming");
    for (const auto& info : infos)
      head += "\n  gpu" + std::to_string(info.ordinal) + ": " + info.name + " (" + info.ArchName() + ", " +
              std::to_string(info.sm_count) + " SMs)";
    progress.Note(head);
  }
  to.tune_run = "run-" + UtcNow(true) + "-" + std::to_string(::getpid());
  // 4. One tuner and worker per GPU; the shapes come from a shared queue.
  std::vector<ShapeOutcome> results(jobs.size());
  tuner::WorkQueue queue(jobs.size());
  std::atomic<int> started_devices{0};
  std::mutex results_mu;
  std::vector<std::string> device_errors;
  const std::string workroot = (fs::temp_directory_path() / ("topk-tune-" + std::to_string(::getpid()))).string();
  std::vector<std::string> scratch;
  for (size_t di = 0; di < devices.size(); ++di)
    scratch.push_back(workroot + "-gpu" + std::to_string(infos[di].ordinal));
  watcher->SetScratch(scratch);
  auto work = [&](size_t di) {
    const jit::DeviceInfo& info = infos[di];
    const int dev = info.ordinal;
    auto fail_device = [&](const std::string& why) {
      std::lock_guard<std::mutex> l(results_mu);
      device_errors.push_back("gpu" + std::to_string(dev) + ": " + why);
      progress.Note("topk-tune: gpu" + std::to_string(dev) + " stopped: " + why);
    };
    // One Cache per thread: SQLite's WAL and busy timeout let them share the file.
    std::unique_ptr<cache::Cache> own;
    cache::Cache* mine = cache->get();
    if (devices.size() > 1) {
      auto c = cache::Cache::Open(db);
      if (!c.ok()) return fail_device("cannot open the cache: " + c.status().ToString());
      own = std::move(c).value();
      mine = own.get();
    }
    tuner::WorkerClient worker(tuner::DefaultWorkerPath(), dev, o.timeout);
    auto hello = worker.Hello();
    if (!hello.ok()) return fail_device("cannot start the worker: " + hello.status().message());
    ++started_devices;
    auto compiler = jit::MakeNvrtcCompiler();
    tuner::TuneOptions mine_opts = to;
    mine_opts.workdir = scratch[di];  // the folder an interrupt removes
    tuner::Tuner tuner(mine, compiler.get(), &worker, cache::RecordOf(info), info.ToArch(), mine_opts);
    int consecutive_errors = 0;
    while (const std::optional<size_t> taken = queue.Take(dev)) {
      const size_t i = *taken;
      auto r = tuner.TuneShape(jobs[i], static_cast<int>(i), static_cast<int>(jobs.size()),
                               [&](const tuner::ProgressEvent& e) { progress.Event(dev, e); });
      if (r.ok()) {
        std::lock_guard<std::mutex> l(results_mu);
        results[i].summary = *r;
      } else {
        // Cannot be refused: this worker took shape i and r is an error.
        (void)queue.Fail(i, r.status());
      }
      progress.ShapeResult(dev, static_cast<int>(i), r.ok() ? &*r : nullptr, r.ok() ? Status::Ok() : r.status());
      consecutive_errors = r.ok() ? 0 : consecutive_errors + 1;
      // The same infrastructure failure twice in a row (worker, cache):
      // leave the remaining shapes to the other GPUs.
      if (consecutive_errors >= 2) {
        fail_device("two shapes in a row failed: " + r.status().ToString());
        break;
      }
    }
    std::error_code ec;
    fs::remove_all(mine_opts.workdir, ec);  // the tuner's cubins, also after giving up
  };
  if (devices.size() == 1) {
    work(0);
  } else {
    std::vector<std::thread> threads;
    for (size_t di = 0; di < devices.size(); ++di) threads.emplace_back(work, di);
    for (auto& t : threads) t.join();
  }
  progress.Finish();
  watcher.reset();
  // Every shape taken was run to its end (a worker gives up only between
  // shapes), so taken means ran.
  for (size_t i = 0; i < jobs.size(); ++i) {
    const tuner::WorkQueue::Slot slot = queue.slot(i);
    results[i].ran = slot.taken;
    results[i].device = slot.worker;
    results[i].error = slot.error;
  }

  // 5. The summary.
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int winners = 0, no_winner = 0, errors = 0, not_run = 0;
  for (const auto& r : results) {
    if (!r.ran)
      ++not_run;
    else if (!r.error.ok())
      ++errors;
    else if (r.summary.has_winner)
      ++winners;
    else
      ++no_winner;
  }
  int code = kExitOk;
  if (started_devices == 0 || (winners == 0 && no_winner == 0))
    code = kExitError;
  else if (winners < static_cast<int>(jobs.size()))
    code = kExitPartial;

  if (Global().json) {
    json shapes = json::array();
    for (size_t i = 0; i < jobs.size(); ++i) {
      const auto& r = results[i];
      json s = {{"shape", jobs[i].ToString()}, {"spec", ShapeSpec(jobs[i])}, {"ran", r.ran}, {"device", r.device}};
      if (r.ran && r.error.ok()) {
        s["has_winner"] = r.summary.has_winner;
        s["winner"] = r.summary.winner_id;
        s["winner_us"] = r.summary.winner_us;
        s["default_us"] = r.summary.default_us;
        s["speedup"] =
            r.summary.default_us > 0 && r.summary.winner_us > 0 ? r.summary.default_us / r.summary.winner_us : 0;
        s["evaluated"] = r.summary.evaluated;
        s["resumed"] = r.summary.resumed;
        s["outcomes"] = r.summary.outcomes;
        s["seconds"] = r.summary.seconds;
        if (!r.summary.has_winner) s["message"] = r.summary.message;
      } else if (r.ran) {
        s["error"] = r.error.ToString();
      }
      shapes.push_back(std::move(s));
    }
    JsonResult({{"event", "summary"},
                      {"db", db},
                      {"tune_run", to.tune_run},
                      {"shapes", std::move(shapes)},
                      {"winners", winners},
                      {"no_winner", no_winner},
                      {"errors", errors},
                      {"not_run", not_run},
                      {"device_errors", device_errors},
                      {"elapsed_s", elapsed}},
               code);
  } else {
    Table t({"shape", "winner", "median us", "default us", "speed-up", "measured", "time"});
    for (size_t i = 0; i < jobs.size(); ++i) {
      const auto& r = results[i];
      if (!r.ran) {
        t.Add({jobs[i].ToString(), "(not run)"});
      } else if (!r.error.ok()) {
        t.Add({jobs[i].ToString(), "(error: " + r.error.message().substr(0, 60) + ")"});
      } else {
        const auto& s = r.summary;
        t.Add({jobs[i].ToString(), s.has_winner ? s.winner_id : "(no winner: " + s.message + ")",
               s.has_winner ? FormatUs(s.winner_us) : "-", FormatUs(s.default_us),
               s.has_winner && s.default_us > 0 ? FormatSpeedup(s.default_us / s.winner_us) : "-",
               std::to_string(s.evaluated) + (s.resumed ? " +" + std::to_string(s.resumed) + " resumed" : ""),
               FormatDuration(s.seconds)});
      }
    }
    std::cout << "\n";
    t.Print(std::cout);
    std::cout << "\n"
              << winners << " of " << jobs.size() << " shapes have a winner; " << FormatDuration(elapsed)
              << " in all. Cache: " << db << "\n";
    std::cout << "Next: topk-tune report --db " << db << "   (HTML, Markdown and JSON report)\n";
  }
  if (Global().json) return code;
  if (code == kExitPartial)
    Info("topk-tune: " + std::to_string(jobs.size() - winners) + " shape(s) have no winner (see the table); rerun the "
         "same command to retry them: finished variants are not measured again.");
  if (code == kExitError) {
    std::string why;
    for (const auto& e : device_errors) why += (why.empty() ? "" : "; ") + e;
    return Fail(kExitError, "no shape could be tuned" + (why.empty() ? "" : ": " + why),
                "check that topk-tune-worker sits beside topk-tune (or set TOPK_WORKER) and that `topk-tune devices` "
                "works");
  }
  return code;
}

}  // namespace

Command AddTune(CLI::App& root) {
  auto o = std::make_shared<TuneOpts>();
  CLI::App* app = root.add_subcommand(
      "tune", "Tune shapes on this machine's GPU(s) and store the winners in the cache (resumes by default)");
  auto* preset = app->add_option("--preset", o->preset, "Built-in shape set: dsa (the default), sampling, moe, smoke")
                     ->check(CLI::IsMember(tuner::PresetNames()));
  auto* file = app->add_option("--shapes", o->shapes_file, "JSON file of shapes (see docs/CLI.md)");
  auto* shape = app->add_option("--shape", o->shapes, std::string("One shape (repeatable): ") + kShapeHelp);
  preset->excludes(file)->excludes(shape);
  file->excludes(shape);
  app->add_option("--budget", o->budget, "Seconds per shape for the budget strategy")
      ->check(FinitePositive(1e7))
      ->capture_default_str();
  app->add_option("--strategy", o->strategy,
                  "auto (exhaustive for small spaces, else budget), exhaustive, or budget (local search)")
      ->check(CLI::IsMember({"auto", "exhaustive", "budget"}))
      ->capture_default_str();
  auto* dev =
      app->add_option("--device", o->device, "GPU ordinal")->check(IntegerIn(0, 1024))->capture_default_str();
  auto* devs = app->add_option("--devices", o->devices, "Several GPUs, one worker each: e.g. 0,1,2,3");
  dev->excludes(devs);
  app->add_option("--shard", o->shard,
                  "Tune only shapes whose index % N == i (i/N, 0 <= i < N); `merge` combines the shard caches");
  AddDbOption(app, &o->db, kDbHelp);
  app->add_option("--timeout", o->timeout, "Seconds before the worker watchdog kills a candidate")
      ->check(FinitePositive(1e7))
      ->capture_default_str();
  app->add_option("--l2", o->l2, "L2 state while timing: hot (input just written) or rotate; default: the set's")
      ->check(CLI::IsMember({"hot", "rotate"}));
  app->add_option("--dist", o->dist, "Benchmark input distribution (normal, uniform, logits, ...); default: the set's");
  app->add_option("--retime", o->retime, "Re-time this many of the best at the end of each shape")
      ->check(IntegerIn(1, 100))
      ->capture_default_str();
  app->add_option("--max-candidates", o->max_candidates, "Evaluate at most this many variants per shape (0: no limit)")
      ->check(IntegerIn(0, std::numeric_limits<int>::max()));
  app->add_option("--compile-threads", o->compile_threads, "NVRTC threads (0: all cores)")->check(IntegerIn(0, 4096));
  app->add_option("--seed", o->seed, "Seed of the inputs and of the search (0 to 2^63-1)")
      ->check(IntegerIn(0, std::numeric_limits<int64_t>::max()))
      ->capture_default_str();
  app->add_flag("--no-resume", o->no_resume, "Measure every variant again instead of skipping finished ones");
  app->add_flag("--no-refine", o->no_refine,
                "Do not time the refinements of each family's best variant after the search (e.g. a radix "
                "strategy switch flipped)");
  app->add_option("--objective", o->objective,
                  "How the winner is chosen: robust (also timed on shifted, plateau and 16-valued inputs; the "
                  "fastest within 1.25x of its own time on all three, unless one that collapses is faster on its "
                  "worst input) or normal (the fastest on the benchmark input)")
      ->check(CLI::IsMember({"robust", "normal"}))
      ->capture_default_str();
  app->add_option("--family", o->families,
                  "Search only this kernel family (repeatable; default: all; topk-tune space lists them)");
  app->add_option("--inject-faults", o->inject_faults, "test only: crash,hang,wrong")->group("");
  app->footer(
      "Examples:\n"
      "  topk-tune tune                                   # the dsa preset on GPU 0\n"
      "  topk-tune tune --preset smoke                    # three small shapes, a quick check\n"
      "  topk-tune tune --shape f32:64x32768:2048:ranges --strategy exhaustive\n"
      "  topk-tune tune --shapes my-shapes.json --devices 0,1,2,3\n"
      "  topk-tune tune --preset sampling --shard 2/8 --db shard-2.db\n"
      "Progress goes to stderr (one updating line on a terminal, log lines otherwise); the result table to "
      "stdout.\nCtrl-C is safe: the same command resumes where it stopped.");
  auto run = [o]() -> int { return RunTune(*o); };
  return {app, run};
}

}  // namespace topk::cli
