// Active Access (issue #19) against a real isometryd: watched regions,
// access logs, active puts and gets for each action, back-pressure, flush
// ordering, ownership, and release when the owner goes.
#include "client/cpp/active_access.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "active/log_abi.h"
#include "integration/client_helpers.h"
#include "integration/daemon_fixture.h"
#include "unit/test_util.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;
using client::ActiveAccess;
using client::Completion;
using client::WatchOptions;
using std::chrono::milliseconds;

namespace {

constexpr uint64_t kTable = uint64_t{64} * 1024;  // the watched allocation

InstanceShape ByteShape(uint64_t n) {
  return {Box::FromExtents({static_cast<int64_t>(n)}), FieldSpace::Uniform(1, 1), Layout::Aos(1)};
}

Allocation TableOf(Client& c) {
  auto t = c.Allocate("sys0", kTable);
  if (!t.ok()) throw std::runtime_error(t.status().ToString());
  std::memset(t->data(), 0x11, kTable);
  if (!t->Publish().ok()) throw std::runtime_error("publish");
  return *std::move(t);
}

struct Entry {
  active::LogEntry e;
  std::string data;
};

// Owner `a` with a published allocation; writer `b` with it mapped and
// an instance over [offset, offset + bytes) of it, plus its own source.
struct Setup {
  std::unique_ptr<Client> a, b;
  Allocation table;  // a's
  std::unique_ptr<ActiveAccess> aa;
  explicit Setup(const Daemon& d)
      : a(ConnectTo(d.local_socket(), "owner")),
        b(ConnectTo(d.local_socket(), "writer")),
        table(TableOf(*a)),
        aa(std::make_unique<ActiveAccess>(*a)) {}
  // b puts `data` at `offset` of the table.
  Completion Put(uint64_t offset, const std::vector<std::byte>& data) {
    auto src = b->Allocate("sys0", data.size());
    REQUIRE(src.ok());
    std::memcpy(src->data(), data.data(), data.size());
    auto s = b->Register(*src, 0, ByteShape(data.size()));
    auto mapped = b->Map(table.id());
    REQUIRE(mapped.ok());
    auto t = b->Register(*mapped, offset, ByteShape(data.size()));
    REQUIRE((s.ok() && t.ok()));
    return b->Copy(*s, *t);
  }
  // b gets `n` bytes at `offset` of the table.
  std::pair<Completion, std::vector<std::byte>> Get(uint64_t offset, uint64_t n) {
    auto dst = b->Allocate("sys0", n);
    REQUIRE(dst.ok());
    auto s = b->Register(*dst, 0, ByteShape(n));
    auto mapped = b->Map(table.id());
    REQUIRE(mapped.ok());
    auto t = b->Register(*mapped, offset, ByteShape(n));
    REQUIRE((s.ok() && t.ok()));
    Completion c = b->Copy(*t, *s);
    return {c, Bytes(*dst, n)};
  }
  std::vector<Entry> Drain(bool ack = true) {
    std::vector<Entry> out;
    client::AccessLog* log = aa->Log(table.id());
    REQUIRE(log);
    log->Poll([&](const active::LogEntry& e, std::string_view d) {
      out.push_back({e, std::string(d)});
    });
    if (ack) log->Ack();
    return out;
  }
};

WatchOptions Opts(uint64_t offset, uint64_t bytes, active::Action a) {
  WatchOptions o;
  o.offset = offset;
  o.bytes = bytes;
  o.action = a;
  return o;
}

bool Same(const std::byte* p, const std::vector<std::byte>& v, size_t from, size_t n) {
  return std::memcmp(p, v.data() + from, n) == 0;
}

}  // namespace

