// The RDMA link exchange as a peer's message (daemon/cluster/peer_wire_rdma
// and net/rdma/link_params): what one node builds, the other parses
// back to the same parameters; what could make a node write outside the
// peer's ring, or connect to a QP that cannot exist, is refused; an answer
// altered in flight, or made for another request, fails its proof.
#include <catch2/catch.hpp>
#include <functional>

#include "daemon/cluster/peer_wire.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::cluster;

namespace {

rdma::LinkParams Sample(uint32_t qps) {
  rdma::LinkParams p;
  for (uint32_t i = 0; i < qps; ++i) {
    rdma::QpAddress q;
    q.qpn = 0x11 + i;
    q.psn = 0xABCDE0 + i;
    q.lid = 0;
    for (uint8_t b = 0; b < 16; ++b) q.gid.raw[b] = static_cast<uint8_t>(0xF0 + b);
    q.mtu = IBV_MTU_4096;
    p.qps.push_back(q);
  }
  p.ring.region_addr = 0x7f0000000000;
  p.ring.region_length = 64ull << 20;
  p.ring.addr = p.ring.region_addr + 4096;
  p.ring.rkey = 0x1234;
  p.ring.slot_bytes = 1 << 20;
  p.ring.slots = 32;
  p.generation = 3;
  return p;
}

peer_api::PeerRdmaLink Wire(const rdma::LinkParams& p) {
  peer_api::PeerRdmaLink m;
  ToProto(p, &m);
  return m;
}

// The message with one change; its parse must fail and name `field`.
void Refused(const std::function<void(peer_api::PeerRdmaLink&)>& change, std::string_view field,
             uint32_t qps = 2) {
  peer_api::PeerRdmaLink m = Wire(Sample(2));
  change(m);
  auto p = FromProto(m, qps);
  INFO(m.ShortDebugString());
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().code() == absl::StatusCode::kInvalidArgument);
  INFO(p.status().message());
  CHECK(std::string(p.status().message()).find(field) != std::string::npos);
}

}  // namespace

TEST_CASE("RDMA link parameters survive the wire") {
  for (uint32_t qps : {1u, 2u, 64u}) {
    const rdma::LinkParams p = Sample(qps);
    auto back = FromProto(Wire(p), qps);
    REQUIRE(back.ok());
    REQUIRE(back->qps.size() == qps);
    for (uint32_t i = 0; i < qps; ++i) {
      CHECK(back->qps[i].qpn == p.qps[i].qpn);
      CHECK(back->qps[i].psn == p.qps[i].psn);
      CHECK(back->qps[i].lid == p.qps[i].lid);
      CHECK(std::memcmp(back->qps[i].gid.raw, p.qps[i].gid.raw, 16) == 0);
      CHECK(back->qps[i].mtu == IBV_MTU_4096);
    }
    CHECK(back->ring.addr == p.ring.addr);
    CHECK(back->ring.rkey == p.ring.rkey);
    CHECK(back->ring.slot_bytes == p.ring.slot_bytes);
    CHECK(back->ring.slots == p.ring.slots);
    CHECK(back->ring.region_addr == p.ring.region_addr);
    CHECK(back->ring.region_length == p.ring.region_length);
    CHECK(back->generation == 3);
  }
  // InfiniBand: a LID and no GID will do; every MTU size maps.
  peer_api::PeerRdmaLink m = Wire(Sample(1));
  m.mutable_qps(0)->set_lid(7);
  m.mutable_qps(0)->set_gid(std::string(16, '\0'));
  for (uint32_t mtu : {256u, 512u, 1024u, 2048u, 4096u}) {
    m.mutable_qps(0)->set_mtu_bytes(mtu);
    auto p = FromProto(m, 1);
    REQUIRE(p.ok());
    CHECK(rdma::MtuBytes(p->qps[0].mtu) == static_cast<int>(mtu));
  }
  // A ring that fills its region exactly.
  rdma::LinkParams full = Sample(1);
  full.ring.addr = full.ring.region_addr;
  full.ring.region_length = full.ring.slot_bytes * full.ring.slots;
  CHECK(FromProto(Wire(full), 1).ok());
}

