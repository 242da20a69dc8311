#include "tools/report.hpp"

#include "tools/atomic_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <numbers>
#include <optional>
#include <set>
#include <sstream>

#include "generator/config.hpp"
#include "generator/family.hpp"

namespace topk::report {

namespace fs = std::filesystem;
using nlohmann::json;

StatusOr<ReportInput> LoadReportInput(const cache::Cache& cache, const std::string& device_fingerprint) {
  ReportInput in;
  in.source = cache.path();
  TOPK_ASSIGN_OR_RETURN(auto devices, cache.Devices());
  for (auto& d : devices)
    if (device_fingerprint.empty() || d.fingerprint == device_fingerprint) in.devices.push_back(std::move(d));
  TOPK_ASSIGN_OR_RETURN(in.winners, cache.Winners(device_fingerprint));
  TOPK_ASSIGN_OR_RETURN(in.measurements, cache.Measurements(device_fingerprint, nullptr));
  TOPK_ASSIGN_OR_RETURN(in.baselines, cache.Baselines(device_fingerprint));
  return in;
}

namespace {

// ------------------------------------------------------------ small helpers

std::string Esc(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&#39;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string Num(double v, int prec = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}

// Microseconds with three significant digits.
std::string Us(double us) {
  if (!(us > 0)) return "-";
  if (us >= 1000) return Num(us, 0);
  if (us >= 100) return Num(us, 1);
  if (us >= 10) return Num(us, 2);
  return Num(us, 3);
}

std::string Times(double x, const char* sign = "\xC3\x97") {  // U+00D7
  if (!(x > 0)) return "-";
  return Num(x, 2) + sign;
}

std::string Driver(int v) {
  if (v <= 0) return "-";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string Bytes(int64_t b) {
  if (b <= 0) return "-";
  if (b >= (int64_t{1} << 30)) return Num(static_cast<double>(b) / (1 << 30), 1) + " GiB";
  if (b >= (1 << 20)) return Num(static_cast<double>(b) / (1 << 20), 0) + " MiB";
  return Num(static_cast<double>(b) / (1 << 10), 0) + " KiB";
}

// "4K", "32K", "1M" for powers of two and round numbers.
std::string Short(double v) {
  if (v >= (1 << 20) && std::fmod(v, 1 << 20) == 0) return Num(v / (1 << 20), 0) + "M";
  if (v >= 1024 && std::fmod(v, 1024) == 0) return Num(v / 1024, 0) + "K";
  return Num(v, 0);
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

double GeoMean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += std::log(x);
  return std::exp(s / static_cast<double>(v.size()));
}

const std::vector<std::string>& OutcomeOrder() {
  static const std::vector<std::string> o = {"ok",    "compile_error", "resource_limit", "wrong_result",
                                             "crash", "timeout",       "skipped"};
  return o;
}

std::string OutcomeColor(const std::string& name) {
  static const std::map<std::string, std::string> c = {
      {"ok", "#59a14f"},    {"compile_error", "#9c755f"}, {"resource_limit", "#edc948"}, {"wrong_result", "#e15759"},
      {"crash", "#b07aa1"}, {"timeout", "#f28e2b"},       {"skipped", "#bab0ac"}};
  auto it = c.find(name);
  return it == c.end() ? "#888888" : it->second;
}

const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                          "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

// ---------------------------------------------------------------- analysis

struct ShapeRow {
  Problem problem;
  std::string key;
  std::string label;
  std::optional<cache::Winner> winner;
  std::string default_id;
  double default_us = 0;
  double torch_us = 0;
  std::map<std::string, double> baselines;  // every recorded baseline
  std::map<std::string, int> outcomes;
  int measured = 0;
  std::vector<const cache::Measurement*> failures;

  double speedup_default() const {
    return winner && winner->median_us > 0 && default_us > 0 ? default_us / winner->median_us : 0;
  }
  double speedup_torch() const {
    return winner && winner->median_us > 0 && torch_us > 0 ? torch_us / winner->median_us : 0;
  }
};

struct KnobValue {
  std::string value;
  double order = 0;
  int groups = 0;      // shapes (with their input settings) where this value ran ok
  int variants = 0;    // ok measurements with this value
  double best = 0;     // median over groups of the group's best relative time
  double typical = 0;  // median over groups of the group's median relative time
};

struct KnobEffect {
  std::string knob;
  std::string label;
  std::vector<KnobValue> values;
};

struct Knob {
  std::string name;   // "family", or "<family>-<parameter>"
  std::string label;
  std::function<std::optional<std::pair<std::string, double>>(const gen::Config&)> get;  // (label, order)
};

// The knobs the report analyses, from the registry: which family, then
// every parameter of every family (a parameter only over its own family's
// variants).
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

struct Settings {
  std::map<std::string, int> l2_modes;
  std::map<std::string, int> dists;
  std::vector<double> launches;
  std::vector<double> samples;
  std::set<std::string> tune_runs;
  std::string first, last;
};

struct Section {
  cache::DeviceRecord device;
  bool recorded = true;  // false: only seen in measurements / winners
  std::vector<ShapeRow> shapes;
  std::vector<KnobEffect> effects;
  std::map<std::string, int> outcomes;
  Settings settings;
  int measurements = 0;
  int failures = 0;
  double geo_default = 0;
  int n_default = 0;
  double geo_torch = 0;
  int n_torch = 0;
  int winners = 0;
};

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

// ---------------------------------------------------------------- SVG

class Svg {
 public:
  Svg(const std::string& id, double w, double h, const std::string& label) {
    o_ << "<svg id=\"" << Esc(id) << "\" class=\"chart\" viewBox=\"0 0 " << Num(w, 0) << ' ' << Num(h, 0)
       << "\" width=\"" << Num(w, 0) << "\" height=\"" << Num(h, 0) << "\" role=\"img\" aria-label=\"" << Esc(label)
       << "\">";
  }
  void Rect(double x, double y, double w, double h, const std::string& fill, const std::string& title = "") {
    o_ << "<rect x=\"" << Num(x) << "\" y=\"" << Num(y) << "\" width=\"" << Num(std::max(0.0, w)) << "\" height=\""
       << Num(std::max(0.0, h)) << "\" fill=\"" << fill << "\"";
    Close("rect", title);
  }
  void Line(double x1, double y1, double x2, double y2, const std::string& cls) {
    o_ << "<line x1=\"" << Num(x1) << "\" y1=\"" << Num(y1) << "\" x2=\"" << Num(x2) << "\" y2=\"" << Num(y2)
       << "\" class=\"" << cls << "\"/>";
  }
  void Text(double x, double y, const std::string& text, const std::string& cls = "", const char* anchor = "start") {
    o_ << "<text x=\"" << Num(x) << "\" y=\"" << Num(y) << "\" text-anchor=\"" << anchor << "\"";
    if (!cls.empty()) o_ << " class=\"" << cls << "\"";
    o_ << ">" << Esc(text) << "</text>";
  }
  void Circle(double cx, double cy, double r, const std::string& fill, const std::string& stroke,
              const std::string& title = "") {
    o_ << "<circle cx=\"" << Num(cx) << "\" cy=\"" << Num(cy) << "\" r=\"" << Num(r) << "\" fill=\"" << fill
       << "\" stroke=\"" << stroke << "\" stroke-width=\"1.5\"";
    Close("circle", title);
  }
  std::string Str() {
    o_ << "</svg>";
    return o_.str();
  }

 private:
  void Close(const char* tag, const std::string& title) {
    if (title.empty())
      o_ << "/>";
    else
      o_ << "><title>" << Esc(title) << "</title></" << tag << ">";
  }
  std::ostringstream o_;
};

// A round axis maximum for a linear scale starting at 0.
double NiceMax(double v) {
  if (v <= 1) return 1;
  const double mag = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0})
    if (m * mag >= v) return m * mag;
  return 10 * mag;
}

std::string Swatch(const std::string& color, const std::string& label, bool hollow = false) {
  return "<span class=\"sw\"><i style=\"" +
         (hollow ? "border:2px solid " + color + ";background:#fff" : "background:" + color) + "\"></i>" + Esc(label) +
         "</span>";
}

// Per-shape speed-up of the winner over the default config and torch.topk.
std::string SpeedupChart(const std::string& id, const Section& s) {
  const bool torch = s.n_torch > 0;
  const double label_w = 290, plot_w = 500, right = 70, top = 10, bottom = 36;
  const double bar_h = 13, gap = torch ? 12 : 9;
  const double row_h = (torch ? 2 * bar_h : bar_h) + gap;
  double maxv = 1;
  for (const auto& r : s.shapes) maxv = std::max({maxv, r.speedup_default(), r.speedup_torch()});
  const double xmax = NiceMax(maxv * 1.05);
  const double h = top + row_h * static_cast<double>(s.shapes.size()) + bottom;
  Svg svg(id, label_w + plot_w + right, h, "speed-up of each shape's winner");
  auto X = [&](double v) { return label_w + plot_w * std::min(v, xmax) / xmax; };
  // Grid and axis.
  const double step = xmax <= 2 ? 0.25 : xmax <= 5 ? 0.5 : xmax <= 10 ? 1 : xmax <= 20 ? 2 : NiceMax(xmax / 8);
  const double plot_bottom = h - bottom;
  for (double t = 0; t <= xmax + 1e-9; t += step) {
    svg.Line(X(t), top, X(t), plot_bottom, "grid");
    svg.Text(X(t), plot_bottom + 14, Num(t, step < 0.5 ? 2 : step < 1 ? 1 : 0) + "\xC3\x97", "tick", "middle");
  }
  svg.Line(X(1), top - 4, X(1), plot_bottom, "one");
  svg.Text(label_w + plot_w / 2, h - 6, "speed-up of the winner (higher is better; 1\xC3\x97 = as fast)", "axis",
           "middle");
  double y = top + gap / 2;
  for (const auto& r : s.shapes) {
    svg.Text(label_w - 8, y + (torch ? bar_h : bar_h / 2) + 4, r.label, "lbl", "end");
    auto bar = [&](double v, double by, const std::string& color, const std::string& what, double base_us) {
      if (v > 0) {
        const std::string title = r.label + ": " + Times(v) + " faster than " + what + " (" + Us(base_us) +
                                  " \xC2\xB5s vs " + Us(r.winner->median_us) + " \xC2\xB5s)";
        svg.Rect(label_w, by, X(v) - label_w, bar_h, color, title);
        svg.Text(X(v) + 4, by + bar_h - 2, Times(v), "val");
      } else {
        svg.Text(label_w + 4, by + bar_h - 2, !r.winner ? "no winner" : ("no " + what + " time"), "none");
      }
    };
    bar(r.speedup_default(), y, "#4e79a7", "the default config", r.default_us);
    if (torch) bar(r.speedup_torch(), y + bar_h, "#f28e2b", kTorchBaseline, r.torch_us);
    y += row_h;
  }
  return svg.Str();
}

// Shapes of the winners on (log2 n, log2 k), colored by one knob.
std::string KnobScatter(const std::string& id, const Section& s, const std::string& knob_label,
                        const std::function<std::string(const gen::Config&)>& value,
                        const std::function<double(const gen::Config&)>& order, std::string* legend) {
  struct Pt {
    double ln, lk;
    std::string v, title;
  };
  std::vector<Pt> pts;
  std::map<std::string, double> values;
  for (const auto& r : s.shapes) {
    if (!r.winner) continue;
    const auto& c = r.winner->config;
    pts.push_back({std::log2(double(r.problem.n)), std::log2(double(std::max<int64_t>(1, r.problem.k))), value(c),
                   r.label + "\n" + r.winner->variant_id + "\n" + knob_label + ": " + value(c)});
    values[value(c)] = order(c);
  }
  std::vector<std::pair<double, std::string>> sorted;
  for (auto& [v, o] : values) sorted.emplace_back(o, v);
  std::sort(sorted.begin(), sorted.end());
  std::map<std::string, std::string> color;
  for (size_t i = 0; i < sorted.size(); ++i) color[sorted[i].second] = kPalette[i % 10];
  legend->clear();
  for (auto& [o, v] : sorted) *legend += Swatch(color[v], v);

  const double W = 400, H = 290, L = 48, R = 12, T = 12, B = 40;
  Svg svg(id, W, H, "winning " + knob_label + " over n and k");
  double nmin = 1e9, nmax = -1e9, kmin = 1e9, kmax = -1e9;
  for (const auto& p : pts) {
    nmin = std::min(nmin, p.ln), nmax = std::max(nmax, p.ln);
    kmin = std::min(kmin, p.lk), kmax = std::max(kmax, p.lk);
  }
  if (pts.empty()) nmin = 12, nmax = 17, kmin = 0, kmax = 11;
  nmin = std::floor(nmin) - 0.5, nmax = std::ceil(nmax) + 0.5;
  kmin = std::floor(kmin) - 0.5, kmax = std::ceil(kmax) + 0.5;
  auto X = [&](double v) { return L + (W - L - R) * (v - nmin) / (nmax - nmin); };
  auto Y = [&](double v) { return H - B - (H - B - T) * (v - kmin) / (kmax - kmin); };
  const int nstep = nmax - nmin > 12 ? 2 : 1, kstep = kmax - kmin > 12 ? 2 : 1;
  for (int e = static_cast<int>(std::ceil(nmin)); e <= nmax; e += nstep) {
    svg.Line(X(e), T, X(e), H - B, "grid");
    svg.Text(X(e), H - B + 14, Short(std::ldexp(1.0, e)), "tick", "middle");
  }
  for (int e = static_cast<int>(std::ceil(kmin)); e <= kmax; e += kstep) {
    svg.Line(L, Y(e), W - R, Y(e), "grid");
    svg.Text(L - 5, Y(e) + 4, Short(std::ldexp(1.0, e)), "tick", "end");
  }
  svg.Text(L + (W - L - R) / 2, H - 6, "n (row length, log scale)", "axis", "middle");
  svg.Text(12, T + 4, "k", "axis", "start");
  if (pts.empty()) svg.Text(W / 2, H / 2, "no winners yet", "none", "middle");
  // Shapes sharing (n, k) (other batch sizes, dtypes or flags) sit on a
  // small circle around their point instead of hiding each other.
  std::map<std::pair<double, double>, std::vector<const Pt*>> at;
  for (const auto& p : pts) at[{p.ln, p.lk}].push_back(&p);
  for (auto& [xy, list] : at) {
    const double cx = X(xy.first), cy = Y(xy.second);
    const double rad = list.size() > 1 ? 7.0 + static_cast<double>(list.size()) : 0;
    for (size_t i = 0; i < list.size(); ++i) {
      const double a =
          2 * std::numbers::pi * static_cast<double>(i) / static_cast<double>(list.size()) - std::numbers::pi / 2;
      svg.Circle(cx + rad * std::cos(a), cy + rad * std::sin(a), 6, color[list[i]->v], "#ffffff", list[i]->title);
    }
  }
  return svg.Str();
}

// Relative time (1 = the shape's best variant) of each value of one knob.
std::string EffectChart(const std::string& id, const KnobEffect& e) {
  const double W = 300, H = 220, L = 46, R = 10, T = 12, B = 48;
  Svg svg(id, W, H, "time versus " + e.knob);
  double ymax = 2;
  for (const auto& v : e.values) ymax = std::max(ymax, v.typical * 1.15);
  const double lmax = std::log(ymax);
  auto Y = [&](double v) { return H - B - (H - B - T) * std::log(std::max(1.0, v)) / lmax; };
  const double slot = (W - L - R) / static_cast<double>(e.values.size());
  auto X = [&](size_t i) { return L + slot * (static_cast<double>(i) + 0.5); };
  std::vector<double> ticks;
  for (double t : {1.0, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0})
    if (t <= ymax) ticks.push_back(t);
  if (ticks.size() > 6) {  // keep about six, always including 1
    std::vector<double> thin = {1.0};
    // Every other tick from the top; the step stops at 0 (i -= 2 from 1
    // wrapped around and read past the end: ASan, scripts/sanitize.sh).
    for (size_t i = ticks.size() - 1; i > 0 && thin.size() < 6; i = i > 2 ? i - 2 : 0) thin.push_back(ticks[i]);
    ticks = thin;
  }
  for (double t : ticks) {
    svg.Line(L, Y(t), W - R, Y(t), t == 1.0 ? "one" : "grid");
    svg.Text(L - 5, Y(t) + 4, Num(t, t < 2 && t != 1.0 ? 2 : 0) + "\xC3\x97", "tick", "end");
  }
  for (size_t i = 0; i < e.values.size(); ++i) {
    const KnobValue& v = e.values[i];
    const std::string title = e.knob + " = " + v.value + ": best " + Times(v.best) + ", median " + Times(v.typical) +
                              " of the shape's best (" + std::to_string(v.groups) + " shapes, " +
                              std::to_string(v.variants) + " variants)";
    svg.Line(X(i), Y(v.best), X(i), Y(v.typical), "range");
    svg.Circle(X(i), Y(v.typical), 4.5, "#ffffff", "#4e79a7", title);
    svg.Circle(X(i), Y(v.best), 5, "#4e79a7", "#4e79a7", title);
    svg.Text(X(i), H - B + 14, v.value, "tick", "middle");
    svg.Text(X(i), H - B + 26, std::to_string(v.groups) + " sh", "small", "middle");
  }
  svg.Text(L + (W - L - R) / 2, H - 6, e.knob + " (" + e.label + ")", "axis", "middle");
  return svg.Str();
}

// Outcome shares per shape, 100% stacked.
std::string OutcomeChart(const std::string& id, const Section& s) {
  const double label_w = 290, plot_w = 500, right = 70, top = 8, bottom = 34, bar_h = 14, gap = 7;
  const double h = top + (bar_h + gap) * static_cast<double>(s.shapes.size()) + bottom;
  Svg svg(id, label_w + plot_w + right, h, "measurement outcomes per shape");
  double y = top;
  for (const auto& r : s.shapes) {
    svg.Text(label_w - 8, y + bar_h - 3, r.label, "lbl", "end");
    double x = label_w;
    for (const auto& name : OutcomeOrder()) {
      auto it = r.outcomes.find(name);
      if (it == r.outcomes.end() || r.measured == 0) continue;
      const double w = plot_w * it->second / r.measured;
      svg.Rect(x, y, w, bar_h, OutcomeColor(name), r.label + ": " + std::to_string(it->second) + " " + name);
      x += w;
    }
    if (r.measured == 0) svg.Text(label_w + 4, y + bar_h - 3, "not measured", "none");
    int failed = r.measured - (r.outcomes.count("ok") ? r.outcomes.at("ok") : 0);
    svg.Text(label_w + plot_w + 6, y + bar_h - 3, std::to_string(failed) + " / " + std::to_string(r.measured), "val");
    y += bar_h + gap;
  }
  for (int pct = 0; pct <= 100; pct += 25) {
    const double x = label_w + plot_w * pct / 100.0;
    svg.Text(x, h - bottom + 14, std::to_string(pct) + "%", "tick", "middle");
  }
  svg.Text(label_w + plot_w / 2, h - 6, "share of the variants measured (right: failed / measured)", "axis", "middle");
  return svg.Str();
}

// ---------------------------------------------------------------- HTML

const char* kCss = R"(
:root{--fg:#1d2330;--muted:#5b6475;--line:#e3e7ee;--bg:#f6f8fb;--card:#fff;--accent:#4e79a7}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 -apple-system,BlinkMacSystemFont,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--fg);background:var(--bg)}
header{background:#1d2330;color:#fff;padding:22px 32px}
header h1{margin:0;font-size:22px;font-weight:600}
header p{margin:4px 0 0;color:#b9c2d3;font-size:13px}
main{max-width:1180px;margin:0 auto;padding:8px 24px 40px}
section.device{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:18px 24px;margin:22px 0}
h2{margin:0 0 2px;font-size:19px}
h3{margin:26px 0 4px;font-size:15px;border-top:1px solid var(--line);padding-top:16px}
h4{margin:6px 0 2px;font-size:13px;color:var(--muted);font-weight:600}
.fp{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;color:var(--muted)}
.note{color:var(--muted);margin:2px 0 10px;font-size:13px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:14px 0 4px}
.card{flex:1 1 150px;border:1px solid var(--line);border-radius:8px;padding:10px 14px;background:#fbfcfe}
.card b{display:block;font-size:24px;font-weight:600;color:var(--accent)}
.card span{color:var(--muted);font-size:12px}
.grid{display:flex;flex-wrap:wrap;gap:18px}
.panel{border:1px solid var(--line);border-radius:8px;padding:8px 10px;background:#fff}
.legend{font-size:12px;color:var(--muted);margin:4px 0 6px}
.sw{display:inline-flex;align-items:center;margin-right:12px;white-space:nowrap}
.sw i{display:inline-block;width:11px;height:11px;border-radius:3px;margin-right:5px}
svg.chart{display:block;max-width:100%;height:auto;font-family:inherit}
svg .grid{stroke:#eef1f5;stroke-width:1}
svg .one{stroke:#1d2330;stroke-width:1.2;stroke-dasharray:4 3}
svg .range{stroke:#9db4cf;stroke-width:3}
svg .tick{font-size:11px;fill:#5b6475}
svg .small{font-size:10px;fill:#8a93a3}
svg .axis{font-size:12px;fill:#1d2330}
svg .lbl{font-size:12px;fill:#1d2330}
svg .val{font-size:11px;fill:#1d2330}
svg .none{font-size:11px;fill:#8a93a3;font-style:italic}
table{border-collapse:collapse;width:100%;font-size:13px;margin:8px 0}
th,td{padding:5px 8px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{background:#f3f5f9;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
td code,dd code{font-size:12px}
.good{color:#2f7d32;font-weight:600}.bad{color:#b23b3b;font-weight:600}
details{margin:8px 0}summary{cursor:pointer;color:var(--accent)}
dl.kv{display:grid;grid-template-columns:220px 1fr;gap:4px 16px;margin:8px 0}
dl.kv dt{color:var(--muted)}dl.kv dd{margin:0}
.empty{padding:30px;text-align:center;color:var(--muted)}
footer{color:var(--muted);font-size:12px;text-align:center;padding:10px}
)";

std::string Card(const std::string& value, const std::string& label) {
  return "<div class=\"card\"><b>" + Esc(value) + "</b><span>" + Esc(label) + "</span></div>";
}

std::string CountsText(const std::map<std::string, int>& m) {
  std::string s;
  for (const auto& [k, v] : m) s += (s.empty() ? "" : ", ") + k + " (" + std::to_string(v) + ")";
  return s.empty() ? "-" : s;
}

std::string DeviceTitle(const Section& s) {
  std::string t = s.device.name.empty() ? s.device.fingerprint : s.device.name;
  if (s.device.cc_major > 0) t += " \xC2\xB7 " + s.device.ArchName();
  if (s.device.sm_count > 0) t += " \xC2\xB7 " + std::to_string(s.device.sm_count) + " SMs";
  return t;
}

std::string HtmlSection(const Section& s, size_t index) {
  const std::string id = "d" + std::to_string(index);
  std::ostringstream h;
  h << "<section class=\"device\" id=\"" << id << "\">\n";
  h << "<h2>" << Esc(DeviceTitle(s)) << "</h2>\n<div class=\"fp\">" << Esc(s.device.fingerprint) << "</div>\n";
  h << "<div class=\"cards\">"
    << Card(std::to_string(s.winners) + " / " + std::to_string(s.shapes.size()), "shapes with a winner")
    << Card(s.n_default ? Times(s.geo_default) : "-",
            "geo-mean speed-up over the default config (" + std::to_string(s.n_default) + " shapes)")
    << Card(s.n_torch ? Times(s.geo_torch) : "-",
            std::string("geo-mean speed-up over ") + kTorchBaseline + " (" + std::to_string(s.n_torch) + " shapes)")
    << Card(std::to_string(s.measurements), "variants measured")
    << Card(std::to_string(s.failures), "failed or skipped") << "</div>\n";

  // 1. Speed-ups.
  h << "<h3>Speed-up of each shape's winner</h3>\n<p class=\"note\">Median time of the default configuration (and of "
    << kTorchBaseline
    << " where a baseline was recorded) divided by the winner's median time, per shape. The dashed line is 1&times;."
       " Hover a bar for the times.</p>\n";
  h << "<div class=\"legend\">" << Swatch("#4e79a7", "vs the default config")
    << (s.n_torch ? Swatch("#f28e2b", std::string("vs ") + kTorchBaseline) : "") << "</div>\n";
  if (s.shapes.empty())
    h << "<div class=\"empty\">No shapes measured on this device yet.</div>\n";
  else
    h << SpeedupChart(id + "-speedup", s) << "\n";
  h << "<table><tr><th>shape</th><th>winner</th><th class=\"num\">median &micro;s</th><th class=\"num\">default "
       "&micro;s</th><th class=\"num\">vs default</th><th class=\"num\">"
    << kTorchBaseline
    << " &micro;s</th><th class=\"num\">vs torch</th><th class=\"num\">measured</th><th "
       "class=\"num\">failed</th></tr>\n";
  for (const auto& r : s.shapes) {
    const int failed = r.measured - (r.outcomes.count("ok") ? r.outcomes.at("ok") : 0);
    auto cls = [](double x) { return x >= 1.0 ? "num good" : x > 0 ? "num bad" : "num"; };
    h << "<tr><td>" << Esc(r.label) << "</td><td>"
      << (r.winner ? "<code>" + Esc(r.winner->variant_id) + "</code>" : "<em>no winner</em>")
      << "</td><td class=\"num\">" << (r.winner ? Us(r.winner->median_us) : "-") << "</td><td class=\"num\">"
      << Us(r.default_us) << "</td><td class=\"" << cls(r.speedup_default()) << "\">" << Times(r.speedup_default())
      << "</td><td class=\"num\">" << Us(r.torch_us) << "</td><td class=\"" << cls(r.speedup_torch()) << "\">"
      << Times(r.speedup_torch()) << "</td><td class=\"num\">" << r.measured << "</td><td class=\"num\">" << failed
      << "</td></tr>\n";
  }
  h << "</table>\n";

  // 2. Winning knobs over (n, k).
  h << "<h3>Winning knobs over (n, k)</h3>\n<p class=\"note\">Each dot is a tuned shape at its row length n and k "
       "(both log scale), colored by the winner's value of one knob. Shapes that share (n, k) with another batch, "
       "dtype or flags sit on a small ring around the point.</p>\n<div class=\"grid\">\n";
  // A panel per parameter of each family that won somewhere, and one of
  // the families themselves where more than one won.
  for (const Knob& k : Knobs()) {
    std::set<std::string> seen;
    for (const ShapeRow& r : s.shapes)
      if (r.winner)
        if (auto v = k.get(r.winner->config)) seen.insert(v->first);
    if (seen.empty() || (k.name == "family" && seen.size() < 2)) continue;
    auto value = [&k](const gen::Config& c) {
      auto v = k.get(c);
      return v ? v->first : "other family (" + c.family + ")";
    };
    auto order = [&k](const gen::Config& c) {
      auto v = k.get(c);
      return v ? v->second : 1e9;
    };
    std::string legend;
    const std::string chart = KnobScatter(id + "-knob-" + k.name, s, k.name, value, order, &legend);
    h << "<div class=\"panel\"><h4>" << Esc(k.label) << "</h4><div class=\"legend\">" << legend << "</div>"
      << chart << "</div>\n";
  }
  h << "</div>\n";

  // 3. Time vs each knob.
  h << "<h3>How time depends on each knob</h3>\n<p class=\"note\">For every value of a knob: the fastest (filled) and "
       "the median (ring) of the variants with that value that ran correctly, as a multiple of the shape's fastest "
       "variant, then the median over shapes (log scale; 1&times; = the best). \"sh\" counts the shapes. Knobs that "
       "never varied are left out.</p>\n";
  if (s.effects.empty()) {
    h << "<div class=\"empty\">Not enough successful measurements to compare knob values.</div>\n";
  } else {
    h << "<div class=\"legend\">" << Swatch("#4e79a7", "best variant with this value")
      << Swatch("#4e79a7", "median variant with this value", true) << "</div>\n<div class=\"grid\">\n";
    for (const auto& e : s.effects)
      h << "<div class=\"panel\">" << EffectChart(id + "-effect-" + e.knob, e) << "</div>\n";
    h << "</div>\n";
  }

  // 4. Failures.
  h << "<h3>Outcomes and failures by kind</h3>\n<p class=\"note\">Every variant measured per shape by how it ended. "
       "Failures are recorded so that a resumed run skips them; none of them can become a winner.</p>\n";
  h << "<div class=\"legend\">";
  for (const auto& name : OutcomeOrder()) {
    const int n = s.outcomes.count(name) ? s.outcomes.at(name) : 0;
    h << Swatch(OutcomeColor(name), name + " " + std::to_string(n));
  }
  h << "</div>\n";
  if (!s.shapes.empty()) h << OutcomeChart(id + "-outcomes", s) << "\n";
  std::vector<const cache::Measurement*> fails;
  for (const auto& r : s.shapes)
    for (const auto* m : r.failures) fails.push_back(m);
  if (!fails.empty()) {
    h << "<details><summary>" << fails.size() << " failures, by shape (first 200)</summary><table><tr><th>shape</th>"
      << "<th>variant</th><th>kind</th><th>message</th></tr>\n";
    for (size_t i = 0; i < fails.size() && i < 200; ++i) {
      std::string msg = fails[i]->message;
      if (msg.size() > 300) msg = msg.substr(0, 300) + "...";
      h << "<tr><td>" << Esc(fails[i]->problem.ToString()) << "</td><td><code>" << Esc(fails[i]->variant_id)
        << "</code></td><td>" << cache::OutcomeName(fails[i]->outcome) << "</td><td>" << Esc(msg) << "</td></tr>\n";
    }
    h << "</table></details>\n";
  }

  // 5. Device and settings.
  const Settings& st = s.settings;
  h << "<h3>Device and measurement settings</h3>\n<dl class=\"kv\">";
  auto kv = [&](const std::string& k, const std::string& v) { h << "<dt>" << Esc(k) << "</dt><dd>" << v << "</dd>"; };
  kv("fingerprint", "<code>" + Esc(s.device.fingerprint) + "</code>");
  kv("name", Esc(s.device.name.empty() ? "-" : s.device.name));
  if (!s.recorded) kv("note", "device record missing from the cache: details unknown");
  kv("compute capability",
     s.device.cc_major ? Esc(std::to_string(s.device.cc_major) + "." + std::to_string(s.device.cc_minor)) : "-");
  kv("SMs", s.device.sm_count ? std::to_string(s.device.sm_count) : "-");
  kv("L2 cache", Bytes(s.device.l2_bytes));
  const json info = json::parse(s.device.info_json.empty() ? "{}" : s.device.info_json, nullptr, false);
  if (info.is_object() && info.contains("total_mem") && info["total_mem"].is_number_integer())
    kv("memory", Bytes(info["total_mem"].get<int64_t>()));
  kv("driver", Esc(Driver(s.device.driver_version)));
  kv("compiler", Esc(s.device.compiler_version.empty() ? "-" : s.device.compiler_version));
  kv("L2 mode of the measurements", Esc(CountsText(st.l2_modes)) +
                                        " <span class=\"note\">(hot: one input buffer reused; rotate: inputs rotate "
                                        "through more than the L2 size)</span>");
  kv("input distribution", Esc(CountsText(st.dists)));
  kv("kernel launches timed per variant",
     st.launches.empty() ? "-"
                         : "median " + Num(Median(st.launches), 0) + " (min " +
                               Num(*std::min_element(st.launches.begin(), st.launches.end()), 0) + ", max " +
                               Num(*std::max_element(st.launches.begin(), st.launches.end()), 0) + ")");
  kv("samples kept per variant", st.samples.empty() ? "-" : "median " + Num(Median(st.samples), 0));
  kv("tune runs", std::to_string(st.tune_runs.size()));
  kv("measured", st.first.empty() ? "-" : Esc(st.first + " \xE2\x80\x93 " + st.last));
  h << "</dl>\n</section>\n";
  return h.str();
}

std::string Html(const ReportInput& in, const std::vector<Section>& sections) {
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>"
    << Esc(in.title) << "</title>\n<style>" << kCss << "</style>\n</head>\n<body>\n<header><h1>" << Esc(in.title)
    << "</h1><p>";
  std::string sub;
  if (!in.source.empty()) sub += "cache " + in.source;
  if (!in.generated.empty()) sub += (sub.empty() ? "" : " \xC2\xB7 ") + std::string("generated ") + in.generated;
  sub += (sub.empty() ? "" : " \xC2\xB7 ") + std::to_string(sections.size()) + " device" +
         (sections.size() == 1 ? "" : "s");
  h << Esc(sub) << "</p></header>\n<main>\n";
  if (sections.empty())
    h << "<section class=\"device\"><div class=\"empty\">The cache holds no devices, measurements or winners yet. "
         "Run <code>topk-tune tune</code> first.</div></section>\n";
  for (size_t i = 0; i < sections.size(); ++i) h << HtmlSection(sections[i], i);
  h << "</main>\n<footer>topk-tune report \xC2\xB7 self-contained: no scripts, no network. Hover points and bars for "
       "details.</footer>\n</body>\n</html>\n";
  return h.str();
}

// ---------------------------------------------------------------- Markdown

std::string Markdown(const ReportInput& in, const std::vector<Section>& sections) {
  std::ostringstream m;
  m << "# " << in.title << "\n\n";
  if (!in.source.empty() || !in.generated.empty()) {
    m << "Cache `" << in.source << "`";
    if (!in.generated.empty()) m << ", generated " << in.generated;
    m << ".\n\n";
  }
  if (sections.empty()) m << "The cache holds no measurements or winners yet.\n";
  for (const auto& s : sections) {
    m << "## " << DeviceTitle(s) << "\n\n";
    m << "Fingerprint `" << s.device.fingerprint << "`";
    if (s.device.l2_bytes > 0) m << " \xC2\xB7 L2 " << Bytes(s.device.l2_bytes);
    if (s.device.driver_version > 0) m << " \xC2\xB7 driver " << Driver(s.device.driver_version);
    if (!s.device.compiler_version.empty()) m << " \xC2\xB7 " << s.device.compiler_version;
    m << "\n\n";
    m << "**" << s.winners << " of " << s.shapes.size() << "** shapes have a winner";
    if (s.n_default)
      m << " \xC2\xB7 geo-mean speed-up **" << Times(s.geo_default) << "** over the default config (" << s.n_default
        << " shapes)";
    if (s.n_torch) m << ", **" << Times(s.geo_torch) << "** over " << kTorchBaseline << " (" << s.n_torch << " shapes)";
    m << " \xC2\xB7 " << s.measurements << " variants measured, " << s.failures << " failed or skipped";
    if (s.failures) {
      m << " (";
      bool first = true;
      for (const auto& name : OutcomeOrder()) {
        if (name == "ok" || !s.outcomes.count(name)) continue;
        m << (first ? "" : ", ") << name << " " << s.outcomes.at(name);
        first = false;
      }
      m << ")";
    }
    m << ".\n\n";
    if (!s.shapes.empty()) {
      m << "| shape | winner | \xC2\xB5s | default \xC2\xB5s | vs default | " << kTorchBaseline
        << " \xC2\xB5s | vs torch | failed |\n|---|---|--:|--:|--:|--:|--:|--:|\n";
      for (const auto& r : s.shapes) {
        const int failed = r.measured - (r.outcomes.count("ok") ? r.outcomes.at("ok") : 0);
        m << "| " << r.label << " | " << (r.winner ? "`" + r.winner->variant_id + "`" : "*no winner*") << " | "
          << (r.winner ? Us(r.winner->median_us) : "-") << " | " << Us(r.default_us) << " | "
          << Times(r.speedup_default()) << " | " << Us(r.torch_us) << " | " << Times(r.speedup_torch()) << " | "
          << failed << "/" << r.measured << " |\n";
      }
      m << "\n";
    }
    m << "Measured with L2 " << CountsText(s.settings.l2_modes) << "; input " << CountsText(s.settings.dists);
    if (!s.settings.launches.empty())
      m << "; median " << Num(Median(s.settings.launches), 0) << " launches per variant";
    m << ".\n\n";
  }
  return m.str();
}

// ---------------------------------------------------------------- JSON

json ProblemJson(const Problem& p) {
  return {{"dtype", DTypeName(p.dtype)}, {"batch", p.batch},   {"n", p.n},           {"k", p.k},
          {"largest", p.largest},        {"ranges", p.ranges}, {"values", p.values}, {"sorted", p.sorted}};
}

json Nullable(double v) { return v > 0 ? json(v) : json(nullptr); }

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

}  // namespace

ReportFiles RenderReport(const ReportInput& in) {
  const std::vector<Section> sections = Analyse(in);
  ReportFiles f;
  f.html = Html(in, sections);
  f.markdown = Markdown(in, sections);
  f.json = Json(in, sections);
  return f;
}

Status WriteReport(const ReportFiles& files, const std::string& dir, std::vector<std::string>* written) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status(Code::kUnavailable, "WriteReport", "cannot create '" + dir + "': " + ec.message());
  const std::string* texts[] = {&files.html, &files.markdown, &files.json};
  static_assert(std::size(texts) == std::size(kReportFileNames));
  for (size_t i = 0; i < std::size(texts); ++i) {
    const fs::path p = fs::path(dir) / kReportFileNames[i];
    TOPK_RETURN_IF_ERROR(cli::WriteFileAtomically(p.string(), *texts[i]));
    if (written) written->push_back(p.string());
  }
  return Status::Ok();
}

}  // namespace topk::report