TEST_CASE("active put, apply_log: applied, split at the region, logged with data") {
  Daemon d(kOneMemory);
  Setup s(d);
  auto region = s.aa->Watch(s.table, Opts(4096, 4096, active::Action::kApplyLog));
  REQUIRE(region.ok());
  const auto data = Pattern(uint64_t{3} * 4096, 7);
  Completion c = s.Put(2048, data);  // [2048, 14336): three pieces
  REQUIRE(c.status.ok());
  CHECK(Same(s.table.data() + 2048, data, 0, data.size()));
  auto entries = s.Drain();
  REQUIRE(entries.size() == 1);
  const active::LogEntry& e = entries[0].e;
  CHECK(e.op == static_cast<uint16_t>(active::LogOp::kPut));
  CHECK(e.offset == 4096);
  CHECK(e.size == 4096);
  CHECK(e.region == *region);
  CHECK(e.transfer == c.transfer);
  CHECK((e.flags & active::kLogApplied));
  CHECK(entries[0].data.size() == 4096);
  CHECK(std::memcmp(entries[0].data.data(), data.data() + 2048, 4096) == 0);
  auto st = s.aa->Stats(s.table.id());
  REQUIRE(st.ok());
  REQUIRE(st->regions.size() == 1);
  CHECK(st->regions[0].puts == 1);
  CHECK(st->regions[0].bytes_accessed == 4096);
}

TEST_CASE("active put, log_only: the region keeps its bytes, the data goes to the log") {
  Daemon d(kOneMemory);
  Setup s(d);
  REQUIRE(s.aa->Watch(s.table, Opts(8192, 4096, active::Action::kLogOnly)).ok());
  const auto data = Pattern(8192, 9);
  REQUIRE(s.Put(4096, data).status.ok());             // [4096, 12288)
  CHECK(Same(s.table.data() + 4096, data, 0, 4096));  // outside: applied
  for (uint64_t i = 8192; i < 12288; ++i) CHECK(s.table.data()[i] == std::byte{0x11});
  auto entries = s.Drain();
  REQUIRE(entries.size() == 1);
  CHECK_FALSE((entries[0].e.flags & active::kLogApplied));
  CHECK(std::memcmp(entries[0].data.data(), data.data() + 4096, 4096) == 0);
}

TEST_CASE("active put, apply_notify: applied, a metadata entry wakes the owner") {
  Daemon d(kOneMemory);
  Setup s(d);
  REQUIRE(s.aa->Watch(s.table, Opts(0, 4096, active::Action::kApplyNotify)).ok());
  const auto data = Pattern(100, 3);
  REQUIRE(s.Put(200, data).status.ok());
  CHECK(Same(s.table.data() + 200, data, 0, 100));
  client::AccessLog* log = s.aa->Log(s.table.id());
  REQUIRE(log->Wait(milliseconds(2000)));
  auto entries = s.Drain();
  REQUIRE(entries.size() == 1);
  CHECK((entries[0].e.flags & active::kLogNotify));
  CHECK(entries[0].e.data_bytes == 0);
  CHECK(entries[0].e.offset == 200);
  CHECK(entries[0].e.size == 100);
}

TEST_CASE("deny: the copy fails clearly and no byte of it lands") {
  Daemon d(kOneMemory);
  Setup s(d);
  REQUIRE(s.aa->Watch(s.table, Opts(4096, 4096, active::Action::kDeny)).ok());
  const auto data = Pattern(8192, 4);
  Completion c = s.Put(0, data);
  CHECK(absl::IsPermissionDenied(c.status));
  CHECK(c.status.message().find("denies") != std::string::npos);
  for (uint64_t i = 0; i < kTable; ++i) REQUIRE(s.table.data()[i] == std::byte{0x11});
  // A get touching it is refused too; one beside it is served.
  CHECK(absl::IsPermissionDenied(s.Get(4000, 200).first.status));
  CHECK(s.Get(0, 4096).first.status.ok());
}

