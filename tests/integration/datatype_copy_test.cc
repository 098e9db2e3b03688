// Datatype instances (issue 14) against a real daemon: copies between
// datatypes, between a datatype and a layout, in pools and in the private
// memory of two other processes, each checked against core's MPI_Pack /
// MPI_Unpack (which tests/unit/datatype_mpi_test holds to MPICH's); and
// every bad request refused with nothing changed.
#include <catch2/catch.hpp>
#include <cstring>
#include <thread>

#include "client/cpp/isometry_client.h"
#include "integration/client_helpers.h"
#include "integration/daemon_fixture.h"
#include "integration/datatype_oracle.h"
#include "integration/worker_process.h"
#include "unit/form_expand.h"
#include "unit/random_datatype.h"
#include "unit/test_util.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;
using client::Elements;

namespace {

const std::string kConfig = std::string("max_datatypes_per_session = 8") + kDatatypeChannels;

const Datatype kByte = Datatype::Basic(BasicType::kByte);

// An allocation holding `bytes`.
Allocation Holding(Client& c, const std::vector<uint8_t>& bytes) {
  auto a = c.Allocate("sys0", bytes.size());
  REQUIRE(a.ok());
  std::memcpy(a->data(), bytes.data(), bytes.size());
  return *std::move(a);
}

// Its first `n` bytes (an allocation may be rounded up to pages).
std::vector<uint8_t> Contents(const Allocation& a, size_t n) {
  const auto* p = reinterpret_cast<const uint8_t*>(a.data());
  return {p, p + n};
}

}  // namespace

TEST_CASE("random datatype pairs copy between pools as MPI_Pack then MPI_Unpack would") {
  Daemon d(kConfig);
  auto c = ConnectTo(d.local_socket(), "datatypes");
  RandomDatatypes gen(20261124);
  int copied = 0;
  while (copied < 60) {
    std::optional<CopyCase> k = RandomCopyCase(gen, 3, 200);
    if (!k) continue;
    Allocation src = Holding(*c, k->source.bytes);
    Allocation dst = Holding(*c, BufferFor(k->dst, k->dst_count, 200).bytes);
    Elements se{k->src, k->src_count, 0}, de{k->dst, k->dst_count, 0};
    if (copied % 2 == 1) {  // by handle: translated once, memoized
      auto sh = c->RegisterDatatype(k->src);
      auto dh = c->RegisterDatatype(k->dst);
      if (!sh.ok() || !dh.ok()) {  // past max_datatypes_per_session: start afresh
        c = ConnectTo(d.local_socket(), "datatypes");
        continue;
      }
      se.handle = *sh;
      de.handle = *dh;
    }
    auto si = c->Register(src, static_cast<uint64_t>(k->source.origin), se);
    auto di = c->Register(dst, static_cast<uint64_t>(k->want.origin), de);
    INFO(k->src.ToString() << " x" << k->src_count << " -> " << k->dst.ToString() << " x"
                           << k->dst_count);
    REQUIRE(si.ok());
    REQUIRE(di.ok());
    const client::Completion done = c->Copy(*si, *di);
    REQUIRE(done.status.ok());
    CHECK(Contents(dst, k->want.bytes.size()) == k->want.bytes);
    ++copied;
  }
  const v1::StatusResponse s = d.Status();
  CHECK(s.form_cache_misses() > 0);
  CHECK(s.datatype_translations() > 0);
  CHECK(d.Stop() == 0);
}

TEST_CASE("a registered datatype's instances reuse its translation and its programs") {
  Daemon d(kConfig);
  auto c = ConnectTo(d.local_socket(), "memo");
  const Datatype vec = Ok(Datatype::Vector(512, 8, 16, kByte));
  const Datatype flat = Ok(Datatype::Contiguous(4096, kByte));
  auto h = c->RegisterDatatype(vec);
  REQUIRE(h.ok());
  std::vector<uint8_t> pattern(8192);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint8_t>(i * 13 + 1);
  Allocation src = Holding(*c, pattern);
  Allocation dst = Holding(*c, std::vector<uint8_t>(4096, 0));
  const auto before = d.Status();
  for (int i = 0; i < 3; ++i) {
    auto si = c->Register(src, 0, Elements{vec, 1, *h});
    auto di = c->Register(dst, 0, Elements{flat, 1, 0});
    REQUIRE(si.ok());
    REQUIRE(di.ok());
    REQUIRE(c->Copy(*si, *di).status.ok());
  }
  const auto after = d.Status();
  CHECK(after.datatype_translations_memoized() - before.datatype_translations_memoized() == 3);
  CHECK(after.form_cache_hits() - before.form_cache_hits() >= 2);  // one program, compiled once
  CHECK(Contents(dst, 4096) ==
        Expected(pattern, 0, vec, 1, std::vector<uint8_t>(4096, 0), 0, flat, 1));
  CHECK(d.Stop() == 0);
}

