// Direct reads (docs/guides/client-memory.md, "Direct reads") against a real daemon and a real
// second process: a client copies another process's published private
// range into its own memory with its own process_vm_readv calls by a lease
// the daemon grants once per pair, byte for byte what MPI_Pack/MPI_Unpack
// (core) give; a source that leaves or dies fails the copy instead of
// reading stale memory; lease requests for what the session may not read
// that way are refused, and the daemon keeps serving.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "client/cpp/isometry_client.h"
#include "integration/client_helpers.h"
#include "integration/daemon_fixture.h"
#include "integration/datatype_oracle.h"
#include "integration/read_pair.h"
#include "integration/worker_process.h"
#include "isometry.pb.h"
#include "unit/skip.h"
#include "unit/test_util.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;
using client::Elements;

namespace {

const Datatype kByte = Datatype::Basic(BasicType::kByte);

// A raw lease request, as a client could write it.
Status AskLease(Client& c, uint64_t src, uint64_t dst) {
  v1::LocalRequest req;
  req.mutable_direct_read()->set_src_instance(src);
  req.mutable_direct_read()->set_dst_instance(dst);
  std::vector<int> fds;
  Result<v1::LocalResponse> r = c.Request(req, &fds);
  for (int fd : fds) ::close(fd);
  return r.status();
}

// Polls `done` for up to 3 s (a session's end trails its client's).
template <class F>
bool Eventually(F done) {
  for (int i = 0; i < 300; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace

TEST_CASE("copies from another process's range into ours run here by a lease, verified") {
  const uint64_t bytes = 1 << 20;
  ReadPair pair(bytes, 31, "direct");
  auto& [d, other, c, mine, other0] = pair;
  // 8-byte blocks (one read of the extent, gathered here), 4 KiB blocks
  // (read run by run) and an indexed type with a negative lower bound.
  const Datatype small = Ok(Datatype::Hvector(8192, 8, 24, kByte));
  const Datatype large = Ok(Datatype::Hvector(64, 4096, 8192, kByte));
  const std::vector<int64_t> lens{3, 1, 4}, disps{-8, 0, 5};
  const Datatype idx = Ok(Datatype::Indexed(lens, disps, Datatype::Basic(BasicType::kInt64)));
  struct Case {
    const char* name;
    Datatype src;
    uint64_t src_offset;
    Datatype dst;
    int64_t dst_count;
    uint64_t dst_offset;
  };
  const std::vector<Case> cases = {
      {"8 B blocks into an indexed type", small, 128, idx, small.size() / idx.size(), 4096},
      {"4 KiB blocks into the same type", large, 64, large, 1, 1024},
  };
  uint64_t pairs = 0;
  for (const Case& k : cases) {
    INFO(k.name);
    REQUIRE(k.dst_count * k.dst.size() == k.src.size());
    auto theirs = c->RegisterPrivateInstance(other.range(), k.src_offset, Elements{k.src, 1, 0});
    auto ours = c->Register(mine.range, k.dst_offset, Elements{k.dst, k.dst_count, 0});
    REQUIRE(theirs.ok());
    REQUIRE(ours.ok());
    const std::vector<uint8_t> mine0 = mine.bytes;
    const uint64_t direct0 = c->direct_reads_run();
    for (int i = 0; i < 3; ++i) {
      const client::Completion done = c->Copy(*theirs, *ours);
      REQUIRE(done.status.ok());
      CHECK(done.transfer == 0);  // no transfer of the daemon: it ran here
    }
    ++pairs;
    CHECK(c->direct_reads_run() == direct0 + 3);
    CHECK(mine.bytes == Expected(other0, static_cast<int64_t>(k.src_offset), k.src, 1, mine0,
                                 static_cast<int64_t>(k.dst_offset), k.dst, k.dst_count));
  }
  // One lease a pair, however many copies.
  v1::StatusResponse st = d.Status();
  CHECK(st.direct_read_leases() == pairs);
  CHECK(st.direct_read_refused() == 0);

  // A client that turned direct reads off copies through the daemon, with
  // the same bytes.
  auto off = Client::Connect(
      {.local_socket = d.local_socket(), .name = "no-direct", .direct_reads = false});
  REQUIRE(off.ok());
  Mine mine2 = RegisterMine(**off, bytes, 33);
  auto theirs = (*off)->RegisterPrivateInstance(other.range(), 0, Elements{small, 1, 0});
  auto ours = (*off)->Register(mine2.range, 0, Elements{small, 1, 0});
  REQUIRE(theirs.ok());
  REQUIRE(ours.ok());
  const std::vector<uint8_t> before2 = mine2.bytes;
  const client::Completion done = (*off)->Copy(*theirs, *ours);
  REQUIRE(done.status.ok());
  CHECK(done.transfer != 0);
  CHECK((*off)->direct_reads_run() == 0);
  CHECK(mine2.bytes == Expected(other0, 0, small, 1, before2, 0, small, 1));
  CHECK(d.Status().direct_read_leases() == pairs);
  CHECK(d.Stop() == 0);
}

TEST_CASE("a source that leaves revokes its leases; one that dies fails the copy") {
  Daemon d(kDatatypeChannels);
  const Datatype type = Ok(Datatype::Hvector(256, 1024, 2048, kByte));
  auto c = ConnectTo(d.local_socket(), "direct");
  Mine mine = RegisterMine(*c, 1 << 20, 41);
  auto copy_from = [&](Worker& w) {
    auto theirs = c->RegisterPrivateInstance(w.range(), 0, Elements{type, 1, 0});
    auto ours = c->Register(mine.range, 0, Elements{type, 1, 0});
    REQUIRE(theirs.ok());
    REQUIRE(ours.ok());
    REQUIRE(c->Copy(*theirs, *ours).status.ok());
    REQUIRE(c->direct_reads_run() > 0);
    return std::make_pair(*std::move(theirs), *std::move(ours));
  };

  SECTION("its session ends while its process and memory stay") {
    Worker other(d, 1 << 20, 42);
    auto [theirs, ours] = copy_from(other);
    const uint64_t direct = c->direct_reads_run();
    other.Leave();
    REQUIRE(Eventually([&] { return d.Status().direct_read_revoked() >= 1; }));
    // The memory is still there and readable by this process, but the
    // range ended: the copy fails as through the daemon, no read happens.
    const client::Completion done = c->Copy(theirs, ours);
    CHECK(absl::IsNotFound(done.status));
    CHECK(c->direct_reads_run() == direct);
  }
  SECTION("its process is killed") {
    Worker other(d, 1 << 20, 43);
    auto [theirs, ours] = copy_from(other);
    other.Kill();
    const client::Completion done = c->Copy(theirs, ours);
    CHECK(absl::IsNotFound(done.status));
  }
  // The daemon keeps serving this client: a copy between its own ranges.
  Mine other_mine = RegisterMine(*c, 1 << 20, 44);
  auto a = c->Register(other_mine.range, 0, Elements{type, 1, 0});
  auto b = c->Register(mine.range, 0, Elements{type, 1, 0});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(c->Copy(*a, *b).status.ok());
  CHECK(d.Stop() == 0);
}

TEST_CASE("lease requests for what the session may not read that way are refused") {
  Daemon d(kDatatypeChannels);
  Worker other(d, 1 << 20, 51);
  auto c = ConnectTo(d.local_socket(), "attacker");
  auto victim = ConnectTo(d.local_socket(), "victim");
  Mine mine = RegisterMine(*c, 1 << 20, 52);
  Mine theirs_mem = RegisterMine(*victim, 1 << 20, 53);
  const Datatype type = Ok(Datatype::Hvector(128, 512, 1024, kByte));
  auto theirs = c->RegisterPrivateInstance(other.range(), 0, Elements{type, 1, 0});
  auto ours = c->Register(mine.range, 0, Elements{type, 1, 0});
  auto victims = victim->Register(theirs_mem.range, 0, Elements{type, 1, 0});
  REQUIRE(theirs.ok());
  REQUIRE(ours.ok());
  REQUIRE(victims.ok());
  const std::vector<uint8_t> mine0 = mine.bytes;

  // Another session's instance (its range is not published): as if absent.
  CHECK(absl::IsNotFound(AskLease(*c, victims->id(), ours->id())));
  CHECK(absl::IsNotFound(AskLease(*c, ours->id(), victims->id())));
  CHECK(absl::IsNotFound(AskLease(*c, 1 << 30, ours->id())));
  // A destination in the other process's memory: process_vm_readv would
  // write this process at those addresses.
  auto into_other = c->RegisterPrivateInstance(other.range(), 0, Elements{type, 1, 0});
  REQUIRE(into_other.ok());
  CHECK(absl::IsFailedPrecondition(AskLease(*c, ours->id(), into_other->id())));
  // A pool allocation is no private range.
  auto pool = c->Allocate("sys0", 1 << 20);
  REQUIRE(pool.ok());
  auto pooled = c->Register(*pool, 0, Elements{type, 1, 0});
  REQUIRE(pooled.ok());
  CHECK(absl::IsFailedPrecondition(AskLease(*c, pooled->id(), ours->id())));
  const v1::StatusResponse st = d.Status();
  CHECK(st.direct_read_leases() == 0);
  CHECK(st.direct_read_refused() == 2);
  CHECK(mine.bytes == mine0);  // nothing was written by any of it

  // The honest pair still gets its lease.
  REQUIRE(c->Copy(*theirs, *ours).status.ok());
  CHECK(c->direct_reads_run() == 1);
  CHECK(d.Status().direct_read_leases() == 1);
  CHECK(d.Stop() == 0);
}

TEST_CASE("layouts of the same fields and bounds by lease; others through the daemon") {
  Daemon d(kDatatypeChannels);
  Worker other(d, 1 << 20, 71);
  auto c = ConnectTo(d.local_socket(), "direct");
  Mine mine = RegisterMine(*c, 1 << 20, 72);
  const std::vector<uint8_t> other0 = AsBytes(other.before());
  const Box bounds = Box::FromExtents({1024});
  const FieldSpace ab = FieldSpace::Uniform(2, 8);  // f0, f1
  auto theirs =
      c->RegisterPrivateInstance(other.range(), 4096, InstanceShape{bounds, ab, Layout::Aos(1)});
  auto same = c->Register(mine.range, 0, InstanceShape{bounds, ab, Layout::Aos(1)});
  auto soa = c->Register(mine.range, 65536, InstanceShape{bounds, ab, Layout::Soa(1)});
  auto wider =
      c->Register(mine.range, 131072, InstanceShape{Box::FromExtents({2048}), ab, Layout::Aos(1)});
  REQUIRE(theirs.ok());
  REQUIRE(same.ok());
  REQUIRE(soa.ok());
  REQUIRE(wider.ok());
  // Field f of element i there.
  const auto field = [&](uint64_t i, uint64_t f) { return &other0[4096 + i * 16 + f * 8]; };

  // The same shape on both sides: one read here.
  client::Completion done = c->Copy(*theirs, *same);
  REQUIRE(done.status.ok());
  CHECK(done.transfer == 0);
  CHECK(std::equal(mine.bytes.begin(), mine.bytes.begin() + ptrdiff_t{16384}, field(0, 0)));
  // AOS there, SOA here, the same fields: converted by the lease's program.
  done = c->Copy(*theirs, *soa);
  REQUIRE(done.status.ok());
  CHECK(done.transfer == 0);
  // Into larger bounds (the source's box, elements 0-1023 of 2048): the
  // daemon copies.
  const client::Completion boxed = c->Copy(*theirs, *wider);
  INFO(boxed.status.ToString());
  REQUIRE(boxed.status.ok());
  CHECK(boxed.transfer != 0);
  for (uint64_t i = 0; i < 1024; ++i) {
    for (uint64_t f = 0; f < 2; ++f) {
      INFO("element " << i << " field " << f);
      REQUIRE(std::equal(field(i, f), field(i, f) + 8, &mine.bytes[65536 + f * 1024 * 8 + i * 8]));
      REQUIRE(std::equal(field(i, f), field(i, f) + 8, &mine.bytes[131072 + i * 16 + f * 8]));
    }
  }
  CHECK(c->direct_reads_run() == 2);
  const v1::StatusResponse st = d.Status();
  CHECK(st.direct_read_leases() == 2);
  CHECK(st.direct_read_refused() == 1);
  CHECK(d.Stop() == 0);
}

TEST_CASE("layouts over fields of different sizes by lease at 16 MiB, a strided type staged") {
  // SOA over fields {6, 1, 1} is a list of runs as a form: the old daemon
  // paired the two ends' forms, walked 2M runs and refused the lease on
  // every copy. Now a lease runs the layout compiler's program, for a
  // layout or contiguous bytes; a strided type is a staged lease (the
  // publisher packs it, each piece unpacked by a layout program), and
  // goes through the daemon for a reader without served reads.
  constexpr int64_t kPoints = int64_t{2} << 20;
  constexpr uint64_t kBytes = uint64_t{kPoints} * 8;
  Daemon d(kDatatypeChannels);
  Worker other(d, kBytes, 81);
  auto c = ConnectTo(d.local_socket(), "direct-mixed");
  Mine mine = RegisterMine(*c, kBytes, 82);
  const std::vector<uint8_t> other0 = AsBytes(other.before());
  const FieldSpace fields = *FieldSpace::Make({{"a", 6}, {"b", 1}, {"c", 1}});
  const auto soa = [&](int64_t points) {
    return InstanceShape{Box::FromExtents({points}), fields, *Layout::Parse("x,F", 1)};
  };
  const Datatype dbl = Datatype::Basic(BasicType::kDouble);
  auto theirs = c->RegisterPrivateInstance(
      other.range(), 0, InstanceShape{Box::FromExtents({kPoints}), fields, Layout::Aos(1)});
  auto bytes = c->RegisterPrivateInstance(
      other.range(), 0, Elements{*Datatype::Contiguous(static_cast<int64_t>(kBytes), kByte), 1, 0});
  auto every_other = c->RegisterPrivateInstance(
      other.range(), 0, Elements{*Datatype::Vector(kPoints / 2, 1, 2, dbl), 1, 0});
  auto here = c->Register(mine.range, 0, soa(kPoints));
  auto half = c->Register(mine.range, 0, soa(kPoints / 2));
  REQUIRE((theirs.ok() && bytes.ok() && every_other.ok() && here.ok() && half.ok()));
  // Point i of `points` points holds the source's 8 bytes from step * i.
  const auto check = [&](int64_t points, int64_t step, const Mine& into) {
    const InstanceShape s = soa(points);
    for (int64_t i = 0; i < points; ++i) {
      const uint8_t* point = &other0[static_cast<size_t>(i * step)];
      const uint8_t* want[3] = {point, point + 6, point + 7};
      for (size_t f = 0; f < 3; ++f) {
        const uint8_t* got = &into.bytes[s.OffsetOf(f, {i})];
        if (!std::equal(want[f], want[f] + fields.fields()[f].size, got)) {
          FAIL("point " << i << " field " << f);
        }
      }
    }
  };
  const auto copy_by = [&](Client& by, Mine& into, const client::Instance& from,
                           const client::Instance& to) {
    std::fill(into.bytes.begin(), into.bytes.end(), 0);
    const client::Completion done = by.Copy(from, to);
    INFO(done.status.ToString());
    REQUIRE(done.status.ok());
    return done.transfer;
  };
  const auto copy = [&](const client::Instance& from, const client::Instance& to) {
    return copy_by(*c, mine, from, to);
  };
  CHECK(copy(*theirs, *here) == 0);
  check(kPoints, 8, mine);
  CHECK(copy(*bytes, *here) == 0);
  check(kPoints, 8, mine);
  const uint64_t served0 = c->served_reads_run();
  for (int i = 0; i < 2; ++i) {  // the second copy reuses the lease
    CHECK(copy(*every_other, *half) == 0);
    check(kPoints / 2, 16, mine);
  }
  CHECK(c->served_reads_run() == served0 + 2);
  CHECK(c->direct_reads_run() == 4);
  CHECK(d.Status().direct_read_leases() == 3);

  auto off = Client::Connect(
      {.local_socket = d.local_socket(), .name = "kernel-reads", .served_reads = false});
  REQUIRE(off.ok());
  Mine mine2 = RegisterMine(**off, kBytes, 83);
  auto every_other2 = (*off)->RegisterPrivateInstance(
      other.range(), 0, Elements{*Datatype::Vector(kPoints / 2, 1, 2, dbl), 1, 0});
  auto half2 = (*off)->Register(mine2.range, 0, soa(kPoints / 2));
  REQUIRE((every_other2.ok() && half2.ok()));
  CHECK(copy_by(**off, mine2, *every_other2, *half2) != 0);
  check(kPoints / 2, 16, mine2);
  CHECK((*off)->direct_reads_run() == 0);
  CHECK(d.Stop() == 0);
}

TEST_CASE("another uid's range is never leased", "[may_skip][other_uid]") {
  if (geteuid() != 0) ISOMETRY_SKIP("needs root to start a client of uid 65534");
  // Everyone may connect: the worker of another uid must reach the daemon.
  Daemon d(std::string("socket_mode = \"0666\"") + kDatatypeChannels);
  ::chmod(d.dir().c_str(), 0755);
  Worker stranger(d, 1 << 20, 81, 65534);
  auto c = ConnectTo(d.local_socket(), "root");
  Mine mine = RegisterMine(*c, 1 << 20, 82);
  const Datatype type = Ok(Datatype::Hvector(128, 512, 1024, kByte));
  auto ours = c->Register(mine.range, 0, Elements{type, 1, 0});
  REQUIRE(ours.ok());
  // Its range cannot be named, so no instance of it can be leased...
  CHECK(absl::IsNotFound(
      c->RegisterPrivateInstance(stranger.range(), 0, Elements{type, 1, 0}).status()));
  // ...and no instance id near this session's leads anywhere.
  for (uint64_t id = 1; id < ours->id() + 8; ++id) {
    if (id == ours->id()) continue;
    CHECK(absl::IsNotFound(AskLease(*c, id, ours->id())));
  }
  CHECK(d.Status().direct_read_leases() == 0);
  CHECK(d.Stop() == 0);
}

TEST_CASE("a node with daemon.direct_reads = false refuses every lease; copies still work") {
  Daemon d(std::string("direct_reads = false") + kDatatypeChannels);
  Worker other(d, 1 << 20, 91);
  auto c = ConnectTo(d.local_socket(), "direct");
  Mine mine = RegisterMine(*c, 1 << 20, 92);
  const Datatype type = Ok(Datatype::Hvector(256, 1024, 2048, kByte));
  auto theirs = c->RegisterPrivateInstance(other.range(), 0, Elements{type, 1, 0});
  auto ours = c->Register(mine.range, 0, Elements{type, 1, 0});
  REQUIRE(theirs.ok());
  REQUIRE(ours.ok());
  const std::vector<uint8_t> before = mine.bytes;
  const Status refused = AskLease(*c, theirs->id(), ours->id());
  CHECK(absl::IsFailedPrecondition(refused));
  CHECK_THAT(std::string(refused.message()), Catch::Contains("daemon.direct_reads"));
  for (int i = 0; i < 2; ++i) {
    const client::Completion done = c->Copy(*theirs, *ours);
    REQUIRE(done.status.ok());
    CHECK(done.transfer != 0);  // the daemon copied
  }
  CHECK(c->direct_reads_run() == 0);
  CHECK(mine.bytes == Expected(AsBytes(other.before()), 0, type, 1, before, 0, type, 1));
  // The raw ask and the client's first Copy() were refused; the client
  // then remembered the refusal.
  CHECK(d.Status().direct_read_refused() == 2);
  CHECK(d.Status().direct_read_leases() == 0);
  CHECK(d.Stop() == 0);
}

}  // namespace ISOMETRY_TEST_FILE