TEST_CASE("active get, apply_log: served and logged with the data read") {
  Daemon d(kOneMemory);
  Setup s(d);
  const auto pattern = Pattern(kTable, 12);
  std::memcpy(s.table.data(), pattern.data(), kTable);
  REQUIRE(s.aa->Watch(s.table, Opts(0, 8192, active::Action::kApplyLog)).ok());
  auto [c, got] = s.Get(4000, 1000);
  REQUIRE(c.status.ok());
  CHECK(Same(got.data(), pattern, 4000, 1000));
  auto entries = s.Drain();
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].e.op == static_cast<uint16_t>(active::LogOp::kGet));
  CHECK(entries[0].e.offset == 4000);
  CHECK(std::memcmp(entries[0].data.data(), pattern.data() + 4000, 1000) == 0);
}

TEST_CASE("the log wraps many times and loses nothing while the owner keeps up") {
  Daemon d(kOneMemory);
  Setup s(d);
  WatchOptions o = Opts(0, kTable, active::Action::kApplyLog);
  o.log_bytes = 4096;  // a few entries at a time
  REQUIRE(s.aa->Watch(s.table, o).ok());
  std::atomic<bool> stop{false};
  std::vector<Entry> seen;
  std::thread owner([&] {
    client::AccessLog* log = s.aa->Log(s.table.id());
    while (!stop || log->Wait(milliseconds(50))) {
      log->Wait(milliseconds(20));
      log->Poll([&](const active::LogEntry& e, std::string_view data) {
        seen.push_back({e, std::string(data)});
      });
      log->Ack();
    }
  });
  constexpr int kPuts = 200;
  for (int i = 0; i < kPuts; ++i) {
    const auto data = Pattern(300, static_cast<uint64_t>(i));
    REQUIRE(s.Put(static_cast<uint64_t>(i) * 300 % (kTable - 300), data).status.ok());
  }
  stop = true;
  owner.join();
  REQUIRE(seen.size() == kPuts);
  for (int i = 0; i < kPuts; ++i) {
    CHECK(seen[i].e.seq == static_cast<uint64_t>(i + 1));
    const auto data = Pattern(300, static_cast<uint64_t>(i));
    CHECK(std::memcmp(seen[i].data.data(), data.data(), 300) == 0);
  }
}

TEST_CASE("a full log in fail mode fails the copy before any byte lands") {
  Daemon d(kOneMemory);
  Setup s(d);
  WatchOptions o = Opts(0, kTable, active::Action::kApplyLog);
  o.log_bytes = 4096;
  o.full = WatchOptions::Full::kFail;
  REQUIRE(s.aa->Watch(s.table, o).ok());
  int ok = 0;
  Completion last;
  for (int i = 0; i < 40; ++i) {
    last = s.Put(0, Pattern(500, static_cast<uint64_t>(i)));
    if (!last.status.ok()) break;
    ++ok;
  }
  REQUIRE(absl::IsResourceExhausted(last.status));
  CHECK(last.status.message().find("full") != std::string::npos);
  CHECK(ok >= 2);
  // The failed put left the bytes of the last successful one.
  CHECK(Same(s.table.data(), Pattern(500, static_cast<uint64_t>(ok - 1)), 0, 500));
  CHECK(s.Drain().size() == static_cast<size_t>(ok));  // every entry is there
  CHECK(s.Put(0, Pattern(500, 99)).status.ok());       // room again after the ack
}

