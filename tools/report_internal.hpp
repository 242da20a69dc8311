// Declarations shared by the files that render a report. Private to
// tools/: callers see report.hpp.
//
//   report.cpp           loading, text formatting helpers, RenderReport, WriteReport
//   report_analysis.cpp  ReportInput to per-device Sections
//   report_svg.cpp       the inline SVG charts
//   report_html.cpp      the HTML page
//   report_markdown.cpp  the Markdown summary
//   report_json.cpp      the JSON numbers
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "generator/config.hpp"
#include "tools/report.hpp"

namespace topk::report::detail {

// ------------------------------------------------------------ small helpers

// Escaped for HTML text and attribute values.
std::string Esc(const std::string& s);
std::string Num(double v, int prec = 1);
// Microseconds with three significant digits.
std::string Us(double us);
std::string Times(double x, const char* sign = "\xC3\x97");  // U+00D7
std::string Driver(int v);
std::string Bytes(int64_t b);
// "4K", "32K", "1M" for powers of two and round numbers.
std::string Short(double v);
double Median(std::vector<double> v);
double GeoMean(const std::vector<double>& v);
const std::vector<std::string>& OutcomeOrder();
std::string OutcomeColor(const std::string& name);

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
std::vector<Knob> Knobs();

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

std::vector<Section> Analyse(const ReportInput& in);

// ---------------------------------------------------------------- SVG

std::string Swatch(const std::string& color, const std::string& label, bool hollow = false);
// Per-shape speed-up of the winner over the default config and torch.topk.
std::string SpeedupChart(const std::string& id, const Section& s);
// Shapes of the winners on (log2 n, log2 k), colored by one knob.
std::string KnobScatter(const std::string& id, const Section& s, const std::string& knob_label,
                        const std::function<std::string(const gen::Config&)>& value,
                        const std::function<double(const gen::Config&)>& order, std::string* legend);
// Relative time (1 = the shape's best variant) of each value of one knob.
std::string EffectChart(const std::string& id, const KnobEffect& e);
// Outcome shares per shape, 100% stacked.
std::string OutcomeChart(const std::string& id, const Section& s);

// ---------------------------------------------------------------- HTML

std::string CountsText(const std::map<std::string, int>& m);
std::string DeviceTitle(const Section& s);
std::string Html(const ReportInput& in, const std::vector<Section>& sections);

// ---------------------------------------------------------------- Markdown

std::string Markdown(const ReportInput& in, const std::vector<Section>& sections);

// ---------------------------------------------------------------- JSON

std::string Json(const ReportInput& in, const std::vector<Section>& sections);

}  // namespace topk::report::detail
