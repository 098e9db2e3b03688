#include "daemon/server/translate_pool.h"

#include <absl/synchronization/notification.h>
#include <absl/time/clock.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <string>
#include <thread>

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

// Work that holds its pool thread until `release` is notified, then counts
// how it was answered.
struct Recorder {
  absl::Notification release;
  std::atomic<int> ok{0}, refused{0};
  std::atomic<int> started{0};
  TranslatePool::Work Blocking() {
    return [this](const Status& s) -> TranslatePool::Answer {
      if (!s.ok()) {
        CHECK(s.code() == absl::StatusCode::kUnavailable);
        return [this] { ++refused; };
      }
      ++started;
      release.WaitForNotification();
      return [this] { ++ok; };
    };
  }
};

void WaitFor(const std::atomic<int>& n, int want) {
  for (int i = 0; i < 5000 && n.load() < want; ++i) absl::SleepFor(absl::Milliseconds(1));
  REQUIRE(n.load() == want);
}

TEST_CASE("TranslatePool bounds each caller, the session-less callers together") {
  auto pool = TranslatePool::Make({.threads = 2, .queue = 8, .per_caller = 2, .max_weight = 100});
  Recorder r;
  REQUIRE(pool->Submit("a", "ExplainPlan", r.Blocking()).ok());
  REQUIRE(pool->Submit("a", "ExplainPlan", r.Blocking()).ok());
  const Status third = pool->Submit("a", "ExplainPlan", r.Blocking());
  CHECK(third.code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(third.message()),
             Catch::Contains("ExplainPlan") && Catch::Contains("this session has 2") &&
                 Catch::Contains("daemon.max_translates_per_session is 2"));
  // Another session has its own share; session-less callers share one.
  REQUIRE(pool->Submit("b", "RegisterDatatype", r.Blocking()).ok());
  REQUIRE(pool->Submit("", "ExplainPlan", r.Blocking()).ok());
  REQUIRE(pool->Submit("", "ExplainPlan", r.Blocking()).ok());
  const Status anon = pool->Submit("", "ExplainPlan", r.Blocking());
  CHECK(anon.code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(anon.message()), Catch::Contains("session-less"));
  WaitFor(r.started, 2);  // two threads, the rest queued
  r.release.Notify();
  WaitFor(r.ok, 5);
  // Done calls no longer count: the caller may submit again.
  absl::Notification ran;
  REQUIRE(pool->Submit("a", "ExplainPlan",
                       [&](const Status& s) {
                         CHECK(s.ok());
                         ran.Notify();
                         return TranslatePool::Answer();
                       })
              .ok());
  CHECK(ran.WaitForNotificationWithTimeout(absl::Seconds(5)));
}

TEST_CASE("TranslatePool answers a call only once the caller's share is free") {
  // A client sends its next call as soon as the last one is answered; on a
  // loaded machine the pool thread used to release the share only after
  // the answer, so the next call was refused RESOURCE_EXHAUSTED.
  auto pool = TranslatePool::Make({.threads = 1, .queue = 8, .per_caller = 1, .max_weight = 1});
  std::atomic<int> answered{0};
  Status next;
  absl::Notification done;
  TranslatePool::Work second = [&](const Status&) {
    return TranslatePool::Answer([&] { done.Notify(); });
  };
  REQUIRE(pool->Submit("a", "RegisterInstance",
                       [&](const Status& s) {
                         REQUIRE(s.ok());
                         return TranslatePool::Answer([&] {
                           ++answered;
                           next = pool->Submit("a", "RegisterInstance", second);
                         });
                       })
              .ok());
  for (int i = 0; i < 5000 && answered.load() == 0; ++i) absl::SleepFor(absl::Milliseconds(1));
  REQUIRE(answered.load() == 1);
  CHECK(next.ok());
  CHECK(done.WaitForNotificationWithTimeout(absl::Seconds(5)));
}

TEST_CASE("TranslatePool bounds its queue; shutting down answers what waits") {
  auto pool = TranslatePool::Make({.threads = 1, .queue = 2, .per_caller = 100, .max_weight = 1});
  Recorder r;
  REQUIRE(pool->Submit("a", "RegisterInstance", r.Blocking()).ok());
  WaitFor(r.started, 1);
  REQUIRE(pool->Submit("b", "RegisterInstance", r.Blocking()).ok());
  REQUIRE(pool->Submit("c", "RegisterInstance", r.Blocking()).ok());
  const Status full = pool->Submit("d", "RegisterInstance", r.Blocking());
  CHECK(full.code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(full.message()), Catch::Contains("daemon.translate_queue is 2"));
  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(50));
    r.release.Notify();
  });
  pool->Shutdown();  // waits for the running call; the two queued are refused
  releaser.join();
  CHECK(r.ok.load() == 1);
  CHECK(r.refused.load() == 2);
  CHECK(pool->Submit("a", "RegisterInstance", r.Blocking()).code() ==
        absl::StatusCode::kUnavailable);
}

TEST_CASE("TranslatePool's weight bound and a message's weight before decoding") {
  auto pool = TranslatePool::Make({.threads = 1, .queue = 1, .per_caller = 1, .max_weight = 12});
  v1::Datatype t;
  auto* ib = t.mutable_indexed_block();
  ib->set_blocklength(1);
  for (int i = 0; i < 10; ++i) ib->add_displacements(int64_t{2} * i);
  ib->mutable_old()->set_basic(v1::BASIC_BYTE);
  CHECK(WeightOf(t) == 12);  // the node, its 10 entries, its old type
  CHECK(pool->CheckWeight(WeightOf(t), "RegisterDatatype").ok());
  v1::Datatype s;
  auto* st = s.mutable_struct_type();
  for (int i = 0; i < 2; ++i) {
    st->add_blocklengths(1);
    st->add_displacements(int64_t{64} * i);
    *st->add_types() = t;
  }
  CHECK(WeightOf(s) == 1 + 2 + 2 * 12);
  const Status heavy = pool->CheckWeight(WeightOf(s), "RegisterDatatype");
  CHECK(heavy.code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(heavy.message()),
             Catch::Contains("weigh 27") && Catch::Contains("daemon.max_translate_weight is 12"));
  v1::Datatype handle;
  handle.set_registered(7);
  CHECK(WeightOf(handle) == 1);  // checked again once decoded
}

}  // namespace ISOMETRY_TEST_FILE