TEST_CASE("a full log in block mode holds the copy until the owner acknowledges") {
  Daemon d(kOneMemory);
  Setup s(d);
  WatchOptions o = Opts(0, kTable, active::Action::kApplyLog);
  o.log_bytes = 4096;
  o.full = WatchOptions::Full::kBlock;
  REQUIRE(s.aa->Watch(s.table, o).ok());
  // Fill the log without acknowledging.
  int i = 0;
  std::future<Completion> blocked;
  for (;; ++i) {
    blocked = std::async(std::launch::async,
                         [&s, i] { return s.Put(0, Pattern(500, static_cast<uint64_t>(i))); });
    if (blocked.wait_for(milliseconds(500)) != std::future_status::ready) break;
    REQUIRE(blocked.get().status.ok());
    REQUIRE(i < 40);
  }
  // The copy waits; the owner acknowledges; it completes, applied.
  CHECK(blocked.wait_for(milliseconds(300)) == std::future_status::timeout);
  s.Drain();
  REQUIRE(blocked.wait_for(milliseconds(5000)) == std::future_status::ready);
  CHECK(blocked.get().status.ok());
  CHECK(Same(s.table.data(), Pattern(500, static_cast<uint64_t>(i)), 0, 500));
}

TEST_CASE("active flush returns only once the owner has handled every access so far") {
  Daemon d(kOneMemory);
  Setup s(d);
  REQUIRE(s.aa->Watch(s.table, Opts(0, 4096, active::Action::kApplyNotify)).ok());
  REQUIRE(s.Put(0, Pattern(64, 1)).status.ok());
  ActiveAccess writer(*s.b);
  auto flushed = std::async(std::launch::async,
                            [&] { return writer.Flush(s.table.id(), milliseconds(10000)); });
  CHECK(flushed.wait_for(milliseconds(300)) == std::future_status::timeout);
  CHECK(s.Drain().size() == 1);
  REQUIRE(flushed.wait_for(milliseconds(5000)) == std::future_status::ready);
  CHECK(flushed.get().ok());
  // Nothing pending: at once. A short limit with pending entries: deadline.
  CHECK(writer.Flush(s.table.id()).ok());
  REQUIRE(s.Put(0, Pattern(64, 2)).status.ok());
  CHECK(absl::IsDeadlineExceeded(writer.Flush(s.table.id(), milliseconds(100))));
}

TEST_CASE("only the owner watches an allocation or reads its log") {
  Daemon d(kOneMemory);
  Setup s(d);
  REQUIRE(s.aa->Watch(s.table, Opts(0, 4096, active::Action::kApplyLog)).ok());
  // Another client's Map of a watched allocation: a handle, no memory.
  auto mapped = s.b->Map(s.table.id());
  REQUIRE(mapped.ok());
  CHECK(mapped->data() == nullptr);
  ActiveAccess other(*s.b);
  CHECK(absl::IsPermissionDenied(
      other.Watch(*mapped, Opts(0, 4096, active::Action::kDeny)).status()));
  CHECK(absl::IsPermissionDenied(other.Stats(s.table.id()).status()));
  CHECK(other.Log(s.table.id()) == nullptr);
  // Bad ranges are refused at the boundary.
  CHECK(absl::IsInvalidArgument(
      s.aa->Watch(s.table, Opts(100, 4096, active::Action::kApplyLog)).status()));
  CHECK(absl::IsInvalidArgument(
      s.aa->Watch(s.table, Opts(0, 8192, active::Action::kApplyLog)).status()));
  CHECK(absl::IsInvalidArgument(
      s.aa->Watch(s.table, Opts(kTable, 4096, active::Action::kApplyLog)).status()));
  // A hashtable region without room for one slot (16 + 4096 bytes in one
  // page) is refused: a put into it once divided by zero slots and took
  // the daemon down. The daemon serves on.
  WatchOptions tiny = Opts(4096, 4096, active::Action::kLogOnly);
  tiny.handler = active::Handler::kHashInsert;
  tiny.value_bytes = 4096;
  const auto refused = s.aa->Watch(s.table, tiny);
  CHECK(absl::IsInvalidArgument(refused.status()));
  CHECK(std::string(refused.status().message()).find("slot") != std::string::npos);
  CHECK(s.Put(4096, std::vector<std::byte>(64, std::byte{7})).status.ok());
}

