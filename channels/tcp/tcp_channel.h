// RemoteMemcpy over TCP: the channel of the network hop between this node
// and one peer, an adapter over the data plane (net/). A request with a
// NetHalf destination is a sending half's chunk, one with a NetHalf source
// a receiving half's (channel.h); it becomes a net::Chunk, which the
// peer's PeerLink moves.
#pragma once

#include <memory>

#include "channels/channel.h"
#include "channels/channel_backend.h"
#include "config/runtime_config.h"
#include "net/data_plane.h"
#include "net/peer_link.h"

namespace isometry {

// The channel for `config` (kind remote_memcpy) over `link`, which must
// outlive it.
std::unique_ptr<Channel> MakeTcpChannel(const ChannelConfig& config, net::PeerLink& link);
// The channel of every peer learnt at run time (config.peer == kAnyPeer):
// each request goes to the link of the peer its NetHalf names.
std::unique_ptr<Channel> MakeAnyPeerTcpChannel(const ChannelConfig& config, net::DataPlane& plane);

// The remote_memcpy kind's descriptor (channel_backend.h).
const ChannelBackend& TcpBackend();

}  // namespace isometry
