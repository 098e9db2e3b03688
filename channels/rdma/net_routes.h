// Which network hops take RDMA: the node's routes of cross-node copies
// over the RDMA channel of each peer, and the network channel that obeys
// them (MakeNetChannel wraps each peer's TCP channel, so the runtime keeps
// one network channel, one DMA worker, per peer whichever transport a hop
// takes).
//
// The cluster layer attaches an RdmaChannel for a peer once their RDMA
// link connects, and detaches it when the link breaks or the peer goes
// down. A copy's network hop takes RDMA only when routed, by both halves,
// before their first request (RdmaChannel::Route): the receiving half
// picks a tag (RouteReceiving; it starts first), the initiator passes it
// to the sending half (RouteSending). A hop not routed runs over TCP
// whole, so a copy never has chunks on both transports. A channel routed
// to stays with its copies after it is detached or replaced: they end on
// it (failing, when its link broke), and new copies take the new channel
// or TCP.
//
// Lifetime: channels are destroyed by Attach, Detach or the destructor,
// once no route refers to them: never by Unroute, which may run on a
// channel's own thread (a request's completion ends the half).
//
// Thread safety: every member from any thread. Calls into an RdmaChannel
// are made under this object's lock (RdmaChannel never calls back into it
// inside Submit, Route, Unroute or AbandonTransfer).
#pragma once

#include <absl/base/thread_annotations.h>
#include <absl/synchronization/mutex.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "channels/channel.h"
#include "channels/rdma/rdma_channel.h"

namespace isometry::rdma {

// In the error of a sending half told to use RDMA where this node has no
// link with the receiver (RouteSending): the receiver's node, seeing it
// (the copy's abort), drops its own link too, so both ends agree again.
inline constexpr char kNoLinkHere[] = "no RDMA link with it is connected here";

class NetRoutes {
 public:
  NetRoutes() = default;
  ~NetRoutes();
  NetRoutes(const NetRoutes&) = delete;
  NetRoutes& operator=(const NetRoutes&) = delete;

  // New copies with `peer` may take `channel`, whose ring slots hold
  // `slot_bytes` each; `keep` (the link under its fabric) lives until the
  // channel is destroyed. Replaces the channel attached before.
  void Attach(const std::string& peer, std::unique_ptr<RdmaChannel> channel, uint64_t slot_bytes,
              std::shared_ptr<const void> keep = nullptr);
  // New copies with `peer` take TCP again. False when none was attached.
  bool Detach(const std::string& peer);
  bool Attached(const std::string& peer) const;
  // The largest chunk the channel attached for `peer` carries; 0: none.
  uint64_t SlotBytes(const std::string& peer) const;

  // The receiving half of copy `transfer` from `peer` has `chunks`
  // chunks of at most `max_chunk_bytes` on the wire: routed over the
  // attached channel under a fresh tag (1..kMaxTag), returned. 0 (the hop
  // takes TCP) with `why` set when no channel is attached, a chunk does
  // not fit in a slot, or every tag is in use with this peer. Returns once
  // the tag is open on the channel (RdmaChannel::AwaitRoutes): never call
  // it on a channel's thread.
  Result<uint32_t> RouteReceiving(const std::string& peer, uint64_t transfer, uint64_t chunks,
                                  uint64_t max_chunk_bytes, std::string* why);
  // The sending half, under the receiver's `tag`: Unavailable when no
  // channel is attached for `peer` (its link is not connected here, or
  // broke), InvalidArgument for a tag out of range.
  Status RouteSending(const std::string& peer, uint64_t transfer, uint32_t tag, uint64_t chunks);
  // The copy's half ended: its route (if any) goes.
  void Unroute(const std::string& peer, uint64_t transfer);
  // The tag copy `transfer` with `peer` is routed under; 0: not routed.
  uint32_t TagOf(const std::string& peer, uint64_t transfer) const;

  // For the network channel (MakeNetChannel): hands the request to the
  // RDMA channel its copy is routed on; false (the request untouched)
  // when not routed.
  bool Submit(const std::string& peer, uint64_t transfer, ChannelRequest& request,
              RequestDone& done);
  // Tells the RDMA channels copy `transfer` is routed on that it was
  // given up (Channel::AbandonTransfer).
  void Abandon(uint64_t transfer, const Status& why);

 private:
  struct Entry {
    std::unique_ptr<RdmaChannel> channel;  // destroyed before `keep`
    std::shared_ptr<const void> keep;
    uint64_t slot_bytes = 0;
    uint64_t routes = 0;  // copies routed on it
  };
  struct Route {
    Entry* entry = nullptr;
    uint32_t tag = 0;
    bool sending = false;
  };
  using Key = std::pair<std::string, uint64_t>;  // peer, transfer

  Status RouteLocked(const std::string& peer, uint64_t transfer, Entry* e, RdmaRoute route)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // RouteReceiving's choice; `on`: the channel routed on, if any.
  Result<uint32_t> PickTagLocked(const std::string& peer, uint64_t transfer, uint64_t chunks,
                                 uint64_t max_chunk_bytes, std::string* why, RdmaChannel** on)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Destroys the retired channels no route refers to; the caller destroys
  // what is returned, outside the lock.
  std::vector<std::unique_ptr<Entry>> SweepLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<Entry>> attached_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Entry>> retired_ ABSL_GUARDED_BY(mu_);
  std::map<Key, Route> routes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint32_t> last_tag_ ABSL_GUARDED_BY(mu_);  // receiving, per peer
};

// The network channel of one peer (or of every etcd peer): requests of
// copies routed over RDMA (`routes`) go to their RDMA channel, all others
// to `tcp`, whose caps it has.
std::unique_ptr<Channel> MakeNetChannel(std::unique_ptr<Channel> tcp,
                                        std::shared_ptr<NetRoutes> routes);

}  // namespace isometry::rdma
