// An RDMA link's end (channels/rdma/rdma_link.h). Everywhere: a link on a
// device this machine lacks is refused with the device's name and the
// failing call. With a device (Soft-RoCE will do; exits 77 saying why
// where there is none): two ends on one device exchange their parameters
// as peers do, connect, and connect again (the recovery after an error),
// each time with fresh PSNs.
#include "channels/rdma/rdma_link.h"

#include <catch2/catch.hpp>

#include "channels/rdma/rdma_probe.h"
#include "unit/skip.h"

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
