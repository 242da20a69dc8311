// Timing one prepared variant on the device: CUDA events around replays of a
// CUDA graph of several launches (the graph strips host launch gaps), after
// warm-up, repeated until a minimum measured time; the median and spread are
// kept. In "rotate" mode the launches of one graph cycle through enough
// input copies to exceed the L2 cache; in "hot" mode they reuse one buffer,
// as when the producer of the input has just written it (the DSA indexer).
#pragma once

#include <cuda.h>

#include <string>
#include <vector>

#include "jit/variant.hpp"
#include "tuner/runner.hpp"

namespace topk::tuner {

struct MeasureSettings {
  std::string l2_mode = "rotate";  // "rotate" or "hot"
  double min_time_ms = 25;         // keep sampling until this much GPU time
  int min_samples = 15;
  int max_samples = 300;
  int warmup = 3;                  // graph replays before timing
  int launches_per_sample = 0;     // 0: copies in rotate mode, 20 in hot mode
};

Status ValidateMeasureSettings(const MeasureSettings& s);

struct Samples {
  std::vector<double> us;  // per-launch time of each sample
  double median = 0, p10 = 0, p90 = 0, min = 0;
  int launches = 0;        // kernel launches timed in total
};

// Statistics of per-sample times (sorted copy).
void Summarise(Samples* s);

// How many input copies rotate mode needs to exceed twice the L2 cache.
int RotationCopies(size_t input_bytes, int64_t l2_bytes);

// Times `v` on `c` (adding input copies as needed). The context must be
// current.
StatusOr<Samples> TimeVariant(const jit::PreparedVariant& v, DeviceCase* c, const MeasureSettings& s,
                              int64_t l2_bytes, CUstream stream);

}  // namespace topk::tuner
