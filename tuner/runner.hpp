// A problem instance on the device with its host copy and exact reference,
// and running one prepared variant on it with a full exactness check. Used by
// the tuner's worker and the GPU tests.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <vector>

#include "jit/device.hpp"
#include "jit/variant.hpp"
#include "tuner/reference.hpp"

namespace topk::tuner {

// How a case with per-row ranges picks them: random and adversarial (empty,
// reversed, at the row's end, odd lengths; for verification) or every row
// whole (for timing: the work torch.topk does, the decode case of the DSA
// indexer).
enum class RangesMode { kRandom, kFull };

struct DeviceCase {
  Problem problem;
  Dist dist = Dist::kNormal;
  uint64_t seed = 0;
  HostMatrix host;
  std::vector<int32_t> ranges;  // empty unless problem.ranges
  Reference ref;
  jit::DeviceBuffer input;
  jit::DeviceBuffer ranges_dev;
  jit::DeviceBuffer indices;
  jit::DeviceBuffer values;

  // Generates the input on the host, computes the reference, uploads. The
  // context must be current.
  static StatusOr<DeviceCase> Make(const Problem& p, Dist dist, uint64_t seed,
                                   RangesMode ranges = RangesMode::kRandom);
  // Extra copies of the input on the device so that timing can rotate
  // through more bytes than the L2 holds.
  Status AddCopies(int copies);
  int copies() const { return 1 + static_cast<int>(extra_inputs.size()); }
  const void* input_copy(int i) const;

  std::vector<jit::DeviceBuffer> extra_inputs;
};

// Poisons the outputs, launches, synchronises, copies back and checks.
// kWrongResult (with the checker's first error) when the result is not an
// exact top-k; the CUDA error when the launch or a copy fails. The check is
// of c->problem (deterministic: the lowest-index ties). `indices_out`, when
// set, receives the output indices as copied back.
Status RunAndCheck(const jit::PreparedVariant& v, DeviceCase* c, CUstream stream,
                   std::vector<int32_t>* indices_out = nullptr);

}  // namespace topk::tuner
