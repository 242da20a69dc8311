// The Markdown summary, for pasting into an issue.
#include <sstream>

#include "tools/report_internal.hpp"

namespace topk::report::detail {

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

}  // namespace topk::report::detail
