#include "tuner/worker.hpp"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "jit/device.hpp"
#include "jit/driver.hpp"
#include "jit/variant.hpp"

extern char** environ;

namespace topk::tuner {

using nlohmann::json;

namespace {

json ProblemJson(const Problem& p) {
  return {{"dtype", DTypeName(p.dtype)}, {"batch", p.batch},   {"n", p.n},           {"k", p.k},
          {"row_stride", p.row_stride},  {"largest", p.largest}, {"ranges", p.ranges}, {"values", p.values},
          {"sorted", p.sorted},          {"deterministic", p.deterministic}};
}

StatusOr<Problem> ProblemFromJson(const json& j) {
  Problem p;
  try {
    auto dt = ParseDType(j.at("dtype").get<std::string>());
    if (!dt.ok()) return dt.status();
    p.dtype = *dt;
    p.batch = j.at("batch").get<int64_t>();
    p.n = j.at("n").get<int64_t>();
    p.k = j.at("k").get<int64_t>();
    p.row_stride = j.value("row_stride", int64_t{0});
    p.largest = j.value("largest", true);
    p.ranges = j.value("ranges", false);
    p.values = j.value("values", false);
    p.sorted = j.value("sorted", false);
    p.deterministic = j.value("deterministic", false);
  } catch (const json::exception& e) {
    return InvalidArgument("Problem JSON", e.what());
  }
  return p;
}

}  // namespace

json EvalRequest::ToJson() const {
  return {{"op", "eval"},
          {"config", config.ToJson()},
          {"variant_id", variant_id},
          {"problem", ProblemJson(problem)},
          {"dist", dist},
          {"adversarial_dist", adversarial_dist},
          {"seed", seed},
          {"verify", verify},
          {"time", time},
          {"measure",
           {{"l2_mode", measure.l2_mode},
            {"min_time_ms", measure.min_time_ms},
            {"min_samples", measure.min_samples},
            {"max_samples", measure.max_samples},
            {"warmup", measure.warmup},
            {"launches_per_sample", measure.launches_per_sample}}},
          {"cubin_path", cubin_path},
          {"lowered_name", lowered_name},
          {"sort_cubin_path", sort_cubin_path},
          {"sort_lowered_name", sort_lowered_name},
          {"ties_cubin_path", ties_cubin_path},
          {"ties_lowered_name", ties_lowered_name}};
}

StatusOr<EvalRequest> EvalRequest::FromJson(const json& j) {
  EvalRequest r;
  try {
    TOPK_ASSIGN_OR_RETURN(r.config, gen::Config::FromJson(j.at("config")));
    TOPK_ASSIGN_OR_RETURN(r.problem, ProblemFromJson(j.at("problem")));
    r.variant_id = j.value("variant_id", r.config.Id());
    r.dist = j.value("dist", std::string("normal"));
    r.adversarial_dist = j.value("adversarial_dist", std::string("few_distinct"));
    r.seed = j.value("seed", uint64_t{1});
    r.verify = j.value("verify", true);
    r.time = j.value("time", true);
    const json& m = j.at("measure");
    r.measure.l2_mode = m.value("l2_mode", std::string("rotate"));
    r.measure.min_time_ms = m.value("min_time_ms", 25.0);
    r.measure.min_samples = m.value("min_samples", 15);
    r.measure.max_samples = m.value("max_samples", 300);
    r.measure.warmup = m.value("warmup", 3);
    r.measure.launches_per_sample = m.value("launches_per_sample", 0);
    r.cubin_path = j.at("cubin_path").get<std::string>();
    r.lowered_name = j.at("lowered_name").get<std::string>();
    r.sort_cubin_path = j.value("sort_cubin_path", std::string());
    r.sort_lowered_name = j.value("sort_lowered_name", std::string());
    r.ties_cubin_path = j.value("ties_cubin_path", std::string());
    r.ties_lowered_name = j.value("ties_lowered_name", std::string());
  } catch (const json::exception& e) {
    return InvalidArgument("EvalRequest", e.what());
  }
  return r;
}

json EvalResult::ToJson() const {
  return {{"outcome", cache::OutcomeName(outcome)},
          {"verified", verified},
          {"median_us", samples.median},
          {"p10_us", samples.p10},
          {"p90_us", samples.p90},
          {"min_us", samples.min},
          {"launches", samples.launches},
          {"samples_us", samples.us},
          {"message", message}};
}

StatusOr<EvalResult> EvalResult::FromJson(const json& j) {
  EvalResult r;
  try {
    TOPK_ASSIGN_OR_RETURN(r.outcome, cache::ParseOutcome(j.at("outcome").get<std::string>()));
    r.verified = j.value("verified", false);
    r.samples.median = j.value("median_us", 0.0);
    r.samples.p10 = j.value("p10_us", 0.0);
    r.samples.p90 = j.value("p90_us", 0.0);
    r.samples.min = j.value("min_us", 0.0);
    r.samples.launches = j.value("launches", 0);
    r.samples.us = j.value("samples_us", std::vector<double>());
    r.message = j.value("message", std::string());
  } catch (const json::exception& e) {
    return InvalidArgument("EvalResult", e.what());
  }
  return r;
}

// ---------------------------------------------------------------- worker side

namespace {

class Server {
 public:
  explicit Server(int device) : device_(device) {}

