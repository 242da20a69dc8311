// The report's charts, as inline SVG: no scripts, so every chart is drawn
// here, with titles for hover text.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "tools/report_internal.hpp"

namespace topk::report::detail {

namespace {

const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                          "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

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

}  // namespace

std::string Swatch(const std::string& color, const std::string& label, bool hollow) {
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

}  // namespace topk::report::detail
