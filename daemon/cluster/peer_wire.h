// Internal to daemon/cluster: the peer protocol's messages
// (isometry_peer.proto, IsometryPeer) to and from the domain types the rest of the cluster layer
// speaks. Pure translation: no I/O, no locks.
#pragma once

#include "daemon/cluster/cluster_impl.h"
#include "isometry_peer.grpc.pb.h"
#include "net/rdma/link_params.h"

namespace isometry::cluster {

// A node's memories and channels, as a welcome carries them.
void ToWelcome(const Topology& topo, peer_api::PeerWelcome* w);
// The peer's topology from its welcome: memory ids {w.node(), index}.
// An unknown memory or channel kind is an error.
Result<Topology> TopologyFromWelcome(const peer_api::PeerWelcome& w);

// The peer's links to its peers, from its welcome: rates must be positive
// and finite (others are dropped).
std::map<std::string, double> LinkRatesFromWelcome(const peer_api::PeerWelcome& w);

HelloIn FromProto(const peer_api::PeerHello& req, std::string from);
void ToProto(const WelcomeOut& w, peer_api::PeerWelcome* out);

// What a peer needs to run its half of a cross-node copy.
struct HalfOut {
  uint64_t key = 0;
  bool sending = false;
  const Path* path = nullptr;
  size_t net_hop = 0;
  uint64_t chunk_target = 0, slot_limit = 0;
  Box box;
  const CrossEnd* end = nullptr;    // the peer's end
  const CrossEnd* other = nullptr;  // the other end (its shape)
  CopyOptions options;
  std::string qos_class;  // the copy's class here
  std::string partner;
  CopySource source;  // for the peer's Active Access log entries
  // A datatype copy: the peer's end by its form's hash (end->local.form),
  // with the serialized form when `form` is set.
  uint64_t form_hash = 0;
  const std::string* form = nullptr;
  // Forwarding: both ends are on the peer, `end` the source and this the
  // destination; the peer plans and runs the whole copy (path unused).
  const CrossEnd* forward_dst = nullptr;
  uint64_t dst_form_hash = 0;  // its form, of a datatype copy
  const std::string* dst_form = nullptr;
  // A relay: the peer also sends at relay_hop to relay_partner; `end` and
  // `other` then give only the shapes of the source and the destination.
  size_t relay_hop = 0;
  std::string relay_partner;
  // A sending half: the tag the receiving half routed the network hop
  // over RDMA under (0: TCP).
  uint32_t rdma_tag = 0;
};
peer_api::StartHalfRequest ToProto(const HalfOut& h);
// The half a peer asks for; an error when the request is malformed.
Result<HalfRequest> FromProto(const peer_api::StartHalfRequest& req);

// RDMA links (peer_wire_rdma.cc). FromProto checks what a peer sent
// (rdma::ValidateLinkParams, with `qps` this node's rdma.qps_per_peer)
// and refuses a GID that is not 16 bytes or an MTU that is not a size.
void ToProto(const rdma::LinkParams& p, peer_api::PeerRdmaLink* out);
Result<rdma::LinkParams> FromProto(const peer_api::PeerRdmaLink& in, uint32_t qps);
// The answer's MAC: HMAC(key, "rdma" | nonce | answer with mac empty).
std::string RdmaAnswerMac(std::string_view key, std::string_view nonce,
                          const peer_api::PeerRdmaLink& answer);
// Checks an answer's MAC against the request's nonce, then parses it.
Result<rdma::LinkParams> CheckedRdmaAnswer(std::string_view key, std::string_view nonce,
                                           const peer_api::PeerRdmaLink& answer, uint32_t qps);

// Distributed instances across nodes (peer_wire_distributed.cc). Ranks
// from a peer's answer are placed on `node`, the peer that answered.
void ToProto(const DistributedRanks& r, peer_api::PeerDistributedRanks* out);
Result<DistributedRanks> FromProto(const peer_api::PeerDistributedRanks& in,
                                   const std::string& node);
void ToProto(const RedistributePart& p, peer_api::PeerRedistributePart* out);
Result<RedistributePart> FromProto(const peer_api::PeerRedistributePart& in);

}  // namespace isometry::cluster
