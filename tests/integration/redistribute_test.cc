// M:N redistribution against a real daemon (issue #18): random producer
// and consumer distributions, each rank its own session with its own local
// layout and storage, checked element by element against the global
// array; a rank whose session ends fails the redistribution cleanly and
// the daemon keeps serving; bad joins are refused.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "client/cpp/isometry_client.h"
#include "integration/client_helpers.h"
#include "integration/daemon_fixture.h"
#include "redistribution/distribution.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;
namespace rd = isometry::redistribution;

namespace {

constexpr char kConfig[] = R"(max_distributed_per_uid = 6
redistribute_concurrency = 3
[[memory]]
name = "sys0"
pool = "768MiB"
client_quota = "768MiB"
[[channel]]
name = "memcpy0"
[[channel]]
name = "cma0"
kind = "cma"
)";

// The `n` bytes of the element at global index `g` (a function of both, so
// a misplaced element or byte shows): one hash an element, not one a byte,
// since the 128 MiB case fills and checks 2^27 bytes (ASan's -O0 build
// spent over a minute there).
void ElementBytes(const rd::Index& g, uint64_t n, std::byte* out) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t v : {g[0], g[1], g[2], g[3]}) h = (h ^ v) * 1099511628211ull;
  for (uint64_t b = 0; b < n; ++b) {
    out[b] = std::byte{static_cast<uint8_t>((h >> (8 * (b % 8) + b / 8 % 8)) + b)};
  }
}

struct Side {
  client::DistributedSpec spec;
  rd::Distribution dist;
  std::vector<int> fields;  // field count per rank (the element split evenly)
  std::vector<bool> column_major, private_memory;
};

// One rank: its session, storage and instance.
struct Rank {
  std::unique_ptr<Client> client;
  std::optional<Allocation> alloc;
  std::vector<std::byte> own;  // private memory storage
  std::optional<client::Instance> inst;
  InstanceShape shape;
  rd::Index extents{};
  std::byte* base = nullptr;
};

rd::DistributionSpec ToSpec(const client::DistributedSpec& s) {
  rd::DistributionSpec out{s.extents,
                           {},
                           s.grid,
                           s.column_major ? rd::GridOrder::kColumnMajor : rd::GridOrder::kRowMajor};
  for (const auto& d : s.dists) {
    out.dists.push_back(d.kind == client::DimDistribution::Kind::kBlock
                            ? rd::DimDistribution::Block()
                        : d.kind == client::DimDistribution::Kind::kCyclic
                            ? rd::DimDistribution::Cyclic()
                            : rd::DimDistribution::BlockCyclic(d.block));
  }
  return out;
}

Side RandomSide(std::mt19937_64& rng, const std::vector<uint64_t>& extents, uint64_t elem) {
  client::DistributedSpec s;
  s.extents = extents;
  s.element_bytes = elem;
  s.column_major = rng() % 2;
  // Grids of 1..8 per dimension (8x1, 1x8, 2x4, ...; 1..2 in 3-D), at
  // most 8 ranks a side so every case stays a few dozen sessions.
  uint64_t ranks = 1;
  for (size_t d = 0; d < extents.size(); ++d) {
    const uint64_t room = extents.size() == 3 ? 2 : 8 / ranks;
    s.grid.push_back(1 + rng() % std::max<uint64_t>(room, 1));
    ranks *= s.grid.back();
    const int k = static_cast<int>(rng() % 3);
    client::DimDistribution dim;
    dim.kind = static_cast<client::DimDistribution::Kind>(k);
    dim.block = 1 + rng() % 7;
    s.dists.push_back(dim);
  }
  auto dist = rd::Distribution::Make(ToSpec(s));
  REQUIRE(dist.ok());
  Side side{s, *dist, {}, {}, {}};
  for (uint64_t r = 0; r < dist->rank_count(); ++r) {
    side.fields.push_back(elem % 2 == 0 && rng() % 3 == 0 ? 2 : 1);
    side.column_major.push_back(rng() % 2);
    side.private_memory.push_back(rng() % 3 == 0);
  }
  return side;
}

