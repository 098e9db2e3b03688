// An RDMA link's end (net/rdma/rdma_link.h). Everywhere: a link on a
// device this machine lacks is refused with the device's name and the
// failing call. With a device (Soft-RoCE will do; exits 77 saying why
// where there is none): two ends on one device exchange their parameters
// as peers do, connect, and connect again (the recovery after an error),
// each time with fresh PSNs; chunks stream from one end's memory into the
// other's ring and on to their places, verified; a write with a wrong
// rkey fails its chunks with the device's text, and the link carries the
// next transfer once connected again.
#include "net/rdma/rdma_link.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <random>
#include <vector>

#include "net/rdma/rdma_probe.h"
#include "unit/skip.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::rdma;

TEST_CASE("a link on a missing device is refused, naming it") {
  LinkOptions o;
  o.device = "isometry_no_such_dev";
  auto link = RdmaLink::Create(o);
  REQUIRE_FALSE(link.ok());
  CHECK_THAT(std::string(link.status().message()), Catch::Contains("isometry_no_such_dev"));
  o.slots = 0;  // the ring is checked before any device is touched
  auto bad = RdmaLink::Create(o);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("slots"));
}

TEST_CASE("two ends on one device connect, and connect again", "[may_skip][rdma_link]") {
  const RdmaProbe probe = ProbeRdma();
  if (!probe.usable()) ISOMETRY_SKIP("no usable RDMA device: " << probe.error);
  auto choice = ChooseRdma(probe, RdmaConfig{});
  REQUIRE(choice.ok());
  LinkOptions o;
  o.device = choice->devices.front();
  o.qps = 3;
  o.slots = 8;
  o.slot_bytes = 64 << 10;
  auto a = RdmaLink::Create(o);
  auto b = RdmaLink::Create(o);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  INFO((*a)->Describe());
  for (int round = 0; round < 2; ++round) {
    const LinkParams pa = (*a)->Local(), pb = (*b)->Local();
    REQUIRE(ValidateLinkParams(pa, 3).ok());
    CHECK(pa.ring.slots == 8);
    CHECK(pa.ring.slot_bytes == 64 << 10);
    CHECK(pa.generation == static_cast<uint64_t>(round));
    REQUIRE((*a)->Connect(pb).ok());
    REQUIRE((*b)->Connect(pa).ok());
    CHECK((*a)->connected());
    CHECK((*a)->remote().qps[2].qpn == pb.qps[2].qpn);
    // The next connection starts from other PSNs.
    const LinkParams again = (*a)->Local();
    bool differ = false;
    for (size_t i = 0; i < again.qps.size(); ++i) differ |= again.qps[i].psn != pa.qps[i].psn;
    CHECK(differ);
  }
  // A peer's parameters for a different qps_per_peer are refused.
  LinkParams short_of = (*b)->Local();
  short_of.qps.pop_back();
  CHECK_FALSE((*a)->Connect(short_of).ok());
}

namespace {

// Streams `chunks` chunks of random sizes from a to b; returns the status
// of the first chunk that failed (OK when all landed intact).
Status Stream(RdmaLink& a, RdmaLink& b, uint32_t tag, uint64_t chunks, uint64_t slot,
              std::mt19937& rng) {
  auto fa = a.MakeFabric();
  auto fb = b.MakeFabric();
  REQUIRE(fa.ok());
  REQUIRE(fb.ok());
  const RingShape ring{a.remote().ring.slots, slot};
  RdmaStream sa(fa->get(), ring, static_cast<uint32_t>(a.remote().qps.size()), nullptr);
  RdmaStream sb(fb->get(), ring, static_cast<uint32_t>(b.remote().qps.size()), nullptr);
  REQUIRE(sa.Open(tag, chunks, true).ok());
  REQUIRE(sb.Open(tag, chunks, false).ok());
  std::vector<std::byte> src(chunks * slot), dst(chunks * slot);
  for (auto& x : src) x = static_cast<std::byte>(rng());
  std::vector<uint64_t> size(chunks);
  Status first = OkStatus();
  uint64_t ended = 0;
  auto end = [&](const Status& s) {
    if (!s.ok() && first.ok()) first = s;
    ++ended;
  };
  for (uint64_t c = 0; c < chunks; ++c) {
    size[c] = 1 + rng() % slot;
    sb.Expect(tag, c, dst.data() + c * slot, slot, end);
    sa.Send(tag, c, src.data() + c * slot, size[c], end);
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (ended < 2 * chunks && std::chrono::steady_clock::now() < until) {
    sa.Progress();
    sb.Progress();
    if (!first.ok()) break;
  }
  if (!first.ok()) return first;
  REQUIRE(ended == 2 * chunks);
  for (uint64_t c = 0; c < chunks; ++c) {
    REQUIRE(std::memcmp(src.data() + c * slot, dst.data() + c * slot, size[c]) == 0);
  }
  return OkStatus();
}

}  // namespace

TEST_CASE("chunks stream over the link; a wrong rkey fails them; reconnected, it carries more",
          "[may_skip][rdma_stream]") {
  const RdmaProbe probe = ProbeRdma();
  if (!probe.usable()) ISOMETRY_SKIP("no usable RDMA device: " << probe.error);
  auto choice = ChooseRdma(probe, RdmaConfig{});
  REQUIRE(choice.ok());
  LinkOptions o;
  o.device = choice->devices.front();
  o.qps = 2;
  o.slots = 8;
  o.slot_bytes = 64 << 10;
  auto a = RdmaLink::Create(o);
  auto b = RdmaLink::Create(o);
  REQUIRE((a.ok() && b.ok()));
  std::mt19937 rng(4);
  auto connect = [&](bool wrong_rkey) {
    LinkParams pa = (*a)->Local(), pb = (*b)->Local();
    if (wrong_rkey) pb.ring.rkey ^= 0x5a5a;
    REQUIRE((*a)->Connect(pb).ok());
    REQUIRE((*b)->Connect(pa).ok());
  };
  connect(false);
  REQUIRE(Stream(**a, **b, 1, 200, o.slot_bytes, rng).ok());
  connect(true);
  const Status failed = Stream(**a, **b, 2, 20, o.slot_bytes, rng);
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(failed.message()), Catch::Contains("status"));  // the device's text
  INFO(failed.message());
  connect(false);
  REQUIRE(Stream(**a, **b, 3, 200, o.slot_bytes, rng).ok());
}

}  // namespace ISOMETRY_TEST_FILE
