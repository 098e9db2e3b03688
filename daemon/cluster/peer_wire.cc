#include "daemon/cluster/peer_wire.h"

#include <cmath>

#include "channels/channel_factory.h"
#include "daemon/server/convert.h"

namespace isometry::cluster {

void ToWelcome(const Topology& topo, peer_api::PeerWelcome* w) {
  for (const TopologyMemory& m : topo.memories) {
    auto* pm = w->add_memories();
    pm->set_index(m.id.memory);
    pm->set_name(m.name);
    pm->set_kind(std::string(MemoryKindName(m.kind)));
  }
  for (const TopologyEdge& e : topo.edges) {
    auto* pe = w->add_edges();
    pe->set_src(e.src.memory);
    pe->set_dst(e.dst.memory);
    pe->set_channel(e.channel_name);
    pe->set_kind(std::string(ChannelKindName(e.kind)));
    for (const ThroughputSample& s : e.tp.Breakpoints()) {
      auto* r = pe->add_rates();
      r->set_request_bytes(s.request_bytes);
      r->set_bytes_per_s(s.bytes_per_second);
    }
  }
}

Result<Topology> TopologyFromWelcome(const peer_api::PeerWelcome& w) {
  Topology t;
  for (const auto& m : w.memories()) {
    auto kind = ParseMemoryKind(m.kind());
    if (!kind) return InvalidArgument("peer memory '", m.name(), "' has unknown kind ", m.kind());
    t.memories.push_back({MemoryId{w.node(), m.index()}, *kind, m.name()});
  }
  for (const auto& e : w.edges()) {
    auto kind = ParseChannelKind(e.kind());
    if (!kind) return InvalidArgument("peer channel '", e.channel(), "' has unknown kind");
    TopologyEdge te{MemoryId{w.node(), e.src()}, MemoryId{w.node(), e.dst()}, -1, *kind,
                    e.channel()};
    te.traits = EdgeTraitsOf(*kind);  // the peer runs the same descriptors
    std::vector<ThroughputSample> samples;
    for (const auto& r : e.rates()) samples.push_back({r.request_bytes(), r.bytes_per_s()});
    if (!samples.empty()) {
      auto tp = ThroughputFunction::FromSamples(std::move(samples));
      if (tp.ok()) te.tp = *tp;
    }
    t.edges.push_back(std::move(te));
  }
  return t;
}

HelloIn FromProto(const peer_api::PeerHello& req, std::string from) {
  HelloIn h;
  h.node_name = req.node_name();
  h.node = req.node();
  h.protocol_version = req.protocol_version();
  h.nonce = req.nonce();
  h.unix_ms = req.unix_ms();
  h.mac = req.mac();
  h.to_node_name = req.to_node_name();
  h.challenge = req.challenge();
  h.from = std::move(from);
  return h;
}

void ToProto(const WelcomeOut& w, peer_api::PeerWelcome* out) {
  out->set_node_name(w.node_name);
  out->set_node(w.node);
  out->set_protocol_version(w.protocol_version);
  out->set_token(w.token);
  out->set_mac(w.mac);
  out->set_data_address(w.data_address);
  if (w.topology) ToWelcome(*w.topology, out);
  for (const auto& [peer, rate] : w.link_rates) {
    auto* l = out->add_links();
    l->set_peer(peer);
    l->set_bytes_per_s(rate);
  }
  if (w.rdma) {
    out->mutable_rdma()->set_usable(w.rdma->use);
    out->mutable_rdma()->set_detail(w.rdma->why);
  }
}

std::map<std::string, double> LinkRatesFromWelcome(const peer_api::PeerWelcome& w) {
  std::map<std::string, double> rates;
  for (const auto& l : w.links()) {
    if (l.bytes_per_s() > 0 && std::isfinite(l.bytes_per_s()) && !l.peer().empty()) {
      rates[l.peer()] = l.bytes_per_s();
    }
  }
  return rates;
}

namespace {

// An end on the peer as its StartHalf names it: allocation (published
// there) or memory + file, and its shape.
void InstanceSpecToProto(const CrossEnd& e, v1::InstanceSpec* out) {
  out->set_allocation(e.allocation);
  out->set_offset(e.offset);
  out->set_memory(e.memory);
  out->set_file(e.file);
  isometry::ToProto(e.shape, out);
}

}  // namespace

peer_api::StartHalfRequest ToProto(const HalfOut& h) {
  peer_api::StartHalfRequest req;
  req.set_key(h.key);
  req.set_sending(h.sending);
  if (h.forward_dst) {
    InstanceSpecToProto(*h.forward_dst, req.mutable_forward_dst());
    if (const EndForm* f = h.forward_dst->local.form.get(); f && h.dst_form) {
      req.set_dst_form_hash(h.dst_form_hash);
      req.set_dst_form(*h.dst_form);
      req.set_dst_form_span(f->span);
    }
  }
  for (const PathNode& pn : (h.forward_dst ? Path{} : *h.path).nodes) {
    auto* ns = req.add_nodes();
    ns->set_node(pn.memory.node);
    ns->set_memory(pn.memory.memory);
    ns->set_layout(pn.layout.ToString());
  }
  for (const TopologyEdge& e : (h.forward_dst ? Path{} : *h.path).edges) {
    auto* es = req.add_edges();
    es->set_channel(e.channel_name);
    es->set_kind(std::string(ChannelKindName(e.kind)));
  }
  req.set_net_hop(static_cast<uint32_t>(h.net_hop));
  req.set_chunk_target(h.chunk_target);
  req.set_slot_limit(h.slot_limit);
  ToProto(h.box, req.mutable_box());
  if (h.relay_hop != 0) {
    // A relay holds neither end: the source's shape only.
    isometry::ToProto(h.end->shape, req.mutable_local());
    req.set_relay_hop(static_cast<uint32_t>(h.relay_hop));
    req.set_relay_partner(h.relay_partner);
  } else {
    InstanceSpecToProto(*h.end, req.mutable_local());
  }
  req.set_distributed(h.end->distributed);
  req.set_distributed_rank(h.end->distributed_rank);
  isometry::ToProto(h.other->shape.bounds, req.mutable_other_bounds());
  req.set_other_layout(h.other->shape.layout.ToString());
  req.set_priority(h.options.priority);
  req.set_durable(h.options.durable);
  req.set_qos_class(h.qos_class);
  req.set_partner(h.partner);
  req.set_source_session(h.source.session);
  req.set_source_transfer(h.source.transfer);
  req.set_rdma_tag(h.rdma_tag);
  if (const EndForm* f = h.end->local.form.get()) {
    req.set_form_hash(h.form_hash);
    req.set_form_span(f->span);
    if (h.form) req.set_form(*h.form);
  }
  return req;
}

Result<HalfRequest> FromProto(const peer_api::StartHalfRequest& req) {
  HalfRequest h;
  RemotePart& part = h.part;
  part.key = req.key();
  part.sending = req.sending();
  part.net_hop = req.net_hop();
  part.chunk_target = req.chunk_target();
  part.slot_limit = req.slot_limit();
  part.relay_hop = req.relay_hop();
  part.relay_peer = req.relay_partner();
  h.partner = req.partner();
  if (req.relay_hop() != 0 &&
      (req.sending() || req.relay_hop() <= req.net_hop() ||
       req.relay_hop() >= static_cast<uint32_t>(req.edges_size()) || req.relay_partner().empty() ||
       req.relay_partner() == req.partner() || req.form_hash() != 0 || !req.distributed().empty() ||
       req.has_forward_dst())) {
    return InvalidArgument("malformed relay");
  }
  // Only a sending half, not a relay or forwarded, takes a tag of 1..255.
  if (req.rdma_tag() != 0 &&
      (!req.sending() || req.relay_hop() != 0 || req.has_forward_dst() || req.rdma_tag() > 255)) {
    return InvalidArgument("rdma_tag ", req.rdma_tag(),
                           " on a half that is not a direct sending half, or beyond 255");
  }
  h.rdma_tag = req.rdma_tag();
  ISO_ASSIGN_OR_RETURN(h.box, BoxFromProto(req.box(), "box"));
  ISO_ASSIGN_OR_RETURN(h.local, InstanceSpecFromProto(req.local()));
  if (h.local.datatype) {
    return InvalidArgument("a peer's datatype end comes as a canonical form (form_hash), ",
                           "not as a datatype");
  }
  if (req.form_hash() == 0 && !req.form().empty()) {
    return InvalidArgument("a canonical form without its hash");
  }
  h.form_hash = req.form_hash();
  h.form = req.form();
  h.form_span = req.form_span();
  h.options = {.priority = req.priority(), .durable = req.durable()};
  h.remote_qos_class = req.qos_class();
  h.source = {req.source_session(), req.source_transfer()};
  if (req.has_forward_dst()) {
    // Forwarded: the receiver plans the whole copy between its own ends.
    if (req.nodes_size() != 0 || !req.distributed().empty() ||
        (req.form_hash() == 0) != (req.dst_form_hash() == 0) ||
        (req.dst_form_hash() != 0 && req.dst_form().empty())) {
      return InvalidArgument("a forwarded copy names two ends on this node (of a datatype ",
                             "copy, both by their forms) and nothing else");
    }
    h.dst_form_hash = req.dst_form_hash();
    h.dst_form = req.dst_form();
    h.dst_form_span = req.dst_form_span();
    ISO_ASSIGN_OR_RETURN(InstanceSpec dst, InstanceSpecFromProto(req.forward_dst()));
    if (dst.datatype) {
      return InvalidArgument("a forwarded copy's ends are layouts, not datatypes");
    }
    h.forward_dst = std::move(dst);
    h.other = h.forward_dst->shape;
    return h;
  }
  if (req.nodes_size() != req.edges_size() + 1 || req.edges_size() == 0) {
    return InvalidArgument("malformed path");
  }
  for (const auto& ns : req.nodes()) {
    ISO_ASSIGN_OR_RETURN(Layout l, Layout::Parse(ns.layout(), h.box.dims));
    part.path.nodes.push_back({MemoryId{ns.node(), ns.memory()}, l});
  }
  for (int i = 0; i < req.edges_size(); ++i) {
    auto kind = ParseChannelKind(req.edges(i).kind());
    if (!kind) return InvalidArgument("edge ", i, " has unknown kind");
    part.path.edges.push_back({part.path.nodes[static_cast<size_t>(i)].memory,
                               part.path.nodes[static_cast<size_t>(i) + 1].memory, -1, *kind,
                               req.edges(i).channel()});
    part.path.edges.back().traits = EdgeTraitsOf(*kind);
  }
  h.local.distributed = req.distributed();
  h.local.distributed_rank = req.distributed_rank();
  if (!h.local.distributed.empty() && (req.form_hash() == 0 || req.sending())) {
    return InvalidArgument("a distributed rank's instance is only the destination of a ",
                           "datatype half");
  }
  ISO_ASSIGN_OR_RETURN(h.other.bounds, BoxFromProto(req.other_bounds(), "other_bounds"));
  h.other.fields = h.local.shape.fields;
  ISO_ASSIGN_OR_RETURN(h.other.layout, Layout::Parse(req.other_layout(), h.other.bounds.dims));
  return h;
}

}  // namespace isometry::cluster