// Visits every local point of a rank with its global index.
template <typename F>
void ForEachLocal(const rd::Distribution& dist, uint64_t rank, const rd::Index& ext, F f) {
  const rd::Index coords = dist.CoordsOf(rank);
  const int dims = dist.dims();
  uint64_t n = 1;
  for (int d = 0; d < dims; ++d) n *= ext[d];
  for (uint64_t i = 0; i < n; ++i) {
    std::array<int64_t, kMaxDims> local{};
    rd::Index global{};
    uint64_t rest = i;
    for (int d = dims - 1; d >= 0; --d) {
      local[d] = static_cast<int64_t>(rest % ext[d]);
      rest /= ext[d];
      global[d] = dist.dim(d).Global(coords[d], static_cast<uint64_t>(local[d]));
    }
    f(local, global);
  }
}

// Opens rank `r`'s session and storage, fills it (producer) or zeroes it.
Rank MakeRank(const Daemon& daemon, const Side& side, uint64_t r, bool fill) {
  Rank k;
  k.client = ConnectTo(daemon.local_socket(), "rank");
  auto ext = side.dist.LocalExtent(r);
  REQUIRE(ext.ok());
  k.extents = *ext;
  const int dims = side.dist.dims();
  uint64_t n = 1;
  for (int d = 0; d < dims; ++d) n *= k.extents[d];
  if (n == 0) return k;
  Box b;
  b.dims = dims;
  for (int d = 0; d < dims; ++d) b.hi[d] = static_cast<int64_t>(k.extents[d]);
  const uint32_t nf = static_cast<uint32_t>(side.fields[r]);
  const FieldSpace fs = FieldSpace::Uniform(static_cast<int>(nf),
                                            static_cast<uint32_t>(side.spec.element_bytes / nf));
  // Two fields: SOA (fields apart, same strides); else AOS in C or
  // Fortran order.
  const Layout l = nf == 2                ? Layout::Soa(dims)
                   : side.column_major[r] ? Layout::ColumnMajor(dims)
                                          : Layout::RowMajor(dims);
  k.shape = InstanceShape{b, fs, l};
  if (side.private_memory[r]) {
    k.own.assign(k.shape.total_bytes(), std::byte{0});
    auto range = k.client->RegisterPrivate(k.own.data(), k.own.size());
    REQUIRE(range.ok());
    auto inst = k.client->Register(*range, 0, k.shape);
    REQUIRE(inst.ok());
    k.inst.emplace(*std::move(inst));
    k.base = k.own.data();
  } else {
    auto a = k.client->Allocate("sys0", k.shape.total_bytes());
    REQUIRE(a.ok());
    std::memset(a->data(), 0, k.shape.total_bytes());
    auto inst = k.client->Register(*a, 0, k.shape);
    REQUIRE(inst.ok());
    k.inst.emplace(*std::move(inst));
    k.alloc.emplace(*std::move(a));
    k.base = k.alloc->data();
  }
  if (!fill) return k;
  const uint64_t fb = side.spec.element_bytes / nf;
  std::vector<std::byte> element(side.spec.element_bytes);
  ForEachLocal(side.dist, r, k.extents, [&](const auto& local, const rd::Index& g) {
    ElementBytes(g, element.size(), element.data());
    for (uint32_t f = 0; f < nf; ++f) {
      std::memcpy(k.base + k.shape.OffsetOf(f, local), element.data() + f * fb, fb);
    }
  });
  return k;
}

