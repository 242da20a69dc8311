// The HTML page: one self-contained file, inline CSS and SVG.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "generator/family.hpp"
#include "tools/report_internal.hpp"

namespace topk::report::detail {

using nlohmann::json;

namespace {

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

}  // namespace

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

namespace {

// How to read the winner ids of this section: per family that has a winner,
// the id's pattern and each field's meaning, from the family's own
// parameter list (a new family's fields appear without touching this).
std::string IdLegend(const Section& s) {
  std::vector<std::string> names;
  for (const auto& r : s.shapes)
    if (r.winner && std::find(names.begin(), names.end(), r.winner->config.family) == names.end())
      names.push_back(r.winner->config.family);
  std::string h;
  for (const auto& name : names) {
    const gen::Family* f = gen::FindFamily(name);
    if (!f) continue;
    std::string pattern = name + "_&lt;dtype&gt;", fields;
    for (const auto& p : f->params()) {
      const std::string field = "_" + Esc(p.tag) + "&lt;" + Esc(p.name) + "&gt;";
      pattern += p.implicit ? "[" + field + "]" : field;  // left out at its implicit value
      fields += (fields.empty() ? "" : "; ") + std::string("<code>") + Esc(p.tag) + "</code> " + Esc(p.meaning);
    }
    h += "<p class=\"note idlegend\">Ids <code>" + pattern + "</code>: " + fields + ".</p>\n";
  }
  return h;
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
  h << IdLegend(s);

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

}  // namespace

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

}  // namespace topk::report::detail
