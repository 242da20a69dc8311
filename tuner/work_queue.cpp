#include "tuner/work_queue.hpp"

#include <string>
#include <utility>

namespace topk::tuner {

std::optional<size_t> WorkQueue::Take(int worker) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_ || next_ >= slots_.size()) return std::nullopt;
  const size_t i = next_++;
  slots_[i].taken = true;
  slots_[i].worker = worker;
  return i;
}

Status WorkQueue::Fail(size_t index, Status error) {
  if (error.ok()) return InvalidArgument("WorkQueue::Fail", "a failure needs a non-ok status");
  std::lock_guard<std::mutex> lock(mu_);
  if (index >= slots_.size()) {
    return InvalidArgument("WorkQueue::Fail", "shape " + std::to_string(index) + " is out of range (" +
                                                  std::to_string(slots_.size()) + " shapes)");
  }
  if (!slots_[index].taken) {
    return InvalidArgument("WorkQueue::Fail", "shape " + std::to_string(index) + " was never handed out");
  }
  slots_[index].error = std::move(error);
  return Status::Ok();
}

void WorkQueue::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
}

bool WorkQueue::stopped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopped_;
}

WorkQueue::Slot WorkQueue::slot(size_t index) const {
  std::lock_guard<std::mutex> lock(mu_);
  return index < slots_.size() ? slots_[index] : Slot{};
}

size_t WorkQueue::taken() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_;
}

}  // namespace topk::tuner
