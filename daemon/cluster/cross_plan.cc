// The initiator's plan of a cross-node copy: the nodes' graphs joined by
// their network links (each costed at the rate its sending node declares,
// [[peer]] link_rate), one crossing between the ends' nodes, or several
// through relay nodes when that is clearly faster, or none when both ends
// are on one other node (forwarding).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "channels/channel_factory.h"
#include "core/log_escape.h"
#include "daemon/cluster/cluster_impl.h"
#include "planner/planner.h"
#include "planner/topology_join.h"

namespace isometry {

namespace {

// A relay must beat the direct path by this much: it costs a node's
// staging, CPU and a second link, and the rates are declared, not measured.
constexpr double kRelayGain = 1.2;
constexpr double kLinkOverheadS = 50e-6;  // per request, on every network edge

// The path's stretches, one per node in order; an error when a node comes
// back (the path leaves a node and returns), which no half can run.
Result<std::vector<cluster::PathStretch>> Stretches(const Path& path,
                                                    const std::map<uint32_t, std::string>& names) {
  auto name_of = [&](MemoryId m) -> Result<std::string> {
    auto it = names.find(m.node);
    if (it == names.end()) return Internal("path memory ", ToString(m), " of no joined node");
    return it->second;
  };
  std::vector<cluster::PathStretch> out(1);
  ISO_ASSIGN_OR_RETURN(out[0].node, name_of(path.nodes.front().memory));
  for (size_t h = 0; h < path.edges.size(); ++h) {
    if (!path.edges[h].traits.crosses_nodes) continue;
    out.back().out_hop = h;
    cluster::PathStretch next;
    ISO_ASSIGN_OR_RETURN(next.node, name_of(path.nodes[h + 1].memory));
    next.in_hop = h;
    for (const cluster::PathStretch& s : out) {
      if (s.node == next.node) {
        return FailedPrecondition("the path returns to node '", next.node, "'");
      }
    }
    out.push_back(std::move(next));
  }
  return out;
}

// A planner for one cross-node copy: this node's thresholds, no cache
// (the joined graph is built for the copy).
PlannerOptions OptionsOf(const RuntimeConfig& rc) {
  PlannerOptions po;
  po.full_threshold = rc.full_planner_threshold;
  po.space_threshold = rc.space_threshold;
  po.cache_capacity = 0;
  return po;
}

}  // namespace

double Cluster::Impl::LinkRate(const std::string& peer) const {
  for (const PeerConfig& pc : config.cluster.peers) {
    if (pc.name == peer && pc.link_bytes_per_s) return static_cast<double>(pc.link_bytes_per_s);
  }
  return static_cast<double>(config.cluster.link_bytes_per_s);
}

Status Cluster::Impl::AddNodeGraph(const std::string& name, bool end,
                                   std::vector<NodeGraph>& graphs,
                                   std::map<std::string, double>* links) {
  if (name == self()) {
    graphs.push_back({name, config.runtime.node, node->runtime().topology()});
    if (links) {
      for (Peer* p : PeerList()) (*links)[p->config.name] = LinkRate(p->config.name);
    }
    return OkStatus();
  }
  Peer* p = FindPeer(name);
  if (!p) return NotFound("no node '", name, "' in this cluster");
  absl::MutexLock lock(&mu);
  const PeerState& st = StateLocked(*p);
  if (!st.up) {
    return Unavailable("peer '", name, "' is ", st.state,
                       st.last_error.empty() ? "" : ": " + st.last_error);
  }
  // For an end of the copy, a set that broke and is being resumed counts
  // as open: the copy's chunks wait for it as those in flight do
  // (net/peer_link_resume.cc). A relay's must be open: its node may be
  // gone (the pings have not said so yet), and the copy can go around it.
  const net::PeerLink& link = data->Link(name);
  if (end ? !link.receiving() : link.incoming() == 0) {
    return Unavailable("peer '", name, "' is up but has not opened its data connections to ",
                       "this node yet");
  }
  graphs.push_back({name, st.node, st.topology});
  if (links) *links = st.link_rates;
  return OkStatus();
}

Result<cluster::CrossPlan> Cluster::Impl::PlanOver(const std::vector<std::string>& nodes,
                                                   const NodeMemory& src, const NodeMemory& dst,
                                                   const Layout& src_layout,
                                                   const Layout& dst_layout, const Box& box,
                                                   const FieldSpace& fields) {
  // The ends' nodes come first (one when both ends are on it) and must
  // take part; any other that cannot is left out.
  const size_t ends = src.node == dst.node ? 1 : 2;
  std::vector<NodeGraph> graphs;
  std::map<std::string, std::map<std::string, double>> declared;
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::map<std::string, double> links;
    Status s = AddNodeGraph(nodes[i], i < ends, graphs, &links);
    if (!s.ok() && i < ends) return s;
    if (s.ok()) declared[nodes[i]] = std::move(links);
  }
  // A link costed at its sender's rate. Between the ends, one that
  // declares nothing (an older node) still gets the cluster's rate, as
  // before; a relay's links must be declared.
  std::vector<NetworkLink> links;
  for (const NodeGraph& from : graphs) {
    for (const NodeGraph& to : graphs) {
      if (from.name == to.name) continue;
      const auto& mine = declared[from.name];
      double rate = 0;
      if (auto it = mine.find(to.name); it != mine.end()) {
        rate = it->second;
      } else if (from.name == src.node && to.name == dst.node) {
        rate = static_cast<double>(config.cluster.link_bytes_per_s);
      }
      if (rate <= 0) continue;
      // "rdma" where this node holds a connected RDMA link with the other
      // end (the halves still decide per copy: rdma_links.cc), else "tcp".
      // Costed alike until RDMA edges are calibrated.
      const std::string* other = from.name == self() ? &to.name
                                 : to.name == self() ? &from.name
                                                     : nullptr;
      const bool rdma = other && net_routes->Attached(*other);
      const ChannelBackend& net = NetworkBackend();
      links.push_back({from.name, to.name, net.kind, rdma ? "rdma" : "tcp",
                       ThroughputFunction::PerRequestOverhead(rate, kLinkOverheadS),
                       net.edge_traits});
    }
  }
  CrossPlan plan;
  ISO_ASSIGN_OR_RETURN(plan.topo, JoinTopologies(graphs, links));
  ISO_ASSIGN_OR_RETURN(MemoryId src_mem,
                       FindJoinedMemory(plan.topo, src.node, graphs[0].id, src.memory));
  ISO_ASSIGN_OR_RETURN(MemoryId dst_mem,
                       FindJoinedMemory(plan.topo, dst.node, graphs[ends - 1].id, dst.memory));
  const RuntimeConfig& rc = node->runtime().config();
  PlannerOptions po = OptionsOf(rc);
  // Relays need the full algorithm whatever the size: the simple one
  // takes the fewest hops, which is always the direct link.
  if (nodes.size() > 2) po.full_threshold = 0;
  po.relays = nodes.size() > 2;
  Planner planner(plan.topo, po);
  ISO_ASSIGN_OR_RETURN(plan.path, planner.Plan({src_mem, src_layout}, {dst_mem, dst_layout}, box,
                                               fields.total_bytes(), fields.smallest_bytes()));
  std::map<uint32_t, std::string> names;
  for (const NodeGraph& g : graphs) names[g.id] = g.name;
  auto stretches = Stretches(plan.path, names);
  if (!stretches.ok()) {
    return FailedPrecondition("the plan ", plan.path.ToString(plan.topo), ": ",
                              stretches.status().message());
  }
  plan.stretches = *std::move(stretches);
  if (plan.stretches.size() < ends) {
    return FailedPrecondition("the plan ", plan.path.ToString(plan.topo),
                              " does not cross the network");
  }
  plan.chunk_target = config.cluster.request_bytes;
  // A direct copy between this node and a peer it has an RDMA link with:
  // chunks that fit in a ring slot, so the receiving half can route the
  // hop over the link (a larger chunk takes TCP).
  if (plan.stretches.size() == 2) {
    const std::string& a = plan.stretches[0].node;
    const std::string& b = plan.stretches[1].node;
    const std::string* other = a == self() ? &b : b == self() ? &a : nullptr;
    const uint64_t slot = other ? net_routes->SlotBytes(*other) : 0;
    if (slot >= 4096) plan.chunk_target = std::min(plan.chunk_target, slot);
  }
  plan.slot_limit = rc.space_threshold / static_cast<uint64_t>(CrossNodeSlots(rc));
  return plan;
}

