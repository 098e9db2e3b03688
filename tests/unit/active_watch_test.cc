// Active Access (issue #19): the region table, splitting accesses at
// region boundaries, action semantics, and the access log ring.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "active/access_log.h"
#include "active/watch.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::active;

namespace {

Region Make(uint64_t b, uint64_t e, Action a = Action::kApplyLog, Handler h = Handler::kClient) {
  Region r;
  r.begin = b;
  r.end = e;
  r.action = a;
  r.handler = h;
  return r;
}

}  // namespace

TEST_CASE("regions are validated: bounds, alignment, overlap, limits, handler fit") {
  RegionTable t;
  const Limits lim{4096, 3};
  CHECK(t.Add(Make(0, 4096), 65536, lim).ok());
  CHECK(absl::IsInvalidArgument(t.Add(Make(100, 4096), 65536, lim).status()));     // unaligned
  CHECK(absl::IsInvalidArgument(t.Add(Make(4096, 4096), 65536, lim).status()));    // empty
  CHECK(absl::IsInvalidArgument(t.Add(Make(61440, 69632), 65536, lim).status()));  // past end
  CHECK(absl::IsInvalidArgument(t.Add(Make(0, 8192), 65536, lim).status()));       // overlap
  // The end may be the allocation's (unaligned) end.
  CHECK(t.Add(Make(8192, 10000), 10000, lim).ok());
  CHECK(absl::IsInvalidArgument(
      t.Add(Make(4096, 8192, Action::kApplyLog, Handler::kHashInsert), 65536, lim).status()));
  CHECK(absl::IsInvalidArgument(
      t.Add(Make(4096, 8192, Action::kDeny, Handler::kDirtyPages), 65536, lim).status()));
  CHECK(t.Add(Make(4096, 8192, Action::kLogOnly, Handler::kHashInsert), 65536, lim).ok());
  CHECK(absl::IsResourceExhausted(t.Add(Make(16384, 20480), 65536, lim).status()));
  CHECK(t.size() == 3);
}

TEST_CASE("a hash_insert region too small for one slot is refused (no division by zero later)") {
  RegionTable t;
  const Limits lim{4096, 8};
  // The last region of a 4200-byte allocation holds 104 bytes; a slot of
  // 4096-byte values needs 4112.
  Region r = Make(4096, 4200, Action::kLogOnly, Handler::kHashInsert);
  r.value_bytes = 4096;
  const auto refused = t.Add(r, 4200, lim);
  CHECK(absl::IsInvalidArgument(refused.status()));
  CHECK(std::string(refused.status().message()).find("slot") != std::string::npos);
  r.value_bytes = 8;  // 24-byte slots: four of them fit
  CHECK(t.Add(r, 4200, lim).ok());
}

TEST_CASE("remove frees the range for a new region") {
  RegionTable t;
  const Limits lim{4096, 8};
  auto id = t.Add(Make(0, 8192), 65536, lim);
  REQUIRE(id.ok());
  CHECK(t.Touches(4000, 5000));
  CHECK(t.Remove(*id).ok());
  CHECK(absl::IsNotFound(t.Remove(*id)));
  CHECK_FALSE(t.Touches(0, 65536));
  CHECK(t.Add(Make(4096, 12288), 65536, lim).ok());
}

