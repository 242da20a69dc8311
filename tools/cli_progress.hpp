// Progress of a long tune, in one of three forms: one line rewritten in
// place on a terminal, plain log lines otherwise, one JSON object per
// event (--json, on stderr: stdout carries the one result object), or
// nothing (--quiet). Thread-safe: one worker thread per
// GPU reports into the same object.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>

#include "tuner/tuner.hpp"

namespace topk::cli {

class Progress {
 public:
  enum class Mode { kTerminal, kLog, kJson, kQuiet };
  // kQuiet with --quiet, kJson with --json, kTerminal when stderr is a
  // terminal (and TERM is not "dumb"), else kLog.
  static Mode Detect(bool json, bool quiet);

  Progress(Mode mode, int shapes, int devices);

  void Event(int device, const tuner::ProgressEvent& e);
  // A shape finished (with or without a winner) or failed with `error`.
  void ShapeResult(int device, int index, const tuner::ShapeSummary* summary, const Status& error);
  // A line that must not be overwritten (warnings, device starts).
  void Note(const std::string& line);
  // Clears the terminal line.
  void Finish();
  Mode mode() const { return mode_; }

 private:
  void Redraw(bool force);
  void ClearLine();
  double OverallEta() const;

  Mode mode_;
  int shapes_;
  int devices_;
  std::mutex mu_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  int finished_ = 0;
  double finished_seconds_ = 0;
  std::map<int, tuner::ProgressEvent> current_;  // by device
  size_t drawn_ = 0;                             // characters on the live line
};

}  // namespace topk::cli
