// daemon/cluster/peer_wire: a peer's StartHalf as this node parses it. A
// relay or a forwarded copy arrives from another node, so whatever does
// not fit its shape is refused before anything is started.
#include "daemon/cluster/peer_wire.h"

#include <catch2/catch.hpp>

#include "channels/channel_factory.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::cluster;

namespace {

// A two-crossing path a:sys0 -> b:sys0 -> c:sys0 (node ids 1, 2, 3), as
// b gets it to relay.
peer_api::StartHalfRequest RelayRequest() {
  peer_api::StartHalfRequest req;
  req.set_key(42);
  for (uint32_t node : {1u, 2u, 3u}) {
    auto* n = req.add_nodes();
    n->set_node(node);
    n->set_memory(0);
    n->set_layout("F,x");
  }
  for (int i = 0; i < 2; ++i) {
    auto* e = req.add_edges();
    e->set_channel("tcp");
    e->set_kind("remote_memcpy");
  }
  req.set_net_hop(0);
  req.set_relay_hop(1);
  req.set_partner("a");
  req.set_relay_partner("c");
  req.set_chunk_target(1 << 20);
  req.set_slot_limit(1 << 20);
  req.mutable_box()->add_lo(0);
  req.mutable_box()->add_hi(1024);
  auto* local = req.mutable_local();
  local->mutable_bounds()->add_lo(0);
  local->mutable_bounds()->add_hi(1024);
  auto* f = local->add_fields();
  f->set_name("v");
  f->set_size(8);
  local->set_layout("F,x");
  req.mutable_other_bounds()->add_lo(0);
  req.mutable_other_bounds()->add_hi(1024);
  req.set_other_layout("F,x");
  return req;
}

}  // namespace

TEST_CASE("peer wire: a relay parses with both network hops and peers") {
  Result<HalfRequest> h = FromProto(RelayRequest());
  REQUIRE(h.ok());
  CHECK(h->part.relays());
  CHECK(h->part.relay_hop == 1);
  CHECK(h->part.relay_peer == "c");
  CHECK(h->partner == "a");
  CHECK(h->part.Mine(0));
  CHECK(h->part.Mine(1));
  CHECK_FALSE(h->forward_dst.has_value());
}

TEST_CASE("peer wire: a peer's edges and a half's hops carry their kinds' traits") {
  // The planner asks an edge's traits, never its kind: a peer's memcpy edge
  // must convert for the simple algorithm and share its node's memory,
  // its disk edges must not convert, as this node's own would.
  Topology mine;
  mine.memories = {{{7, 0}, MemoryKind::kSys, "sys0"}, {{7, 1}, MemoryKind::kDsk, "dsk0"}};
  mine.edges = {{{7, 0}, {7, 0}, 0, ChannelKind::kMemcpy, "memcpy0"},
                {{7, 0}, {7, 1}, 1, ChannelKind::kDiskWrite, "disk_w"}};
  peer_api::PeerWelcome w;
  w.set_node(7);
  ToWelcome(mine, &w);
  Result<Topology> theirs = TopologyFromWelcome(w);
  REQUIRE(theirs.ok());
  REQUIRE(theirs->edges.size() == 2);
  CHECK(theirs->edges[0].traits == EdgeTraitsOf(ChannelKind::kMemcpy));
  CHECK(theirs->edges[0].traits.simple_converter);
  CHECK(theirs->edges[0].traits.shares_node_memory);
  CHECK(theirs->edges[1].traits == EdgeTraitsOf(ChannelKind::kDiskWrite));
  CHECK_FALSE(theirs->edges[1].traits.converts_layout);

  Result<HalfRequest> h = FromProto(RelayRequest());
  REQUIRE(h.ok());
  for (const TopologyEdge& e : h->part.path.edges) {
    CHECK(e.traits == EdgeTraitsOf(ChannelKind::kRemoteMemcpy));
  }
}

TEST_CASE("peer wire: malformed relays are refused") {
  auto refused = [](const peer_api::StartHalfRequest& req) {
    Result<HalfRequest> h = FromProto(req);
    REQUIRE_FALSE(h.ok());
    CHECK(absl::IsInvalidArgument(h.status()));
  };
  peer_api::StartHalfRequest req = RelayRequest();
  req.set_sending(true);  // a relay receives first
  refused(req);
  req = RelayRequest();
  req.set_net_hop(1);  // the outgoing hop not after the incoming one
  refused(req);
  req = RelayRequest();
  req.set_relay_hop(2);  // past the path's end
  refused(req);
  req = RelayRequest();
  req.set_relay_partner("");
  refused(req);
  req = RelayRequest();
  req.set_relay_partner("a");  // back to where the bytes came from
  refused(req);
  req = RelayRequest();
  req.set_form_hash(7);  // datatype copies are not relayed
  refused(req);
}

TEST_CASE("peer wire: a forwarded copy names two ends and no path") {
  peer_api::StartHalfRequest req = RelayRequest();
  req.clear_nodes();
  req.clear_edges();
  req.set_relay_hop(0);
  req.set_relay_partner("");
  req.set_partner("");
  *req.mutable_forward_dst() = req.local();
  Result<HalfRequest> h = FromProto(req);
  REQUIRE(h.ok());
  REQUIRE(h->forward_dst.has_value());
  CHECK(h->other.bounds == h->forward_dst->shape.bounds);
  // A path beside it is refused: the receiving node plans itself.
  peer_api::StartHalfRequest with_path = RelayRequest();
  with_path.set_relay_hop(0);
  with_path.set_relay_partner("");
  *with_path.mutable_forward_dst() = with_path.local();
  REQUIRE_FALSE(FromProto(with_path).ok());
}

TEST_CASE("peer wire: an RDMA tag comes only with a direct sending half") {
  // A direct half: a:sys0 -> b:sys0, this node sending to b.
  peer_api::StartHalfRequest direct = RelayRequest();
  direct.mutable_nodes()->RemoveLast();
  direct.mutable_edges()->RemoveLast();
  direct.set_relay_hop(0);
  direct.set_relay_partner("");
  direct.set_partner("b");
  direct.set_sending(true);
  direct.set_rdma_tag(17);
  Result<HalfRequest> h = FromProto(direct);
  REQUIRE(h.ok());
  CHECK(h->rdma_tag == 17);
  // 0: the hop takes TCP.
  direct.set_rdma_tag(0);
  REQUIRE(FromProto(direct).ok());
  CHECK(FromProto(direct)->rdma_tag == 0);
  auto refused = [](const peer_api::StartHalfRequest& req) {
    Result<HalfRequest> r = FromProto(req);
    REQUIRE_FALSE(r.ok());
    CHECK(absl::IsInvalidArgument(r.status()));
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("rdma_tag"));
  };
  peer_api::StartHalfRequest req = direct;
  req.set_rdma_tag(256);  // beyond the 8-bit tag
  refused(req);
  req = direct;
  req.set_rdma_tag(3);
  req.set_sending(false);  // the receiver picks the tag, it is never told one
  refused(req);
  req = RelayRequest();
  req.set_rdma_tag(3);  // relays take TCP
  refused(req);
}

}  // namespace ISOMETRY_TEST_FILE
