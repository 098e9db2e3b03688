// Hops a client runs itself (README, "Hops the client runs itself")
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
#include "integration/worker_process.h"
#include "isometry.pb.h"
#include "layout/hop_window.h"
#include "unit/form_expand.h"
#include "unit/random_datatype.h"
#include "unit/test_util.h"

using namespace isometry;
using namespace isometry::testing;
using client::Elements;

namespace {

constexpr char kConfig[] = R"(own_hop_timeout_ms = 400
[[memory]]
name = "sys0"
pool = "256MiB"
client_quota = "256MiB"
[[channel]]
name = "memcpy0"
[[channel]]
name = "cma0"
kind = "cma"
)";

const Datatype kByte = Datatype::Basic(BasicType::kByte);

Datatype Ok(Result<Datatype> r) {
  REQUIRE(r.ok());
  return *std::move(r);
}

std::vector<uint8_t> AsBytes(const std::vector<std::byte>& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  return {p, p + v.size()};
}

std::unique_ptr<Client> Connect(const Daemon& d, bool own_hops) {
  auto c = Client::Connect(
      {.local_socket = d.local_socket(), .name = "own-hops", .run_own_hops = own_hops});
  REQUIRE(c.ok());
  return *std::move(c);
}

// This process's memory registered with a session: `bytes` of a pattern.
struct Mine {
  std::vector<uint8_t> bytes;
  client::PrivateRange range;
};

Mine Register(Client& c, size_t n, uint64_t seed) {
  std::vector<uint8_t> b = AsBytes(Pattern(n, seed));
  auto r = c.RegisterPrivate(b.data(), b.size());
  REQUIRE(r.ok());
  return {std::move(b), *r};
}

std::vector<uint8_t> Expected(const std::vector<uint8_t>& src, int64_t src_origin,
                              const Datatype& st, int64_t sc, std::vector<uint8_t> dst,
                              int64_t dst_origin, const Datatype& dt, int64_t dc) {
  std::vector<uint8_t> packed(static_cast<size_t>(st.size() * sc));
  REQUIRE(Pack(src, src_origin, st, sc, packed).ok());
  REQUIRE(Unpack(packed, dt, dc, dst, dst_origin).ok());
  return dst;
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
    Mine mine = Register(*c, bytes, 22);
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
  CHECK(d.Stop() == 0);
}

