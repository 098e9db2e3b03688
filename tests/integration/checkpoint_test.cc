// Incremental checkpoints (Active Access, issue #19) against a real
// isometryd: a base image plus a delta chain restores byte-exact after a
// full checkpoint, after several incrementals and after compaction; the
// client's own stores, tracked with userfaultfd write-protect, are in the
// image; damaged or mismatched input is refused and changes nothing.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "client/cpp/active_access.h"
#include "client/cpp/write_tracker.h"
#include "integration/client_helpers.h"
#include "integration/daemon_fixture.h"
#include "unit/skip.h"
#include "unit/test_util.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;
using client::ActiveAccess;
using client::WatchOptions;

namespace {

constexpr uint64_t kTable = uint64_t{512} * 1024;
constexpr uint64_t kPage = 4096;

// A daemon with DSK memory dsk0 in a fresh directory; chains of more than
// three records are compacted.
struct Env {
  std::string dir;
  Daemon d;
  std::unique_ptr<Client> a, b;  // owner, writer
  Allocation table;
  ActiveAccess aa;
  static std::string Dir() {
    char tmpl[] = "/var/tmp/isometry-ckpt-XXXXXX";
    return mkdtemp(tmpl);
  }
  Env()
      : dir(Dir()),
        d("checkpoint_max_deltas = 3\n" + std::string(kOneMemory) +
          "[[memory]]\nname = \"dsk0\"\nkind = \"DSK\"\ndirectory = \"" + dir + "\"\n"),
        a(ConnectTo(d.local_socket(), "owner")),
        b(ConnectTo(d.local_socket(), "writer")),
        table(*a->Allocate("sys0", kTable)),
        aa(*a) {
    const auto start = Pattern(kTable, 21);
    std::memcpy(table.data(), start.data(), kTable);
    REQUIRE(table.Publish().ok());
    WatchOptions o;
    o.bytes = kTable;
    o.handler = active::Handler::kDirtyPages;
    REQUIRE(aa.Watch(table, o).ok());
  }
  ~Env() { std::filesystem::remove_all(dir); }
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;
  // b puts `n` pattern bytes at `offset` of the table (an active put, a
  // gRPC Write: another client may not map a watched allocation).
  void Put(uint64_t offset, uint64_t n, uint64_t seed) {
    const auto bytes = Pattern(n, seed);
    v1::WriteRequest req;
    req.set_allocation(table.id());
    req.set_offset(offset);
    req.set_data(reinterpret_cast<const char*>(bytes.data()), n);
    grpc::ClientContext ctx;
    ctx.AddMetadata("isometry-session", b->session());
    v1::WriteResponse resp;
    const grpc::Status s = d.stub().Write(&ctx, req, &resp);
    INFO(s.error_message());
    REQUIRE(s.ok());
  }
  // Restores into a fresh allocation and compares it with the table.
  bool RestoresExact() {
    auto fresh = a->Allocate("sys0", kTable);
    REQUIRE(fresh.ok());
    auto r = aa.Restore(fresh->id(), "dsk0", "t.img");
    INFO(r.status().ToString());
    REQUIRE(r.ok());
    CHECK(r->image_bytes == kTable);
    return std::memcmp(fresh->data(), table.data(), kTable) == 0;
  }
  std::string Path(const std::string& name) const { return dir + "/" + name; }
};

std::vector<char> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("a delta chain restores byte-exact after full, incrementals and compaction") {
  Env e;
  auto full = e.aa.Checkpoint(e.table.id(), "dsk0", "t.img");
  REQUIRE(full.ok());
  CHECK(full->full);
  CHECK(full->deltas == 0);
  CHECK(e.RestoresExact());
  for (uint64_t round = 1; round <= 3; ++round) {
    e.Put(kPage * (10 * round) + 4000, 300, round);  // two pages
    e.Put(kPage * 50 + round * 8, 8, round + 10);    // the same page every round
    auto inc = e.aa.Checkpoint(e.table.id(), "dsk0", "t.img");
    REQUIRE(inc.ok());
    CHECK_FALSE(inc->full);
    CHECK(inc->pages_written == 3);
    CHECK(inc->deltas == round);
    CHECK_FALSE(inc->compacted);
    CHECK(std::filesystem::file_size(e.Path("t.img.delta")) == inc->delta_file_bytes);
    CHECK(e.RestoresExact());
  }
  // The base alone is still the first image: the chain carries the rest.
  CHECK(ReadFile(e.Path("t.img")) !=
        std::vector<char>(reinterpret_cast<char*>(e.table.data()),
                          reinterpret_cast<char*>(e.table.data()) + kTable));
  // A fourth record passes daemon.checkpoint_max_deltas = 3: merged.
  e.Put(kPage * 60, 10, 99);
  auto fourth = e.aa.Checkpoint(e.table.id(), "dsk0", "t.img");
  REQUIRE(fourth.ok());
  CHECK(fourth->compacted);
  CHECK(fourth->deltas == 0);
  CHECK(std::filesystem::file_size(e.Path("t.img.delta")) == 0);
  CHECK(ReadFile(e.Path("t.img")) ==
        std::vector<char>(reinterpret_cast<char*>(e.table.data()),
                          reinterpret_cast<char*>(e.table.data()) + kTable));
  CHECK(e.RestoresExact());
  // Explicit compaction, and a checkpoint asking for it.
  e.Put(kPage * 70, 10, 7);
  REQUIRE(e.aa.Checkpoint(e.table.id(), "dsk0", "t.img")->deltas == 1);
  auto compacted = e.aa.Compact("dsk0", "t.img");
  REQUIRE(compacted.ok());
  CHECK(compacted->deltas == 1);
  CHECK(compacted->pages_applied == 1);
  CHECK(e.RestoresExact());
  e.Put(kPage * 71, 10, 8);
  client::CheckpointOptions o;
  o.compact = true;
  auto asked = e.aa.Checkpoint(e.table.id(), "dsk0", "t.img", o);
  REQUIRE(asked.ok());
  CHECK(asked->compacted);
  CHECK(e.RestoresExact());
  // A full checkpoint drops the chain.
  e.Put(kPage * 72, 10, 9);
  REQUIRE(e.aa.Checkpoint(e.table.id(), "dsk0", "t.img")->deltas == 1);
  auto again = e.aa.Checkpoint(e.table.id(), "dsk0", "t.img", true);
  REQUIRE(again.ok());
  CHECK(again->full);
  CHECK(std::filesystem::file_size(e.Path("t.img.delta")) == 0);
  CHECK(e.RestoresExact());
}

TEST_CASE("damaged or mismatched restore input is refused and changes nothing") {
  Env e;
  REQUIRE(e.aa.Checkpoint(e.table.id(), "dsk0", "t.img").ok());
  e.Put(kPage * 3, 100, 1);
  e.Put(kPage * 7, 100, 2);
  REQUIRE(e.aa.Checkpoint(e.table.id(), "dsk0", "t.img")->deltas == 1);
  e.Put(kPage * 9, 100, 3);
  REQUIRE(e.aa.Checkpoint(e.table.id(), "dsk0", "t.img")->deltas == 2);
  const auto good = ReadFile(e.Path("t.img.delta"));
  auto fresh = e.a->Allocate("sys0", kTable);
  REQUIRE(fresh.ok());
  std::memset(fresh->data(), 0x5A, kTable);
  const std::vector<std::byte> untouched(kTable, std::byte{0x5A});
  auto write_delta = [&](const std::vector<char>& bytes) {
    std::ofstream(e.Path("t.img.delta"), std::ios::binary | std::ios::trunc)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  };
  auto flipped = good;
  flipped[good.size() - 5] ^= 1;  // page data of the last record
  write_delta(flipped);
  Status s = e.aa.Restore(fresh->id(), "dsk0", "t.img").status();
  INFO(s.ToString());
  CHECK(absl::IsDataLoss(s));
  CHECK(std::string(s.message()).find("record 2") != std::string::npos);
  CHECK(Bytes(*fresh, kTable) == untouched);
  write_delta(std::vector<char>(good.begin(), good.end() - 100));  // cut short
  CHECK(absl::IsDataLoss(e.aa.Restore(fresh->id(), "dsk0", "t.img").status()));
  CHECK(Bytes(*fresh, kTable) == untouched);
  // Compaction refuses the damaged chain too, and leaves the base alone.
  const auto base = ReadFile(e.Path("t.img"));
  CHECK(absl::IsDataLoss(e.aa.Compact("dsk0", "t.img").status()));
  CHECK(ReadFile(e.Path("t.img")) == base);
  // Another size, a missing checkpoint, a name leaving the directory.
  write_delta(good);
  auto small = e.a->Allocate("sys0", kTable / 2);
  REQUIRE(small.ok());
  CHECK(absl::IsInvalidArgument(e.aa.Restore(small->id(), "dsk0", "t.img").status()));
  CHECK(absl::IsNotFound(e.aa.Restore(fresh->id(), "dsk0", "none.img").status()));
  CHECK(absl::IsPermissionDenied(e.aa.Restore(fresh->id(), "dsk0", "../t.img").status()));
  CHECK(Bytes(*fresh, kTable) == untouched);
  // Only the owner restores into an allocation.
  CHECK(
      absl::IsPermissionDenied(ActiveAccess(*e.b).Restore(fresh->id(), "dsk0", "t.img").status()));
  CHECK(e.RestoresExact());
  // A checkpoint over a chain whose header or payload is damaged starts
  // over with a full image, and says why (before, a damaged payload was
  // appended to: a chain that could never be restored).
  auto bad_header = good;
  bad_header[10] ^= 1;
  write_delta(bad_header);
  e.Put(kPage * 11, 100, 4);
  auto ck = e.aa.Checkpoint(e.table.id(), "dsk0", "t.img");
  REQUIRE(ck.ok());
  CHECK(ck->full);
  CHECK(ck->full_reason.find("cannot be extended") != std::string::npos);
  CHECK(e.RestoresExact());
  e.Put(kPage * 12, 100, 5);
  REQUIRE(e.aa.Checkpoint(e.table.id(), "dsk0", "t.img")->deltas == 1);
  auto bad_payload = ReadFile(e.Path("t.img.delta"));
  bad_payload[bad_payload.size() - 5] ^= 1;
  write_delta(bad_payload);
  e.Put(kPage * 13, 100, 6);
  auto over = e.aa.Checkpoint(e.table.id(), "dsk0", "t.img");
  REQUIRE(over.ok());
  INFO(over->full_reason);
  CHECK(over->full);
  CHECK(over->full_reason.find("payload CRC mismatch") != std::string::npos);
  CHECK(e.RestoresExact());
  e.Put(kPage * 14, 100, 7);
  CHECK_FALSE(e.aa.Checkpoint(e.table.id(), "dsk0", "t.img")->full);
  CHECK(e.RestoresExact());
}

TEST_CASE("a sparse delta file far past any chain's size is refused unread") {
  Env e;
  REQUIRE(e.aa.Checkpoint(e.table.id(), "dsk0", "t.img").ok());
  e.Put(kPage * 3, 100, 1);
  REQUIRE(e.aa.Checkpoint(e.table.id(), "dsk0", "t.img")->deltas == 1);
  // 60 GiB that hold a few KiB (before: read whole, std::bad_alloc, abort).
  REQUIRE(::truncate(e.Path("t.img.delta").c_str(), off_t{60} << 30) == 0);
  auto fresh = e.a->Allocate("sys0", kTable);
  REQUIRE(fresh.ok());
  std::memset(fresh->data(), 0x5A, kTable);
  const std::vector<std::byte> untouched(kTable, std::byte{0x5A});
  const auto start = std::chrono::steady_clock::now();
  const Status restore = e.aa.Restore(fresh->id(), "dsk0", "t.img").status();
  const Status compact = e.aa.Compact("dsk0", "t.img").status();
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  for (const Status& s : {restore, compact}) {
    INFO(s.ToString());
    CHECK(absl::IsDataLoss(s));
    CHECK(std::string(s.message()).find("dsk0:t.img.delta") != std::string::npos);
    CHECK(std::string(s.message()).find("at most") != std::string::npos);
  }
  CHECK(Bytes(*fresh, kTable) == untouched);
  CHECK(std::filesystem::file_size(e.Path("t.img.delta")) == uint64_t{60} << 30);
  // The daemon lives on; the next checkpoint starts a new chain.
  e.Put(kPage * 4, 100, 2);
  auto ck = e.aa.Checkpoint(e.table.id(), "dsk0", "t.img");
  REQUIRE(ck.ok());
  CHECK(ck->full);
  CHECK(std::filesystem::file_size(e.Path("t.img.delta")) == 0);
  CHECK(e.RestoresExact());
}

TEST_CASE("checkpoint names with a `..` component are refused like instance names") {
  Env e;
  std::filesystem::create_directory(e.Path("sub"));
  auto fresh = e.a->Allocate("sys0", kTable);
  REQUIRE(fresh.ok());
  for (const Status& s : {e.aa.Checkpoint(e.table.id(), "dsk0", "sub/../x").status(),
                          e.aa.Restore(fresh->id(), "dsk0", "sub/../x").status(),
                          e.aa.Compact("dsk0", "sub/../x").status()}) {
    INFO(s.ToString());
    CHECK(absl::IsPermissionDenied(s));
    CHECK(std::string(s.message()).find("'..'") != std::string::npos);
  }
  CHECK_FALSE(std::filesystem::exists(e.Path("x")));
  // A name in a subdirectory works; its files are private to the owner.
  REQUIRE(e.aa.Checkpoint(e.table.id(), "dsk0", "sub/t.img").ok());
  for (const char* name : {"sub/t.img", "sub/t.img.delta"}) {
    INFO(name);
    CHECK((std::filesystem::status(e.Path(name)).permissions() & std::filesystem::perms::all) ==
          (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
  }
}

TEST_CASE("client page ranges are validated against the allocation") {
  Env e;
  REQUIRE(e.aa.Checkpoint(e.table.id(), "dsk0", "t.img").ok());
  auto send = [&](uint64_t first, uint64_t n, int copies) {
    v1::LocalRequest req;
    v1::CheckpointRequest* c = req.mutable_checkpoint();
    c->set_allocation(e.table.id());
    c->set_memory("dsk0");
    c->set_file("t.img");
    for (int i = 0; i < copies; ++i) {
      v1::PageRange* r = c->add_client_pages();
      r->set_first_page(first);
      r->set_pages(n);
    }
    return e.a->Request(req, nullptr).status();
  };
  const uint64_t pages = kTable / kPage;
  CHECK(absl::IsInvalidArgument(send(pages, 1, 1)));
  CHECK(absl::IsInvalidArgument(send(pages - 1, 2, 1)));
  CHECK(absl::IsInvalidArgument(send(1, UINT64_MAX, 1)));
  CHECK(absl::IsInvalidArgument(send(0, 0, 1)));
  CHECK(send(pages - 1, 1, 1).ok());
  // A request over the local socket's 1 MiB frame (250,000 ranges of 6 bytes)
  // fails at once, before a byte is sent, and the connection goes on.
  const Status big = send(1, 1, 250000);
  INFO(big.ToString());
  CHECK(absl::IsOutOfRange(big));
  CHECK(send(0, 1, 1).ok());
  CHECK(e.RestoresExact());
}

TEST_CASE("stores through the client's own mapping are tracked with userfaultfd",
          "[may_skip][uffd]") {
  const Status why = client::WriteTracker::Supported();
  if (!why.ok()) {
    ISOMETRY_SKIP("userfaultfd write-protect tracking unavailable: " << why.ToString());
  }
  Env e;
  auto tracker = client::WriteTracker::Start(e.table);
  REQUIRE(tracker.ok());
  client::CheckpointOptions o;
  o.tracker = tracker->get();
  auto first = e.aa.Checkpoint(e.table.id(), "dsk0", "t.img", o);
  REQUIRE(first.ok());
  CHECK(first->full);
  CHECK(first->tracker_status.ok());
  // Plain stores through this process's mapping: pages 5, 6 and the last;
  // an active put by another client: page 20.
  std::memset(e.table.data() + kPage * 5 + 100, 0xA1, kPage);
  e.table.data()[kTable - 1] = std::byte{0xB2};
  e.Put(kPage * 20, 64, 5);
  auto second = e.aa.Checkpoint(e.table.id(), "dsk0", "t.img", o);
  REQUIRE(second.ok());
  INFO(second->tracker_status.ToString());
  CHECK_FALSE(second->full);
  CHECK(second->pages_written == 4);
  CHECK(e.RestoresExact());
  // Nothing stored since: nothing listed. Reads do not count.
  volatile std::byte sink = e.table.data()[kPage * 30];
  (void)sink;
  auto third = e.aa.Checkpoint(e.table.id(), "dsk0", "t.img", o);
  REQUIRE(third.ok());
  CHECK(third->pages_written == 0);
  std::memset(e.table.data() + kPage * 40, 0xC3, 10);
  auto fourth = e.aa.Checkpoint(e.table.id(), "dsk0", "t.img", o);
  REQUIRE(fourth.ok());
  CHECK(fourth->pages_written == 1);
  CHECK(e.RestoresExact());
}

}  // namespace ISOMETRY_TEST_FILE
