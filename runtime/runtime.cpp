// The library behind include/topk/topk.hpp.
#include <chrono>
#include <cstdint>
#include <mutex>

#include "cache/cache.hpp"
#include "cache/jit_adapter.hpp"
#include "jit/device.hpp"
#include "jit/driver.hpp"
#include "jit/kernel_store.hpp"
#include "jit/variant.hpp"
#include "runtime/dispatch.hpp"
#include "runtime/kernels.hpp"
#include "topk/topk.hpp"

namespace topk {
namespace {

bool Aligned(const void* p, int bytes) { return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) == 0; }

class PlanImpl final : public Plan {
 public:
  // `own_done`: an event for ordering the calls on the plan's own workspace
  // (null when the plan needs none); the plan destroys it.
  PlanImpl(Problem p, PlanInfo info, jit::PreparedVariant v, CUcontext ctx, bool noop, CUevent own_done)
      : problem_(p), info_(std::move(info)), variant_(std::move(v)), ctx_(ctx), noop_(noop), own_done_(own_done) {}
  ~PlanImpl() override {
    // The variant's workspace and the event belong to the library's context.
    jit::ContextGuard guard(ctx_);
    if (own_done_) {
      auto d = jit::GetDriver();
      if (d.ok()) (*d)->cuEventDestroy(own_done_);
    }
    variant_ = jit::PreparedVariant();
  }

  Status Run(const Args& args, void* stream) const override {
    const int64_t batch = args.batch < 0 ? problem_.batch : args.batch;
    if (batch > problem_.batch)
      return InvalidArgument("Plan::Run", "args.batch " + std::to_string(batch) + " exceeds the planned batch " +
                                              std::to_string(problem_.batch));
    if (batch == 0 || problem_.k == 0) return Status::Ok();
    const int es = DTypeSize(problem_.dtype);
    if (!args.input) return InvalidArgument("Plan::Run", "input is null");
    if (!args.indices) return InvalidArgument("Plan::Run", "indices is null");
    if (problem_.values && !args.values) return InvalidArgument("Plan::Run", "values is null but the plan writes values");
    if (problem_.ranges && !args.ranges) return InvalidArgument("Plan::Run", "ranges is null but the plan uses ranges");
    if (!Aligned(args.input, es))
      return InvalidArgument("Plan::Run", "input is not aligned to its " + std::to_string(es) + "-byte elements");
    if (!Aligned(args.indices, 4)) return InvalidArgument("Plan::Run", "indices are not 4-byte aligned");
    if (problem_.values && !Aligned(args.values, es))
      return InvalidArgument("Plan::Run", "values are not aligned to their " + std::to_string(es) + "-byte elements");
    if (problem_.ranges && !Aligned(args.ranges, 4)) return InvalidArgument("Plan::Run", "ranges are not 4-byte aligned");
    if (info_.workspace_bytes > 0 && args.workspace && !Aligned(args.workspace, 16))
      return InvalidArgument("Plan::Run", "workspace is not 16-byte aligned");
    if (noop_) return Status::Ok();
    // Launch in the library's context; the caller's is restored afterwards.
    jit::ContextGuard guard(ctx_);
    TOPK_RETURN_IF_ERROR(guard.status());
    const CUstream s = static_cast<CUstream>(stream);
    auto launch = [&] {
      return variant_.Launch(args.input, problem_.ranges ? args.ranges : nullptr, args.indices,
                             problem_.values ? args.values : nullptr, batch, s, args.workspace);
    };
    if (!own_done_ || args.workspace) return launch();
    // The plan's own workspace: a call on another stream than the last one
    // waits on the GPU for it (the event recorded after each call), so that
    // eager calls on several streams never overlap on it. A call being
    // captured into a graph is not ordered so (a graph's replays order
    // themselves on their stream; graphs must not replay concurrently).
    std::lock_guard<std::mutex> lock(own_mu_);
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
    TOPK_CU(cuStreamIsCapturing, s, &capture);
    if (capture != CU_STREAM_CAPTURE_STATUS_NONE) return launch();
    // CU_STREAM_PER_THREAD is one value for another stream in each thread:
    // always waited on.
    if (own_used_ && (s != own_last_stream_ || s == CU_STREAM_PER_THREAD))
      TOPK_CU(cuStreamWaitEvent, s, own_done_, 0);
    TOPK_RETURN_IF_ERROR(launch());
    TOPK_CU(cuEventRecord, own_done_, s);
    own_used_ = true;
    own_last_stream_ = s;
    return Status::Ok();
  }
  const Problem& problem() const override { return problem_; }
  const PlanInfo& info() const override { return info_; }

