// Tuning reports: one self-contained HTML page (inline CSS and SVG charts,
// no scripts, no network), a Markdown summary for pasting into an issue, and
// the same numbers as JSON. Built from plain data (ReportInput) so that tests
// feed fixtures; LoadReportInput fills it from a cache. See docs/REPORTS.md.
#pragma once

#include <string>
#include <vector>

#include "cache/cache.hpp"
#include "topk/status.hpp"

namespace topk::report {

// The name of the external baseline the report compares against.
inline constexpr const char* kTorchBaseline = "torch.topk";

struct ReportInput {
  std::string title = "topk-tune report";
  std::string source;     // where the data came from (the cache path)
  std::string generated;  // a timestamp shown in the report ("" leaves it out)
  std::vector<cache::DeviceRecord> devices;
  std::vector<cache::Winner> winners;
  std::vector<cache::Measurement> measurements;
  std::vector<cache::Baseline> baselines;
};

// Everything for one device fingerprint ("" for every device in the cache).
StatusOr<ReportInput> LoadReportInput(const cache::Cache& cache, const std::string& device_fingerprint);

struct ReportFiles {
  std::string html;
  std::string markdown;
  std::string json;
};

// Pure: the same input gives the same bytes.
ReportFiles RenderReport(const ReportInput& in);

// The files WriteReport writes into its directory, in this order.
inline constexpr const char* kReportFileNames[] = {"report.html", "report.md", "report.json"};

// Writes report.html, report.md and report.json into `dir` (created if
// missing); each through cli::WriteFileAtomically (a temporary beside it
// and a rename). `written` receives the paths.
Status WriteReport(const ReportFiles& files, const std::string& dir, std::vector<std::string>* written);

}  // namespace topk::report
