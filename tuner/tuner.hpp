// The tuning loop for one shape: enumerate and prune the space, compile
// kernels on host threads while the GPU times, evaluate candidates in a
// worker process in the order a strategy proposes, record every attempt in
// the cache (resuming past finished ones), re-time the best few and store the
// winner.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cache/cache.hpp"
#include "generator/config.hpp"
#include "jit/compiler.hpp"
#include "tuner/timing.hpp"
#include "tuner/worker.hpp"

namespace topk::tuner {

struct TuneOptions {
  std::string strategy = "auto";  // "exhaustive", "budget", "auto"
  double budget_s = 30;           // per shape, for the budget strategy
  int max_candidates = 0;         // per shape, any strategy (0: no limit); refinements are extra
  int retime_top = 3;             // re-time this many of the best at the end
  MeasureSettings measure;
  std::string dist = "normal";
  std::string adversarial_dist = "few_distinct";
  uint64_t seed = 1;
  int compile_threads = 0;  // 0: all cores
  bool resume = true;       // skip variants already measured for this shape
  // Test-only kernels evaluated as extra candidates of the first shape
  // ("crash", "hang", "wrong"); recorded, never winners.
  std::vector<std::string> inject_faults;
  std::string tune_run;  // recorded with every measurement
  std::string workdir;   // where cubin files for the worker go
  // How the winner is chosen among the re-timed candidates (the best few
  // and the best of each family): "normal" is the fastest on `dist`;
  // "robust" also times them on `robust_dists`: the fastest of those that
  // stay within `collapse` x of their own time on every one of them wins
  // over a faster one that collapses, unless that one (the least
  // max(time on dist, worst / collapse) of the others) is faster on its
  // worst input than the flat one on `dist`; with none flat, that one.
  std::string objective = "robust";
  std::vector<std::string> robust_dists = {"shifted", "plateau", "distinct16"};
  double collapse = 1.25;
  // Kernel families to search (gen::SpaceOptions::families); empty: all.
  // The default configuration is timed as the baseline whatever its family.
  std::vector<std::string> families;
  // After the search, time the refinements of each family's best config
  // (gen::Family::Refinements: e.g. a strategy switch flipped) that were not
  // measured yet; they are extra to the strategy's candidates (budget and
  // max_candidates do not count them) and then re-timed like any other.
  bool refine = true;
};

struct ProgressEvent {
  enum Kind { kShapeStart, kVariant, kRetime, kShapeDone } kind = kVariant;
  int shape_index = 0;
  int shape_count = 0;
  Problem problem;
  int done = 0;        // candidates finished for this shape (resumed included)
  int total = 0;       // candidates the strategy may propose
  int resumed = 0;
  std::string variant_id;
  cache::Outcome outcome = cache::Outcome::kOk;
  double median_us = 0;
  double best_us = 0;
  std::string best_id;
  double elapsed_s = 0;  // in this shape
  double eta_s = 0;      // for this shape
};

struct ShapeSummary {
  Problem problem;
  int space = 0;
  int evaluated = 0;
  int resumed = 0;
  std::map<std::string, int> outcomes;  // outcome name -> count (this run)
  std::string winner_id;
  double winner_us = 0;
  double default_us = 0;
  double seconds = 0;
  bool has_winner = false;
  std::string message;  // why there is no winner
};

class Tuner {
 public:
  // The cache, compiler and evaluator must outlive the tuner. `device` is
  // the cache record of the GPU the evaluator runs on.
  Tuner(cache::Cache* cache, jit::Compiler* compiler, Evaluator* evaluator, cache::DeviceRecord device,
        gen::Arch arch, TuneOptions options);
  ~Tuner();

  StatusOr<ShapeSummary> TuneShape(const Problem& p, int index, int count,
                                   const std::function<void(const ProgressEvent&)>& progress);

 private:
  struct Kernel;
  std::shared_ptr<Kernel> Submit(const gen::KernelSource& src);
  StatusOr<std::pair<std::string, std::string>> CubinFile(const std::shared_ptr<Kernel>& k);
  // `dist` empty: the options' benchmark input.
  EvalResult EvaluateConfig(const gen::Config& c, const std::string& variant_id, const gen::KernelSource& src,
                            const Problem& p, bool verify, Status* infra, const std::string& dist = "");
  Status Record(const gen::Config& c, const std::string& variant_id, const Problem& p, const EvalResult& r,
                const std::string& dist = "");

  cache::Cache* cache_;
  jit::Compiler* compiler_;
  Evaluator* evaluator_;
  cache::DeviceRecord device_;
  gen::Arch arch_;
  TuneOptions opt_;
  std::mutex cache_mu_;  // the cache is shared with the compile threads
  struct Pool;
  std::unique_ptr<Pool> pool_;
  std::map<std::string, std::shared_ptr<Kernel>> kernels_;
  bool faults_done_ = false;
};

}  // namespace topk::tuner
