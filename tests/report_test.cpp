// Tests of the report writer (tools/report.hpp) on fixture data: the HTML is
// self-contained and holds its charts, the Markdown and JSON hold every
// shape and the right ratios, text is escaped, and a cache loads into the
// same report. An optional test renders the HTML in headless Chromium where
// it is installed (Debian's `chromium`) and checks the screenshot.
#include "tools/report.hpp"
#include "tools/report_internal.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "generator/config.hpp"
#include "generator/family.hpp"
#include "generator/radix.hpp"
#include "support/test_support.hpp"

namespace topk::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using topk::testing::TempPath;

bool Contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

size_t Count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

Problem Shape(DType dt, int64_t b, int64_t n, int64_t k, bool ranges, bool values = false) {
  Problem p;
  p.dtype = dt;
  p.batch = b;
  p.n = n;
  p.k = k;
  p.ranges = ranges;
  p.values = values;
  return p;
}

cache::DeviceRecord H100() {
  cache::DeviceRecord d;
  d.name = "NVIDIA H100 80GB HBM3";
  d.cc_major = 9;
  d.cc_minor = 0;
  d.sm_count = 132;
  d.l2_bytes = 50 << 20;
  d.driver_version = 13000;
  d.compiler_version = "nvrtc 13.0";
  d.fingerprint = "NVIDIA H100 80GB HBM3|sm_90|132sm|L2=52428800";
  d.info_json = R"({"total_mem": 84987740160, "uuid": "0123"})";
  return d;
}

// Deterministic noise in [-1, 1) from a string.
double Noise(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return static_cast<double>(h % 20001) / 10000.0 - 1.0;
}

// A made-up but plausible cost model: bandwidth-bound with enough CTAs,
// penalties for knobs away from their sweet spot.
double ModelUs(const gen::Config& cfg, const Problem& p) {
  const gen::RadixParams c = gen::RadixParams::Of(cfg);  // zeros for the warp family's missing knobs
  const double bytes = static_cast<double>(p.batch * p.n * DTypeSize(p.dtype));
  const bool warp = cfg.family == "warp";
  const double ctas = warp ? static_cast<double>(p.batch) / (c.block_threads / 32.0)
                           : static_cast<double>(p.batch) * c.cluster;
  const double busy = std::clamp(ctas / 132.0, 0.02, 1.0);
  double t = 4.0 + bytes / (2.5e6 * busy);
  t *= 1 + 0.12 * std::abs(std::log2(c.block_threads / 512.0));
  t *= c.radix_bits == 11 ? 1.0 : c.radix_bits == 8 ? 1.1 : 1.0;
  t *= c.half_first ? 0.94 : 1.0;
  t *= 1 + 0.06 * std::abs(c.rounds - 2);
  t *= c.row_cache ? 0.9 : 1.0;
  t *= c.smem_buffer == 0 && !warp ? 1.25 : 1.0;
  return t * (1 + 0.04 * Noise(cfg.Id() + cache::ProblemKey(p)));
}