 private:
  Problem problem_;
  PlanInfo info_;
  jit::PreparedVariant variant_;
  CUcontext ctx_;
  bool noop_;
  CUevent own_done_ = nullptr;
  mutable std::mutex own_mu_;  // guards the three below
  mutable bool own_used_ = false;
  mutable CUstream own_last_stream_ = nullptr;
};

class LibraryImpl final : public Library {
 public:
  static StatusOr<std::unique_ptr<Library>> Make(const Options& o) {
    if (o.device < 0) return InvalidArgument("Library::Open", "device must be >= 0, got " + std::to_string(o.device));
    auto lib = std::unique_ptr<LibraryImpl>(new LibraryImpl());
    lib->options_ = o;
    // The context first: the device query's cluster probe then reuses it.
    TOPK_ASSIGN_OR_RETURN(lib->ctx_, jit::Context::Primary(o.device));
    TOPK_ASSIGN_OR_RETURN(lib->info_, jit::QueryDevice(o.device));
    if (lib->info_.cc_major < 8)
      return Status(Code::kUnimplemented, "Library::Open",
                    lib->info_.name + " is " + lib->info_.ArchName() + "; topk-tune needs sm_80 or newer");
    lib->arch_ = lib->info_.ToArch();
    lib->arch_.programmatic_launch = o.programmatic_launch;
    lib->description_ = lib->info_.name + " " + lib->info_.ArchName() + " " + std::to_string(lib->info_.sm_count) + " SMs";
    if (!o.cache_path.empty()) {
      auto c = o.write_back ? cache::Cache::Open(o.cache_path) : cache::Cache::OpenReadOnly(o.cache_path);
      if (c.ok()) {
        lib->cache_ = std::move(*c);
        auto devs = lib->cache_->Devices();
        if (devs.ok())
          for (const auto& d : *devs)
            if (d.fingerprint != lib->info_.Fingerprint() && d.cc_major == lib->info_.cc_major &&
                d.cc_minor == lib->info_.cc_minor)
              lib->same_arch_.push_back(d.fingerprint);
      } else {
        lib->warnings_ = "tuning cache ignored, running on defaults: " + c.status().ToString();
      }
    }
    lib->compiler_ = jit::MakeNvrtcCompiler();
    // With write_back off the cache is opened read-only: it still serves its
    // binaries, and the store's write-back of new compiles fails quietly
    // (KernelStore treats that write as best effort).
    if (lib->cache_) lib->store_ = cache::MakeBinaryStore(lib->cache_.get());
    // Lookup order: shipped kernels, the tuning cache, the kernel directory,
    // then NVRTC (runtime/kernels.hpp).
    lib->stores_ = std::make_unique<runtime::KernelStores>(
        lib->store_.get(), o.shipped_kernels ? runtime::ShippedKernelBlob() : std::string_view(),
        runtime::ResolveKernelDir(o.kernel_dir));
    jit::CompileOptions co;
    co.arch = lib->info_.ArchName();
    lib->kernels_ = std::make_unique<jit::KernelStore>(lib->compiler_.get(), lib->stores_->store(), co);
    return std::unique_ptr<Library>(std::move(lib));
  }

