// The remote_memcpy kind's descriptor (channels/channel_backend.h): the
// TCP channel. Where RDMA carries some hops, channel_factory.cc wraps
// what this makes (rdma::MakeNetChannel). And the channels the daemon
// makes of this kind, one per peer (PeerChannels).
#include <string>
#include <utility>
#include <vector>

#include "channels/added_channels.h"
#include "channels/channel_backend.h"
#include "channels/tcp/tcp_channel.h"

namespace isometry {
namespace {

// No configured pair: its edges come from the peers' topologies.
bool Serves(MemoryKind, MemoryKind) { return false; }

// Unmeasured: the planner's placeholder.
EdgeRateModel Model(MemoryKind, MemoryKind) { return {}; }

ChannelAvailability Probe(ChannelKind kind, const ChannelContext& context) {
  if (!context.data_plane) return KindAbsent(kind, "no [[peer]] configured");
  return KindAvailable(kind, StrCat("TCP data plane listening on ", context.data_plane->address()));
}

Result<std::unique_ptr<Channel>> Make(const ChannelConfig& c, const ChannelContext& context) {
  if (!context.data_plane) {
    return FailedPrecondition("channel '", c.name,
                              "': a remote_memcpy channel needs the cluster's data plane (this "
                              "node has no [[peer]])");
  }
  if (c.peer.empty()) {
    return InvalidArgument("channel '", c.name, "': a remote_memcpy channel names no peer");
  }
  return c.peer == kAnyPeer ? MakeAnyPeerTcpChannel(c, *context.data_plane)
                            : MakeTcpChannel(c, context.data_plane->Link(c.peer));
}

}  // namespace

const ChannelBackend& TcpBackend() {
  static constexpr ChannelBackend kBackend{
      .kind = ChannelKind::kRemoteMemcpy,
      .name = "remote_memcpy",
      .serves = Serves,
      // Its hops leave the node (and may change layouts: the default).
      .edge_traits = {.crosses_nodes = true},
      .per_peer = true,
      .model = Model,
      .probe = Probe,
      .make = Make,
  };
  return kBackend;
}

std::vector<ChannelConfig> PeerChannels(const ClusterConfig& cluster) {
  auto channel = [&cluster](std::string name, std::string peer) {
    ChannelConfig c;
    c.name = std::move(name);
    c.kind = ChannelKind::kRemoteMemcpy;
    c.threads = cluster.data_connections;
    c.request_bytes = cluster.request_bytes;
    c.rate_limit_bytes_per_s = cluster.rate_limit_bytes_per_s;
    c.peer = std::move(peer);
    return c;
  };
  std::vector<ChannelConfig> out;
  for (const PeerConfig& p : cluster.peers) out.push_back(channel("tcp:" + p.name, p.name));
  // Peers learnt from etcd share one channel: its requests name their
  // peer (NetHalf::peer), so peers may come and go while it lives.
  if (cluster.etcd.enabled()) out.push_back(channel("tcp:etcd", std::string(kAnyPeer)));
  return out;
}

}  // namespace isometry
