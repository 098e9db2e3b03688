// The daemon's side of Active Access without a daemon (issue #19): a
// WatchState over plain memory, its log read through the memfd it hands
// out, as an owner would map it.
#include "daemon/node/watch_state.h"

#include <sys/mman.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "unit/test_util.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using std::chrono::milliseconds;

namespace {

constexpr uint64_t kBytes = 65536;

struct Fixture {
  std::vector<std::byte> memory = std::vector<std::byte>(kBytes, std::byte{0x11});
  std::shared_ptr<WatchState> w;
  std::byte* map = nullptr;
  uint64_t mapped = 0;
  std::optional<active::LogReader> reader;

  explicit Fixture(const WatchOptions& o) {
    auto s = WatchState::Create(1, 7, memory.data(), kBytes, o);
    REQUIRE(s.ok());
    w = *s;
    mapped = w->log_mapped_bytes();
    void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, w->log_fd(), 0);
    REQUIRE(p != MAP_FAILED);
    map = static_cast<std::byte*>(p);
    auto r = active::LogReader::Open(map, mapped);
    REQUIRE(r.ok());
    reader.emplace(*r);
  }
  ~Fixture() {
    w->Close("test over");
    munmap(map, mapped);
  }
  uint64_t Watch(uint64_t b, uint64_t e, active::Action a,
                 active::Handler h = active::Handler::kClient) {
    RegionSpec rs;
    rs.region.begin = b;
    rs.region.end = e;
    rs.region.action = a;
    rs.region.handler = h;
    auto id = w->AddRegion(std::move(rs));
    REQUIRE(id.ok());
    return *id;
  }
  Status Put(uint64_t offset, const std::vector<std::byte>& data) {
    ActiveAccess a;
    a.op = active::Op::kPut;
    a.ranges = {{offset, offset + data.size()}};
    a.scratch = std::make_unique<std::byte[]>(data.size());
    std::memcpy(a.scratch.get(), data.data(), data.size());
    a.scratch_base = offset;
    std::promise<Status> done;
    auto f = done.get_future();
    w->Enqueue(std::move(a), [&done](Status s) { done.set_value(std::move(s)); });
    return f.get();
  }
};

WatchOptions Small(LogFullMode mode, milliseconds limit = milliseconds(5000)) {
  WatchOptions o;
  o.log_bytes = 4096;
  o.full = mode;
  o.block_limit = limit;
  return o;
}

}  // namespace

