// The report's numbers as JSON, for scripts.
#include <nlohmann/json.hpp>

#include "tools/report_internal.hpp"

namespace topk::report::detail {

using nlohmann::json;

namespace {

json ProblemJson(const Problem& p) {
  return {{"dtype", DTypeName(p.dtype)}, {"batch", p.batch},   {"n", p.n},           {"k", p.k},
          {"largest", p.largest},        {"ranges", p.ranges}, {"values", p.values}, {"sorted", p.sorted}};
}

json Nullable(double v) { return v > 0 ? json(v) : json(nullptr); }

}  // namespace

std::string Json(const ReportInput& in, const std::vector<Section>& sections) {
  json j;
  j["title"] = in.title;
  j["source"] = in.source;
  j["generated"] = in.generated;
  j["baseline_name"] = kTorchBaseline;
  j["devices"] = json::array();
  for (const auto& s : sections) {
    json d;
    d["fingerprint"] = s.device.fingerprint;
    d["name"] = s.device.name;
    d["recorded"] = s.recorded;
    d["arch"] = s.device.cc_major ? s.device.ArchName() : "";
    d["sm_count"] = s.device.sm_count;
    d["l2_bytes"] = s.device.l2_bytes;
    d["driver_version"] = s.device.driver_version;
    d["compiler_version"] = s.device.compiler_version;
    const json info = json::parse(s.device.info_json.empty() ? "{}" : s.device.info_json, nullptr, false);
    d["info"] = info.is_discarded() ? json(s.device.info_json) : info;
    d["summary"] = {{"shapes", s.shapes.size()},
                    {"winners", s.winners},
                    {"geomean_speedup_default", Nullable(s.geo_default)},
                    {"shapes_with_default", s.n_default},
                    {"geomean_speedup_torch", Nullable(s.geo_torch)},
                    {"shapes_with_torch", s.n_torch},
                    {"measurements", s.measurements},
                    {"failures", s.failures}};
    d["outcomes"] = s.outcomes;
    d["settings"] = {{"l2_modes", s.settings.l2_modes},
                     {"input_dists", s.settings.dists},
                     {"median_launches", Median(s.settings.launches)},
                     {"median_samples", Median(s.settings.samples)},
                     {"tune_runs", std::vector<std::string>(s.settings.tune_runs.begin(), s.settings.tune_runs.end())},
                     {"first_measured", s.settings.first},
                     {"last_measured", s.settings.last}};
    json shapes = json::array();
    for (const auto& r : s.shapes) {
      json x;
      x["shape"] = r.label;
      x["key"] = r.key;
      x["problem"] = ProblemJson(r.problem);
      x["winner"] = r.winner ? json(r.winner->variant_id) : json(nullptr);
      x["config"] = r.winner ? r.winner->config.ToJson() : json(nullptr);
      x["median_us"] = r.winner ? Nullable(r.winner->median_us) : json(nullptr);
      x["default_id"] = r.default_id;
      x["default_us"] = Nullable(r.default_us);
      x["speedup_default"] = Nullable(r.speedup_default());
      x["torch_us"] = Nullable(r.torch_us);
      x["speedup_torch"] = Nullable(r.speedup_torch());
      x["baselines"] = r.baselines;
      x["measured"] = r.measured;
      x["outcomes"] = r.outcomes;
      shapes.push_back(std::move(x));
    }
    d["shapes"] = std::move(shapes);
    json effects = json::array();
    for (const auto& e : s.effects) {
      json values = json::array();
      for (const auto& v : e.values)
        values.push_back({{"value", v.value},
                          {"shapes", v.groups},
                          {"variants", v.variants},
                          {"best_relative", v.best},
                          {"median_relative", v.typical}});
      effects.push_back({{"knob", e.knob}, {"label", e.label}, {"values", std::move(values)}});
    }
    d["knob_effects"] = std::move(effects);
    j["devices"].push_back(std::move(d));
  }
  return j.dump(2) + "\n";
}

}  // namespace topk::report::detail