TEST_CASE("an owner that goes releases its regions and log; a waiting copy fails, not hangs") {
  Daemon d(kOneMemory);
  Setup s(d);
  WatchOptions o = Opts(0, kTable, active::Action::kApplyLog);
  o.log_bytes = 4096;
  REQUIRE(s.aa->Watch(s.table, o).ok());
  CHECK(d.Status().watched_regions() == 1);
  std::future<Completion> blocked;
  for (int i = 0; i < 40; ++i) {
    blocked = std::async(std::launch::async, [&s] { return s.Put(0, Pattern(500, 1)); });
    if (blocked.wait_for(milliseconds(500)) != std::future_status::ready) break;
    REQUIRE(blocked.get().status.ok());
  }
  s.aa.reset();
  s.a.reset();  // the owner's session ends (as when its process dies)
  REQUIRE(blocked.wait_for(milliseconds(5000)) == std::future_status::ready);
  CHECK(absl::IsAborted(blocked.get().status));
  for (int i = 0; i < 300 && d.Status().watched_allocations() != 0; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  CHECK(d.Status().watched_allocations() == 0);
  CHECK(d.Status().watched_regions() == 0);
  // The allocation stays published; puts go straight in now.
  CHECK(s.Put(0, Pattern(500, 2)).status.ok());
}

TEST_CASE("built-in handlers: counters, hashtable insert, dirty pages, file log") {
  char tmpl[] = "/var/tmp/isometry-active-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  Daemon d(std::string(kOneMemory) + "[[memory]]\nname = \"dsk0\"\nkind = \"DSK\"\ndirectory = \"" +
           dir + "\"\n");
  Setup s(d);
  WatchOptions count = Opts(0, 4096, active::Action::kApplyLog);
  count.handler = active::Handler::kCount;
  WatchOptions hash = Opts(4096, 16384, active::Action::kLogOnly);
  hash.handler = active::Handler::kHashInsert;
  hash.value_bytes = 8;
  WatchOptions dirty = Opts(20480, 16384, active::Action::kApplyLog);
  dirty.handler = active::Handler::kDirtyPages;
  WatchOptions file = Opts(36864, 4096, active::Action::kApplyLog);
  file.handler = active::Handler::kFileLog;
  file.file_memory = "dsk0";
  file.file = "access.log";
  std::memset(s.table.data() + 4096, 0, 16384);  // an empty hashtable
  for (const WatchOptions& o : {count, hash, dirty, file}) REQUIRE(s.aa->Watch(s.table, o).ok());
  REQUIRE(s.Put(0, Pattern(100, 1)).status.ok());
  REQUIRE(s.Get(0, 50).first.status.ok());
  // Two (key, value) records in one put.
  std::vector<std::byte> recs(32);
  const uint64_t kv[4] = {42, 4200, 7, 700};
  std::memcpy(recs.data(), kv, 32);
  REQUIRE(s.Put(4096, recs).status.ok());
  REQUIRE(s.Put(20480 + 5000, Pattern(5000, 2)).status.ok());  // pages 6..7 of the table
  REQUIRE(s.Put(36864, Pattern(10, 3)).status.ok());
  auto st = s.aa->Stats(s.table.id());
  REQUIRE(st.ok());
  REQUIRE(st->regions.size() == 4);
  CHECK(st->regions[0].puts == 1);
  CHECK(st->regions[0].gets == 1);
  CHECK(st->regions[1].inserts == 2);
  CHECK(st->regions[2].dirty_pages == 2);
  // The hashtable holds both keys (slots of {used, key, value}).
  int found = 0;
  for (uint64_t at = 4096; at + 24 <= 4096 + 16384; at += 24) {
    uint64_t slot[3];
    std::memcpy(slot, s.table.data() + at, 24);
    if (slot[0] == 1 && ((slot[1] == 42 && slot[2] == 4200) || (slot[1] == 7 && slot[2] == 700))) {
      ++found;
    }
  }
  CHECK(found == 2);
  auto pages = s.aa->DirtyPages(s.table.id(), true);
  REQUIRE(pages.ok());
  CHECK(*pages == std::vector<uint64_t>{6, 7});
  CHECK(s.aa->DirtyPages(s.table.id(), false)->empty());
  // The file log: its header, then one entry with its 10 bytes.
  CHECK(std::filesystem::file_size(dir + "/access.log") ==
        sizeof(active::FileLogHeader) + sizeof(active::LogEntry) + 10);
  {
    std::ifstream in(dir + "/access.log", std::ios::binary);
    active::FileLogHeader h{};
    active::LogEntry e{};
    in.read(reinterpret_cast<char*>(&h),
            sizeof h);  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
    in.read(reinterpret_cast<char*>(&e),
            sizeof e);  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
    CHECK(std::memcmp(h.magic, active::kFileLogMagic, sizeof h.magic) == 0);
    CHECK(h.version == active::kFileLogVersion);
    CHECK(h.entry_bytes == sizeof(active::LogEntry));
    CHECK(h.allocation == s.table.id());
    CHECK(e.op == static_cast<uint16_t>(active::LogOp::kPut));
    CHECK(e.offset == 36864);
    CHECK(e.data_bytes == 10);
    CHECK(e.record_bytes == sizeof e + 10);
  }
  // Appending to a file that is not a file log is refused, the file kept.
  {
    std::ofstream(dir + "/notes.txt") << "not a log";
    WatchOptions other = Opts(40960, 4096, active::Action::kApplyLog);
    other.handler = active::Handler::kFileLog;
    other.file_memory = "dsk0";
    other.file = "notes.txt";
    auto refused = s.aa->Watch(s.table, other);
    CHECK(absl::IsInvalidArgument(refused.status()));
    CHECK(std::filesystem::file_size(dir + "/notes.txt") == 9);
  }
  // The client handler's log saw none of these.
  CHECK(s.Drain().empty());
  std::filesystem::remove_all(dir);
}

