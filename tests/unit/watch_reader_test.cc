// The daemon-side reader of a watch's access log (ReadAccessLog) without a
// daemon: a WatchState over plain memory whose ring no client maps.
#include "daemon/node/watch_reader.h"

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
  std::vector<std::byte> memory;
  std::shared_ptr<WatchState> w;

  explicit Fixture(uint64_t log_bytes = 4096, uint64_t bytes = kBytes)
      : memory(bytes, std::byte{0x11}) {
    WatchOptions o;
    o.log_bytes = log_bytes;
    o.block_limit = milliseconds(5000);
    auto s = WatchState::Create(1, 7, memory.data(), bytes, o);
    REQUIRE(s.ok());
    w = *s;
    RegionSpec rs;
    rs.region.begin = 0;
    rs.region.end = bytes;
    const auto added = w->AddRegion(std::move(rs));
    REQUIRE(added.ok());
  }
  ~Fixture() { w->Close("test over"); }
  std::future<Status> Put(uint64_t offset, const std::vector<std::byte>& data) {
    ActiveAccess a;
    a.op = active::Op::kPut;
    a.ranges = {{offset, offset + data.size()}};
    a.scratch = std::make_unique<std::byte[]>(data.size());
    std::memcpy(a.scratch.get(), data.data(), data.size());
    a.scratch_base = offset;
    auto done = std::make_shared<std::promise<Status>>();
    auto f = done->get_future();
    w->Enqueue(std::move(a), [done](Status s) { done->set_value(std::move(s)); });
    return f;
  }
};

// One Next, waited for.
Result<std::vector<LoggedAccess>> NextOf(WatchReader& r) {
  auto done = std::make_shared<std::promise<Result<std::vector<LoggedAccess>>>>();
  auto f = done->get_future();
  r.Next([done](Result<std::vector<LoggedAccess>> b) { done->set_value(std::move(b)); });
  return f.get();
}

}  // namespace

TEST_CASE("a reader drains puts many times the ring's size, in order") {
  Fixture f;
  auto reader = f.w->OpenReader();
  REQUIRE(reader.ok());
  std::vector<LoggedAccess> got;
  std::thread owner([&] {
    while (got.size() < 200) {
      auto b = NextOf(**reader);
      if (!b.ok() || b->empty()) return;
      for (LoggedAccess& a : *b) got.push_back(std::move(a));
      (*reader)->Ack();
    }
  });
  for (uint64_t i = 0; i < 200; ++i) {
    // 592-byte records: a 4096-byte ring holds six.
    REQUIRE(f.Put(i * 8, testing::Pattern(512, i)).get().ok());
  }
  owner.join();
  REQUIRE(got.size() == 200);
  for (uint64_t i = 0; i < 200; ++i) {
    CHECK(got[i].entry.seq == i + 1);
    CHECK(got[i].entry.offset == i * 8);
    const auto want = testing::Pattern(512, i);
    CHECK(std::memcmp(got[i].data.data(), want.data(), want.size()) == 0);
  }
}

TEST_CASE("one consumer per ring: a second reader, or a reader beside a mapping, is refused") {
  Fixture f;
  {
    auto first = f.w->OpenReader();
    REQUIRE(first.ok());
    CHECK(absl::IsAlreadyExists(f.w->OpenReader().status()));
    CHECK(f.w->ReadByDaemon());
    CHECK_FALSE(f.w->HandOutLog());  // the local socket hands no fds now
  }
  CHECK_FALSE(f.w->ReadByDaemon());
  CHECK(f.w->HandOutLog());
  CHECK(absl::IsFailedPrecondition(f.w->OpenReader().status()));
}

TEST_CASE("a new reader starts at the first entry not acknowledged") {
  Fixture f;
  REQUIRE(f.Put(0, testing::Pattern(64, 1)).get().ok());
  REQUIRE(f.Put(64, testing::Pattern(64, 2)).get().ok());
  {
    auto r = f.w->OpenReader();
    REQUIRE(r.ok());
    auto b = NextOf(**r);
    REQUIRE(b.ok());
    REQUIRE(b->size() == 2);
    // Not acknowledged: the next reader gets them again.
  }
  auto r = f.w->OpenReader();
  REQUIRE(r.ok());
  auto b = NextOf(**r);
  REQUIRE(b.ok());
  REQUIRE(b->size() == 2);
  CHECK(b->front().entry.seq == 1);
  (*r)->Ack();
  REQUIRE(f.Put(128, testing::Pattern(64, 3)).get().ok());
  b = NextOf(**r);
  REQUIRE(b.ok());
  REQUIRE(b->size() == 1);
  CHECK(b->front().entry.seq == 3);
}

TEST_CASE("a waiting Next ends with the watch, or answers CANCELLED") {
  Fixture f;
  auto r = f.w->OpenReader();
  REQUIRE(r.ok());
  auto done = std::make_shared<std::promise<Result<std::vector<LoggedAccess>>>>();
  auto ended = done->get_future();
  (*r)->Next([done](Result<std::vector<LoggedAccess>> b) { done->set_value(std::move(b)); });
  CHECK(ended.wait_for(milliseconds(50)) == std::future_status::timeout);
  (*r)->Cancel();
  auto b = ended.get();
  CHECK(absl::IsCancelled(b.status()));
  CHECK_FALSE(f.w->ReadByDaemon());  // the slot is free at once

  auto again = f.w->OpenReader();
  REQUIRE(again.ok());
  REQUIRE(f.Put(0, testing::Pattern(64, 1)).get().ok());
  f.w->Close("unwatched");
  auto last = NextOf(**again);  // what was published still comes ...
  REQUIRE(last.ok());
  CHECK(last->size() == 1);
  auto end = NextOf(**again);  // ... then the end
  REQUIRE(end.ok());
  CHECK(end->empty());
}

TEST_CASE("an entry with more data than a message takes comes in pieces of one seq") {
  // A 128 MiB ring takes records of 32 MiB: a 20 MiB put is one entry.
  constexpr uint64_t kPut = uint64_t{20} << 20;
  Fixture f(uint64_t{128} << 20, kPut + 4096);
  auto r = f.w->OpenReader();
  REQUIRE(r.ok());
  const auto data = testing::Pattern(kPut, 9);
  REQUIRE(f.Put(4096, data).get().ok());
  auto b = NextOf(**r);
  REQUIRE(b.ok());
  REQUIRE(b->size() == 2);
  CHECK(((*b)[0].entry.seq == 1 && (*b)[1].entry.seq == 1));
  CHECK((*b)[0].entry.offset == 4096);
  CHECK((*b)[0].entry.size == WatchReader::kPieceBytes);
  CHECK((*b)[1].entry.offset == 4096 + WatchReader::kPieceBytes);
  CHECK((*b)[1].entry.size == kPut - WatchReader::kPieceBytes);
  const std::string joined = (*b)[0].data + (*b)[1].data;
  REQUIRE(joined.size() == kPut);
  CHECK(std::memcmp(joined.data(), data.data(), kPut) == 0);
}

}  // namespace ISOMETRY_TEST_FILE
