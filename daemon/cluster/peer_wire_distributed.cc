// The peer messages of distributed instances across nodes (proto/
// isometry.proto, "distributed instances across nodes") to and from the
// node's types (daemon/node/node_distributed.h). Pure translation.
#include "core/strings.h"
#include "daemon/cluster/peer_wire.h"
#include "daemon/server/convert.h"
#include "daemon/server/convert_distributed.h"

namespace isometry::cluster {
namespace {

void ToProto(const RankPlace& r, peer_api::PeerRankPlace* out) {
  out->set_rank(r.rank);
  out->set_node(r.node);
  out->set_memory(r.memory);
  out->set_empty(r.empty);
  if (!r.empty) isometry::ToProto(r.shape, out->mutable_shape());
}

Result<RankPlace> FromProto(const peer_api::PeerRankPlace& in) {
  RankPlace r;
  r.rank = in.rank();
  r.node = in.node();
  r.memory = in.memory();
  r.empty = in.empty();
  if (!r.empty) {
    ISO_ASSIGN_OR_RETURN(const InstanceSpec spec, InstanceSpecFromProto(in.shape()));
    if (spec.datatype) return InvalidArgument("rank ", r.rank, ": a shape, not a datatype");
    ISO_RETURN_IF_ERROR(spec.shape.Validate(StrCat("rank ", r.rank, "'s instance")));
    r.shape = spec.shape;
  }
  return r;
}

}  // namespace

void ToProto(const DistributedRanks& r, peer_api::PeerDistributedRanks* out) {
  out->set_found(r.found);
  if (!r.found) return;
  isometry::ToProto(r.spec, out->mutable_distribution());
  out->set_element_bytes(r.element_bytes);
  for (const RankPlace& p : r.ranks) ToProto(p, out->add_ranks());
  out->set_grant_digest(r.grant_digest);
}

Result<DistributedRanks> FromProto(const peer_api::PeerDistributedRanks& in,
                                   const std::string& node) {
  DistributedRanks r;
  r.node = node;
  r.found = in.found();
  if (!r.found) return r;
  ISO_ASSIGN_OR_RETURN(r.spec, DistributionFromProto(in.distribution()));
  r.element_bytes = in.element_bytes();
  r.grant_digest = in.grant_digest();
  for (const peer_api::PeerRankPlace& p : in.ranks()) {
    ISO_ASSIGN_OR_RETURN(RankPlace place, FromProto(p));
    place.node = node;  // the answering node's, whatever it wrote
    r.ranks.push_back(std::move(place));
  }
  return r;
}

void ToProto(const RedistributePart& p, peer_api::PeerRedistributePart* out) {
  out->set_key(p.key);
  out->set_producer(p.producer);
  out->set_consumer(p.consumer);
  isometry::ToProto(p.producer_spec, out->mutable_producer_distribution());
  isometry::ToProto(p.consumer_spec, out->mutable_consumer_distribution());
  out->set_element_bytes(p.element_bytes);
  for (const RankPlace& r : p.consumers) ToProto(r, out->add_consumers());
  out->set_concurrency(p.concurrency);
}

Result<RedistributePart> FromProto(const peer_api::PeerRedistributePart& in) {
  RedistributePart p;
  p.key = in.key();
  p.producer = in.producer();
  p.consumer = in.consumer();
  ISO_ASSIGN_OR_RETURN(p.producer_spec, DistributionFromProto(in.producer_distribution()));
  ISO_ASSIGN_OR_RETURN(p.consumer_spec, DistributionFromProto(in.consumer_distribution()));
  p.element_bytes = in.element_bytes();
  p.concurrency = in.concurrency();
  for (const peer_api::PeerRankPlace& r : in.consumers()) {
    ISO_ASSIGN_OR_RETURN(RankPlace place, FromProto(r));
    if (place.node.empty()) return InvalidArgument("consumer rank ", place.rank, " has no node");
    p.consumers.push_back(std::move(place));
  }
  return p;
}

}  // namespace isometry::cluster