// Every variant of every shape "measured" with the model, a few failures of
// each kind, winners, and a torch.topk baseline for most shapes.
ReportInput Synthetic(const std::vector<Problem>& shapes, bool with_torch = true) {
  ReportInput in;
  in.title = "Synthetic report";
  in.source = "/tmp/synthetic.db";
  in.generated = "2025-01-31 12:00 UTC";
  const cache::DeviceRecord dev = H100();
  in.devices.push_back(dev);
  const gen::Arch arch = gen::Arch::Sm90();
  int64_t id = 0;
  for (size_t si = 0; si < shapes.size(); ++si) {
    const Problem& p = shapes[si];
    const gen::Config def = gen::DefaultConfig(p, arch);
    cache::Winner w;
    w.device_fingerprint = dev.fingerprint;
    w.problem = p;
    w.median_us = 1e30;
    size_t vi = 0;
    for (const gen::Config& c : gen::Enumerate(p, arch)) {
      cache::Measurement m;
      m.id = ++id;
      m.device_fingerprint = dev.fingerprint;
      m.variant_id = c.Id();
      m.config = c;
      m.problem = p;
      m.input_dist = p.values ? "logits" : "normal";
      m.l2_mode = p.ranges ? "hot" : "rotate";
      m.tune_run = "run-1";
      m.created = "2025-01-31T11:00:00.000Z";
      const double noise = Noise(m.variant_id + "fail" + std::to_string(si));
      if (!(c == def) && noise > 0.93) {
        m.outcome = cache::Outcome::kResourceLimit;
        m.message = "too many resources requested for launch";
      } else if (!(c == def) && noise < -0.985) {
        m.outcome = si % 2 ? cache::Outcome::kWrongResult : cache::Outcome::kTimeout;
        m.message = "row 3: multiset differs at the k-th value";
      } else if (!(c == def) && vi == 5 && si % 3 == 0) {
        m.outcome = cache::Outcome::kCrash;
        m.message = "worker killed by signal 6 (Aborted)";
      } else {
        m.median_us = ModelUs(c, p);
        m.p10_us = m.median_us * 0.98;
        m.p90_us = m.median_us * 1.03;
        m.min_us = m.median_us * 0.97;
        m.repetitions = 480;
        m.samples_us.assign(24, m.median_us);
        m.verified = true;
        if (m.median_us < w.median_us) {
          w.median_us = m.median_us;
          w.variant_id = m.variant_id;
          w.config = c;
          w.measurement_id = m.id;
        }
        if (c == def) w.default_us = m.median_us;
      }
      ++vi;
      in.measurements.push_back(std::move(m));
    }
    in.winners.push_back(w);
    if (with_torch && si % 4 != 3) {
      cache::Baseline b;
      b.device_fingerprint = dev.fingerprint;
      b.problem = p;
      b.name = kTorchBaseline;
      b.median_us = w.default_us * (1.4 + 0.3 * static_cast<double>(si % 3));
      in.baselines.push_back(b);
    }
  }
  return in;
}

std::vector<Problem> ManyShapes() {
  return {Shape(DType::kF32, 64, 4096, 512, true),         Shape(DType::kF32, 1, 8192, 2048, true),
          Shape(DType::kF32, 64, 16384, 2048, true),       Shape(DType::kF32, 1, 32768, 2048, true),
          Shape(DType::kF32, 64, 32768, 2048, true),       Shape(DType::kF32, 64, 32768, 512, true),
          Shape(DType::kF32, 1, 131072, 2048, true),       Shape(DType::kF32, 32, 131072, 2048, true),
          Shape(DType::kF32, 128, 131072, 1024, true),     Shape(DType::kF32, 1, 524288, 2048, true),
          Shape(DType::kF32, 64, 128256, 50, false, true), Shape(DType::kBF16, 64, 151936, 50, false, true),
          Shape(DType::kF32, 1024, 256, 8, false),         Shape(DType::kF32, 4096, 128, 4, false)};
}

// ---------------------------------------------------------------- tests

TEST(ReportTest, HtmlIsSelfContainedAndHoldsEveryChart) {
  const ReportFiles f = RenderReport(Synthetic(ManyShapes()));
  const std::string& h = f.html;
  ASSERT_TRUE(Contains(h, "<!DOCTYPE html>"));
  // Nothing fetched from anywhere: no URLs, scripts, external sheets or images.
  for (const char* bad : {"http://", "https://", "<script", "<link", "src=", "@import", "url(", "//cdn"})
    EXPECT_FALSE(Contains(h, bad)) << "found " << bad;
  EXPECT_TRUE(Contains(h, "<style>"));
  EXPECT_TRUE(Contains(h, "<meta charset=\"utf-8\">"));
  // The charts.
  EXPECT_TRUE(Contains(h, "id=\"d0-speedup\""));
  // Knob charts come from the families' parameters ("family" compares the
  // families themselves).
  for (const char* k : {"radix-cluster", "radix-block_threads", "radix-radix_bits", "radix-smem_buffer"})
    EXPECT_TRUE(Contains(h, std::string("id=\"d0-knob-") + k + "\"")) << k;
  for (const char* k : {"family", "radix-block_threads", "radix-radix_bits", "radix-smem_buffer", "radix-cluster",
                        "radix-rounds", "radix-row_cache", "warp-block_threads"})
    EXPECT_TRUE(Contains(h, std::string("id=\"d0-effect-") + k + "\"")) << k;
  EXPECT_TRUE(Contains(h, "id=\"d0-outcomes\""));
  EXPECT_GE(Count(h, "<svg"), 12u);
  EXPECT_EQ(Count(h, "<svg"), Count(h, "</svg>"));
  // Device fingerprint and measurement settings.
  EXPECT_TRUE(Contains(h, "NVIDIA H100 80GB HBM3|sm_90|132sm|L2=52428800"));
  EXPECT_TRUE(Contains(h, "L2 mode of the measurements"));
  EXPECT_TRUE(Contains(h, "hot ("));
  EXPECT_TRUE(Contains(h, "kernel launches timed per variant"));
  EXPECT_TRUE(Contains(h, "79.2 GiB"));  // total_mem from info_json
  for (const auto& p : ManyShapes()) EXPECT_TRUE(Contains(h, p.ToString())) << p.ToString();
  for (const char* kind : {"resource_limit", "crash", "wrong_result", "timeout"})
    EXPECT_TRUE(Contains(h, kind)) << kind;
}