TEST_CASE("a layout instance copies to and from datatypes in AOS C order") {
  Daemon d(kConfig);
  auto c = ConnectTo(d.local_socket(), "mixed");
  const FieldSpace fields = *FieldSpace::Make({{"a", 4}, {"b", 8}});
  const Box space = Box::FromExtents({6, 5});
  const InstanceShape soa{space, fields, Layout::Soa(2)};
  const InstanceShape c_order{space, fields, *Layout::Parse("F,y,x", 2)};
  Placed layout = Place(*c, soa, 7);
  const uint64_t n = space.volume() * fields.total_bytes();

  // SOA -> a packed datatype: the bytes an AOS C-order copy leaves.
  const Datatype packed = Ok(Datatype::Contiguous(static_cast<int64_t>(n), kByte));
  Allocation flat = Holding(*c, std::vector<uint8_t>(n, 0));
  auto fi = c->Register(flat, 0, Elements{packed, 1, 0});
  REQUIRE(fi.ok());
  REQUIRE(c->Copy(layout.inst, *fi).status.ok());
  Placed aos = Place(*c, c_order, 9);
  REQUIRE(c->Copy(layout.inst, aos.inst).status.ok());
  CHECK(Contents(flat, n) == AsBytes(Bytes(aos.alloc, n)));

  // A strided datatype (12-byte entries every 20 bytes) -> SOA -> packed:
  // the packed bytes are MPI_Pack of the strided source.
  const Datatype strided =
      Ok(Datatype::Hvector(static_cast<int64_t>(space.volume()), 12, 20, kByte));
  std::vector<uint8_t> holey(static_cast<size_t>(space.volume()) * 20);
  for (size_t i = 0; i < holey.size(); ++i) holey[i] = static_cast<uint8_t>(i * 31 + 5);
  Allocation hs = Holding(*c, holey);
  auto hi = c->Register(hs, 0, Elements{strided, 1, 0});
  REQUIRE(hi.ok());
  REQUIRE(c->Copy(*hi, layout.inst).status.ok());
  REQUIRE(c->Copy(layout.inst, *fi).status.ok());
  std::vector<uint8_t> want(n);
  REQUIRE(Pack(holey, 0, strided, 1, want).ok());
  CHECK(Contents(flat, n) == want);
  CHECK(d.Stop() == 0);
}

TEST_CASE("datatypes over two processes' private memory and pools, verified") {
  Daemon d(kConfig);
  const uint64_t bytes = 1 << 20;
  Worker a(d, bytes, 21);
  Worker b(d, bytes, 22);
  auto c = ConnectTo(d.local_socket(), "private-datatypes");
  // Blocks of 24 bytes every 40 in A; an indexed, negative-lb type in B
  // whose origin sits 4096 bytes into its range.
  const Datatype sv = Ok(Datatype::Hvector(4096, 24, 40, kByte));
  const std::vector<int64_t> lens{3, 1, 4}, disps{-8, 0, 5};
  const Datatype idx = Ok(Datatype::Indexed(lens, disps, Datatype::Basic(BasicType::kInt64)));
  const int64_t dc = sv.size() * 1 / idx.size();
  REQUIRE(dc * idx.size() == sv.size());
  auto ai = c->RegisterPrivateInstance(a.range(), 128, Elements{sv, 1, 0});
  auto bi = c->RegisterPrivateInstance(b.range(), 4096, Elements{idx, dc, 0});
  REQUIRE(ai.ok());
  REQUIRE(bi.ok());
  REQUIRE(c->Copy(*ai, *bi).status.ok());
  const std::vector<uint8_t> a0 = AsBytes(a.before()), b0 = AsBytes(b.before());
  CHECK(AsBytes(b.Dump(d)) == Expected(a0, 128, sv, 1, b0, 4096, idx, dc));

  // B's datatype -> a pool layout (1-D, 8-byte entries), and that -> A's.
  const InstanceShape shape{Box::FromExtents({sv.size() / 8}), *FieldSpace::Make({{"v", 8}}),
                            Layout::Aos(1)};
  Placed pool = Place(*c, shape, 5);
  REQUIRE(c->Copy(*bi, pool.inst).status.ok());
  const std::vector<uint8_t> b1 = AsBytes(b.Dump(d));
  std::vector<uint8_t> packed(static_cast<size_t>(sv.size()));
  REQUIRE(Pack(b1, 4096, idx, dc, packed).ok());
  CHECK(AsBytes(Bytes(pool.alloc, packed.size())) == packed);
  REQUIRE(c->Copy(pool.inst, *ai).status.ok());
  std::vector<uint8_t> a_want = a0;
  REQUIRE(Unpack(packed, sv, 1, a_want, 128).ok());
  CHECK(AsBytes(a.Dump(d)) == a_want);
  CHECK(d.Stop() == 0);
}