  Status Init() {
    // The context first: the device query's cluster probe then reuses it.
    TOPK_ASSIGN_OR_RETURN(ctx_, jit::Context::Primary(device_));
    TOPK_ASSIGN_OR_RETURN(info_, jit::QueryDevice(device_));
    TOPK_RETURN_IF_ERROR(ctx_->MakeCurrent());
    TOPK_CU(cuStreamCreate, &stream_, CU_STREAM_NON_BLOCKING);
    return Status::Ok();
  }

  json Hello() const { return {{"ok", true}, {"device", info_.ToJson()}}; }

  // Sets *fatal when the context is no longer usable.
  EvalResult Eval(const EvalRequest& r, bool* fatal) {
    EvalResult res;
    auto fail = [&](cache::Outcome o, const Status& s) {
      res.outcome = o;
      res.message = s.ToString();
      return res;
    };
    auto fn = Function(r.cubin_path, r.lowered_name);
    if (!fn.ok()) return fail(cache::Outcome::kCompileError, fn.status());
    CUfunction sort = nullptr;
    if (r.problem.sorted) {
      auto s = Function(r.sort_cubin_path, r.sort_lowered_name);
      if (!s.ok()) return fail(cache::Outcome::kCompileError, s.status());
      sort = *s;
    }
    CUfunction ties = nullptr;
    if (r.problem.deterministic) {
      auto t = Function(r.ties_cubin_path, r.ties_lowered_name);
      if (!t.ok()) return fail(cache::Outcome::kCompileError, t.status());
      ties = *t;
    }
    auto v = jit::PreparedVariant::Make(r.config, r.problem, info_.ToArch(), {*fn}, sort, -1, ties);
    if (!v.ok()) {
      if (v.status().code() == Code::kResourceExhausted) return fail(cache::Outcome::kResourceLimit, v.status());
      if (v.status().code() == Code::kInvalidArgument || v.status().code() == Code::kUnimplemented)
        return fail(cache::Outcome::kSkipped, v.status());
      *fatal = Sticky();
      return fail(cache::Outcome::kCrash, v.status());
    }
    auto classify = [&](const Status& s) {
      if (s.code() == Code::kWrongResult) return fail(cache::Outcome::kWrongResult, s);
      if (s.code() == Code::kResourceExhausted) return fail(cache::Outcome::kResourceLimit, s);
      *fatal = Sticky();
      return fail(cache::Outcome::kCrash, s);
    };
    auto bench = Case(r.problem, r.dist, r.seed, RangesMode::kFull);
    if (!bench.ok()) return fail(cache::Outcome::kSkipped, bench.status().WithContext("preparing inputs"));
    if (r.verify) {
      Status s = RunAndCheck(*v, *bench, stream_);
      if (!s.ok()) return classify(s);
      if (!r.adversarial_dist.empty()) {
        auto adv = Case(r.problem, r.adversarial_dist, r.seed + 1, RangesMode::kRandom);
        if (!adv.ok()) return fail(cache::Outcome::kSkipped, adv.status().WithContext("preparing inputs"));
        s = RunAndCheck(*v, *adv, stream_);
        if (!s.ok()) return classify(s);
      }
      res.verified = true;
    }
    if (r.time) {
      auto t = TimeVariant(*v, *bench, r.measure, info_.l2_bytes, stream_);
      if (!t.ok()) return classify(t.status());
      res.samples = std::move(*t);
    }
    return res;
  }

