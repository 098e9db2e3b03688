// What isoctl shows of the cluster layer: the halves this node runs (its
// own copies' and other nodes'), and the memories each network channel
// connects.
#include <chrono>

#include "daemon/cluster/cluster_impl.h"

namespace isometry {

namespace {

// The path with every memory node-qualified; the planner's Path::ToString
// knows only one node's names.
std::string PathText(const Path& path, const std::map<MemoryId, std::string>& names) {
  std::string s;
  for (size_t i = 0; i < path.nodes.size(); ++i) {
    auto it = names.find(path.nodes[i].memory);
    const std::string name = it != names.end() ? it->second : ToString(path.nodes[i].memory);
    StrAppend(&s, i ? " -[" : "", i ? path.edges[i - 1].channel_name : "", i ? "]-> " : "", name,
              "<", path.nodes[i].layout.ToString(), ">");
  }
  return s;
}

std::string NameOr(const std::map<MemoryId, std::string>& names, MemoryId id) {
  auto it = names.find(id);
  return it != names.end() ? it->second : ToString(id);
}

}  // namespace

std::vector<HalfReport> Cluster::Impl::HalfReports(uint64_t id, bool running_only) const {
  std::vector<std::shared_ptr<Half>> hs;
  std::vector<std::optional<Transfer>> ts;
  std::vector<HalfReport> out;
  {
    absl::MutexLock lock(&mu);
    const auto list = [&](const std::shared_ptr<Half>& h) {
      if (!h->transfer) return;  // still starting, or a tombstone
      if ((id != 0 && h->source_transfer != id) || (running_only && h->finished)) return;
      HalfReport r;
      r.id = h->source_transfer;
      r.initiator = h->initiator;
      r.partner = h->partner;
      r.sending = h->sending;
      r.forwarded = h->whole;
      r.relay_to = h->relay_partner;
      r.remote = h->initiator != self();
      r.finished = h->finished;
      r.status = h->status;
      r.priority = h->priority;
      out.push_back(std::move(r));
      hs.push_back(h);
      ts.push_back(h->transfer);
    };
    if (id == 0) {
      for (const auto& [key, h] : halves) list(h);
    } else {
      // One copy's halves through the index: a node keeps many ended ones.
      for (auto [i, end] = halves_of_copy.equal_range(id); i != end; ++i) {
        if (auto it = halves.find(i->second); it != halves.end()) list(it->second);
      }
    }
  }
  // The runtime's lock, not ours: a half's completion takes ours inside it.
  for (size_t i = 0; i < out.size(); ++i) {
    const Half& h = *hs[i];  // its plan fields are constant once it is listed
    const Transfer& t = *ts[i];
    HalfReport& r = out[i];
    r.bytes = t.bytes();
    const TransferTimes times = t.times();
    const auto end = r.finished ? times.finished : TransferTimes::Clock::now();
    r.elapsed_s = std::chrono::duration<double>(end - times.submitted).count();
    r.path = PathText(h.path, h.names);
    const std::vector<uint64_t> done = t.HopsDone();
    // Which hops are this node's: the runtime's own rule (RemotePart).
    RemotePart role;
    role.sending = h.sending;
    role.net_hop = h.net_hop;
    role.relay_hop = h.relay_hop;
    for (size_t e = 0; e < h.path.edges.size(); ++e) {
      if (!h.whole && !role.Mine(e)) continue;
      HopReport hop;
      hop.src_memory = NameOr(h.names, h.path.edges[e].src);
      hop.dst_memory = NameOr(h.names, h.path.edges[e].dst);
      // The network hop: over the RDMA link when routed there (rdma_tag is
      // set before the half is listed), else TCP.
      hop.channel = e == h.net_hop && !h.whole
                        ? StrCat(h.rdma_tag != 0 ? "rdma:" : "tcp:", h.partner)
                    : role.relays() && e == h.relay_hop ? StrCat("tcp:", h.relay_partner)
                                                        : h.path.edges[e].channel_name;
      hop.src_layout = h.path.nodes[e].layout.ToString();
      hop.dst_layout = h.path.nodes[e + 1].layout.ToString();
      hop.chunks_done = e < done.size() ? done[e] : 0;
      hop.chunks_total = t.chunks();
      r.hops.push_back(std::move(hop));
    }
  }
  return out;
}

std::vector<std::string> Cluster::Impl::LinkEdges(const std::string& peer) const {
  const Peer* p = FindPeer(peer);
  if (!p) return {};
  std::vector<std::string> theirs;
  {
    absl::MutexLock lock(&mu);
    for (const TopologyMemory& m : StateLocked(*p).topology.memories) {
      if (m.kind == MemoryKind::kSys) theirs.push_back(StrCat(peer, ":", m.name));
    }
  }
  // The network hop joins SYS memories (planner/topology_join.h).
  std::vector<std::string> mine;
  for (const TopologyMemory& m : node->runtime().topology().memories) {
    if (m.kind == MemoryKind::kSys) mine.push_back(m.name);
  }
  std::vector<std::string> out;
  for (const std::string& a : mine) {
    for (const std::string& b : theirs) out.push_back(StrCat(a, "->", b));
  }
  for (const std::string& b : theirs) {
    for (const std::string& a : mine) out.push_back(StrCat(b, "->", a));
  }
  return out;
}

Status Cluster::Impl::ForPeer(const Status& s) const {
  if (s.ok()) return s;
  std::string msg(s.message());
  bool changed = false;
  for (const MemoryConfig& m : config.runtime.memories) {
    if (m.kind != MemoryKind::kDsk || m.directory.empty()) continue;
    std::string dir = m.directory;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    const std::string name = StrCat(self(), ":", m.name, ":");
    // "dir/" first: "dir/x.bin" becomes "b:dsk0:x.bin"; then "dir" alone.
    for (const std::string& from : {dir + "/", dir}) {
      for (size_t at = msg.find(from); at != std::string::npos; at = msg.find(from, at)) {
        msg.replace(at, from.size(), name);
        at += name.size();
        changed = true;
      }
    }
  }
  if (!changed) return s;
  Status out(s.code(), msg);
  s.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

std::vector<HalfReport> Cluster::Halves(uint64_t id, bool running_only) const {
  return impl_->HalfReports(id, running_only);
}

std::vector<std::string> Cluster::LinkEdges(const std::string& peer) const {
  return impl_->LinkEdges(peer);
}

}  // namespace isometry