TEST_CASE("a put larger than the log streams through it while the owner reads") {
  Fixture f(Small(LogFullMode::kBlock));
  f.Watch(0, kBytes, active::Action::kLogOnly);
  const auto data = testing::Pattern(20000, 3);
  std::string got;
  std::atomic<bool> stop{false};
  bool in_order = true;  // Catch's macros are for this thread only
  std::thread owner([&] {
    while (!stop) {
      f.reader->Poll([&](const active::LogEntry& e, std::string_view d) {
        in_order = in_order && e.offset == 1000 + got.size();
        got += d;
      });
      f.reader->Ack();
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  });
  CHECK(f.Put(1000, data).ok());
  stop = true;
  owner.join();
  f.reader->Poll([&](const active::LogEntry&, std::string_view d) { got += d; });
  CHECK(in_order);
  REQUIRE(got.size() == data.size());
  CHECK(std::memcmp(got.data(), data.data(), data.size()) == 0);
  // log_only: memory untouched.
  for (uint64_t i = 1000; i < 21000; ++i) REQUIRE(f.memory[i] == std::byte{0x11});
}

TEST_CASE("a blocked put gives up after the block limit and applies nothing") {
  Fixture f(Small(LogFullMode::kBlock, milliseconds(100)));
  f.Watch(0, kBytes, active::Action::kApplyLog);
  int ok = 0;
  Status s;
  while ((s = f.Put(0, testing::Pattern(500, static_cast<uint64_t>(ok)))).ok()) ++ok;
  CHECK(absl::IsDeadlineExceeded(s));
  CHECK(std::memcmp(f.memory.data(), testing::Pattern(500, static_cast<uint64_t>(ok - 1)).data(),
                    500) == 0);
}

TEST_CASE("a full hashtable fails the put that does not fit") {
  Fixture f(Small(LogFullMode::kFail));
  std::memset(f.memory.data(), 0, 4096);
  RegionSpec rs;
  rs.region.begin = 0;
  rs.region.end = 4096;
  rs.region.action = active::Action::kLogOnly;
  rs.region.handler = active::Handler::kHashInsert;
  rs.region.value_bytes = 8;
  const Result<uint64_t> added = f.w->AddRegion(std::move(rs));
  REQUIRE(added.ok());
  // 4096 / 24 = 170 slots: 170 distinct keys fit, the 171st does not.
  std::vector<std::byte> recs(size_t{171} * 16);
  for (uint64_t k = 0; k < 171; ++k) std::memcpy(recs.data() + k * 16, &k, 8);
  recs.resize(size_t{170} * 16);
  CHECK(f.Put(0, recs).ok());
  std::vector<std::byte> more(16);
  const uint64_t key = 1000;
  std::memcpy(more.data(), &key, 8);
  CHECK(absl::IsResourceExhausted(f.Put(0, more)));
  // An existing key is updated in place.
  const uint64_t again[2] = {5, 55};
  std::memcpy(more.data(), again, 16);
  CHECK(f.Put(0, more).ok());
  // A record cut short is refused.
  CHECK(absl::IsInvalidArgument(f.Put(0, std::vector<std::byte>(10))));
}

TEST_CASE("flush waits for the owner's acknowledgement; closing aborts it") {
  Fixture f(Small(LogFullMode::kBlock));
  f.Watch(0, 4096, active::Action::kApplyNotify);
  REQUIRE(f.Put(0, testing::Pattern(10, 1)).ok());
  std::promise<Status> p1;
  f.w->Flush(milliseconds(5000), [&](Status s) { p1.set_value(std::move(s)); });
  auto f1 = p1.get_future();
  CHECK(f1.wait_for(milliseconds(200)) == std::future_status::timeout);
  CHECK(f.reader->Poll([](const active::LogEntry&, std::string_view) {}) == 1);
  f.reader->Ack();
  REQUIRE(f1.wait_for(milliseconds(2000)) == std::future_status::ready);
  CHECK(f1.get().ok());
  REQUIRE(f.Put(0, testing::Pattern(10, 2)).ok());
  std::promise<Status> p2;
  f.w->Flush(milliseconds(5000), [&](Status s) { p2.set_value(std::move(s)); });
  f.w->Close("owner left");
  auto f2 = p2.get_future();
  REQUIRE(f2.wait_for(milliseconds(2000)) == std::future_status::ready);
  CHECK(absl::IsAborted(f2.get()));
  CHECK(absl::IsAborted(f.Put(0, testing::Pattern(10, 3))));
}

TEST_CASE("the dirty set counts from a checkpoint only while it holds every write") {
  Fixture f(WatchOptions{});
  using active::Action;
  using active::Handler;
  // Half the allocation in a dirty_pages region: writes elsewhere are not
  // tracked, which TakeDirty names.
  const uint64_t half = f.Watch(0, kBytes / 2, Action::kApplyLog, Handler::kDirtyPages);
  WatchState::DirtyTake t = f.w->TakeDirty();
  CHECK(t.since.empty());
  CHECK(t.untracked.find("bytes [32768, 65536)") != std::string::npos);
  f.Watch(kBytes / 2, kBytes, Action::kApplyLog, Handler::kDirtyPages);
  t = f.w->TakeDirty();
  CHECK(t.untracked.empty());
  CHECK(t.since_why.find("was watched after it") != std::string::npos);
  f.w->CountFrom(t.epoch, "ckpt", 5, "");
  // A write that passes by the watch (the owner's) is noted: pages 1 and 2.
  f.w->NoteWrite(4095, 2);
  f.w->NoteWrite(3 * 4096 - 1, 1);
  t = f.w->TakeDirty();
  CHECK(t.pages == std::vector<uint64_t>{0, 1, 2});
  CHECK(t.since == "ckpt");
  CHECK(t.generation == 5);
  // Until its checkpoint ends, another take counts from nothing, and the
  // first checkpoint's CountFrom no longer applies.
  WatchState::DirtyTake other = f.w->TakeDirty();
  CHECK(other.since.empty());
  f.w->CountFrom(t.epoch, "ckpt", 6, "");
  CHECK(f.w->TakeDirty().since.empty());
  // A clear that drops pages, or a region unwatched, forgets the base.
  t = f.w->TakeDirty();
  f.w->CountFrom(t.epoch, "ckpt", 7, "");
  CHECK(f.w->DirtyPages(/*clear=*/true).empty());  // dropped nothing
  t = f.w->TakeDirty();
  CHECK(t.since == "ckpt");
  f.w->CountFrom(t.epoch, "ckpt", 8, "");
  f.w->NoteWrite(0, 1);
  CHECK(f.w->DirtyPages(/*clear=*/true) == std::vector<uint64_t>{0});
  t = f.w->TakeDirty();
  CHECK(t.since.empty());
  CHECK(t.since_why.find("DirtyPages clear dropped 1") != std::string::npos);
  f.w->CountFrom(t.epoch, "ckpt", 9, "");
  REQUIRE(f.w->RemoveRegion(half).ok());
  t = f.w->TakeDirty();
  CHECK(t.since.empty());
  CHECK_FALSE(t.untracked.empty());
}

}  // namespace ISOMETRY_TEST_FILE