TEST(ReportTest, MarkdownAndJsonHoldEveryShapeAndTheRatios) {
  const ReportInput in = Synthetic(ManyShapes());
  const ReportFiles f = RenderReport(in);
  for (const auto& p : ManyShapes()) EXPECT_TRUE(Contains(f.markdown, "| " + p.ToString() + " |")) << p.ToString();
  EXPECT_TRUE(Contains(f.markdown, "| shape | winner |"));
  EXPECT_TRUE(Contains(f.markdown, "over torch.topk"));
  EXPECT_FALSE(Contains(f.markdown, "<"));  // pasteable: no HTML

  const json j = json::parse(f.json);
  ASSERT_EQ(j["devices"].size(), 1u);
  const json& d = j["devices"][0];
  EXPECT_EQ(d["fingerprint"], H100().fingerprint);
  ASSERT_EQ(d["shapes"].size(), ManyShapes().size());
  EXPECT_EQ(d["summary"]["winners"], ManyShapes().size());
  for (const auto& w : in.winners) {
    const std::string key = cache::ProblemKey(w.problem);
    bool found = false;
    for (const auto& s : d["shapes"]) {
      if (s["key"] != key) continue;
      found = true;
      EXPECT_EQ(s["winner"], w.variant_id);
      EXPECT_NEAR(s["speedup_default"].get<double>(), w.default_us / w.median_us, 1e-9);
      EXPECT_GE(s["speedup_default"].get<double>(), 1.0);
    }
    EXPECT_TRUE(found) << key;
  }
  EXPECT_GT(d["summary"]["geomean_speedup_torch"].get<double>(), 1.0);
  EXPECT_GT(d["outcomes"]["resource_limit"].get<int>(), 0);
  EXPECT_FALSE(d["knob_effects"].empty());
  for (const auto& e : d["knob_effects"])
    for (const auto& v : e["values"]) EXPECT_GE(v["best_relative"].get<double>(), 1.0) << e.dump();
}

TEST(ReportTest, TorchBaselineComesFromBaselinesOrTheWinnerRecord) {
  ReportInput in = Synthetic({Shape(DType::kF32, 64, 32768, 2048, true), Shape(DType::kF32, 1, 8192, 512, true)},
                             /*with_torch=*/false);
  // One shape from the baseline table, one from the winner's own fields.
  cache::Baseline b;
  b.device_fingerprint = H100().fingerprint;
  b.problem = in.winners[0].problem;
  b.name = kTorchBaseline;
  b.median_us = in.winners[0].median_us * 3;
  in.baselines.push_back(b);
  cache::Baseline other = b;
  other.name = "cub_segmented_sort";
  other.median_us = 999;
  in.baselines.push_back(other);
  in.winners[1].baseline_name = kTorchBaseline;
  in.winners[1].baseline_us = in.winners[1].median_us * 2;
  const json j = json::parse(RenderReport(in).json);
  const json& shapes = j["devices"][0]["shapes"];
  for (const auto& s : shapes) {
    if (s["key"] == cache::ProblemKey(in.winners[0].problem)) {
      EXPECT_NEAR(s["speedup_torch"].get<double>(), 3.0, 1e-9);
      EXPECT_EQ(s["baselines"]["cub_segmented_sort"], 999.0);
    } else {
      EXPECT_NEAR(s["speedup_torch"].get<double>(), 2.0, 1e-9);
    }
  }
  EXPECT_EQ(j["devices"][0]["summary"]["shapes_with_torch"], 2);
}