TEST_CASE("an access is split at region boundaries") {
  RegionTable t;
  const Limits lim{4096, 8};
  REQUIRE(t.Add(Make(4096, 8192, Action::kDeny), 65536, lim).ok());
  REQUIRE(t.Add(Make(8192, 12288, Action::kLogOnly), 65536, lim).ok());
  REQUIRE(t.Add(Make(20480, 24576), 65536, lim).ok());
  auto p = t.Split(1000, 21000);
  REQUIRE(p.size() == 5);
  CHECK((p[0].begin == 1000 && p[0].end == 4096 && !p[0].region));
  CHECK((p[1].begin == 4096 && p[1].end == 8192 && p[1].region->action == Action::kDeny));
  CHECK((p[2].begin == 8192 && p[2].end == 12288 && p[2].region->action == Action::kLogOnly));
  CHECK((p[3].begin == 12288 && p[3].end == 20480 && !p[3].region));
  CHECK((p[4].begin == 20480 && p[4].end == 21000 && p[4].region));
  // Inside one region; entirely outside.
  p = t.Split(5000, 6000);
  REQUIRE(p.size() == 1);
  CHECK((p[0].begin == 5000 && p[0].end == 6000 && p[0].region));
  p = t.Split(30000, 40000);
  REQUIRE(p.size() == 1);
  CHECK(!p[0].region);
  // Several ranges: unwatched neighbours merge.
  p = t.SplitAll(MergeRanges({{0, 100}, {100, 200}, {13000, 14000}, {5000, 5100}}));
  REQUIRE(p.size() == 3);
  CHECK((p[0].begin == 0 && p[0].end == 200 && !p[0].region));
  CHECK((p[1].begin == 5000 && p[1].region));
  CHECK((p[2].begin == 13000 && !p[2].region));
}

TEST_CASE("actions resolve to effects for puts and gets") {
  Region r;
  r.action = Action::kApplyLog;
  r.log_data = false;
  Effect e = EffectOf(r, Op::kPut);
  CHECK((e.apply && e.log && !e.data && !e.deny));
  r.action = Action::kLogOnly;
  e = EffectOf(r, Op::kPut);
  CHECK((!e.apply && e.log && e.data));
  e = EffectOf(r, Op::kGet);
  CHECK((e.apply && e.log && e.data));
  r.action = Action::kApplyNotify;
  e = EffectOf(r, Op::kPut);
  CHECK((e.apply && e.log && e.notify && !e.data));
  r.action = Action::kDeny;
  CHECK(EffectOf(r, Op::kGet).deny);
  CHECK(ParseAction("log_only") == Action::kLogOnly);
  CHECK(ParseHandler("hash_insert") == Handler::kHashInsert);
  CHECK(!ParseAction("nope"));
}

TEST_CASE("the access log wraps, refuses when full and never loses an entry") {
  const uint64_t cap = 4096;
  std::vector<std::byte> mem(LogBytes(cap));
  LogWriter w(mem.data(), cap, 7);
  auto reader = LogReader::Open(mem.data(), mem.size());
  REQUIRE(reader.ok());
  const std::string data(200, 'x');
  uint64_t written = 0, read = 0, next_expected = 1;
  for (int round = 0; round < 50; ++round) {
    int appended = 0;
    LogEntry e{};
    e.op = static_cast<uint16_t>(LogOp::kPut);
    while (w.TryAppend(e, data)) ++appended;
    CHECK(appended > 0);
    written += appended;
    w.Publish();
    // Full: nothing more until the reader acknowledges.
    CHECK_FALSE(w.TryAppend(e, data));
    reader->Poll([&](const LogEntry& got, std::string_view d) {
      CHECK(got.seq == next_expected++);
      CHECK(d == data);
      ++read;
    });
    reader->Ack();
    CHECK(w.Acknowledged() == w.published());
  }
  CHECK(read == written);
  CHECK(read > uint64_t{500});
}

TEST_CASE("a corrupt head reads as no progress") {
  const uint64_t cap = 4096;
  std::vector<std::byte> mem(LogBytes(cap));
  LogWriter w(mem.data(), cap, 1);
  REQUIRE(w.TryAppend(LogEntry{}, "abc"));
  w.Publish();
  auto* h = reinterpret_cast<LogHeader*>(mem.data());
  h->head.value.store(1u << 30);
  CHECK(w.Acknowledged() == 0);
  CHECK(absl::IsInvalidArgument(LogReader::Open(mem.data(), 100).status()));
}

}  // namespace ISOMETRY_TEST_FILE
