#include "tuner/runner.hpp"

#include "jit/driver.hpp"

namespace topk::tuner {

StatusOr<DeviceCase> DeviceCase::Make(const Problem& p, Dist dist, uint64_t seed, RangesMode ranges) {
  TOPK_RETURN_IF_ERROR(p.Validate());
  DeviceCase c;
  c.problem = p;
  c.dist = dist;
  c.seed = seed;
  c.host = HostMatrix(p.dtype, p.batch, p.n, p.stride());
  Fill(&c.host, dist, seed, p.k);
  if (p.ranges) {
    if (ranges == RangesMode::kFull) {
      c.ranges.resize(static_cast<size_t>(2 * p.batch));
      for (int64_t r = 0; r < p.batch; ++r) {
        c.ranges[static_cast<size_t>(2 * r)] = 0;
        c.ranges[static_cast<size_t>(2 * r + 1)] = static_cast<int32_t>(p.n);
      }
    } else {
      c.ranges = MakeRanges(p.batch, p.n, seed);
    }
  }
  c.ref = ComputeReference(c.host, p, p.ranges ? c.ranges.data() : nullptr);
  const size_t in_bytes = std::max<size_t>(c.host.bytes.size(), 16);
  TOPK_ASSIGN_OR_RETURN(c.input, jit::DeviceBuffer::Alloc(in_bytes));
  if (!c.host.bytes.empty()) TOPK_CU(cuMemcpyHtoD, c.input.get(), c.host.bytes.data(), c.host.bytes.size());
  if (p.ranges) {
    TOPK_ASSIGN_OR_RETURN(c.ranges_dev, jit::DeviceBuffer::Alloc(std::max<size_t>(c.ranges.size() * 4, 8)));
    if (!c.ranges.empty()) TOPK_CU(cuMemcpyHtoD, c.ranges_dev.get(), c.ranges.data(), c.ranges.size() * 4);
  }
  const size_t out = static_cast<size_t>(std::max<int64_t>(p.batch * p.k, 1));
  TOPK_ASSIGN_OR_RETURN(c.indices, jit::DeviceBuffer::Alloc(out * 4));
  if (p.values) {
    TOPK_ASSIGN_OR_RETURN(c.values, jit::DeviceBuffer::Alloc(out * DTypeSize(p.dtype)));
  }
  return c;
}

Status DeviceCase::AddCopies(int copies) {
  while (static_cast<int>(extra_inputs.size()) + 1 < copies) {
    TOPK_ASSIGN_OR_RETURN(jit::DeviceBuffer b, jit::DeviceBuffer::Alloc(input.bytes()));
    TOPK_CU(cuMemcpyDtoD, b.get(), input.get(), input.bytes());
    extra_inputs.push_back(std::move(b));
  }
  // A device-to-device cuMemcpy does not wait for completion before
  // returning, and the timing launches go to a non-blocking stream.
  TOPK_CU(cuCtxSynchronize);
  return Status::Ok();
}

const void* DeviceCase::input_copy(int i) const {
  return i == 0 ? input.ptr() : extra_inputs[static_cast<size_t>(i - 1)].ptr();
}

Status RunAndCheck(const jit::PreparedVariant& v, DeviceCase* c, CUstream stream, std::vector<int32_t>* indices_out) {
  const Problem& p = c->problem;
  const size_t out = static_cast<size_t>(p.batch * p.k);
  // Poison: a kernel that leaves a slot unwritten fails the check. On the
  // kernel's stream: cuMemsetD8 runs on the legacy stream, which a
  // non-blocking stream does not wait for, and a late memset overwrote the
  // rows a kernel finished first (the empty-range rows of a cluster kernel
  // read as unwritten on an H100 busy with compute-sanitizer).
  TOPK_CU(cuMemsetD8Async, c->indices.get(), 0xA5, std::max<size_t>(out * 4, 4), stream);
  if (p.values)
    TOPK_CU(cuMemsetD8Async, c->values.get(), 0x5A, std::max<size_t>(out * DTypeSize(p.dtype), 4), stream);
  TOPK_RETURN_IF_ERROR(v.Launch(c->input.ptr(), p.ranges ? static_cast<const int32_t*>(c->ranges_dev.ptr()) : nullptr,
                                static_cast<int32_t*>(c->indices.ptr()), p.values ? c->values.ptr() : nullptr,
                                p.batch, stream));
  TOPK_CU(cuStreamSynchronize, stream);
  std::vector<int32_t> idx(out);
  std::vector<uint8_t> vals;
  if (out) TOPK_CU(cuMemcpyDtoH, idx.data(), c->indices.get(), out * 4);
  if (p.values && out) {
    vals.resize(out * static_cast<size_t>(DTypeSize(p.dtype)));
    TOPK_CU(cuMemcpyDtoH, vals.data(), c->values.get(), vals.size());
  }
  const CheckResult r = Check(c->host, p, p.ranges ? c->ranges.data() : nullptr, c->ref, idx.data(),
                              p.values ? vals.data() : nullptr);
  if (indices_out) *indices_out = idx;
  if (!r.ok())
    return Status(Code::kWrongResult, v.config().Id(),
                  p.ToString() + " input " + DistName(c->dist) + ": " + std::to_string(r.bad_rows) + " of " +
                      std::to_string(r.rows_checked) + " rows wrong; " + r.first_error);
  return Status::Ok();
}

}  // namespace topk::tuner
