// The analysis behind every view of a report: ReportInput grouped into one
// Section per device, with shape rows, knob effects and tuning settings.
#include <algorithm>
#include <cmath>
#include <set>

#include "generator/family.hpp"
#include "tools/report_internal.hpp"

namespace topk::report::detail {

std::vector<Knob> Knobs() {
  std::vector<Knob> out;
  const std::vector<const gen::Family*> families = gen::Families();
  out.push_back({"family", "kernel family", [families](const gen::Config& c) {
                   double order = 0;
                   for (size_t i = 0; i < families.size(); ++i)
                     if (families[i]->name() == c.family) order = static_cast<double>(i);
                   return std::optional<std::pair<std::string, double>>(std::make_pair(c.family, order));
                 }});
  for (const gen::Family* f : families)
    for (const gen::ParamSpec& ps : f->params()) {
      const std::string family = f->name(), param = ps.name;
      out.push_back({family + "-" + param, family + ": " + ps.meaning,
                     [family, param](const gen::Config& c) -> std::optional<std::pair<std::string, double>> {
                       if (c.family != family || !c.Has(param)) return std::nullopt;
                       const int v = c.Get(param);
                       return std::make_pair(std::to_string(v), double(v));
                     }});
    }
  return out;
}

namespace {

gen::Arch ArchOf(const cache::DeviceRecord& d) {
  if (d.cc_major > 0) {
    auto a = gen::Arch::FromName(d.ArchName());
    if (a.ok()) return *a;
  }
  return gen::Arch::Sm90();
}

bool ShapeLess(const Problem& a, const Problem& b) {
  auto key = [](const Problem& p) {
    return std::make_tuple(static_cast<int>(p.dtype), !p.largest, p.ranges, p.values, p.sorted, p.n, p.k, p.batch);
  };
  return key(a) < key(b);
}

std::vector<KnobEffect> AnalyseKnobs(const std::vector<const cache::Measurement*>& ms) {
  // Group ok measurements by what makes their times comparable.
  std::map<std::string, std::vector<const cache::Measurement*>> groups;
  for (const auto* m : ms)
    if (m->outcome == cache::Outcome::kOk && m->median_us > 0 && gen::FindFamily(m->config.family))
      groups[cache::ProblemKey(m->problem) + "|" + m->input_dist + "|" + m->l2_mode].push_back(m);
  std::vector<KnobEffect> out;
  for (const Knob& knob : Knobs()) {
    // value -> per-group (min rel, median rel), and the value's order.
    std::map<std::string, std::vector<std::pair<double, double>>> per_value;
    std::map<std::string, double> order;
    std::map<std::string, int> variants;
    for (const auto& [key, list] : groups) {
      double best = 0;
      for (const auto* m : list) best = best == 0 ? m->median_us : std::min(best, m->median_us);
      std::map<std::string, std::vector<double>> rel;
      for (const auto* m : list) {
        const auto got = knob.get(m->config);
        if (!got) continue;
        const auto& [v, o] = *got;
        rel[v].push_back(m->median_us / best);
        order[v] = o;
        ++variants[v];
      }
      for (auto& [v, r] : rel) per_value[v].emplace_back(*std::min_element(r.begin(), r.end()), Median(r));
    }
    if (per_value.size() < 2) continue;  // a knob that never varied says nothing
    KnobEffect e;
    e.knob = knob.name;
    e.label = knob.label;
    for (auto& [v, pairs] : per_value) {
      KnobValue kv;
      kv.value = v;
      kv.order = order[v];
      kv.groups = static_cast<int>(pairs.size());
      kv.variants = variants[v];
      std::vector<double> bests, typicals;
      for (auto [b, t] : pairs) {
        bests.push_back(b);
        typicals.push_back(t);
      }
      kv.best = Median(bests);
      kv.typical = Median(typicals);
      e.values.push_back(kv);
    }
    std::sort(e.values.begin(), e.values.end(),
              [](const KnobValue& a, const KnobValue& b) { return a.order < b.order; });
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

std::vector<Section> Analyse(const ReportInput& in) {
  std::vector<std::string> order;  // fingerprints, recorded devices first
  std::map<std::string, Section> sections;
  for (const auto& d : in.devices) {
    if (sections.count(d.fingerprint)) continue;
    order.push_back(d.fingerprint);
    sections[d.fingerprint].device = d;
  }
  auto touch = [&](const std::string& fp) -> Section& {
    if (!sections.count(fp)) {
      order.push_back(fp);
      Section& s = sections[fp];
      s.device.fingerprint = fp;
      s.device.name = fp.substr(0, fp.find('|'));
      s.recorded = false;
    }
    return sections[fp];
  };
  for (const auto& w : in.winners) touch(w.device_fingerprint);
  for (const auto& m : in.measurements) touch(m.device_fingerprint);
  for (const auto& b : in.baselines) touch(b.device_fingerprint);

  std::vector<Section> out;
  for (const std::string& fp : order) {
    Section s = std::move(sections[fp]);
    const gen::Arch arch = ArchOf(s.device);
    std::map<std::string, ShapeRow> rows;
    auto row = [&](const Problem& p) -> ShapeRow& {
      const std::string key = cache::ProblemKey(p);
      auto it = rows.find(key);
      if (it != rows.end()) return it->second;
      ShapeRow& r = rows[key];
      r.problem = p;
      r.key = key;
      r.label = p.ToString();
      r.default_id = gen::DefaultConfig(p, arch).Id();
      return r;
    };
    std::vector<const cache::Measurement*> ms;
    std::map<int64_t, const cache::Measurement*> by_id;
    for (const auto& m : in.measurements) {
      if (m.device_fingerprint != fp) continue;
      ms.push_back(&m);
      by_id[m.id] = &m;
      ShapeRow& r = row(m.problem);
      const std::string oc = cache::OutcomeName(m.outcome);
      ++r.outcomes[oc];
      ++s.outcomes[oc];
      ++r.measured;
      ++s.measurements;
      if (m.outcome != cache::Outcome::kOk) {
        ++s.failures;
        r.failures.push_back(&m);
      } else {
        s.settings.launches.push_back(m.repetitions);
        s.settings.samples.push_back(static_cast<double>(m.samples_us.size()));
      }
      ++s.settings.l2_modes[m.l2_mode];
      ++s.settings.dists[m.input_dist];
      if (!m.tune_run.empty()) s.settings.tune_runs.insert(m.tune_run);
      if (!m.created.empty()) {
        if (s.settings.first.empty() || m.created < s.settings.first) s.settings.first = m.created;
        if (m.created > s.settings.last) s.settings.last = m.created;
      }
    }
    for (const auto& w : in.winners) {
      if (w.device_fingerprint != fp) continue;
      ShapeRow& r = row(w.problem);
      r.winner = w;
    }
    for (const auto& b : in.baselines) {
      if (b.device_fingerprint != fp) continue;
      ShapeRow& r = row(b.problem);
      r.baselines[b.name] = b.median_us;
      if (b.name == kTorchBaseline) r.torch_us = b.median_us;
    }
    for (auto& [key, r] : rows) {
      if (r.winner) {
        r.default_us = r.winner->default_us;
        if (r.torch_us <= 0 && r.winner->baseline_name == kTorchBaseline) r.torch_us = r.winner->baseline_us;
        if (r.winner->baseline_us > 0 && !r.winner->baseline_name.empty() &&
            !r.baselines.count(r.winner->baseline_name))
          r.baselines[r.winner->baseline_name] = r.winner->baseline_us;
      }
      if (r.default_us <= 0) {
        // The default's own measurement, under the winner's input settings
        // when they are known.
        const cache::Measurement* wm = nullptr;
        if (r.winner && by_id.count(r.winner->measurement_id)) wm = by_id[r.winner->measurement_id];
        for (const auto* m : ms)
          if (m->variant_id == r.default_id && m->outcome == cache::Outcome::kOk && m->median_us > 0 &&
              cache::ProblemKey(m->problem) == key &&
              (!wm || (m->input_dist == wm->input_dist && m->l2_mode == wm->l2_mode)))
            r.default_us = m->median_us;
      }
      if (r.winner) ++s.winners;
      s.shapes.push_back(r);
    }
    std::sort(s.shapes.begin(), s.shapes.end(),
              [](const ShapeRow& a, const ShapeRow& b) { return ShapeLess(a.problem, b.problem); });
    std::vector<double> sd, st;
    for (const auto& r : s.shapes) {
      if (r.speedup_default() > 0) sd.push_back(r.speedup_default());
      if (r.speedup_torch() > 0) st.push_back(r.speedup_torch());
    }
    s.geo_default = GeoMean(sd);
    s.n_default = static_cast<int>(sd.size());
    s.geo_torch = GeoMean(st);
    s.n_torch = static_cast<int>(st.size());
    s.effects = AnalyseKnobs(ms);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace topk::report::detail
