// JSON for the cache: the field readers import and merge use, and each
// record as its JSON Lines object (the export format).
#include <limits>
#include <string>

#include "cache/base64.hpp"
#include "cache/cache_internal.hpp"

namespace topk::cache::detail {

const json& At(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) throw FieldError(std::string("missing field '") + key + "'");
  return *it;
}

std::string Str(const json& j, const char* key) {
  const json& v = At(j, key);
  if (!v.is_string()) throw FieldError(std::string("field '") + key + "' must be a string");
  return v.get<std::string>();
}

int64_t Int(const json& j, const char* key) {
  const json& v = At(j, key);
  if (!v.is_number_integer()) throw FieldError(std::string("field '") + key + "' must be an integer");
  return v.get<int64_t>();
}

int Int32(const json& j, const char* key) {
  const int64_t v = Int(j, key);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    throw FieldError(std::string("field '") + key + "' is out of range");
  }
  return static_cast<int>(v);
}

double NumberOrNaN(const json& v, const std::string& what) {
  if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (!v.is_number()) throw FieldError(what + " must be a number");
  return v.get<double>();
}

double Real(const json& j, const char* key) { return NumberOrNaN(At(j, key), std::string("field '") + key + "'"); }

bool Bool(const json& j, const char* key) {
  const json& v = At(j, key);
  if (!v.is_boolean()) throw FieldError(std::string("field '") + key + "' must be true or false");
  return v.get<bool>();
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string SamplesToJson(const std::vector<double>& samples) { return Dump(json(samples)); }

StatusOr<std::vector<double>> SamplesFromJson(const json& j) {
  if (!j.is_array()) return DataLoss("samples", "samples must be a JSON array");
  std::vector<double> out;
  out.reserve(j.size());
  for (const json& v : j) {
    if (!v.is_number() && !v.is_null()) return DataLoss("samples", "samples must be numbers");
    out.push_back(v.is_null() ? std::numeric_limits<double>::quiet_NaN() : v.get<double>());
  }
  return out;
}

json DeviceToJson(const DeviceRecord& d) {
  return {{"table", "devices"},
          {"fingerprint", d.fingerprint},
          {"name", d.name},
          {"cc_major", d.cc_major},
          {"cc_minor", d.cc_minor},
          {"sm_count", d.sm_count},
          {"l2_bytes", d.l2_bytes},
          {"driver_version", d.driver_version},
          {"compiler_version", d.compiler_version},
          {"info_json", d.info_json}};
}

json BinaryToJson(const BinaryRecord& b) {
  return {{"table", "binaries"},
          {"source_hash", b.source_hash},
          {"arch", b.arch},
          {"options", b.options},
          {"compiler_version", b.compiler_version},
          {"kernel_key", b.kernel_key},
          {"lowered_name", b.lowered_name},
          {"registers", b.registers},
          {"spill_stores", b.spill_stores},
          {"spill_loads", b.spill_loads},
          {"stack_bytes", b.stack_bytes},
          {"compile_ms", b.compile_ms},
          {"log", b.log},
          {"cubin_base64", internal::Base64Encode(b.cubin)}};
}

json MeasurementToJson(const Measurement& m) {
  return {{"table", "measurements"},
          {"id", m.id},
          {"device", m.device_fingerprint},
          {"variant_id", m.variant_id},
          {"problem", ProblemKey(m.problem)},
          {"row_stride", m.problem.row_stride},
          {"input_dist", m.input_dist},
          {"l2_mode", m.l2_mode},
          {"outcome", OutcomeName(m.outcome)},
          {"median_us", m.median_us},
          {"p10_us", m.p10_us},
          {"p90_us", m.p90_us},
          {"min_us", m.min_us},
          {"repetitions", m.repetitions},
          {"samples_us", m.samples_us},
          {"verified", m.verified},
          {"message", m.message},
          {"tune_run", m.tune_run},
          {"created", m.created}};
}

json WinnerToJson(const Winner& w, const std::optional<MeasurementKey>& key) {
  json j = {{"table", "winners"},
            {"device", w.device_fingerprint},
            {"problem", ProblemKey(w.problem)},
            {"row_stride", w.problem.row_stride},
            {"variant_id", w.variant_id},
            {"median_us", w.median_us},
            {"default_us", w.default_us},
            {"baseline_us", w.baseline_us},
            {"baseline_name", w.baseline_name},
            {"measurement_id", w.measurement_id},
            {"updated", w.updated}};
  if (key) {
    j["measurement"] = {{"device", key->device},
                        {"variant_id", key->variant_id},
                        {"problem", key->problem_key},
                        {"input_dist", key->input_dist},
                        {"l2_mode", key->l2_mode}};
  }
  return j;
}

json BaselineToJson(const Baseline& b) {
  return {{"table", "baselines"},
          {"device", b.device_fingerprint},
          {"problem", ProblemKey(b.problem)},
          {"row_stride", b.problem.row_stride},
          {"name", b.name},
          {"median_us", b.median_us},
          {"created", b.created}};
}

Problem ProblemFromJson(const json& j) {
  Problem p = ValueOrThrow(ParseProblemKey(Str(j, "problem")));
  p.row_stride = j.contains("row_stride") ? Int(j, "row_stride") : 0;
  return p;
}

}  // namespace topk::cache::detail