namespace {

size_t OpenFds(pid_t pid) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("an owner process killed with SIGKILL: regions and log released, writers not stuck") {
  Daemon d(kOneMemory);
  const char* bin = std::getenv("ISOMETRY_CLIENT_WORKER");
  REQUIRE(bin);
  int out[2];
  REQUIRE(pipe(out) == 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  const std::string sock = d.local_socket();
  char* argv[] = {const_cast<char*>(bin), const_cast<char*>(sock.c_str()),
                  const_cast<char*>("watcher"), nullptr};
  pid_t owner = -1;
  REQUIRE(posix_spawn(&owner, bin, &fa, nullptr, argv, environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  std::string line;
  char ch;
  while (read(out[0], &ch, 1) == 1 && ch != '\n') line += ch;
  close(out[0]);
  const uint64_t table = std::stoull(line);
  CHECK(d.Status().watched_regions() == 1);
  // A writer fills the never-acknowledged log; its next put waits.
  auto b = ConnectTo(d.local_socket(), "writer");
  auto mapped = b->Map(table);
  REQUIRE(mapped.ok());
  auto src = b->Allocate("sys0", 500);
  REQUIRE(src.ok());
  auto s = b->Register(*src, 0, ByteShape(500));
  auto t = b->Register(*mapped, 0, ByteShape(500));
  REQUIRE((s.ok() && t.ok()));
  std::future<Completion> blocked;
  for (int i = 0; i < 40; ++i) {
    blocked = std::async(std::launch::async, [&] { return b->Copy(*s, *t); });
    if (blocked.wait_for(milliseconds(500)) != std::future_status::ready) break;
    REQUIRE(blocked.get().status.ok());
  }
  const size_t fds_watched = OpenFds(d.pid());
  kill(owner, SIGKILL);
  waitpid(owner, nullptr, 0);
  REQUIRE(blocked.wait_for(milliseconds(5000)) == std::future_status::ready);
  CHECK(absl::IsAborted(blocked.get().status));
  for (int i = 0; i < 300 && d.Status().watched_allocations() != 0; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  const v1::StatusResponse st = d.Status();
  CHECK(st.watched_allocations() == 0);
  CHECK(st.watched_regions() == 0);
  CHECK(st.watches_size() == 0);
  // The owner's socket, control segment, its two eventfds, and the log's
  // memfd and eventfd are closed.
  for (int i = 0; i < 300 && OpenFds(d.pid()) > fds_watched - 6; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  CHECK(OpenFds(d.pid()) <= fds_watched - 6);
  CHECK(b->Copy(*s, *t).status.ok());  // the published allocation is plain memory now
}

TEST_CASE("incremental checkpoint writes only dirty pages and restores byte-exact") {
  char tmpl[] = "/var/tmp/isometry-ckpt-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  Daemon d(std::string(kOneMemory) + "[[memory]]\nname = \"dsk0\"\nkind = \"DSK\"\ndirectory = \"" +
           dir + "\"\n[[channel]]\nname = \"disk_read0\"\nkind = \"disk_read\"\n");
  Setup s(d);
  const auto start = Pattern(kTable, 21);
  std::memcpy(s.table.data(), start.data(), kTable);
  WatchOptions o = Opts(0, kTable, active::Action::kApplyLog);
  o.handler = active::Handler::kDirtyPages;
  REQUIRE(s.aa->Watch(s.table, o).ok());
  auto first = s.aa->Checkpoint(s.table.id(), "dsk0", "table.img");
  REQUIRE(first.ok());
  CHECK(first->full);
  CHECK(first->bytes_written == kTable);
  // Two pages change by active puts (one put spans a page boundary).
  REQUIRE(s.Put(4096 * 3 + 4000, Pattern(200, 5)).status.ok());  // pages 3 and 4
  REQUIRE(s.Put(4096 * 9 + 10, Pattern(20, 6)).status.ok());     // page 9
  auto second = s.aa->Checkpoint(s.table.id(), "dsk0", "table.img");
  REQUIRE(second.ok());
  CHECK_FALSE(second->full);
  CHECK(second->pages_written == 3);
  CHECK(second->bytes_written == uint64_t{3} * 4096);
  // Nothing written since: nothing to write.
  auto third = s.aa->Checkpoint(s.table.id(), "dsk0", "table.img");
  REQUIRE(third.ok());
  CHECK(third->pages_written == 0);
  // Restore into a fresh allocation: base + delta chain.
  auto fresh = s.a->Allocate("sys0", kTable);
  REQUIRE(fresh.ok());
  REQUIRE(s.aa->Restore(fresh->id(), "dsk0", "table.img").ok());
  CHECK(std::memcmp(fresh->data(), s.table.data(), kTable) == 0);
  CHECK(std::memcmp(s.table.data() + uint64_t{4096} * 3 + 4000, Pattern(200, 5).data(), 200) == 0);
  // Compacted, the base alone is the image: the daemon's disk path reads it.
  REQUIRE(s.aa->Compact("dsk0", "table.img").ok());
  auto copy = s.a->Allocate("sys0", kTable);
  REQUIRE(copy.ok());
  auto file = s.a->RegisterFile("dsk0", "table.img", 0, ByteShape(kTable));
  auto into = s.a->Register(*copy, 0, ByteShape(kTable));
  REQUIRE((file.ok() && into.ok()));
  REQUIRE(s.a->Copy(*file, *into).status.ok());
  CHECK(std::memcmp(copy->data(), s.table.data(), kTable) == 0);
  // Only the owner checkpoints.
  CHECK(absl::IsPermissionDenied(
      ActiveAccess(*s.b).Checkpoint(s.table.id(), "dsk0", "other.img").status()));
  std::filesystem::remove_all(dir);
}

}  // namespace ISOMETRY_TEST_FILE
