// The queue that hands a tune run's shapes to the GPU workers: every shape
// exactly once however many workers race for them, in list order, and
// nothing handed out after a stop. Plain threads stand in for the GPUs.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "tuner/work_queue.hpp"

namespace topk::tuner {
namespace {

// Runs `workers` threads that each call `body(worker)` once, all released
// at the same moment so that they really contend for the queue.
template <typename Body>
void RunConcurrently(int workers, Body body) {
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w)
    threads.emplace_back([&, w] {
      while (!go.load()) std::this_thread::yield();
      body(w);
    });
  go = true;
  for (auto& t : threads) t.join();
}

TEST(WorkQueueTest, OneWorkerGetsTheShapesInListOrder) {
  WorkQueue q(5);
  for (size_t want = 0; want < 5; ++want) {
    auto got = q.Take(7);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(*got, want);
    EXPECT_EQ(q.slot(want).worker, 7);
  }
  EXPECT_FALSE(q.Take(7).has_value());
  EXPECT_FALSE(q.Take(8).has_value()) << "an exhausted queue stays exhausted for every worker";
  EXPECT_EQ(q.taken(), 5u);
}

TEST(WorkQueueTest, EmptyQueueHandsOutNothing) {
  WorkQueue q(0);
  EXPECT_FALSE(q.Take(0).has_value());
  EXPECT_EQ(q.taken(), 0u);
}

TEST(WorkQueueTest, ConcurrentWorkersTakeEveryShapeExactlyOnce) {
  constexpr size_t kShapes = 20000;
  constexpr int kWorkers = 8;
  WorkQueue q(kShapes);
  std::vector<std::vector<size_t>> got(kWorkers);
  RunConcurrently(kWorkers, [&](int w) {
    while (auto i = q.Take(w)) got[w].push_back(*i);
  });

  std::vector<int> times(kShapes, 0);
  for (int w = 0; w < kWorkers; ++w) {
    // Each worker sees the list in order: its own shapes only increase.
    EXPECT_TRUE(std::is_sorted(got[w].begin(), got[w].end())) << "worker " << w;
    for (size_t i : got[w]) {
      ASSERT_LT(i, kShapes);
      ++times[i];
      EXPECT_EQ(q.slot(i).worker, w) << "shape " << i << " is recorded for the worker that took it";
    }
  }
  for (size_t i = 0; i < kShapes; ++i) ASSERT_EQ(times[i], 1) << "shape " << i;
  EXPECT_EQ(q.taken(), kShapes);
  for (size_t i = 0; i < kShapes; ++i) ASSERT_TRUE(q.slot(i).taken);
}

TEST(WorkQueueTest, StopEndsTheHandOut) {
  WorkQueue q(10);
  ASSERT_EQ(q.Take(0), std::optional<size_t>(0));
  ASSERT_EQ(q.Take(1), std::optional<size_t>(1));
  EXPECT_FALSE(q.stopped());
  q.Stop();
  EXPECT_TRUE(q.stopped());
  EXPECT_FALSE(q.Take(0).has_value());
  EXPECT_FALSE(q.Take(1).has_value());
  EXPECT_EQ(q.taken(), 2u);
  EXPECT_TRUE(q.slot(1).taken);
  EXPECT_FALSE(q.slot(2).taken) << "a shape after the stop is not marked taken";
}

TEST(WorkQueueTest, StopDuringConcurrentTakesLeavesTheRestUntaken) {
  constexpr size_t kShapes = 100000;
  constexpr size_t kStopAt = 500;
  constexpr int kWorkers = 8;
  WorkQueue q(kShapes);
  std::vector<std::vector<size_t>> got(kWorkers);
  RunConcurrently(kWorkers, [&](int w) {
    while (auto i = q.Take(w)) {
      got[w].push_back(*i);
      if (*i == kStopAt) q.Stop();
    }
  });
  // Shapes handed out form a prefix of the list, each once; after the stop
  // every worker got at most the one shape it was taking at that moment.
  const size_t n = q.taken();
  EXPECT_GT(n, kStopAt);
  EXPECT_LE(n, kStopAt + kWorkers);
  std::vector<int> times(kShapes, 0);
  for (const auto& list : got)
    for (size_t i : list) ++times[i];
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(times[i], 1) << "shape " << i;
  for (size_t i = n; i < kShapes; ++i) ASSERT_EQ(times[i], 0) << "shape " << i << " was handed out after the stop";
  EXPECT_FALSE(q.Take(0).has_value());
}

TEST(WorkQueueTest, WorkerThatGivesUpLeavesItsShapesToTheOthers) {
  WorkQueue q(6);
  // Worker 0 takes one shape and stops taking (its GPU broke); worker 1
  // carries on alone and gets every remaining shape.
  ASSERT_EQ(q.Take(0), std::optional<size_t>(0));
  std::vector<size_t> rest;
  while (auto i = q.Take(1)) rest.push_back(*i);
  EXPECT_EQ(rest, (std::vector<size_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(q.slot(0).worker, 0);
  EXPECT_EQ(q.slot(5).worker, 1);
}

TEST(WorkQueueTest, FailureIsRecordedForTheShape) {
  WorkQueue q(3);
  ASSERT_EQ(q.Take(2), std::optional<size_t>(0));
  ASSERT_EQ(q.Take(2), std::optional<size_t>(1));
  ASSERT_TRUE(q.Fail(1, Status(Code::kUnavailable, "worker", "the worker crashed")).ok());
  EXPECT_TRUE(q.slot(0).error.ok());
  EXPECT_EQ(q.slot(1).error.code(), Code::kUnavailable);
  EXPECT_EQ(q.slot(1).error.message(), "the worker crashed");
  EXPECT_TRUE(q.slot(2).error.ok());
}

TEST(WorkQueueTest, FailRefusesWhatItCannotRecord) {
  WorkQueue q(3);
  ASSERT_EQ(q.Take(0), std::optional<size_t>(0));
  const Status crash(Code::kUnavailable, "worker", "crashed");
  EXPECT_EQ(q.Fail(2, crash).code(), Code::kInvalidArgument) << "shape 2 was never handed out";
  EXPECT_TRUE(q.slot(2).error.ok());
  EXPECT_EQ(q.Fail(3, crash).code(), Code::kInvalidArgument) << "out of range";
  EXPECT_EQ(q.Fail(0, Status::Ok()).code(), Code::kInvalidArgument) << "a failure needs a reason";
  EXPECT_TRUE(q.slot(0).error.ok());
  EXPECT_FALSE(q.slot(3).taken) << "out of range reads as an untaken slot";
}

}  // namespace
}  // namespace topk::tuner
