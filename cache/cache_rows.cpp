// SQL rows to cache records: each reader takes the columns of
// cache_internal.hpp's column lists by position.
#include <string>

#include "cache/cache_internal.hpp"

namespace topk::cache::detail {

DeviceRecord DeviceFromRow(const Stmt& s) {
  DeviceRecord d;
  d.fingerprint = s.Text(0);
  d.name = s.Text(1);
  d.cc_major = static_cast<int>(s.Int(2));
  d.cc_minor = static_cast<int>(s.Int(3));
  d.sm_count = static_cast<int>(s.Int(4));
  d.l2_bytes = s.Int(5);
  d.driver_version = static_cast<int>(s.Int(6));
  d.compiler_version = s.Text(7);
  d.info_json = s.Text(8);
  return d;
}

BinaryRecord BinaryFromRow(const Stmt& s) {
  BinaryRecord b;
  b.source_hash = s.Text(0);
  b.arch = s.Text(1);
  b.options = s.Text(2);
  b.compiler_version = s.Text(3);
  b.kernel_key = s.Text(4);
  b.lowered_name = s.Text(5);
  b.cubin = s.Blob(6);
  b.registers = static_cast<int>(s.Int(7));
  b.spill_stores = static_cast<int>(s.Int(8));
  b.spill_loads = static_cast<int>(s.Int(9));
  b.stack_bytes = static_cast<int>(s.Int(10));
  b.compile_ms = s.Real(11);
  b.log = s.Text(12);
  return b;
}

StatusOr<Problem> ProblemFromRow(const std::string& key, int64_t row_stride) {
  auto p = ParseProblemKey(key);
  if (!p.ok()) return DataLoss("cache row", p.status().message());
  p->row_stride = row_stride;
  return p;
}

StatusOr<gen::Config> ConfigFromRow(const Stmt& s, int json_col, const std::string& variant_id) {
  if (!s.IsNull(json_col)) {
    const json j = json::parse(s.Text(json_col), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return DataLoss("cache row", "variant '" + variant_id + "' has malformed config JSON");
    auto c = gen::Config::FromJson(j);
    if (!c.ok()) return DataLoss("cache row", "variant '" + variant_id + "': " + c.status().message());
    return c;
  }
  auto c = gen::Config::FromId(variant_id);
  if (!c.ok()) {
    return DataLoss("cache row", "variant '" + variant_id +
                                     "' has no variants row and its id does not parse: " + c.status().message());
  }
  return c;
}

StatusOr<Winner> WinnerFromRow(const Stmt& s) {
  Winner w;
  w.device_fingerprint = s.Text(0);
  TOPK_ASSIGN_OR_RETURN(w.problem, ProblemFromRow(s.Text(1), s.Int(2)));
  w.variant_id = s.Text(3);
  TOPK_ASSIGN_OR_RETURN(w.config, ConfigFromRow(s, 4, w.variant_id));
  w.median_us = s.Real(5);
  w.default_us = s.Real(6);
  w.baseline_us = s.Real(7);
  w.baseline_name = s.Text(8);
  w.measurement_id = s.Int(9);
  w.updated = s.Text(10);
  return w;
}

StatusOr<Baseline> BaselineFromRow(const Stmt& s) {
  Baseline b;
  b.device_fingerprint = s.Text(0);
  TOPK_ASSIGN_OR_RETURN(b.problem, ProblemFromRow(s.Text(1), s.Int(2)));
  b.name = s.Text(3);
  b.median_us = s.Real(4);
  b.created = s.Text(5);
  return b;
}

}  // namespace topk::cache::detail
