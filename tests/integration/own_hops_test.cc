// Hops a client runs itself (docs/guides/client-memory.md, "Hops the client runs itself")
// against a real daemon: copies into and out of a client's own private
// memory run in that client through its hop window, byte for byte what
// MPI_Pack/MPI_Unpack (core) give; a client that does not answer, leaves,
// or scribbles over its window loses only its own copies, and the daemon
// keeps serving.
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <thread>

#include "client/cpp/isometry_client.h"
#include "integration/client_helpers.h"
#include "integration/daemon_fixture.h"
#include "integration/datatype_oracle.h"
#include "integration/worker_process.h"
#include "isometry.pb.h"
#include "layout/hop_window.h"
#include "unit/form_expand.h"
#include "unit/random_datatype.h"
#include "unit/test_util.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;
using client::Elements;

namespace {

const std::string kConfig = std::string("own_hop_timeout_ms = 400") + kDatatypeChannels;

const Datatype kByte = Datatype::Basic(BasicType::kByte);

std::unique_ptr<Client> Connect(const Daemon& d, bool own_hops) {
  auto c = Client::Connect(
      // Direct reads off: these copies must go through the daemon's hops.
      {.local_socket = d.local_socket(),
       .name = "own-hops",
       .run_own_hops = own_hops,
       .direct_reads = false});
  REQUIRE(c.ok());
  return *std::move(c);
}

// A copy of `type` from the other process's range (offset 0) into ours
// (offset 0), registered in `c`.
struct VectorCopy {
  client::Instance theirs, ours;
};

VectorCopy Between(Client& c, const Worker& other, const Mine& mine, const Datatype& type) {
  auto theirs = c.RegisterPrivateInstance(other.range(), 0, Elements{type, 1, 0});
  auto ours = c.Register(mine.range, 0, Elements{type, 1, 0});
  REQUIRE(theirs.ok());
  REQUIRE(ours.ok());
  return {*std::move(theirs), *std::move(ours)};
}

// That copy as Copy() submits it (it promises to run its hops), to be
// written raw so that nobody runs them.
ring::SubmissionEntry Promising(const VectorCopy& k, uint64_t n) {
  ring::SubmissionEntry e{};
  e.op = static_cast<uint16_t>(ring::Op::kCopy);
  e.user_data = (1ull << 60) + n;
  e.flags = ring::kFlagClientRunsHops;
  e.src_instance = k.theirs.id();
  e.dst_instance = k.ours.id();
  return e;
}

// No transfer left active (polled for up to 3 s: the session's end trails
// its client's).
bool NoTransfers(Daemon& d) {
  for (int i = 0; i < 300; ++i) {
    if (d.Status().transfers_active() == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace

TEST_CASE("copies into and out of a client's own memory run in the client, verified") {
  Daemon d(kConfig);
  const uint64_t bytes = 1 << 20;
  Worker other(d, bytes, 21);  // another process's published range
  for (const bool own : {true, false}) {
    INFO("run_own_hops " << own);
    auto c = Connect(d, own);
    Mine mine = RegisterMine(*c, bytes, 22);
    // 8-byte blocks every 24 bytes there; an indexed, negative-lb type here.
    const Datatype sv = Ok(Datatype::Hvector(8192, 8, 24, kByte));
    const std::vector<int64_t> lens{3, 1, 4}, disps{-8, 0, 5};
    const Datatype idx = Ok(Datatype::Indexed(lens, disps, Datatype::Basic(BasicType::kInt64)));
    const int64_t dc = sv.size() / idx.size();
    REQUIRE(dc * idx.size() == sv.size());
    auto theirs = c->RegisterPrivateInstance(other.range(), 128, Elements{sv, 1, 0});
    auto ours = c->Register(mine.range, 4096, Elements{idx, dc, 0});
    REQUIRE(theirs.ok());
    REQUIRE(ours.ok());
    const std::vector<uint8_t> other0 = AsBytes(other.before()), mine0 = mine.bytes;
    const uint64_t ran0 = c->own_hops_run();

    // Into our memory: the last hop runs here.
    REQUIRE(c->Copy(*theirs, *ours).status.ok());
    CHECK(mine.bytes == Expected(other0, 128, sv, 1, mine0, 4096, idx, dc));
    // Out of our memory into the other process: the first hop runs here
    // (it packs into the window), the daemon writes the other process.
    auto back = c->RegisterPrivateInstance(other.range(), 512 << 10, Elements{sv, 1, 0});
    REQUIRE(back.ok());
    REQUIRE(c->Copy(*ours, *back).status.ok());
    std::vector<uint8_t> packed(static_cast<size_t>(sv.size()));
    REQUIRE(Pack(mine.bytes, 4096, idx, dc, packed).ok());
    std::vector<uint8_t> other_want = other0;
    REQUIRE(Unpack(packed, sv, 1, other_want, 512 << 10).ok());
    CHECK(AsBytes(other.Dump(d)) == other_want);
    if (own) {
      CHECK(c->own_hops_run() >= ran0 + 2);
    } else {
      CHECK(c->own_hops_run() == 0);
    }
  }
  // What the daemon says of it (isoctl status): the first client's hops
  // ran there; the second never had a window.
  const v1::StatusResponse st = d.Status();
  CHECK(st.own_hop_runs() >= 2);
  CHECK(st.own_hop_timeouts() == 0);
  CHECK(st.own_hop_bogus() == 0);
  CHECK(d.Stop() == 0);
}

TEST_CASE("concurrent copies of one client all run in its window, each right") {
  Daemon d(kConfig);
  Worker other(d, 1 << 20, 61);
  const uint64_t windows0 = d.Status().own_hop_windows();  // the worker's own
  auto c = Connect(d, true);
  const Datatype sv = Ok(Datatype::Hvector(4096, 8, 24, kByte));
  const std::vector<uint8_t> other0 = AsBytes(other.before());
  constexpr int kThreads = 3;
  constexpr int kCopies = 30;
  std::vector<Mine> mine;
  std::vector<VectorCopy> copies;
  mine.reserve(kThreads);
  copies.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) mine.push_back(RegisterMine(*c, 1 << 20, 62 + t));
  for (int t = 0; t < kThreads; ++t) copies.push_back(Between(*c, other, mine[t], sv));
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  std::atomic<int> failed{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCopies; ++i) {
        if (!c->Copy(copies[t].theirs, copies[t].ours).status.ok()) ++failed;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(failed == 0);
  for (int t = 0; t < kThreads; ++t) {
    INFO("thread " << t);
    CHECK(mine[t].bytes == Expected(other0, 0, sv, 1, AsBytes(Pattern(1 << 20, 62 + t)), 0, sv, 1));
  }
  // Every copy's last hop ran here: none went to staging for want of room
  // in the window while another was running.
  const v1::StatusResponse st = d.Status();
  CHECK(st.own_hop_windows() == windows0 + 1);
  CHECK(st.own_hop_not_lent() == 0);
  CHECK(st.own_hop_fallbacks() == 0);
  CHECK(c->own_hops_run() >= uint64_t{kThreads} * kCopies);
  CHECK(st.own_hop_runs() == c->own_hops_run());
  c.reset();
  CHECK(NoTransfers(d));
  bool closed = false;  // the session's end trails its client's
  for (int i = 0; i < 300 && !closed; ++i) {
    closed = d.Status().own_hop_windows() == windows0;
    if (!closed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(closed);
  CHECK(d.Stop() == 0);
}

TEST_CASE("random datatype pairs between a client's own buffers, run by the client") {
  Daemon d(kConfig);
  auto c = Connect(d, true);
  const size_t arena = 1 << 20;
  Mine src = RegisterMine(*c, arena, 3), dst = RegisterMine(*c, arena, 4);
  RandomDatatypes gen(20261125);
  int copied = 0;
  while (copied < 40) {
    std::optional<CopyCase> k = RandomCopyCase(gen, 3, 200);
    if (!k || k->source.bytes.size() > arena || k->want.bytes.size() > arena) continue;
    std::memcpy(src.bytes.data(), k->source.bytes.data(), k->source.bytes.size());
    const std::vector<uint8_t> dst0 = BufferFor(k->dst, k->dst_count, 200).bytes;
    std::memcpy(dst.bytes.data(), dst0.data(), dst0.size());
    auto si = c->Register(src.range, static_cast<uint64_t>(k->source.origin),
                          Elements{k->src, k->src_count, 0});
    auto di = c->Register(dst.range, static_cast<uint64_t>(k->want.origin),
                          Elements{k->dst, k->dst_count, 0});
    INFO(k->src.ToString() << " x" << k->src_count << " -> " << k->dst.ToString() << " x"
                           << k->dst_count);
    REQUIRE(si.ok());
    REQUIRE(di.ok());
    REQUIRE(c->Copy(*si, *di).status.ok());
    CHECK(std::vector<uint8_t>(dst.bytes.begin(), dst.bytes.begin() + k->want.bytes.size()) ==
          k->want.bytes);
    ++copied;
  }
  CHECK(c->own_hops_run() >= 40);
  CHECK(d.Stop() == 0);
}

TEST_CASE("a layout copy AOS -> SOA into a client's own memory runs in the client") {
  Daemon d(kConfig);
  auto c = Connect(d, true);
  const uint64_t n = 100000;
  const auto fields = *FieldSpace::Make({{"a", 4}, {"b", 8}, {"c", 2}});
  const InstanceShape aos{Box::FromExtents({n}), fields, Layout::Aos(1)};
  const InstanceShape soa{Box::FromExtents({n}), fields, Layout::Soa(1)};
  Mine src = RegisterMine(*c, aos.total_bytes(), 5), dst = RegisterMine(*c, soa.total_bytes(), 6);
  auto si = c->Register(src.range, 0, aos);
  auto di = c->Register(dst.range, 0, soa);
  REQUIRE(si.ok());
  REQUIRE(di.ok());
  REQUIRE(c->Copy(*si, *di).status.ok());
  CHECK(c->own_hops_run() > 0);
  // Field f of entry i: AOS at i*14 + offset(f), SOA at offset(f)*n + i*size(f).
  const size_t off[3] = {0, 4, 12}, size[3] = {4, 8, 2};
  bool same = true;
  for (uint64_t i = 0; i < n && same; ++i) {
    for (int f = 0; f < 3; ++f) {
      same &= std::memcmp(&src.bytes[i * 14 + off[f]], &dst.bytes[off[f] * n + i * size[f]],
                          size[f]) == 0;
    }
  }
  CHECK(same);
  CHECK(d.Stop() == 0);
}

TEST_CASE("a client that does not run its hop fails only its own copy, after the timeout") {
  Daemon d(kConfig);
  Worker other(d, 1 << 20, 31);
  auto c = Connect(d, true);
  auto bystander = Connect(d, false);
  Mine mine = RegisterMine(*c, 1 << 20, 32);
  const Datatype sv = Ok(Datatype::Hvector(4096, 8, 24, kByte));
  const VectorCopy k = Between(*c, other, mine, sv);
  // Submitted as Copy() would, but nobody waits for it: its hop never runs.
  const ring::SubmissionEntry e = Promising(k, 1);
  auto ticket = c->SubmitRaw(e);
  REQUIRE(ticket.ok());
  // Meanwhile another client is served as usual.
  Mine b_mine = RegisterMine(*bystander, 1 << 20, 33);
  const VectorCopy b = Between(*bystander, other, b_mine, sv);
  REQUIRE(bystander->Copy(b.theirs, b.ours).status.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const client::Completion late = c->Wait(*ticket);
  CHECK(late.status.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK_THAT(std::string(late.status.message()), Catch::Contains("own_hop_timeout_ms"));
  CHECK(d.Status().own_hop_timeouts() == 1);
  // The window is free again: the next copy runs here and is right.
  REQUIRE(c->Copy(k.theirs, k.ours).status.ok());
  const std::vector<uint8_t> other0 = AsBytes(other.before());
  CHECK(mine.bytes == Expected(other0, 0, sv, 1, AsBytes(Pattern(1 << 20, 32)), 0, sv, 1));
  c.reset();
  bystander.reset();
  CHECK(NoTransfers(d));
  CHECK(d.Stop() == 0);
}

TEST_CASE("a client's unanswered hops hold none of the channel's slots") {
  // Hops that wait on their client (up to own_hop_timeout_ms each) are
  // the client's own: another client's copies over the same cma channel
  // run meanwhile, long before the first of those hops times out.
  Daemon d(std::string("own_hop_timeout_ms = 6000") + kDatatypeChannels);
  Worker other(d, 1 << 20, 36);
  auto attacker = Connect(d, true);
  auto victim = Connect(d, false);
  Mine a_mine = RegisterMine(*attacker, 1 << 20, 37);
  Mine v_mine = RegisterMine(*victim, 1 << 20, 38);
  const Datatype sv = Ok(Datatype::Hvector(4096, 8, 24, kByte));
  const VectorCopy a = Between(*attacker, other, a_mine, sv);
  const VectorCopy v = Between(*victim, other, v_mine, sv);
  // More copies promising their hops than the channel has slots (2 per
  // thread); nobody runs them.
  constexpr int kPromised = 16;
  for (int i = 0; i < kPromised; ++i) REQUIRE(attacker->SubmitRaw(Promising(a, 100 + i)).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < 4; ++i) REQUIRE(victim->Copy(v.theirs, v.ours).status.ok());
  const auto took = std::chrono::steady_clock::now() - started;
  CHECK(took < std::chrono::milliseconds(3000));  // the first hop times out at 6 s
  CHECK(v_mine.bytes ==
        Expected(AsBytes(other.before()), 0, sv, 1, AsBytes(Pattern(1 << 20, 38)), 0, sv, 1));
  CHECK(d.Status().own_hop_timeouts() == 0);
  attacker.reset();  // its pending hops fail with its session
  victim.reset();
  CHECK(NoTransfers(d));
  CHECK(d.Stop() == 0);
}

TEST_CASE("a client that leaves with its hop pending frees what its copy held") {
  Daemon d(kConfig);
  Worker other(d, 1 << 20, 41);
  auto c = Connect(d, true);
  Mine mine = RegisterMine(*c, 1 << 20, 42);
  const Datatype sv = Ok(Datatype::Hvector(4096, 8, 24, kByte));
  const VectorCopy k = Between(*c, other, mine, sv);
  REQUIRE(c->SubmitRaw(Promising(k, 2)).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  c.reset();  // the session ends with the hop unanswered
  CHECK(NoTransfers(d));
  auto again = Connect(d, true);
  Mine m2 = RegisterMine(*again, 1 << 20, 43);
  const VectorCopy k2 = Between(*again, other, m2, sv);
  REQUIRE(again->Copy(k2.theirs, k2.ours).status.ok());
  CHECK(again->own_hops_run() > 0);
  CHECK(d.Stop() == 0);
}

TEST_CASE("a client that scribbles over its hop window loses only its own hops") {
  Daemon d(kConfig);
  Worker other(d, 1 << 20, 51);
  auto c = Connect(d, false);  // it maps the window itself, as an attacker would
  Mine mine = RegisterMine(*c, 1 << 20, 52);
  v1::LocalRequest req;
  req.mutable_own_hops();
  std::vector<int> fds;
  auto resp = c->Request(req, &fds);
  REQUIRE(resp.ok());
  REQUIRE(fds.size() == 1);
  const uint64_t window_bytes = resp->own_hops().bytes();
  void* p = mmap(nullptr, window_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
  REQUIRE(p != MAP_FAILED);
  auto* h = static_cast<hop_window::HopWindowHeader*>(p);
  REQUIRE(hop_window::CheckHeader(*h, window_bytes).ok());
  // Done entries for work never posted, then a tail far past the ring.
  for (uint32_t i = 0; i < 5; ++i) {
    h->done[i] = hop_window::DoneEntry{1000 + i, 0, 0};
  }
  h->done_tail.value.store(5);
  const Datatype sv = Ok(Datatype::Hvector(4096, 8, 24, kByte));
  const std::vector<uint8_t> want =
      Expected(AsBytes(other.before()), 0, sv, 1, AsBytes(Pattern(1 << 20, 52)), 0, sv, 1);
  // Submitted with the promise, but nobody here runs the hop: it fails
  // after the timeout, and the bogus entries changed nothing.
  const VectorCopy k = Between(*c, other, mine, sv);  // lives as long as its copies
  const ring::SubmissionEntry e = Promising(k, 3);
  auto t1 = c->SubmitRaw(e);
  REQUIRE(t1.ok());
  CHECK(c->Wait(*t1).status.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(d.Status().own_hop_bogus() == 5);
  h->done_tail.value.store(1u << 30);  // then indexes past the ring: the window breaks
  auto t2 = c->SubmitRaw(e);
  REQUIRE(t2.ok());
  const client::Completion second = c->Wait(*t2);
  // Whether this copy found the window broken before or after posting,
  // it fails or falls back to CMA; it never hangs and never writes wrong bytes.
  if (second.status.ok()) CHECK(mine.bytes == want);
  // From now on its copies go by CMA, and are right.
  std::memcpy(mine.bytes.data(), AsBytes(Pattern(1 << 20, 52)).data(), mine.bytes.size());
  auto t3 = c->SubmitRaw(e);
  REQUIRE(t3.ok());
  REQUIRE(c->Wait(*t3).status.ok());
  CHECK(mine.bytes == want);
  munmap(p, window_bytes);
  for (int fd : fds) close(fd);
  // Other clients never noticed.
  auto other_client = Connect(d, true);
  Mine m2 = RegisterMine(*other_client, 1 << 20, 53);
  const VectorCopy k2 = Between(*other_client, other, m2, sv);
  REQUIRE(other_client->Copy(k2.theirs, k2.ours).status.ok());
  CHECK(other_client->own_hops_run() > 0);
  CHECK(d.Stop() == 0);
}

}  // namespace ISOMETRY_TEST_FILE
