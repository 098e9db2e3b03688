// The memcpy channel (channels/memcpy/memcpy_channel.h) as the runtime
// uses it: it copies exactly the bytes a program names, calls `done` once
// per request off the caller's thread (at the daemon's own nice value),
// ends cancelled requests promptly, and drains before it is destroyed.
#include "channels/memcpy/memcpy_channel.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/thread_nice.h"

namespace isometry {
namespace ISOMETRY_TEST_FILE {
namespace {

// Every request of this file is built here, host bytes to host bytes: the
// one place to change when ChannelRequest's endpoints change shape.
ChannelRequest HostRequest(std::shared_ptr<const CopyProgram> program, const void* src, void* dst,
                           const std::atomic<bool>* cancelled = nullptr) {
  ChannelRequest r;
  r.program = std::move(program);
  // A source is only read (channels/endpoint.h); HostBytes holds one pointer type.
  r.src = HostBytes{static_cast<std::byte*>(const_cast<void*>(src))};
  r.dst = HostBytes{static_cast<std::byte*>(dst)};
  r.cancelled = cancelled;
  return r;
}

ChannelConfig Config(int threads = 2, uint64_t rate_limit = 0) {
  ChannelConfig c;
  c.name = "memcpy0";
  c.kind = ChannelKind::kMemcpy;
  c.threads = threads;
  c.rate_limit_bytes_per_s = rate_limit;
  return c;
}

std::unique_ptr<Channel> Make(const ChannelConfig& c) {
  auto ch = MakeMemcpyChannel(c);
  REQUIRE(ch.ok());
  return *std::move(ch);
}

std::vector<std::byte> Pattern(size_t n, int seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = static_cast<std::byte>((i * 31 + static_cast<size_t>(seed)) & 0xff);
  }
  return v;
}

// Submits and waits for the one `done`; returns its status.
Status SubmitAndWait(Channel& ch, ChannelRequest r) {
  std::promise<Status> done;
  auto f = done.get_future();
  ch.Submit(std::move(r), [&](Status s) { done.set_value(std::move(s)); });
  REQUIRE(f.wait_for(std::chrono::seconds(20)) == std::future_status::ready);  // no hang
  return f.get();
}

// Every 4th 8-byte element of src (from byte 16) into a dense dst at 8:
// the other bytes of dst must stay as they were.
std::shared_ptr<const CopyProgram> GatherProgram(uint64_t count) {
  auto p = std::make_shared<CopyProgram>();
  CopyOp op;
  op.src_offset = 16;
  op.dst_offset = 8;
  op.run_bytes = 8;
  op.num_loops = 1;
  op.loops[0] = {.count = count, .src_stride = 32, .dst_stride = 8};
  p->ops.push_back(op);
  p->bytes = count * 8;
  p->runs = count;
  return p;
}

TEST_CASE("configs that are not a memcpy channel are refused by name") {
  ChannelConfig disk = Config();
  disk.kind = ChannelKind::kDiskRead;
  auto a = MakeMemcpyChannel(disk);
  REQUIRE_FALSE(a.ok());
  CHECK(a.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(a.status().message() == "channel 'memcpy0' is not a memcpy channel");
  auto b = MakeMemcpyChannel(Config(/*threads=*/0));
  REQUIRE_FALSE(b.ok());
  CHECK(b.status().message() == "channel 'memcpy0' needs at least one thread");
}

TEST_CASE("caps describe a host-to-host layout converter") {
  auto ch = Make(Config(3));
  const ChannelCaps& caps = ch->caps();
  CHECK(caps.name == "memcpy0");
  CHECK(caps.kind == ChannelKind::kMemcpy);
  CHECK(caps.converts_layout);
  CHECK(caps.streams_stores);      // the runtime streams its ring writes only here
  CHECK(caps.max_in_flight == 6);  // max_in_flight 0: two per thread
  CHECK(caps.runs_inline);
  CHECK(caps.memory_kinds.size() == 9);  // SYS, REG, ZCM to each other
  for (const auto& [a, b] : caps.memory_kinds) {
    CHECK(a != MemoryKind::kDsk);
    CHECK(b != MemoryKind::kDsk);
  }
  ChannelConfig limited = Config(2, 1 << 20);
  limited.max_in_flight = 5;
  auto capped = Make(limited);
  CHECK(capped->caps().max_in_flight == 5);
  CHECK(capped->caps().rate_limit_bytes_per_s == 1 << 20);
  CHECK_FALSE(capped->caps().runs_inline);  // a cap paces every byte
}

TEST_CASE("a request copies exactly the program's bytes, and done runs once off the caller") {
  auto ch = Make(Config());
  const uint64_t count = 1000;
  const std::vector<std::byte> src = Pattern(16 + count * 32, 1);
  const std::vector<std::byte> before = Pattern(8 + count * 8 + 64, 2);
  std::vector<std::byte> dst = before;

  std::atomic<int> calls{0};
  std::promise<std::pair<Status, std::thread::id>> done;
  auto f = done.get_future();
  ch->Submit(HostRequest(GatherProgram(count), src.data(), dst.data()), [&](Status s) {
    if (calls.fetch_add(1) == 0) done.set_value({std::move(s), std::this_thread::get_id()});
  });
  REQUIRE(f.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  const auto [status, done_on] = f.get();
  CHECK(status.ok());
  CHECK(done_on != std::this_thread::get_id());
  for (uint64_t i = 0; i < count; ++i) {
    INFO(i);
    REQUIRE(std::memcmp(&dst[8 + i * 8], &src[16 + i * 32], 8) == 0);
  }
  CHECK(std::memcmp(dst.data(), before.data(), 8) == 0);                     // before the first run
  CHECK(std::memcmp(&dst[8 + count * 8], &before[8 + count * 8], 64) == 0);  // after the last
  ch.reset();  // joins the workers: no second `done` can still come
  CHECK(calls == 1);
}

TEST_CASE("a request of a class at nice idle is done at the daemon's own value") {
  // What runs after `done` takes the runtime's locks: a thread left without
  // a CPU under SCHED_IDLE there would hold up every other class's copies.
  if (!ThreadNiceSupported()) {
    WARN("threads may not come back from SCHED_IDLE here: " + ThreadNiceUnsupportedReason());
  }
  auto ch = Make(Config(1));
  const std::vector<std::byte> src = Pattern(1000 * 32 + 16, 3);
  std::vector<std::byte> dst(1000 * 8 + 8);
  ChannelRequest r = HostRequest(GatherProgram(1000), src.data(), dst.data());
  r.qos_nice = kIdleThreadNice;
  std::promise<int> policy;
  auto f = policy.get_future();
  ch->Submit(std::move(r), [&](const Status& s) {
    CHECK(s.ok());
    policy.set_value(sched_getscheduler(0));
  });
  REQUIRE(f.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  CHECK(f.get() == SCHED_OTHER);
}

TEST_CASE("RunInline copies on the calling thread; a rate-capped channel refuses it") {
  const std::vector<std::byte> src = Pattern(4096, 3);
  std::vector<std::byte> dst(4096);
  auto ch = Make(Config());
  REQUIRE(ch->RunInline(HostRequest(ContiguousProgram(4096), src.data(), dst.data())).ok());
  CHECK(dst == src);

  auto capped = Make(Config(1, 1 << 20));
  std::vector<std::byte> untouched(4096);
  const Status s =
      capped->RunInline(HostRequest(ContiguousProgram(4096), src.data(), untouched.data()));
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(s.message() == "channel 'memcpy0' cannot run requests inline");
  CHECK(untouched == std::vector<std::byte>(4096));
}

TEST_CASE("a request cancelled before it starts ends CANCELLED and copies nothing") {
  auto ch = Make(Config());
  const std::vector<std::byte> src = Pattern(1 << 16, 4);
  std::vector<std::byte> dst(1 << 16);
  const std::atomic<bool> cancelled{true};
  const Status s = SubmitAndWait(
      *ch, HostRequest(ContiguousProgram(1 << 16), src.data(), dst.data(), &cancelled));
  CHECK(s.code() == absl::StatusCode::kCancelled);
  CHECK(s.message() == "memcpy 'memcpy0': request cancelled");
  CHECK(dst == std::vector<std::byte>(1 << 16));
  // The channel serves on.
  CHECK(SubmitAndWait(*ch, HostRequest(ContiguousProgram(1 << 16), src.data(), dst.data())).ok());
  CHECK(dst == src);
}

TEST_CASE("a paced request ends early once cancelled and interrupted") {
  // 8 MiB at 1 MiB/s would be paced for ~8 s; cancelled, it ends at once.
  auto ch = Make(Config(1, 1 << 20));
  const std::vector<std::byte> src = Pattern(8 << 20, 5);
  std::vector<std::byte> dst(8 << 20);
  std::atomic<bool> cancelled{false};
  std::promise<Status> done;
  auto f = done.get_future();
  const auto t0 = std::chrono::steady_clock::now();
  ch->Submit(HostRequest(ContiguousProgram(8 << 20), src.data(), dst.data(), &cancelled),
             [&](Status s) { done.set_value(std::move(s)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  cancelled.store(true, std::memory_order_release);
  ch->Interrupt();
  REQUIRE(f.wait_for(std::chrono::seconds(6)) == std::future_status::ready);
  const Status s = f.get();
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(6));
  // The bytes were copied before the pacing wait; either outcome is a
  // finished request.
  CHECK((s.ok() || s.code() == absl::StatusCode::kCancelled));
}

TEST_CASE("many requests from many threads each complete once with their own bytes") {
  auto ch = Make(Config(4));
  constexpr int kThreads = 4, kPerThread = 50;
  constexpr size_t kBytes = 10000;
  std::vector<std::vector<std::byte>> srcs, dsts;
  for (int i = 0; i < kThreads * kPerThread; ++i) {
    srcs.push_back(Pattern(kBytes, i));
    dsts.emplace_back(kBytes);
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> calls(srcs.size(), 0);
  int finished = 0, failed = 0;
  std::vector<std::thread> submitters;
  submitters.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    submitters.emplace_back([&, t] {
      for (int k = 0; k < kPerThread; ++k) {
        const size_t i = static_cast<size_t>(t) * kPerThread + static_cast<size_t>(k);
        ch->Submit(HostRequest(ContiguousProgram(kBytes), srcs[i].data(), dsts[i].data()),
                   [&, i](const Status& s) {
                     std::lock_guard lock(mu);
                     ++calls[i];
                     failed += s.ok() ? 0 : 1;
                     ++finished;
                     cv.notify_all();
                   });
      }
    });
  }
  for (std::thread& t : submitters) t.join();
  {
    std::unique_lock lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(20),
                        [&] { return finished == static_cast<int>(srcs.size()); }));
  }
  CHECK(failed == 0);
  for (size_t i = 0; i < srcs.size(); ++i) {
    INFO(i);
    CHECK(calls[i] == 1);
    CHECK(dsts[i] == srcs[i]);
  }
}

// What a one-thread channel starts in which order: request 0 first, its
// thread held inside its done until the rest are queued, so what the
// queue does with them decides the order they run in. Each request is
// {priority, QoS class, weight}, of a bulk size (above the express lane's).
struct Queued {
  int priority = 0;
  uint32_t qos_class = 0;
  uint32_t weight = 1;
};
constexpr uint64_t kBulk = 2 * kExpressRequestBytes;

std::vector<int> StartOrder(const std::vector<Queued>& requests) {
  auto ch = Make(Config(1));
  const std::vector<std::byte> src = Pattern(kBulk, 7);
  std::vector<std::vector<std::byte>> dsts(requests.size(), std::vector<std::byte>(kBulk));
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::vector<int> order;
  auto record = [&](int id) {
    return [&, id](const Status& s) {
      std::unique_lock lock(mu);
      CHECK(s.ok());
      order.push_back(id);
      cv.notify_all();
      if (id == 0) cv.wait(lock, [&] { return release; });
    };
  };
  for (size_t id = 0; id < requests.size(); ++id) {
    ChannelRequest r = HostRequest(ContiguousProgram(kBulk), src.data(), dsts[id].data());
    r.priority = requests[id].priority;
    r.qos_class = requests[id].qos_class;
    r.qos_weight = requests[id].weight;
    ch->Submit(std::move(r), record(static_cast<int>(id)));
    if (id == 0) {  // the thread is inside request 0's done before the rest arrive
      std::unique_lock lock(mu);
      REQUIRE(cv.wait_for(lock, std::chrono::seconds(20), [&] { return !order.empty(); }));
    }
  }
  {
    std::unique_lock lock(mu);
    release = true;
    cv.notify_all();
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(20),
                        [&] { return order.size() == requests.size(); }));
  }
  for (const auto& dst : dsts) CHECK(dst == src);
  return order;
}

TEST_CASE("queued requests start by priority, in submission order among equals") {
  CHECK(StartOrder({{0}, {0}, {0}, {5}, {0}, {5}}) == std::vector<int>{0, 3, 5, 1, 2, 4});
}

TEST_CASE("queued requests of two classes take turns by weight, a late class first") {
  // Class 1 (weight 1) queued four requests behind the running one; class
  // 2 (weight 3) comes later and does not wait behind them: it sends three
  // for each of class 1's, priority counting within a class only.
  const std::vector<Queued> requests{{0, 1, 1}, {0, 1, 1}, {0, 1, 1}, {0, 1, 1}, {0, 1, 1},
                                     {0, 2, 3}, {0, 2, 3}, {0, 2, 3}, {9, 2, 3}};
  CHECK(StartOrder(requests) == std::vector<int>{0, 8, 5, 6, 1, 7, 2, 3, 4});
}

// Completion records of the express tests: which requests have ended.
struct Ends {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> ended;
  bool release = false;
  // Records `id`; a request in `hold` then keeps its thread until release.
  RequestDone Record(int id, bool hold) {
    return [this, id, hold](const Status& s) {
      std::unique_lock lock(mu);
      CHECK(s.ok());
      ended.push_back(id);
      cv.notify_all();
      if (hold) cv.wait(lock, [&] { return release; });
    };
  }
  bool WaitFor(size_t n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(20), [&] { return ended.size() >= n; });
  }
  void Release() {
    std::unique_lock lock(mu);
    release = true;
    cv.notify_all();
  }
};

TEST_CASE("a small request runs on the express lane while every thread is busy with bulk ones") {
  Ends ends;  // outlives the channel, whose threads run its callbacks
  auto ch = Make(Config(1));
  CHECK(ch->caps().express);
  const std::vector<std::byte> src = Pattern(kBulk, 8);
  std::vector<std::vector<std::byte>> dsts(3, std::vector<std::byte>(kBulk));
  // Bulk request 0 holds the only thread; bulk request 1 queues behind it.
  ch->Submit(HostRequest(ContiguousProgram(kBulk), src.data(), dsts[0].data()),
             ends.Record(0, /*hold=*/true));
  REQUIRE(ends.WaitFor(1));
  ch->Submit(HostRequest(ContiguousProgram(kBulk), src.data(), dsts[1].data()),
             ends.Record(1, false));
  // A small one (a whole 64 KiB copy) does not wait for either.
  ch->Submit(HostRequest(ContiguousProgram(64 << 10), src.data(), dsts[2].data()),
             ends.Record(2, false));
  REQUIRE(ends.WaitFor(2));
  {
    std::unique_lock lock(ends.mu);
    CHECK(ends.ended == std::vector<int>{0, 2});
  }
  ends.Release();
  REQUIRE(ends.WaitFor(3));
  CHECK(dsts[0] == src);
  CHECK(dsts[1] == src);
  CHECK(std::equal(dsts[2].begin(), dsts[2].begin() + (64 << 10), src.begin()));
}

TEST_CASE("a small request waits for neither a busy express thread nor an idle thread's queue") {
  Ends ends;
  auto ch = Make(Config(1));
  const std::vector<std::byte> src = Pattern(64 << 10, 9);
  std::vector<std::vector<std::byte>> dsts(2, std::vector<std::byte>(64 << 10));
  // Small request 0 holds the express thread; small request 1 goes to
  // the idle bulk thread.
  ch->Submit(HostRequest(ContiguousProgram(64 << 10), src.data(), dsts[0].data()),
             ends.Record(0, /*hold=*/true));
  REQUIRE(ends.WaitFor(1));
  ch->Submit(HostRequest(ContiguousProgram(64 << 10), src.data(), dsts[1].data()),
             ends.Record(1, false));
  REQUIRE(ends.WaitFor(2));
  ends.Release();
  CHECK(dsts[0] == src);
  CHECK(dsts[1] == src);
}

TEST_CASE("destroying the channel finishes the requests it holds") {
  const std::vector<std::byte> src = Pattern(1 << 20, 6);
  std::vector<std::vector<std::byte>> dsts(32, std::vector<std::byte>(1 << 20));
  std::atomic<int> ok{0}, calls{0};
  {
    auto ch = Make(Config(1));
    for (auto& dst : dsts) {
      ch->Submit(HostRequest(ContiguousProgram(1 << 20), src.data(), dst.data()),
                 [&](const Status& s) {
                   ok += s.ok() ? 1 : 0;
                   ++calls;
                 });
    }
  }  // the destructor waits for outstanding requests
  CHECK(calls == 32);
  CHECK(ok == 32);
  for (const auto& dst : dsts) CHECK(dst == src);
}

}  // namespace
}  // namespace ISOMETRY_TEST_FILE
}  // namespace isometry