TEST_CASE("random datatype pairs between a client's own buffers, run by the client") {
  Daemon d(kConfig);
  auto c = Connect(d, true);
  const size_t arena = 1 << 20;
  Mine src = Register(*c, arena, 3), dst = Register(*c, arena, 4);
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
  Mine src = Register(*c, aos.total_bytes(), 5), dst = Register(*c, soa.total_bytes(), 6);
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
  Mine mine = Register(*c, 1 << 20, 32);
  const Datatype sv = Ok(Datatype::Hvector(4096, 8, 24, kByte));
  auto theirs = c->RegisterPrivateInstance(other.range(), 0, Elements{sv, 1, 0});
  auto ours = c->Register(mine.range, 0, Elements{sv, 1, 0});
  REQUIRE(theirs.ok());
  REQUIRE(ours.ok());
  // A copy submitted as Copy() would (it promises to run its hops), whose
  // completion nobody waits for: its hop is never run.
  ring::SubmissionEntry e{};
  e.op = static_cast<uint16_t>(ring::Op::kCopy);
  e.user_data = (1ull << 60) + 1;
  e.flags = ring::kFlagClientRunsHops;
  e.src_instance = theirs->id();
  e.dst_instance = ours->id();
  auto ticket = c->SubmitRaw(e);
  REQUIRE(ticket.ok());
  // Meanwhile another client is served as usual.
  auto b_theirs = bystander->RegisterPrivateInstance(other.range(), 0, Elements{sv, 1, 0});
  Mine b_mine = Register(*bystander, 1 << 20, 33);
  auto b_ours = bystander->Register(b_mine.range, 0, Elements{sv, 1, 0});
  REQUIRE(b_theirs.ok());
  REQUIRE(b_ours.ok());
  REQUIRE(bystander->Copy(*b_theirs, *b_ours).status.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const client::Completion late = c->Wait(*ticket);
  CHECK(late.status.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK_THAT(std::string(late.status.message()), Catch::Contains("own_hop_timeout_ms"));
  // The window is free again: the next copy runs here and is right.
  REQUIRE(c->Copy(*theirs, *ours).status.ok());
  const std::vector<uint8_t> other0 = AsBytes(other.before());
  CHECK(mine.bytes == Expected(other0, 0, sv, 1, AsBytes(Pattern(1 << 20, 32)), 0, sv, 1));
  c.reset();
  bystander.reset();
  CHECK(NoTransfers(d));
  CHECK(d.Stop() == 0);
}

TEST_CASE("a client that leaves with its hop pending frees what its copy held") {
  Daemon d(kConfig);
  Worker other(d, 1 << 20, 41);
  auto c = Connect(d, true);
  Mine mine = Register(*c, 1 << 20, 42);
  const Datatype sv = Ok(Datatype::Hvector(4096, 8, 24, kByte));
  auto theirs = c->RegisterPrivateInstance(other.range(), 0, Elements{sv, 1, 0});
  auto ours = c->Register(mine.range, 0, Elements{sv, 1, 0});
  REQUIRE(theirs.ok());
  REQUIRE(ours.ok());
  ring::SubmissionEntry e{};
  e.op = static_cast<uint16_t>(ring::Op::kCopy);
  e.user_data = (1ull << 60) + 2;
  e.flags = ring::kFlagClientRunsHops;
  e.src_instance = theirs->id();
  e.dst_instance = ours->id();
  REQUIRE(c->SubmitRaw(e).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  c.reset();  // the session ends with the hop unanswered
  CHECK(NoTransfers(d));
  auto again = Connect(d, true);
  Mine m2 = Register(*again, 1 << 20, 43);
  auto t2 = again->RegisterPrivateInstance(other.range(), 0, Elements{sv, 1, 0});
  auto o2 = again->Register(m2.range, 0, Elements{sv, 1, 0});
  REQUIRE(t2.ok());
  REQUIRE(o2.ok());
  REQUIRE(again->Copy(*t2, *o2).status.ok());
  CHECK(again->own_hops_run() > 0);
  CHECK(d.Stop() == 0);
}

TEST_CASE("a client that scribbles over its hop window loses only its own hops") {
  Daemon d(kConfig);
  Worker other(d, 1 << 20, 51);
  auto c = Connect(d, false);  // it maps the window itself, as an attacker would
  Mine mine = Register(*c, 1 << 20, 52);
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
  auto theirs = c->RegisterPrivateInstance(other.range(), 0, Elements{sv, 1, 0});
  auto ours = c->Register(mine.range, 0, Elements{sv, 1, 0});
  REQUIRE(theirs.ok());
  REQUIRE(ours.ok());
  const std::vector<uint8_t> want =
      Expected(AsBytes(other.before()), 0, sv, 1, AsBytes(Pattern(1 << 20, 52)), 0, sv, 1);
  // Submitted with the promise, but nobody here runs the hop: it fails
  // after the timeout, and the bogus entries changed nothing.
  ring::SubmissionEntry e{};
  e.op = static_cast<uint16_t>(ring::Op::kCopy);
  e.user_data = (1ull << 60) + 3;
  e.flags = ring::kFlagClientRunsHops;
  e.src_instance = theirs->id();
  e.dst_instance = ours->id();
  auto t1 = c->SubmitRaw(e);
  REQUIRE(t1.ok());
  CHECK(c->Wait(*t1).status.code() == absl::StatusCode::kDeadlineExceeded);
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
  Mine m2 = Register(*other_client, 1 << 20, 53);
  auto t = other_client->RegisterPrivateInstance(other.range(), 0, Elements{sv, 1, 0});
  auto o = other_client->Register(m2.range, 0, Elements{sv, 1, 0});
  REQUIRE(t.ok());
  REQUIRE(o.ok());
  REQUIRE(other_client->Copy(*t, *o).status.ok());
  CHECK(other_client->own_hops_run() > 0);
  CHECK(d.Stop() == 0);
}