std::vector<Rank> JoinAll(const Daemon& daemon, const Side& side, const std::string& name,
                          bool fill) {
  std::vector<Rank> ranks;
  for (uint64_t r = 0; r < side.dist.rank_count(); ++r) {
    ranks.push_back(MakeRank(daemon, side, r, fill));
    Rank& k = ranks.back();
    auto info = k.client->JoinDistributed(name, side.spec, r, k.inst ? &*k.inst : nullptr);
    INFO(info.status().ToString());
    REQUIRE(info.ok());
    CHECK(info->joined == r + 1);
  }
  return ranks;
}

// Mismatched elements of the consumer ranks.
uint64_t Mismatches(const Side& side, const std::vector<Rank>& ranks) {
  uint64_t bad = 0;
  for (uint64_t r = 0; r < ranks.size(); ++r) {
    const Rank& k = ranks[r];
    if (!k.inst) continue;
    const uint32_t nf = static_cast<uint32_t>(side.fields[r]);
    const uint64_t fb = side.spec.element_bytes / nf;
    std::vector<std::byte> element(side.spec.element_bytes);
    ForEachLocal(side.dist, r, k.extents, [&](const auto& local, const rd::Index& g) {
      ElementBytes(g, element.size(), element.data());
      bool ok = true;
      for (uint32_t f = 0; f < nf; ++f) {
        ok = ok &&
             std::memcmp(k.base + k.shape.OffsetOf(f, local), element.data() + f * fb, fb) == 0;
      }
      bad += !ok;
    });
  }
  return bad;
}

}  // namespace

TEST_CASE("random M:N redistributions land every element where the consumer expects it") {
  Daemon daemon(kConfig);
  std::mt19937_64 rng(20261124);
  for (int c = 0; c < 24; ++c) {
    const size_t dims = 1 + c % 3;
    std::vector<uint64_t> extents;
    for (size_t d = 0; d < dims; ++d) extents.push_back(1 + rng() % (dims == 1 ? 200 : 30));
    const uint64_t elem = std::vector<uint64_t>{1, 4, 8, 12}[rng() % 4];
    const Side prod = RandomSide(rng, extents, elem);
    const Side cons = RandomSide(rng, extents, elem);
    INFO("case " << c << ": " << prod.dist.ToString() << " -> " << cons.dist.ToString()
                 << ", elements of " << elem << " bytes");
    std::vector<Rank> p = JoinAll(daemon, prod, "p" + std::to_string(c), true);
    std::vector<Rank> q = JoinAll(daemon, cons, "q" + std::to_string(c), false);
    const client::Completion done =
        p[0].client->Redistribute("p" + std::to_string(c), "q" + std::to_string(c));
    INFO(done.status.ToString());
    REQUIRE(done.status.ok());
    CHECK(done.transfer != 0);
    CHECK(Mismatches(cons, q) == 0);
  }
}

