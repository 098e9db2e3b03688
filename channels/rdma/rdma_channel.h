// RemoteMemcpy over an RDMA link: the channel of network hops with one
// peer. A request with a NetHalf destination is a sending half's chunk,
// one with a NetHalf source a receiving half's (channel.h), as for TCP.
//
// A transfer goes over RDMA only once routed: both nodes call Route with
// the same tag and chunk count before their first request of it (the
// cluster layer agrees on them when it sets up the halves, and only where
// both nodes hold a connected link). Requests of a transfer not routed go
// to the fallback channel (TCP), so a hop takes RDMA or TCP whole.
//
// Sending: the chunk is gathered (unless it is one run in memory already)
// and written with immediate into a slot of the peer's ring; its request
// completes when the peer's credit for it comes back. Receiving: the
// chunk is scattered from this node's ring into its place. One thread per
// channel owns the stream and polls the link's one CQ; every `done` runs
// on it (or the fallback's threads), never inside Submit. A failed
// completion fails every request in flight on the channel with the
// device's text and calls `on_error` (the owner connects the link again
// and makes a new channel over it); requests of the transfers routed then
// keep failing with that error until they are unrouted.
//
// Thread safety: Submit, Route, Unroute and AbandonTransfer from any
// thread. The destructor stops the thread; callers drain first.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "channels/channel.h"
#include "config/runtime_config.h"
#include "net/rdma/rdma_stream.h"

namespace isometry::rdma {

struct RdmaRoute {
  uint32_t tag = 0;  // 1..kMaxTag, unused on this channel meanwhile
  uint64_t chunks = 0;
  bool sending = false;
};

class RdmaChannel : public Channel {
 public:
  // AlreadyExists when the transfer or the tag is routed already.
  virtual Status Route(uint64_t transfer, const RdmaRoute& route) = 0;
  // The transfer ended (both halves done): its tag may be routed again.
  virtual void Unroute(uint64_t transfer) = 0;
  // Returns once every Route and Unroute called before it is in effect on
  // the channel's thread. A receiving route must be before the peer's
  // first chunk of it arrives (one under a tag not open breaks the link),
  // so the receiver calls this before telling the sender its tag. Never
  // on the channel's thread, nor holding a lock its callbacks take.
  virtual void AwaitRoutes() = 0;
};

// `fabric` (RdmaLink::MakeFabric, or a test's) is owned by the channel;
// `ring` is both ends' ring shape; `fallback` (may be null: unrouted
// requests then fail) must outlive the channel.
Result<std::unique_ptr<RdmaChannel>> MakeRdmaChannel(
    const ChannelConfig& config, std::unique_ptr<Fabric> fabric, RingShape ring, uint32_t qps,
    Channel* fallback, const std::function<void(const Status&)>& on_error);

}  // namespace isometry::rdma