TEST(ReportTest, ShapesWithoutAWinnerOrDefaultStillAppear) {
  ReportInput in = Synthetic({Shape(DType::kF32, 8, 8192, 256, true)}, false);
  const Problem lost = Shape(DType::kF32, 2, 4096, 64, false);
  cache::Measurement m = in.measurements.front();
  m.problem = lost;
  m.outcome = cache::Outcome::kCompileError;
  m.median_us = 0;
  m.message = "error: <bad> & \"quoted\"";
  in.measurements.push_back(m);
  in.winners[0].default_us = 0;  // found again from the default's measurement
  const ReportFiles f = RenderReport(in);
  EXPECT_TRUE(Contains(f.html, lost.ToString()));
  EXPECT_TRUE(Contains(f.html, "no winner"));
  EXPECT_TRUE(Contains(f.html, "error: &lt;bad&gt; &amp; &quot;quoted&quot;"));
  EXPECT_FALSE(Contains(f.html, "<bad>"));
  EXPECT_TRUE(Contains(f.markdown, "*no winner*"));
  const json j = json::parse(f.json);
  for (const auto& s : j["devices"][0]["shapes"]) {
    if (s["key"] == cache::ProblemKey(lost)) {
      EXPECT_TRUE(s["winner"].is_null());
      EXPECT_EQ(s["outcomes"]["compile_error"], 1);
    } else {
      EXPECT_GT(s["default_us"].get<double>(), 0) << "default time not recovered from the measurements";
    }
  }
}

TEST(ReportTest, EscapesDeviceNamesAndTitles) {
  ReportInput in = Synthetic({Shape(DType::kF32, 8, 8192, 256, true)});
  in.title = "<script>alert(1)</script>";
  in.devices[0].name = "GPU <b>&</b>";
  const ReportFiles f = RenderReport(in);
  EXPECT_FALSE(Contains(f.html, "<script>"));
  EXPECT_TRUE(Contains(f.html, "&lt;script&gt;"));
  EXPECT_TRUE(Contains(f.html, "GPU &lt;b&gt;&amp;&lt;/b&gt;"));
}

TEST(ReportTest, WinnerIdsHaveALegendOfTheirFields) {
  const ReportFiles f = RenderReport(Synthetic(ManyShapes()));
  // Every radix parameter's tag and meaning, read from the family.
  const gen::Family* radix = gen::FindFamily("radix");
  ASSERT_NE(radix, nullptr);
  EXPECT_TRUE(Contains(f.html, "idlegend"));
  for (const auto& p : radix->params()) {
    EXPECT_TRUE(Contains(f.html, "<code>" + p.tag + "</code> " + detail::Esc(p.meaning))) << p.name;
    EXPECT_TRUE(Contains(f.html, "_" + p.tag + "&lt;" + p.name + "&gt;")) << p.name;
  }
  // No winner of another family: no legend for it.
  EXPECT_FALSE(Contains(f.html, "Ids <code>warp_"));
}

TEST(ReportTest, EmptyInputRendersAHelpfulPage) {
  ReportInput in;
  const ReportFiles f = RenderReport(in);
  EXPECT_TRUE(Contains(f.html, "topk-tune tune"));
  EXPECT_TRUE(Contains(f.markdown, "no measurements"));
  EXPECT_TRUE(json::parse(f.json)["devices"].empty());
}

TEST(ReportTest, MeasurementsOfAnUnrecordedDeviceGetTheirOwnSection) {
  ReportInput in = Synthetic({Shape(DType::kF32, 8, 8192, 256, true)});
  for (auto& m : in.measurements) m.device_fingerprint = "Other GPU|sm_80|108sm|L2=41943040";
  for (auto& w : in.winners) w.device_fingerprint = "Other GPU|sm_80|108sm|L2=41943040";
  const ReportFiles f = RenderReport(in);
  const json j = json::parse(f.json);
  ASSERT_EQ(j["devices"].size(), 2u);
  EXPECT_EQ(j["devices"][1]["name"], "Other GPU");
  EXPECT_FALSE(j["devices"][1]["recorded"].get<bool>());
  EXPECT_TRUE(Contains(f.html, "id=\"d1-speedup\""));
}

