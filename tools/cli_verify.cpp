// `topk-tune verify`: runs every stored winner of this GPU against the
// reference implementation.
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
#include "tuner/worker.hpp"

namespace topk::cli {

namespace fs = std::filesystem;
using nlohmann::json;

Command AddVerify(CLI::App& root) {
  struct Opts {
    std::string db;
    int device = 0;
    double timeout = 120;
    bool no_time = false;
    bool deterministic = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* app = root.add_subcommand("verify", "Re-check (and re-time) the stored winners on this GPU");
  AddDbOption(app, &o->db, kDbHelp);
  app->add_option("--device", o->device, "GPU ordinal")->check(IntegerIn(0, 1024))->capture_default_str();
  app->add_option("--timeout", o->timeout, "Seconds before the worker watchdog kills a candidate")
      ->check(FinitePositive(1e7))
      ->capture_default_str();
  app->add_flag("--no-time", o->no_time, "Check results only, do not re-time");
  app->add_flag("--deterministic", o->deterministic,
                "Also run each winner in deterministic mode as the library does (in its kernel, a grid winner's "
                "ties-1 kernel, or with the tie pass after it): the ties at the k-th value must be the lowest "
                "indices; the cost is timed beside the plain run");
  app->footer(
      "Example: topk-tune verify --db tuning.db\n"
      "Checks every winner stored for this GPU's fingerprint against the exact reference and compares its time "
      "with the stored one. The cache is opened read-only. Exit code 5 when a winner fails.");
  auto run = [o]() -> int {
    std::string db;
    if (const int rc = ResolveCachePath(o->db, &db); rc != kExitOk) return rc;
    auto count = RequireGpus("verify");
    if (!count.ok()) return Fail(kExitNoGpu, count.status().message(), kNoGpuHint);
    if (o->device >= *count)
      return Fail(kExitUsage,
                  "there is no GPU " + std::to_string(o->device) + ": this machine has " + std::to_string(*count),
                  "`topk-tune devices` lists them");
    auto info = jit::QueryDevice(o->device);
    if (!info.ok())
      return Fail(kExitError, "cannot query GPU " + std::to_string(o->device) + ": " + info.status().ToString());
    auto cache = cache::Cache::OpenReadOnly(db);
    if (!cache.ok()) return CacheOpenFailure(cache.status(), db, true);
    const std::string fp = info->Fingerprint();
    auto winners = (*cache)->Winners(fp);
    if (!winners.ok()) return Fail(kExitCache, "cannot read winners from '" + db + "': " + winners.status().ToString());
    std::sort(winners->begin(), winners->end(), [](const cache::Winner& a, const cache::Winner& b) {
      auto key = [](const Problem& p) {
        return std::make_tuple(static_cast<int>(p.dtype), !p.largest, p.ranges, p.values, p.sorted, p.n, p.k, p.batch);
      };
      return key(a.problem) < key(b.problem);
    });
    if (winners->empty()) {
      std::string known;
      if (auto ds = (*cache)->Devices(); ds.ok())
        for (const auto& d : *ds) known += "\n  " + d.fingerprint;
      if (Global().json) return JsonResult({{"db", db}, {"fingerprint", fp}, {"winners", json::array()}, {"failed", 0}});
      Info("topk-tune: no winners for this GPU (" + fp + ") in " + db + "." +
           (known.empty() ? "" : " The cache has devices:" + known) + "\nRun `topk-tune tune --db " + db +
           "` on this GPU first.");
      return kExitOk;
    }
    // Kernels: the cache's binaries (written read-only: a compiled kernel
    // is not stored back), as cubin files for the worker.
    auto compiler = jit::MakeNvrtcCompiler();
    auto store = cache::MakeBinaryStore(cache->get());
    jit::CompileOptions co;
    co.arch = info->ArchName();
    jit::KernelStore kernels(compiler.get(), store.get(), co);
    std::string tmpl = (fs::temp_directory_path() / "topk-verify-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) return Fail(kExitError, "cannot create a temporary directory");
    const std::string tmp = tmpl;
    auto cubin = [&](const gen::KernelSource& src) -> StatusOr<std::pair<std::string, std::string>> {
      TOPK_ASSIGN_OR_RETURN(auto bin, kernels.Binary(src));
      const std::string path = tmp + "/" + src.hash + ".cubin";
      if (!fs::exists(path))
        TOPK_RETURN_IF_ERROR(WriteFileAtomically(path, std::string(bin->cubin.begin(), bin->cubin.end())));
      return std::make_pair(path, bin->lowered_name);
    };
    tuner::WorkerClient worker(tuner::DefaultWorkerPath(), o->device, o->timeout);
    if (auto h = worker.Hello(); !h.ok()) {
      fs::remove_all(tmp);
      return Fail(kExitError, "cannot start the worker: " + h.status().message(),
                  "topk-tune-worker must sit beside topk-tune (or set TOPK_WORKER)");
    }
    std::vector<std::string> cols = {"shape", "winner", "stored us", "now us", "change", "result"};
    if (o->deterministic) cols.insert(cols.end() - 1, {"deterministic us", "cost"});
    Table t(cols);
    json list = json::array();
    int failed = 0;
    // Checks (and times) winner `w`, run as `config`, on `problem`: "ok" or
    // why not, and the median.
    auto evaluate = [&](const cache::Winner& w, const gen::Config& config, const Problem& problem,
                        double* now) -> std::string {
      tuner::EvalRequest r;
      r.config = config;
      r.variant_id = config == w.config ? w.variant_id : config.Id();
      r.problem = problem;
      r.verify = true;
      r.time = !o->no_time;
      // The settings of the stored measurement, where it is known.
      if (auto ms = (*cache)->Measurements(fp, &w.problem); ms.ok())
        for (const auto& m : *ms)
          if (m.id == w.measurement_id || (w.measurement_id == 0 && m.variant_id == w.variant_id)) {
            r.dist = m.input_dist;
            r.measure.l2_mode = m.l2_mode;
          }
      auto file = cubin(gen::GenerateSource(r.config));
      if (!file.ok()) return "compile_error: " + file.status().message().substr(0, 80);
      r.cubin_path = file->first;
      r.lowered_name = file->second;
      if (problem.sorted) {
        auto sort = cubin(gen::SortSource(problem.dtype));
        if (!sort.ok()) return "compile_error: " + sort.status().message().substr(0, 80);
        r.sort_cubin_path = sort->first;
        r.sort_lowered_name = sort->second;
      }
      if (problem.deterministic) {
        auto ties = cubin(gen::TieSource(problem.dtype));
        if (!ties.ok()) return "compile_error: " + ties.status().message().substr(0, 80);
        r.ties_cubin_path = ties->first;
        r.ties_lowered_name = ties->second;
      }
      auto e = worker.Evaluate(r);
      if (!e.ok()) return "error: " + e.status().message().substr(0, 80);
      if (e->outcome != cache::Outcome::kOk || !e->verified)
        return std::string(cache::OutcomeName(e->outcome)) + ": " + e->message.substr(0, 80);
      *now = e->samples.median;
      return "ok";
    };
    auto percent = [](double v) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%+.1f%%", v);
      return std::string(buf);
    };
    const gen::Arch arch = info->ToArch();
    for (const auto& w : *winners) {
      double now = 0, det_now = 0;
      std::string result = evaluate(w, w.config, w.problem, &now);
      bool ok = result == "ok";
      // In deterministic mode the config dispatch runs for the winner (e.g.
      // the grid family's kernel that takes the ties itself, gen::WithModes).
      Problem dp = w.problem;
      dp.deterministic = true;
      const gen::Config det_config = o->deterministic ? gen::WithModes(w.config, dp, arch) : w.config;
      if (ok && o->deterministic) {
        const std::string det = evaluate(w, det_config, dp, &det_now);
        if (det != "ok") {
          ok = false;
          result = "deterministic: " + det;
        }
      }
      if (!ok) ++failed;
      const double change = ok && now > 0 && w.median_us > 0 ? 100.0 * (now - w.median_us) / w.median_us : 0;
      const double cost = ok && now > 0 && det_now > 0 ? 100.0 * (det_now - now) / now : 0;
      std::vector<std::string> row = {w.problem.ToString(), w.variant_id, FormatUs(w.median_us),
                                      ok && now > 0 ? FormatUs(now) : "-", ok && now > 0 ? percent(change) : "-"};
      if (o->deterministic) {
        row.push_back(ok && det_now > 0 ? FormatUs(det_now) : "-");
        row.push_back(ok && det_now > 0 && now > 0 ? percent(cost) : "-");
      }
      row.push_back(result);
      t.Add(row);
      json item = {{"shape", w.problem.ToString()},
                   {"spec", ShapeSpec(w.problem)},
                   {"winner", w.variant_id},
                   {"stored_us", w.median_us},
                   {"now_us", now},
                   {"change_pct", change},
                   {"ok", ok},
                   {"result", result}};
      if (o->deterministic) {
        item["deterministic_variant"] = det_config.Id();
        item["deterministic_us"] = det_now;
        item["deterministic_cost_pct"] = cost;
      }
      list.push_back(item);
    }
    std::error_code ec;
    fs::remove_all(tmp, ec);
    const int code = failed ? kExitPartial : kExitOk;
    if (Global().json) {
      return JsonResult({{"db", db}, {"fingerprint", fp}, {"winners", list}, {"failed", failed}}, code);
    } else {
      std::cout << info->name << " (" << fp << ")\n\n";
      t.Print(std::cout);
      std::cout << "\n" << (winners->size() - failed) << " of " << winners->size() << " winners verified.\n";
    }
    if (failed)
      Info("topk-tune: " + std::to_string(failed) + " winner(s) failed on this GPU: re-tune those shapes with " +
           "`topk-tune tune --no-resume --shape SPEC --db " + db + "`.");
    return code;
  };
  return {app, run};
}

}  // namespace topk::cli