  StatusOr<std::unique_ptr<Plan>> MakePlan(const Problem& p) override {
    const auto t0 = std::chrono::steady_clock::now();
    TOPK_RETURN_IF_ERROR(p.Validate());
    if (p.sorted && p.k > jit::kMaxSortedK)
      return Status(Code::kUnimplemented, "MakePlan",
                    "sorted output supports k <= " + std::to_string(jit::kMaxSortedK) + ", got " + std::to_string(p.k));
    std::lock_guard<std::mutex> lock(mu_);  // SQLite handle and module loads
    jit::ContextGuard guard(ctx_->get());
    TOPK_RETURN_IF_ERROR(guard.status());
    PlanInfo info;
    runtime::DispatchDecision d = runtime::Decide(cache_.get(), info_.Fingerprint(), same_arch_,
                                                  options_.allow_same_arch, p, arch_);
    const bool noop = p.batch == 0 || p.k == 0;
    jit::PreparedVariant v;
    if (!noop) {
      auto made = Prepare(d.config, p, &info.binary_from_cache);
      if (!made.ok() && d.source != DispatchSource::kDefault) {
        // A tuned entry that no longer loads or fits falls back to the default.
        d = runtime::DispatchDecision();
        d.config = gen::DefaultConfig(p, arch_);
        made = Prepare(d.config, p, &info.binary_from_cache);
      }
      if (!made.ok()) return made.status();
      v = std::move(*made);
      if (d.source == DispatchSource::kNearest) FitToBatch(p, &d, &v);
    }
    info.source = d.source;
    info.variant_id = d.config.Id();
    info.tuned_shape = d.tuned_shape;
    info.tuned_median_us = d.tuned_median_us;
    info.workspace_bytes = v.workspace_bytes();
    info.plan_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    CUevent own_done = nullptr;
    if (info.workspace_bytes > 0) TOPK_CU(cuEventCreate, &own_done, CU_EVENT_DISABLE_TIMING);
    return std::unique_ptr<Plan>(new PlanImpl(p, std::move(info), std::move(v), ctx_->get(), noop, own_done));
  }

  const std::string& warnings() const override { return warnings_; }
  const std::string& device_description() const override { return description_; }

 private:
  // A nearest-shape winner stretched over more rows than it was tuned for
  // may launch differently (the radix family shrinks its clusters when they
  // would no longer be co-resident: gen::FitClusterToBatch). Only launch
  // arguments change: the compiled kernels stay the same (so
  // binary_from_cache, set by the first Prepare, stays true to where they
  // came from). Best effort: on any failure the plan keeps the winner's.
  void FitToBatch(const Problem& p, runtime::DispatchDecision* d, jit::PreparedVariant* v) {
    const gen::Family* family = d->config.family_ptr();
    if (!family || v->plan().stages.empty()) return;
    const std::vector<gen::KernelSource> srcs = gen::GenerateSources(d->config);
    const int first = v->plan().stages.front().kernel;
    if (first < 0 || first >= static_cast<int>(srcs.size())) return;
    auto fn = kernels_->Function(srcs[first]);
    if (!fn.ok()) return;
    auto fitted = family->FitToBatch(d->config, p, d->tuned_batch, [&](const gen::Config& t) {
      const gen::LaunchPlan plan = gen::PlanLaunch(t, p, arch_);
      if (plan.stages.empty()) return 0;
      auto n = jit::ResidentClusters(*fn, jit::StageShape(plan.stages.front(), p.batch));
      return n.ok() ? *n : 0;
    });
    if (!fitted) return;
    bool fc = false;
    auto made = Prepare(*fitted, p, &fc);
    if (!made.ok()) return;
    *v = std::move(*made);
    d->config = *fitted;
  }

  StatusOr<jit::PreparedVariant> Prepare(const gen::Config& c, const Problem& p, bool* from_cache) {
    return jit::LoadVariant(*kernels_, c, p, arch_, from_cache);
  }

  Options options_;
  jit::DeviceInfo info_;
  gen::Arch arch_;
  std::shared_ptr<jit::Context> ctx_;
  std::unique_ptr<cache::Cache> cache_;
  std::vector<std::string> same_arch_;
  std::string warnings_;
  std::string description_;
  std::unique_ptr<jit::Compiler> compiler_;
  std::unique_ptr<jit::BinaryStore> store_;
  std::unique_ptr<runtime::KernelStores> stores_;
  std::unique_ptr<jit::KernelStore> kernels_;
  std::mutex mu_;
};

}  // namespace

StatusOr<std::unique_ptr<Library>> Library::Open(const Options& options) { return LibraryImpl::Make(options); }

}  // namespace topk