Result<cluster::CrossPlan> Cluster::Impl::PlanCross(const NodeMemory& src, const NodeMemory& dst,
                                                    const Layout& src_layout,
                                                    const Layout& dst_layout, const Box& box,
                                                    const FieldSpace& fields, bool relays) {
  if (src.node == dst.node) {
    // Both ends on one other node: forwarded, that node plans and runs
    // the whole copy. The plan here is over its graph as its welcome gave
    // it, for isoctl plan and the copy's path text; its own may differ
    // (calibration).
    if (src.node == self()) {
      return Internal("a copy with both ends on this node reached the cluster layer");
    }
    return PlanOver({src.node}, src, dst, src_layout, dst_layout, box, fields);
  }
  ISO_ASSIGN_OR_RETURN(CrossPlan direct, PlanOver({src.node, dst.node}, src, dst, src_layout,
                                                  dst_layout, box, fields));
  if (!relays) return direct;
  // Relays: peers that are up, other than the ends and this node.
  std::vector<std::string> nodes = {src.node, dst.node};
  for (Peer* p : PeerList()) {
    const std::string& n = p->config.name;
    if (n != src.node && n != dst.node) nodes.push_back(n);
  }
  if (nodes.size() == 2) return direct;
  Result<CrossPlan> relayed = PlanOver(nodes, src, dst, src_layout, dst_layout, box, fields);
  if (!relayed.ok()) {
    spdlog::debug("no relay for {} -> {}: {}", ForLog(src.node), ForLog(dst.node),
                  ForLog(relayed.status().ToString(), 512));
    return direct;
  }
  if (relayed->stretches.size() <= 2 ||
      relayed->path.predicted_bps < kRelayGain * direct.path.predicted_bps) {
    spdlog::debug("no relay for {} -> {}: direct {} at {:.0f} B/s, best {} at {:.0f} B/s",
                  ForLog(src.node), ForLog(dst.node), direct.path.ToString(direct.topo),
                  direct.path.predicted_bps, relayed->path.ToString(relayed->topo),
                  relayed->path.predicted_bps);
    return direct;
  }
  return relayed;
}

}  // namespace isometry
