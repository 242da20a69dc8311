#include "tuner/timing.hpp"

#include <algorithm>
#include <cmath>

#include "jit/driver.hpp"

namespace topk::tuner {

Status ValidateMeasureSettings(const MeasureSettings& s) {
  if (s.l2_mode != "rotate" && s.l2_mode != "hot")
    return InvalidArgument("MeasureSettings", "l2_mode must be 'rotate' or 'hot', got '" + s.l2_mode + "'");
  if (s.min_samples < 1 || s.max_samples < s.min_samples)
    return InvalidArgument("MeasureSettings", "need 1 <= min_samples <= max_samples");
  if (s.min_time_ms < 0 || s.warmup < 0 || s.launches_per_sample < 0)
    return InvalidArgument("MeasureSettings", "times and counts must be >= 0");
  return Status::Ok();
}

void Summarise(Samples* s) {
  if (s->us.empty()) return;
  std::vector<double> v = s->us;
  std::sort(v.begin(), v.end());
  auto q = [&](double f) {
    const double pos = f * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
  };
  s->median = q(0.5);
  s->p10 = q(0.1);
  s->p90 = q(0.9);
  s->min = v.front();
}

int RotationCopies(size_t input_bytes, int64_t l2_bytes) {
  if (input_bytes == 0) return 1;
  const double want = 2.0 * static_cast<double>(std::max<int64_t>(l2_bytes, 1 << 20));
  const int copies = static_cast<int>(std::ceil(want / static_cast<double>(input_bytes)));
  return std::clamp(copies, 2, 128);
}

namespace {

// Owns the driver objects of one measurement so every return frees them.
struct Resources {
  CUstream own_stream = nullptr;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  CUevent start = nullptr, stop = nullptr;
  ~Resources() {
    auto d = jit::GetDriver();
    if (!d.ok()) return;
    if (exec) (*d)->cuGraphExecDestroy(exec);
    if (graph) (*d)->cuGraphDestroy(graph);
    if (start) (*d)->cuEventDestroy(start);
    if (stop) (*d)->cuEventDestroy(stop);
    if (own_stream) (*d)->cuStreamDestroy(own_stream);
  }
};

}  // namespace

StatusOr<Samples> TimeVariant(const jit::PreparedVariant& v, DeviceCase* c, const MeasureSettings& s,
                              int64_t l2_bytes, CUstream stream) {
  TOPK_RETURN_IF_ERROR(ValidateMeasureSettings(s));
  const Problem& p = c->problem;
  const bool rotate = s.l2_mode == "rotate";
  if (rotate) TOPK_RETURN_IF_ERROR(c->AddCopies(RotationCopies(c->host.bytes.size(), l2_bytes)));
  const int copies = rotate ? c->copies() : 1;
  const int per_graph = s.launches_per_sample > 0 ? s.launches_per_sample : (rotate ? copies : 20);
  const int32_t* ranges = p.ranges ? static_cast<const int32_t*>(c->ranges_dev.ptr()) : nullptr;
  int32_t* idx = static_cast<int32_t*>(c->indices.ptr());
  void* vals = p.values ? c->values.ptr() : nullptr;

  Resources r;
  if (!stream) {  // graphs cannot be captured on the legacy default stream
    TOPK_CU(cuStreamCreate, &r.own_stream, CU_STREAM_NON_BLOCKING);
    stream = r.own_stream;
  }
  // One direct launch first: a launch error surfaces here, not inside capture.
  TOPK_RETURN_IF_ERROR(v.Launch(c->input.ptr(), ranges, idx, vals, p.batch, stream));
  TOPK_CU(cuStreamSynchronize, stream);
  TOPK_CU(cuStreamBeginCapture, stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  Status launched = Status::Ok();
  for (int i = 0; i < per_graph && launched.ok(); ++i)
    launched = v.Launch(c->input_copy(i % copies), ranges, idx, vals, p.batch, stream);
  {
    auto d = jit::GetDriver();
    const CUresult er = (*d)->cuStreamEndCapture(stream, &r.graph);
    TOPK_RETURN_IF_ERROR(launched);
    if (er != CUDA_SUCCESS) return jit::CudaStatus(er, "cuStreamEndCapture", __FILE__, __LINE__);
  }
  TOPK_CU(cuGraphInstantiate, &r.exec, r.graph, 0);
  TOPK_CU(cuEventCreate, &r.start, CU_EVENT_DEFAULT);
  TOPK_CU(cuEventCreate, &r.stop, CU_EVENT_DEFAULT);
  for (int i = 0; i < s.warmup; ++i) TOPK_CU(cuGraphLaunch, r.exec, stream);
  TOPK_CU(cuStreamSynchronize, stream);

  Samples out;
  double total_ms = 0;
  while (static_cast<int>(out.us.size()) < s.max_samples &&
         (static_cast<int>(out.us.size()) < s.min_samples || total_ms < s.min_time_ms)) {
    TOPK_CU(cuEventRecord, r.start, stream);
    TOPK_CU(cuGraphLaunch, r.exec, stream);
    TOPK_CU(cuEventRecord, r.stop, stream);
    TOPK_CU(cuEventSynchronize, r.stop);
    float ms = 0;
    TOPK_CU(cuEventElapsedTime, &ms, r.start, r.stop);
    total_ms += ms;
    out.us.push_back(1000.0 * ms / per_graph);
    out.launches += per_graph;
  }
  Summarise(&out);
  return out;
}

}  // namespace topk::tuner
