#include "tools/report.hpp"

#include "tools/atomic_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "tools/report_internal.hpp"

namespace topk::report {

namespace fs = std::filesystem;
using namespace detail;

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

namespace detail {

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

std::string Num(double v, int prec) {
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

std::string Times(double x, const char* sign) {
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

}  // namespace detail

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