 private:
  // After an error: is the context still usable? Illegal addresses and
  // traps are sticky; the worker must then exit.
  bool Sticky() {
    auto d = jit::GetDriver();
    if (!d.ok()) return true;
    return (*d)->cuCtxSynchronize() != CUDA_SUCCESS;
  }

  StatusOr<CUfunction> Function(const std::string& path, const std::string& name) {
    auto it = modules_.find(path);
    if (it == modules_.end()) {
      std::ifstream f(path, std::ios::binary);
      if (!f) return Status(Code::kNotFound, "worker", "cannot read cubin " + path);
      std::vector<char> cubin((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      TOPK_ASSIGN_OR_RETURN(auto m, jit::Module::Load(cubin, name));
      it = modules_.emplace(path, std::move(m)).first;
    }
    return it->second->function();
  }

  // Inputs and references are expensive for large problems: keep the last
  // few, keyed by problem, distribution and seed.
  StatusOr<DeviceCase*> Case(const Problem& p, const std::string& dist_name, uint64_t seed, RangesMode rm) {
    const std::string key = p.ToString() + "|" + dist_name + "|" + std::to_string(seed) + "|" +
                            (rm == RangesMode::kFull ? "full" : "random");
    for (auto& [k, c] : cases_)
      if (k == key) return c.get();
    TOPK_ASSIGN_OR_RETURN(Dist dist, ParseDist(dist_name));
    TOPK_ASSIGN_OR_RETURN(DeviceCase c, DeviceCase::Make(p, dist, seed, rm));
    if (cases_.size() >= 4) cases_.pop_front();
    cases_.emplace_back(key, std::make_unique<DeviceCase>(std::move(c)));
    return cases_.back().second.get();
  }

  int device_;
  jit::DeviceInfo info_;
  std::shared_ptr<jit::Context> ctx_;
  CUstream stream_ = nullptr;
  std::map<std::string, std::unique_ptr<jit::Module>> modules_;
  std::deque<std::pair<std::string, std::unique_ptr<DeviceCase>>> cases_;
};

}  // namespace

int ServeWorker(int device, std::istream& in, std::ostream& out) {
  Server server(device);
  const Status init = server.Init();
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json resp;
    bool fatal = false;
    const json req = json::parse(line, nullptr, false);
    if (req.is_discarded() || !req.is_object()) {
      resp = {{"error", "malformed request line"}};
    } else if (!init.ok()) {
      resp = {{"error", init.ToString()}};
    } else if (req.value("op", std::string()) == "hello") {
      resp = server.Hello();
    } else if (req.value("op", std::string()) == "eval") {
      auto r = EvalRequest::FromJson(req);
      if (!r.ok()) {
        resp = {{"error", r.status().ToString()}};
      } else {
        resp = server.Eval(*r, &fatal).ToJson();
        resp["fatal"] = fatal;
      }
    } else {
      resp = {{"error", "unknown op"}};
    }
    out << resp.dump() << '\n';
    out.flush();
    if (fatal) return 3;
  }
  return 0;
}

// ---------------------------------------------------------------- parent side

std::string DefaultWorkerPath() {
  if (const char* p = std::getenv("TOPK_WORKER"); p && *p) return p;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto beside = self.parent_path() / "topk-tune-worker";
    if (std::filesystem::exists(beside)) return beside.string();
  }
  return "topk-tune-worker";
}

namespace {

// Live worker pids, one slot each (0: free). Fixed and lock-free so that
// KillAllWorkers can run in a signal handler; 256 exceeds any GPU count
// times the one worker a client keeps.
constexpr int kWorkerSlots = 256;
std::atomic<pid_t> g_workers[kWorkerSlots];
static_assert(std::atomic<pid_t>::is_always_lock_free, "KillAllWorkers must be async-signal-safe");

void RegisterWorker(pid_t pid) {
  for (auto& slot : g_workers) {
    pid_t free = 0;
    if (slot.compare_exchange_strong(free, pid)) return;
  }
  // All slots taken: the worker is still stopped by its client, only an
  // interrupt would miss it.
}

void UnregisterWorker(pid_t pid) {
  for (auto& slot : g_workers) {
    pid_t mine = pid;
    if (slot.compare_exchange_strong(mine, 0)) return;
  }
}

// Set by KillAllWorkers: a worker that dies of SIGKILL afterwards was
// stopped, it did not crash.
std::atomic<bool> g_killed_all{false};
static_assert(std::atomic<bool>::is_always_lock_free, "KillAllWorkers must be async-signal-safe");

}  // namespace

int KillAllWorkers() {
  g_killed_all.store(true);
  int n = 0;
  for (auto& slot : g_workers) {
    const pid_t pid = slot.load();
    if (pid > 0 && kill(pid, SIGKILL) == 0) ++n;
  }
  return n;
}

WorkerClient::WorkerClient(std::string worker_path, int device, double timeout_s)
    : path_(std::move(worker_path)), device_(device), timeout_s_(timeout_s) {}

WorkerClient::~WorkerClient() { Stop(false); }

Status WorkerClient::Start() {
  if (pid_ > 0) return Status::Ok();
  int in_pipe[2], out_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0)
    return Status(Code::kUnavailable, "pipe2", std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  const std::string dev = std::to_string(device_);
  std::vector<char*> argv = {const_cast<char*>(path_.c_str()), const_cast<char*>("--device"),
                             const_cast<char*>(dev.c_str()), nullptr};
  // The worker starts with no signal blocked and SIGINT/SIGTERM at their
  // defaults, whatever this thread's mask: topk-tune blocks both in every
  // thread and takes them on one watcher thread (tools/cli_tune.cpp), and a
  // Ctrl-C in the terminal must still reach the workers.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, path_.c_str(), &fa, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  close(in_pipe[0]);
  close(out_pipe[1]);
  if (rc != 0) {
    close(in_pipe[1]);
    close(out_pipe[0]);
    return Status(Code::kUnavailable, "posix_spawn",
                  "cannot start the worker " + path_ + ": " + std::strerror(rc) +
                      " (build topk-tune-worker or set TOPK_WORKER)");
  }
  pid_ = pid;
  RegisterWorker(pid);
  to_child_ = in_pipe[1];
  from_child_ = out_pipe[0];
  buffer_.clear();
  return Status::Ok();
}

void WorkerClient::Stop(bool kill_first) {
  if (pid_ <= 0) return;
  // Out of the registry before it is reaped: once reaped its pid may be
  // reused by an unrelated process that KillAllWorkers must never hit.
  UnregisterWorker(pid_);
  if (to_child_ >= 0) close(to_child_);
  if (kill_first) kill(pid_, SIGKILL);
  int status = 0;
  // Without SIGKILL the worker exits on EOF; give it a moment, then insist.
  for (int i = 0; i < 200 && waitpid(pid_, &status, WNOHANG) == 0; ++i) usleep(10000);
  if (waitpid(pid_, &status, WNOHANG) == 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
  }
  if (from_child_ >= 0) close(from_child_);
  pid_ = -1;
  to_child_ = from_child_ = -1;
}

namespace {

// write() that neither dies of SIGPIPE (the worker may be gone) nor changes
// the process's signal disposition: block it on this thread and consume it.
bool WriteAll(int fd, const std::string& data) {
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  size_t off = 0;
  bool ok = true;
  while (off < data.size()) {
    const ssize_t w = write(fd, data.data() + off, data.size() - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      ok = false;
      break;
    }
    off += static_cast<size_t>(w);
  }
  if (!ok) {
    const timespec zero = {0, 0};
    sigtimedwait(&block, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return ok;
}

std::string DescribeExit(int status) {
  if (WIFSIGNALED(status)) return "worker killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
                                  strsignal(WTERMSIG(status)) + ")";
  if (WIFEXITED(status)) return "worker exited with code " + std::to_string(WEXITSTATUS(status));
  return "worker ended";
}

}  // namespace

StatusOr<std::string> WorkerClient::Exchange(const std::string& line, double timeout_s, cache::Outcome* failure) {
  *failure = cache::Outcome::kOk;
  TOPK_RETURN_IF_ERROR(Start());
  auto died = [&]() -> StatusOr<std::string> {
    int status = 0;
    UnregisterWorker(pid_);
    waitpid(pid_, &status, 0);
    pid_ = -1;
    close(to_child_);
    close(from_child_);
    to_child_ = from_child_ = -1;
    ++restarts_;
    // Stopped by an interrupt (a terminal's Ctrl-C reaches the workers
    // directly; SIGTERM and the watcher's SIGKILL after KillAllWorkers): no
    // outcome of the variant, so nothing is recorded as a crash that a
    // resumed run would skip.
    if (WIFSIGNALED(status) && (WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGTERM ||
                                (WTERMSIG(status) == SIGKILL && g_killed_all.load())))
      return Status(Code::kUnavailable, "worker", "interrupted: " + DescribeExit(status));
    *failure = cache::Outcome::kCrash;
    return DescribeExit(status);
  };
  if (!WriteAll(to_child_, line + "\n")) return died();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    const size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string out = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return out;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      Stop(true);
      ++restarts_;
      *failure = cache::Outcome::kTimeout;
      return std::string("no answer within ") + std::to_string(timeout_s) + " s: worker killed";
    }
    pollfd pfd = {from_child_, POLLIN, 0};
    const int pr = poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (pr < 0 && errno != EINTR) return died();
    if (pr <= 0) continue;
    char buf[65536];
    const ssize_t n = read(from_child_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return died();
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

StatusOr<std::string> WorkerClient::Hello() {
  cache::Outcome failure;
  TOPK_ASSIGN_OR_RETURN(std::string line, Exchange(json{{"op", "hello"}}.dump(), timeout_s_, &failure));
  if (failure != cache::Outcome::kOk)
    return Status(Code::kUnavailable, "worker", "the worker did not start: " + line);
  const json j = json::parse(line, nullptr, false);
  if (j.is_discarded()) return Status(Code::kInternal, "worker", "malformed answer: " + line);
  if (j.contains("error")) return Status(Code::kUnavailable, "worker", j["error"].get<std::string>());
  return j.at("device").dump();
}

StatusOr<EvalResult> WorkerClient::Evaluate(const EvalRequest& r) {
  cache::Outcome failure;
  TOPK_ASSIGN_OR_RETURN(std::string line, Exchange(r.ToJson().dump(), timeout_s_, &failure));
  if (failure != cache::Outcome::kOk) {
    EvalResult res;
    res.outcome = failure;
    res.message = line;
    return res;
  }
  const json j = json::parse(line, nullptr, false);
  if (j.is_discarded()) return Status(Code::kInternal, "worker", "malformed answer: " + line);
  if (j.contains("error")) return Status(Code::kUnavailable, "worker", j["error"].get<std::string>());
  auto res = EvalResult::FromJson(j);
  if (res.ok() && j.value("fatal", false)) {
    Stop(false);  // it exits by itself; the next request starts a fresh one
    ++restarts_;
  }
  return res;
}

}  // namespace topk::tuner