TEST_CASE("bad datatype instances and copies are refused and change nothing") {
  Daemon d(kConfig);
  auto c = ConnectTo(d.local_socket(), "bad");
  auto other = ConnectTo(d.local_socket(), "other");
  Allocation a = Holding(*c, std::vector<uint8_t>(4096, 1));
  Allocation b = Holding(*c, std::vector<uint8_t>(4096, 2));
  const Datatype vec = Ok(Datatype::Vector(16, 8, 16, kByte));  // 128 bytes in 248
  const Datatype neg =
      Ok(Datatype::Hindexed(std::vector<int64_t>{8}, std::vector<int64_t>{-64}, kByte));
  const uint64_t instances = d.Status().instances();
  CHECK(absl::IsInvalidArgument(c->Register(a, 0, Elements{vec, 0, 0}).status()));
  CHECK(absl::IsOutOfRange(c->Register(a, 32, Elements{neg, 1, 0}).status()));    // before byte 0
  CHECK(absl::IsOutOfRange(c->Register(a, 3900, Elements{vec, 1, 0}).status()));  // past the end
  CHECK(absl::IsNotFound(c->Register(a, 0, Elements{vec, 1, 999}).status()));
  auto h = other->RegisterDatatype(vec);
  REQUIRE(h.ok());
  CHECK(absl::IsNotFound(c->Register(a, 0, Elements{vec, 1, *h}).status()));  // not this session's
  CHECK(d.Status().instances() == instances);

  auto si = c->Register(a, 0, Elements{vec, 1, 0});
  auto di = c->Register(b, 0, Elements{vec, 2, 0});  // packs to twice as much
  REQUIRE(si.ok());
  REQUIRE(di.ok());
  CHECK(absl::IsInvalidArgument(c->Copy(*si, *di).status));
  CHECK(Contents(b, 4096) == std::vector<uint8_t>(4096, 2));
  // Overlapping source and destination storage in one allocation.
  auto di2 = c->Register(a, 8, Elements{vec, 1, 0});
  REQUIRE(di2.ok());
  CHECK(absl::IsInvalidArgument(c->Copy(*si, *di2).status));
  CHECK(Contents(a, 4096) == std::vector<uint8_t>(4096, 1));

  for (int i = 0; i < 8; ++i) REQUIRE(c->RegisterDatatype(vec).ok());
  CHECK(absl::IsResourceExhausted(c->RegisterDatatype(vec).status()));
  CHECK(d.Stop() == 0);
}

TEST_CASE("sessions register and use datatypes at once, each its own, and take them along") {
  // Each session's handles sit behind its own lock (daemon/node/session.h):
  // four sessions register, copy through and reregister handles at once,
  // every copy moves exactly the bytes its type names, and when they end
  // every handle goes with them.
  Daemon d(kConfig);
  constexpr int kSessions = 4;
  const Datatype vec = Ok(Datatype::Vector(16, 8, 16, kByte));  // 128 bytes in 248
  std::vector<std::unique_ptr<Client>> clients;
  clients.reserve(kSessions);
  for (int i = 0; i < kSessions; ++i) {
    clients.push_back(ConnectTo(d.local_socket(), "dt" + std::to_string(i)));
  }
  std::atomic<int> failures{0};
  std::vector<uint64_t> last(kSessions);
  std::vector<std::thread> threads;
  threads.reserve(kSessions);
  for (int i = 0; i < kSessions; ++i) {
    threads.emplace_back([&, i] {
      Client& c = *clients[i];
      for (int round = 0; round < 20; ++round) {
        const uint8_t mark = static_cast<uint8_t>(i * 32 + round + 1);
        auto a = c.Allocate("sys0", 4096);
        auto b = c.Allocate("sys0", 4096);
        auto h = c.RegisterDatatype(vec);
        if (!a.ok() || !b.ok() || !h.ok()) {
          if (h.ok() || !absl::IsResourceExhausted(h.status())) ++failures;
          continue;  // past max_datatypes_per_session: the bound, not a failure
        }
        last[i] = *h;
        std::memset(a->data(), mark, 4096);
        std::memset(b->data(), 0, 4096);
        auto si = c.Register(*a, 0, Elements{vec, 1, *h});
        auto di = c.Register(*b, 0, Elements{vec, 1, *h});
        if (!si.ok() || !di.ok() || !c.Copy(*si, *di).status.ok()) {
          ++failures;
          continue;
        }
        const auto* out = reinterpret_cast<const uint8_t*>(b->data());
        for (size_t k = 0; k < 4096; ++k) {
          const bool touched = k < 248 && k % 16 < 8;
          if (out[k] != (touched ? mark : 0)) {
            ++failures;
            break;
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failures == 0);
  CHECK(d.Status().datatypes() == uint64_t{8} * kSessions);  // each at its bound

  // A handle names a datatype in its own session only, and not after it.
  auto late = ConnectTo(d.local_socket(), "late");
  Allocation a = Holding(*late, std::vector<uint8_t>(4096, 1));
  CHECK(absl::IsNotFound(late->Register(a, 0, Elements{vec, 1, last[0]}).status()));
  clients.clear();
  bool gone = false;
  for (int i = 0; i < 300 && !gone; ++i) {
    gone = d.Status().sessions() == 1 && d.Status().datatypes() == 0;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(gone);
  CHECK(absl::IsNotFound(late->Register(a, 0, Elements{vec, 1, last[1]}).status()));
  CHECK(d.Stop() == 0);
}

}  // namespace ISOMETRY_TEST_FILE
