// The shapes of one tune run, handed out to the GPU workers that tune them.
//
// Each worker (one per GPU) takes the next shape when it is free, so a fast
// GPU simply takes more shapes than a slow one and no GPU idles while
// shapes are left. Shapes go out in list order, each to exactly one worker.
// A worker that gives up (its GPU or worker process broke) just stops
// taking: the shapes it never took go to the others. Stop() ends the
// hand-out for everyone; shapes already taken finish.
//
// The queue also records who took each shape and which shapes failed, so
// the caller's summary reads one record instead of per-thread bookkeeping.
// Thread-safe.
#pragma once

#include <cstddef>
#include <mutex>
#include <optional>
#include <vector>

#include "topk/status.hpp"

namespace topk::tuner {

class WorkQueue {
 public:
  struct Slot {
    bool taken = false;  // handed out to a worker
    int worker = -1;     // the worker that took it (its GPU ordinal in the CLI)
    Status error;        // Ok unless Fail recorded why the shape failed
  };

  // Shapes 0 .. count-1.
  explicit WorkQueue(size_t count) : slots_(count) {}

  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  size_t size() const { return slots_.size(); }

  // The next shape for `worker`, or nullopt once every shape was handed out
  // or Stop() was called.
  std::optional<size_t> Take(int worker);

  // Records that shape `index` failed. kInvalidArgument when the index is
  // out of range, was never taken, or `error` is ok (a failure needs a
  // reason); the record is left as it was.
  Status Fail(size_t index, Status error);

  // No shape is handed out after this; a Take() racing with it either gets
  // its shape or nullopt, never a shape after the stop.
  void Stop();
  bool stopped() const;

  // A copy of shape `index`'s record (a default Slot when out of range).
  Slot slot(size_t index) const;
  // How many shapes were handed out.
  size_t taken() const;

 private:
  mutable std::mutex mu_;
  std::vector<Slot> slots_;
  size_t next_ = 0;
  bool stopped_ = false;
};

}  // namespace topk::tuner