TEST_CASE("bad queue pairs are refused") {
  Refused([](auto&) {}, "qps", /*qps=*/3);  // the peers' qps_per_peer differ
  Refused([](auto& m) { m.mutable_qps()->RemoveLast(); }, "qps_per_peer");
  Refused([](auto& m) { m.mutable_qps(1)->set_qpn(0); }, "qps[1]");
  Refused([](auto& m) { m.mutable_qps(0)->set_qpn(1u << 24); }, "QP number");
  Refused([](auto& m) { m.mutable_qps(1)->set_qpn(m.qps(0).qpn()); }, "repeats");
  Refused([](auto& m) { m.mutable_qps(0)->set_psn(1u << 24); }, "PSN");
  Refused([](auto& m) { m.mutable_qps(0)->set_lid(0x10000); }, "LID");
  Refused([](auto& m) { m.mutable_qps(0)->set_gid("short"); }, "GID");
  Refused([](auto& m) { m.mutable_qps(0)->set_mtu_bytes(1500); }, "MTU");
  Refused([](auto& m) { m.mutable_qps(0)->set_mtu_bytes(0); }, "MTU");
  Refused([](auto& m) { m.mutable_qps(0)->set_gid(std::string(16, '\0')); }, "neither");
}

TEST_CASE("rings outside their region, or overflowing, are refused") {
  Refused([](auto& m) { m.mutable_ring()->set_slots(0); }, "slots");
  Refused([](auto& m) { m.mutable_ring()->set_slots(1025); }, "slots");
  Refused([](auto& m) { m.mutable_ring()->set_slot_bytes(0); }, "slot");
  Refused([](auto& m) { m.mutable_ring()->set_slot_bytes((1ull << 32) + 1); }, "slot");
  // One byte past the region's end, and one before its start.
  Refused(
      [](auto& m) {
        auto* r = m.mutable_ring();
        r->set_addr(r->region_addr() + r->region_length() - r->slot_bytes() * r->slots() + 1);
      },
      "not inside");
  Refused([](auto& m) { m.mutable_ring()->set_addr(m.ring().region_addr() - 1); }, "not inside");
  // A region that would be fine but for the rkey covering less of it.
  Refused([](auto& m) { m.mutable_ring()->set_region_length(1 << 20); }, "not inside");
  // Sizes that overflow 64 bits: the ring's end, and the region's.
  Refused(
      [](auto& m) {
        m.mutable_ring()->set_slot_bytes(1ull << 32);
        m.mutable_ring()->set_slots(1024);
        m.mutable_ring()->set_addr(~0ull - (1ull << 41));
      },
      "wraps");
  Refused([](auto& m) { m.mutable_ring()->set_region_length(~0ull); }, "wraps");
  Refused([](auto& m) { m.clear_ring(); }, "slots");
}

TEST_CASE("an RDMA answer is bound to the session and the request") {
  const std::string key(32, 'k');
  peer_api::PeerRdmaLink answer = Wire(Sample(2));
  answer.set_mac(RdmaAnswerMac(key, "nonce-1", answer));
  CHECK(CheckedRdmaAnswer(key, "nonce-1", answer, 2).ok());
  // Another request's nonce (a replayed answer), another session's key.
  CHECK(CheckedRdmaAnswer(key, "nonce-2", answer, 2).status().code() ==
        absl::StatusCode::kUnauthenticated);
  CHECK(CheckedRdmaAnswer(std::string(32, 'x'), "nonce-1", answer, 2).status().code() ==
        absl::StatusCode::kUnauthenticated);
  // Altered in flight: the ring's rkey, a QP number; or no proof at all.
  for (const auto& change : std::vector<std::function<void(peer_api::PeerRdmaLink&)>>{
           [](auto& m) { m.mutable_ring()->set_rkey(m.ring().rkey() + 1); },
           [](auto& m) { m.mutable_qps(1)->set_qpn(99); }, [](auto& m) { m.clear_mac(); }}) {
    peer_api::PeerRdmaLink forged = answer;
    change(forged);
    CHECK(CheckedRdmaAnswer(key, "nonce-1", forged, 2).status().code() ==
          absl::StatusCode::kUnauthenticated);
  }
  // A proven answer is still checked.
  peer_api::PeerRdmaLink bad = answer;
  bad.mutable_ring()->set_slots(0);
  bad.set_mac(RdmaAnswerMac(key, "nonce-1", bad));
  CHECK(CheckedRdmaAnswer(key, "nonce-1", bad, 2).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace ISOMETRY_TEST_FILE
