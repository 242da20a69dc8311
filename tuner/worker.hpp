// Candidates run in a worker process so that an illegal memory access, a
// sticky CUDA error, an abort or a hang kills only the worker: the parent
// records the failure kind, respawns it and carries on.
//
// Protocol: one JSON object per line. The parent writes a request to the
// worker's stdin and reads one response line from its stdout, with a
// watchdog. Kernels travel as cubin files the parent wrote (the parent
// compiles, the worker only loads, verifies and times).
#pragma once

#include <sys/types.h>

#include <iosfwd>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "cache/cache.hpp"
#include "generator/config.hpp"
#include "tuner/timing.hpp"

namespace topk::tuner {

struct EvalRequest {
  gen::Config config;
  std::string variant_id;  // normally config.Id(); test faults use their own
  Problem problem;
  std::string dist = "normal";              // benchmark input
  std::string adversarial_dist = "few_distinct";  // second verification input
  uint64_t seed = 1;
  bool verify = true;
  bool time = true;
  MeasureSettings measure;
  std::string cubin_path;  // the variant's kernel
  std::string lowered_name;
  std::string sort_cubin_path;  // the row sort, when problem.sorted
  std::string sort_lowered_name;
  std::string ties_cubin_path;  // the tie pass, when problem.deterministic
  std::string ties_lowered_name;

  nlohmann::json ToJson() const;
  static StatusOr<EvalRequest> FromJson(const nlohmann::json& j);
};

struct EvalResult {
  cache::Outcome outcome = cache::Outcome::kOk;
  bool verified = false;
  Samples samples;
  std::string message;

  nlohmann::json ToJson() const;
  static StatusOr<EvalResult> FromJson(const nlohmann::json& j);
};

// Evaluates one variant. Implementations: WorkerClient (a real GPU in a
// child process) and fakes in tests. A non-ok Status means the evaluation
// machinery itself failed (e.g. the worker cannot start); a variant's own
// failure is an EvalResult with its outcome.
class Evaluator {
 public:
  virtual ~Evaluator() = default;
  virtual StatusOr<EvalResult> Evaluate(const EvalRequest& r) = 0;
};

// The worker side: serves requests from `in` until EOF, writing responses to
// `out`. Returns when the input ends (0) or when the CUDA context became
// unusable after a sticky error (non-zero: the process must exit so that the
// parent starts a fresh one).
int ServeWorker(int device, std::istream& in, std::ostream& out);

class WorkerClient final : public Evaluator {
 public:
  // `worker_path` is the topk-tune-worker executable; `timeout_s` the
  // watchdog per request (input generation of a large problem included).
  WorkerClient(std::string worker_path, int device, double timeout_s);
  ~WorkerClient() override;
  StatusOr<EvalResult> Evaluate(const EvalRequest& r) override;
  // Starts the worker if needed and returns its device description (JSON).
  StatusOr<std::string> Hello();
  int restarts() const { return restarts_; }

 private:
  Status Start();
  void Stop(bool kill_first);
  StatusOr<std::string> Exchange(const std::string& line, double timeout_s, cache::Outcome* failure);

  std::string path_;
  int device_;
  double timeout_s_;
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  std::string buffer_;
  int restarts_ = 0;
};

// The worker executable beside the running program, or $TOPK_WORKER.
std::string DefaultWorkerPath();

// SIGKILLs every worker process that a WorkerClient of this process has
// started and not yet stopped; returns how many it signalled. For an
// interrupted tune: a SIGTERM sent to topk-tune alone would otherwise leave
// its workers running on the GPU until their pipes close. Async-signal-safe
// (lock-free slots and kill(2)), so a signal handler may call it too.
// Afterwards a worker that dies of SIGKILL (as of SIGINT or SIGTERM at any
// time) fails its request with kUnavailable instead of a crash outcome, so
// that an interrupted tune records no crash for the variant it was timing.
int KillAllWorkers();

}  // namespace topk::tuner