TEST_CASE("a rank whose session ends fails the redistribution and the daemon keeps serving") {
  Daemon daemon(kConfig);
  client::DistributedSpec ps{
      {4096, 4096}, {{}, {client::DimDistribution::Kind::kCyclic, 0}}, {1, 4}, false, 8};
  client::DistributedSpec cs{{4096, 4096}, {{}, {}}, {1, 4}, false, 8};
  auto side = [](const client::DistributedSpec& s) {
    auto dist = rd::Distribution::Make(ToSpec(s));
    REQUIRE(dist.ok());
    return Side{s, *dist, {1, 1, 1, 1}, {false, true, false, true}, {false, false, false, false}};
  };
  const Side prod = side(ps), cons = side(cs);
  std::vector<Rank> p = JoinAll(daemon, prod, "big-p", true);
  std::vector<Rank> q = JoinAll(daemon, cons, "big-q", false);
  client::Completion done;
  std::thread runner([&] { done = p[0].client->Redistribute("big-p", "big-q"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  q[2].client.reset();  // consumer rank 2's session ends
  runner.join();
  INFO(done.status.ToString());
  // Mid-way: ABORTED; before it was planned: NOT_FOUND or ABORTED; a
  // machine fast enough may have finished first.
  CHECK((done.status.ok() || absl::IsAborted(done.status) || absl::IsNotFound(done.status)));
  // The distributed instance is gone: later calls fail cleanly.
  const client::Completion again = p[0].client->Redistribute("big-p", "big-q");
  CHECK(absl::IsNotFound(again.status));
  // And the daemon serves a new one.
  std::vector<Rank> q2;
  for (uint64_t r = 0; r < 4; ++r) {
    q2.push_back(MakeRank(daemon, cons, r, false));
    REQUIRE(q2.back().client->JoinDistributed("big-q2", cs, r, &*q2.back().inst).ok());
  }
  REQUIRE(p[0].client->Redistribute("big-p", "big-q2").status.ok());
  CHECK(Mismatches(cons, q2) == 0);
}

TEST_CASE("bad joins and redistributions are refused with the reason") {
  Daemon daemon(kConfig);
  client::DistributedSpec s{{10, 6}, {{}, {}}, {2, 1}, false, 8};
  auto dist = rd::Distribution::Make(ToSpec(s));
  REQUIRE(dist.ok());
  const Side side{s, *dist, {1, 1}, {false, false}, {false, false}};
  Rank r0 = MakeRank(daemon, side, 0, false);
  Rank r1 = MakeRank(daemon, side, 1, false);
  REQUIRE(r0.client->JoinDistributed("a", s, 0, &*r0.inst).ok());
  // Incomplete: refused.
  CHECK(absl::IsFailedPrecondition(r0.client->Redistribute("a", "a").status));
  // Another distribution under the same name.
  client::DistributedSpec other = s;
  other.dists[0] = {client::DimDistribution::Kind::kCyclic, 0};
  auto bad = r1.client->JoinDistributed("a", other, 1, &*r1.inst);
  CHECK(absl::IsInvalidArgument(bad.status()));
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("CYCLIC"));
  // Wrong element size, rank out of range, twice the same rank.
  client::DistributedSpec wide = s;
  wide.element_bytes = 4;
  CHECK(absl::IsInvalidArgument(r1.client->JoinDistributed("a", wide, 1, &*r1.inst).status()));
  CHECK(absl::IsInvalidArgument(r1.client->JoinDistributed("a", s, 2, &*r1.inst).status()));
  CHECK(absl::IsAlreadyExists(r0.client->JoinDistributed("a", s, 0, &*r0.inst).status()));
  // Rank 1's instance is not rank 0's shape... (10x6 over 2: both 5x6;
  // a 3x6 instance does not fit).
  Box b{2, {0, 0}, {3, 6}};
  auto small_alloc = r1.client->Allocate("sys0", uint64_t{3} * 6 * 8);
  REQUIRE(small_alloc.ok());
  auto small = r1.client->Register(
      *small_alloc, 0, InstanceShape{b, FieldSpace::Uniform(1, 8), Layout::RowMajor(2)});
  REQUIRE(small.ok());
  CHECK(absl::IsInvalidArgument(r1.client->JoinDistributed("a", s, 1, &*small).status()));
  // A blocked layout is not strided.
  Box b5{2, {0, 0}, {5, 6}};
  auto blocked_layout = Layout::Blocked({2, 2});
  REQUIRE(blocked_layout.ok());
  auto blk_alloc = r1.client->Allocate("sys0", uint64_t{6} * 6 * 8);
  REQUIRE(blk_alloc.ok());
  auto blocked = r1.client->Register(*blk_alloc, 0,
                                     InstanceShape{b5, FieldSpace::Uniform(1, 8), *blocked_layout});
  REQUIRE(blocked.ok());
  CHECK(absl::IsUnimplemented(r1.client->JoinDistributed("a", s, 1, &*blocked).status()));
  // Another session's instance id is not this one's.
  CHECK(absl::IsNotFound(r1.client->JoinDistributed("a", s, 1, &*r0.inst).status()));
  REQUIRE(r1.client->JoinDistributed("a", s, 1, &*r1.inst).ok());
  // Unknown names; different global extents.
  CHECK(absl::IsNotFound(r0.client->Redistribute("a", "nothing").status));
  client::DistributedSpec t{{10, 7}, {{}, {}}, {1, 1}, false, 8};
  auto tdist = rd::Distribution::Make(ToSpec(t));
  REQUIRE(tdist.ok());
  Rank t0 = MakeRank(daemon, Side{t, *tdist, {1}, {false}, {false}}, 0, false);
  REQUIRE(t0.client->JoinDistributed("t", t, 0, &*t0.inst).ok());
  CHECK(absl::IsInvalidArgument(r0.client->Redistribute("a", "t").status));
  // A session that is no rank of either may not start it.
  auto outsider = ConnectTo(daemon.local_socket(), "outsider");
  CHECK(absl::IsPermissionDenied(outsider->Redistribute("a", "t").status));
  // At most max_distributed_per_uid (6) names per uid.
  for (int i = 0; i < 4; ++i) {
    REQUIRE(t0.client->JoinDistributed("n" + std::to_string(i), t, 0, &*t0.inst).ok());
  }
  CHECK(absl::IsResourceExhausted(t0.client->JoinDistributed("n9", t, 0, &*t0.inst).status()));
}

TEST_CASE("pieces with more runs per row than one copy holds are cut and still land right") {
  Daemon daemon(kConfig);
  // CYCLIC columns: every element of a producer row is its own run in the
  // consumer's row (100000 per row, past the 65536 runs of one copy).
  const client::DistributedSpec ps{
      {3, 200000}, {{}, {client::DimDistribution::Kind::kCyclic, 0}}, {1, 2}, false, 8};
  const client::DistributedSpec cs{{3, 200000}, {{}, {}}, {1, 1}, false, 8};
  auto pd = rd::Distribution::Make(ToSpec(ps));
  auto cd = rd::Distribution::Make(ToSpec(cs));
  REQUIRE((pd.ok() && cd.ok()));
  const Side prod{ps, *pd, {1, 1}, {false, true}, {false, true}};
  const Side cons{cs, *cd, {1}, {true}, {false}};
  std::vector<Rank> p = JoinAll(daemon, prod, "wide-p", true);
  std::vector<Rank> q = JoinAll(daemon, cons, "wide-q", false);
  const client::Completion done = q[0].client->Redistribute("wide-p", "wide-q");
  INFO(done.status.ToString());
  REQUIRE(done.status.ok());
  CHECK(Mismatches(cons, q) == 0);
}

TEST_CASE("column-major consumers get pieces in column order, cut by runs of dimension 0") {
  Daemon daemon(kConfig);
  // CYCLIC rows into a column-major consumer: the enumeration follows the
  // consumer's columns (dimension 0 innermost), where every producer row is
  // its own run: 100000 runs per column, 3 columns, cut into several copies.
  const client::DistributedSpec ps{
      {200000, 3}, {{client::DimDistribution::Kind::kCyclic, 0}, {}}, {2, 1}, false, 8};
  const client::DistributedSpec cs{{200000, 3}, {{}, {}}, {1, 1}, false, 8};
  auto pd = rd::Distribution::Make(ToSpec(ps));
  auto cd = rd::Distribution::Make(ToSpec(cs));
  REQUIRE((pd.ok() && cd.ok()));
  const Side prod{ps, *pd, {1, 1}, {true, false}, {false, true}};
  const Side cons{cs, *cd, {1}, {true}, {true}};
  std::vector<Rank> p = JoinAll(daemon, prod, "tall-p", true);
  std::vector<Rank> q = JoinAll(daemon, cons, "tall-q", false);
  const client::Completion done = q[0].client->Redistribute("tall-p", "tall-q");
  INFO(done.status.ToString());
  REQUIRE(done.status.ok());
  CHECK(Mismatches(cons, q) == 0);
}

}  // namespace ISOMETRY_TEST_FILE
