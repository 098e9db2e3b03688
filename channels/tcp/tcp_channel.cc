#include "channels/tcp/tcp_channel.h"

#include <thread>
#include <variant>

namespace isometry {

namespace {

// A small copy is small on every hop: a memcpy channel's express lane and
// the data link's express connection take the same chunks.
static_assert(net::kExpressChunkBytes == kExpressRequestBytes);

class TcpChannel final : public Channel {
 public:
  TcpChannel(const ChannelConfig& config, net::PeerLink* link, net::DataPlane* plane)
      : link_(link), plane_(plane) {
    caps_.name = config.name;
    caps_.kind = ChannelKind::kRemoteMemcpy;
    caps_.memory_kinds = {{MemoryKind::kSys, MemoryKind::kSys}};
    caps_.converts_layout = false;  // it can (a bounce buffer), but a Memcpy hop does it better
    caps_.request_bytes = config.request_bytes;
    // Requests waiting for a credit or for data hold no thread and no
    // memory (their chunk's place is the transfer's own), so they are not
    // rationed: a budget shared by both directions and by every transfer
    // with this peer would let requests that wait on the other node fill
    // it and stall transfers the other node waits on (a cross-node
    // deadlock). Credits bound what travels; each connection's queue is
    // shared by QoS class weight, by priority within a class.
    caps_.max_in_flight = config.max_in_flight > 0 ? config.max_in_flight : (1 << 20);
    caps_.rate_limit_bytes_per_s = config.rate_limit_bytes_per_s;
  }

  const ChannelCaps& caps() const override { return caps_; }

  // Host memory to a network half (sending) or a network half to host
  // memory (receiving); the PeerLink relies on these checks.
  void Submit(ChannelRequest request, RequestDone done) override {
    const bool sending = std::holds_alternative<NetHalf>(request.dst);
    Status ok = sending ? EndpointAs<HostBytes>(request.src, caps_.name, "source").status()
                        : EndpointAs<NetHalf>(request.src, caps_.name, "source").status();
    if (ok.ok() && !sending) {
      ok = EndpointAs<HostBytes>(request.dst, caps_.name, "destination").status();
    }
    if (!ok.ok()) {
      // A programming error of the caller: reported, never crashed on, and
      // never inside Submit() (channel.h).
      std::thread([done = std::move(done), ok] { done(ok); }).detach();
      return;
    }
    const NetHalf& half = std::get<NetHalf>(sending ? request.dst : request.src);
    net::PeerLink& link = link_ ? *link_ : plane_->Link(half.peer);
    net::Chunk chunk{.transfer = half.transfer,
                     .chunk = half.chunk,
                     .program = std::move(request.program),
                     .memory = std::get<HostBytes>(sending ? request.src : request.dst).base,
                     .priority = request.priority,
                     .qos_class = request.qos_class,
                     .qos_weight = request.qos_weight,
                     .qos_nice = request.qos_nice};
    if (sending) {
      link.Send(chunk, std::move(done));
    } else {
      link.Post(chunk, std::move(done));
    }
  }

  void AbandonTransfer(uint64_t transfer, const Status& why) override {
    if (link_) {
      link_->Abandon(transfer, why);
    } else {
      plane_->AbandonEverywhere(transfer, why);
    }
  }

 private:
  ChannelCaps caps_;
  net::PeerLink* const link_;  // null: by the request's peer, on plane_
  net::DataPlane* const plane_;
};

}  // namespace

std::unique_ptr<Channel> MakeTcpChannel(const ChannelConfig& config, net::PeerLink& link) {
  return std::make_unique<TcpChannel>(config, &link, nullptr);
}

std::unique_ptr<Channel> MakeAnyPeerTcpChannel(const ChannelConfig& config, net::DataPlane& plane) {
  return std::make_unique<TcpChannel>(config, nullptr, &plane);
}

}  // namespace isometry
