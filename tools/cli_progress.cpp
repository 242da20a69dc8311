#include "tools/cli_progress.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "tools/cli_common.hpp"

namespace topk::cli {

namespace {

const char* KindName(tuner::ProgressEvent::Kind k) {
  switch (k) {
    case tuner::ProgressEvent::kShapeStart:
      return "shape_start";
    case tuner::ProgressEvent::kVariant:
      return "variant";
    case tuner::ProgressEvent::kRetime:
      return "retime";
    case tuner::ProgressEvent::kShapeDone:
      return "shape_done";
  }
  return "event";
}

int TerminalWidth() {
  winsize w{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 20) return w.ws_col;
  return 120;
}

}  // namespace

Progress::Mode Progress::Detect(bool json, bool quiet) {
  if (quiet) return Mode::kQuiet;
  if (json) return Mode::kJson;
  const char* term = std::getenv("TERM");
  if (isatty(STDERR_FILENO) && !(term && std::strcmp(term, "dumb") == 0)) return Mode::kTerminal;
  return Mode::kLog;
}

Progress::Progress(Mode mode, int shapes, int devices)
    : mode_(mode), shapes_(shapes), devices_(std::max(1, devices)), start_(std::chrono::steady_clock::now()) {}

double Progress::OverallEta() const {
  // Shapes not started yet cost the average finished shape (or, before any
  // finished, the running ones' estimate), spread over the devices.
  double running_eta = 0, running_estimate = 0;
  for (const auto& [d, e] : current_) {
    running_eta = std::max(running_eta, e.eta_s);
    running_estimate = std::max(running_estimate, e.elapsed_s + e.eta_s);
  }
  const int queued = std::max(0, shapes_ - finished_ - static_cast<int>(current_.size()));
  const double per = finished_ > 0 ? finished_seconds_ / finished_ : running_estimate;
  return running_eta + per * queued / devices_;
}

void Progress::ClearLine() {
  if (mode_ != Mode::kTerminal || drawn_ == 0) return;
  std::cerr << '\r' << std::string(drawn_, ' ') << '\r';
  drawn_ = 0;
}

void Progress::Redraw(bool force) {
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  if (current_.empty()) return;
  // The device whose shape started last is the one worth watching.
  const tuner::ProgressEvent* e = nullptr;
  for (const auto& [d, ev] : current_)
    if (!e || ev.shape_index > e->shape_index) e = &ev;
  std::string line =
      "[" + std::to_string(finished_ + static_cast<int>(current_.size())) + "/" + std::to_string(shapes_) + "] ";
  if (devices_ > 1) line += "gpu" + std::to_string(current_.begin()->first) + "+ ";
  line += e->problem.ToString() + " | " + std::to_string(e->done) + "/" + std::to_string(e->total) + " variants";
  if (e->best_us > 0) line += " | best " + FormatUs(e->best_us) + " us";
  line += " | ETA " + FormatDuration(OverallEta());
  const size_t width = static_cast<size_t>(TerminalWidth() - 1);
  if (line.size() > width) line = line.substr(0, width);
  std::cerr << '\r' << line;
  if (line.size() < drawn_) std::cerr << std::string(drawn_ - line.size(), ' ') << '\r' << line;
  std::cerr.flush();
  drawn_ = line.size();
}

void Progress::Event(int device, const tuner::ProgressEvent& e) {
  std::lock_guard<std::mutex> l(mu_);
  if (mode_ == Mode::kQuiet) return;
  if (mode_ == Mode::kJson) {
    nlohmann::json j = {{"event", KindName(e.kind)},
                        {"device", device},
                        {"shape_index", e.shape_index},
                        {"shape_count", e.shape_count},
                        {"shape", e.problem.ToString()},
                        {"spec", ShapeSpec(e.problem)},
                        {"done", e.done},
                        {"total", e.total},
                        {"resumed", e.resumed},
                        {"elapsed_s", e.elapsed_s},
                        {"eta_s", e.eta_s}};
    if (e.kind == tuner::ProgressEvent::kVariant || e.kind == tuner::ProgressEvent::kRetime) {
      j["variant"] = e.variant_id;
      j["outcome"] = cache::OutcomeName(e.outcome);
      j["median_us"] = e.median_us;
    }
    if (e.best_us > 0) {
      j["best_us"] = e.best_us;
      j["best_id"] = e.best_id;
    }
    std::cerr << j.dump() << "\n";
    std::cerr.flush();
    return;
  }
  if (e.kind == tuner::ProgressEvent::kShapeDone) return;  // ShapeResult reports it
  current_[device] = e;
  if (mode_ == Mode::kTerminal) {
    Redraw(e.kind == tuner::ProgressEvent::kShapeStart);
    return;
  }
  const std::string tag = (devices_ > 1 ? "gpu" + std::to_string(device) + " " : "") + "[" +
                          std::to_string(e.shape_index + 1) + "/" + std::to_string(shapes_) + "] ";
  if (e.kind == tuner::ProgressEvent::kShapeStart) {
    std::cerr << tag << e.problem.ToString() << ": " << e.total << " candidate variants\n";
  } else if (e.kind == tuner::ProgressEvent::kVariant &&
             (e.done % 10 == 0 || e.done == e.total || (e.outcome != cache::Outcome::kOk && e.done == 0))) {
    std::cerr << tag << e.done << "/" << e.total << " variants";
    if (e.resumed) std::cerr << " (" << e.resumed << " resumed)";
    if (e.best_us > 0) std::cerr << ", best " << FormatUs(e.best_us) << " us " << e.best_id;
    std::cerr << ", shape ETA " << FormatDuration(e.eta_s) << ", total ETA " << FormatDuration(OverallEta()) << "\n";
  } else if (e.kind == tuner::ProgressEvent::kRetime) {
    std::cerr << tag << "re-timed " << e.variant_id << ": " << FormatUs(e.median_us) << " us\n";
  }
  std::cerr.flush();
}

void Progress::ShapeResult(int device, int index, const tuner::ShapeSummary* s, const Status& error) {
  std::lock_guard<std::mutex> l(mu_);
  ++finished_;
  if (s) finished_seconds_ += s->seconds;
  current_.erase(device);
  if (mode_ == Mode::kQuiet) return;
  if (mode_ == Mode::kJson) {
    nlohmann::json j = {{"event", "shape_result"}, {"device", device}, {"shape_index", index}};
    if (s) {
      j["shape"] = s->problem.ToString();
      j["spec"] = ShapeSpec(s->problem);
      j["has_winner"] = s->has_winner;
      j["winner"] = s->winner_id;
      j["winner_us"] = s->winner_us;
      j["default_us"] = s->default_us;
      j["space"] = s->space;
      j["evaluated"] = s->evaluated;
      j["resumed"] = s->resumed;
      j["outcomes"] = s->outcomes;
      j["seconds"] = s->seconds;
      if (!s->has_winner) j["message"] = s->message;
    } else {
      j["error"] = error.ToString();
    }
    std::cerr << j.dump() << "\n";
    std::cerr.flush();
    return;
  }
  ClearLine();
  std::string tag = "[" + std::to_string(index + 1) + "/" + std::to_string(shapes_) + "] ";
  if (devices_ > 1) tag = "gpu" + std::to_string(device) + " " + tag;
  if (!s) {
    std::cerr << tag << "FAILED: " << error.ToString() << "\n";
  } else if (s->has_winner) {
    std::cerr << tag << s->problem.ToString() << ": " << s->winner_id << " " << FormatUs(s->winner_us) << " us";
    if (s->default_us > 0) std::cerr << " (" << FormatSpeedup(s->default_us / s->winner_us) << " vs default)";
    std::cerr << ", " << s->evaluated << " measured";
    if (s->resumed) std::cerr << " + " << s->resumed << " resumed";
    std::cerr << " in " << FormatDuration(s->seconds) << "\n";
  } else {
    std::cerr << tag << s->problem.ToString() << ": NO WINNER: " << s->message << "\n";
  }
  if (mode_ == Mode::kTerminal) Redraw(true);
  std::cerr.flush();
}

void Progress::Note(const std::string& line) {
  std::lock_guard<std::mutex> l(mu_);
  if (mode_ == Mode::kQuiet) return;
  if (mode_ == Mode::kJson) {
    // One JSON object a line, as every other event on stderr.
    std::cerr << nlohmann::json({{"event", "note"}, {"message", line}}).dump() << "\n";
    return;
  }
  ClearLine();
  std::cerr << line << "\n";
  if (mode_ == Mode::kTerminal) Redraw(true);
}

void Progress::Finish() {
  std::lock_guard<std::mutex> l(mu_);
  ClearLine();
  std::cerr.flush();
}

}  // namespace topk::cli