TEST(ReportTest, RenderingIsDeterministic) {
  const ReportInput in = Synthetic(ManyShapes());
  const ReportFiles a = RenderReport(in), b = RenderReport(in);
  EXPECT_EQ(a.html, b.html);
  EXPECT_EQ(a.markdown, b.markdown);
  EXPECT_EQ(a.json, b.json);
}

TEST(ReportTest, LoadsFromACacheAndWritesThreeFiles) {
  const std::string db = TempPath("report.db");
  const ReportInput src =
      Synthetic({Shape(DType::kF32, 64, 32768, 2048, true), Shape(DType::kBF16, 16, 32000, 50, false, true)});
  {
    auto c = cache::Cache::Open(db);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ASSERT_TRUE((*c)->PutDevice(src.devices[0]).ok());
    std::map<int64_t, int64_t> ids;
    for (const auto& m : src.measurements) {
      auto id = (*c)->PutMeasurement(m);
      ASSERT_TRUE(id.ok()) << id.status().ToString();
      ids[m.id] = *id;
    }
    for (auto w : src.winners) {
      w.measurement_id = ids[w.measurement_id];
      ASSERT_TRUE((*c)->PutWinner(w).ok());
    }
    for (const auto& b : src.baselines) ASSERT_TRUE((*c)->PutBaseline(b).ok());
  }
  auto c = cache::Cache::OpenReadOnly(db);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto in = LoadReportInput(**c, "");
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ(in->source, db);
  EXPECT_EQ(in->winners.size(), 2u);
  EXPECT_EQ(in->measurements.size(), src.measurements.size());
  EXPECT_EQ(in->baselines.size(), src.baselines.size());
  auto none = LoadReportInput(**c, "no such device");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->winners.empty());
  EXPECT_TRUE(none->devices.empty());

  const ReportFiles f = RenderReport(*in);
  const json from_cache = json::parse(f.json)["devices"][0]["shapes"];
  const json from_memory = json::parse(RenderReport(src).json)["devices"][0]["shapes"];
  EXPECT_EQ(from_cache, from_memory);

  const std::string dir = TempPath("report_out") + "/deeper";
  std::vector<std::string> written;
  ASSERT_TRUE(WriteReport(f, dir, &written).ok());
  ASSERT_EQ(written.size(), 3u);
  for (const auto& p : written) EXPECT_GT(fs::file_size(p), 100u) << p;
  EXPECT_FALSE(fs::exists(dir + "/report.html.tmp"));
}

// ---------------------------------------------------------------- Chromium

// Renders the report as a browser would, without network access, and checks
// that a real page came out (an empty or broken page is a small, flat PNG).
// Set TOPK_REPORT_SCREENSHOT=/path.png to keep the image.
TEST(ReportBrowserTest, RendersInHeadlessChromium) {
  const std::string chromium =
      topk::testing::FirstExisting({"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"});
  if (chromium.empty()) GTEST_SKIP() << "chromium not installed (apt-get install chromium)";
  const std::string dir = TempPath("browser");
  std::vector<std::string> written;
  ASSERT_TRUE(WriteReport(RenderReport(Synthetic(ManyShapes())), dir, &written).ok());
  const char* keep = std::getenv("TOPK_REPORT_SCREENSHOT");
  const std::string png = keep && *keep ? keep : dir + "/report.png";
  const std::string profile = dir + "/profile";
  const std::string cmd = chromium +
                          " --headless --no-sandbox --disable-gpu --disable-background-networking"
                          " --disable-component-update --disable-sync --no-first-run --hide-scrollbars"
                          " --user-data-dir=" +
                          profile + " --screenshot=" + png + " --window-size=1400,2600 file://" +
                          fs::absolute(written[0]).string() + " >" + dir + "/chromium.log 2>&1";
  const int rc = std::system(cmd.c_str());
  ASSERT_EQ(rc, 0) << cmd;
  ASSERT_TRUE(fs::exists(png)) << cmd;
  std::ifstream f(png, std::ios::binary);
  char sig[8] = {};
  f.read(sig, 8);
  EXPECT_EQ(std::string(sig + 1, 3), "PNG");
  // A blank 1400x2600 page compresses to a few KB; charts and tables do not.
  EXPECT_GT(fs::file_size(png), 60000u) << png;
  std::cout << "screenshot: " << png << "\n";
}

}  // namespace
}  // namespace topk::report
