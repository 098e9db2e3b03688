// The channel interface: moves bytes between a pair of memory kinds
// (Isometry §3.2). A channel executes requests; it never schedules them
// (the runtime's DMA worker does) and never includes runtime code.
//
// Contract:
//  - Submit() starts one request and returns quickly; `done` is called
//    exactly once, on a channel-owned thread, never inside Submit().
//  - At most caps().max_in_flight requests are outstanding at a time; the
//    caller (the DMA worker) enforces this.
//  - The destructor waits for outstanding requests; callers drain first.
//  - A failed request reports a Status naming the channel and the cause;
//    the channel stays usable for later requests.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "channels/endpoint.h"
#include "core/channel_kind.h"
#include "core/memory.h"
#include "core/status.h"
#include "layout/copy_program.h"

namespace isometry {

struct ChannelCaps {
  std::string name;
  ChannelKind kind = ChannelKind::kMemcpy;
  std::vector<std::pair<MemoryKind, MemoryKind>> memory_kinds;  // what it can connect
  bool converts_layout = false;  // executes strided programs efficiently
  uint64_t request_bytes = 0;    // preferred request size (sweet spot)
  int max_in_flight = 1;
  // Threads that run requests at the same time: a copy of fewer requests
  // than that is cut finer so that each has one (the runtime's GridFor).
  int threads = 1;
  uint64_t rate_limit_bytes_per_s = 0;  // 0 = unlimited
  bool runs_inline = false;             // RunInline() is supported
  bool streams_stores = false;          // honours ChannelRequest::stream_stores
  // Requests of at most kExpressRequestBytes run on a thread of their own
  // when every other thread is busy (channel_workers.h): the runtime may
  // issue one such request beyond max_in_flight.
  bool express = false;
  // Submit only queues the request for the channel's own threads: it never
  // blocks and never completes it on the calling thread. The runtime then
  // issues the channel's next requests from whichever thread ended one
  // (another channel's, even) instead of waking its DMA worker.
  bool queues_only = false;
};

// The largest request an express lane takes: a small copy's whole chunk,
// far below a bulk request (request_size).
inline constexpr uint64_t kExpressRequestBytes = 256 << 10;

// One request: run `program` from the source endpoint to the destination
// endpoint (endpoint.h). Which alternatives a channel takes is its own
// contract (a memcpy channel: host to host; DiskRead: a file range to host
// memory; RemoteMemcpy: host memory to a network half when sending, a
// network half to host memory when receiving); any other pair fails the
// request with FAILED_PRECONDITION.
struct ChannelRequest {
  std::shared_ptr<const CopyProgram> program;
  Endpoint src;
  Endpoint dst;
  int priority = 0;  // the transfer's; channels that queue honour it
  // Set (never cleared) when the transfer gives up: a request not started
  // yet completes with CANCELLED at once, a running one at its next safe
  // point (between I/Os, between pieces of a paced copy). Null: never.
  // Must stay valid until `done` runs; the runtime calls Interrupt() after
  // setting it so a sleeping channel looks.
  const std::atomic<bool>* cancelled = nullptr;
  // A hint from the runtime: the transfer is larger than the last-level
  // cache and the destination is the transfer's own, or an intermediate
  // ring where calibration found streaming faster than handing the ring
  // over in the cache (Runtime's ring writes), so a host-memory channel
  // may write it with non-temporal stores (layout/executor.h, Stores).
  bool stream_stores = false;
  // The transfer's QoS class and the class's weight on this channel: a
  // channel that queues requests itself (the network's) shares between
  // classes by weight (docs/guides/qos.md).
  uint32_t qos_class = 0;
  uint32_t qos_weight = 1;
  // The class's nice value: a channel's threads run the request at it
  // (core/thread_nice.h).
  int qos_nice = 0;
  bool Cancelled() const { return cancelled && cancelled->load(std::memory_order_acquire); }
};

using RequestDone = std::function<void(Status)>;

class Channel {
 public:
  virtual ~Channel() = default;
  virtual const ChannelCaps& caps() const = 0;
  virtual void Submit(ChannelRequest request, RequestDone done) = 0;
  // Executes a small request synchronously on the calling thread (the
  // latency path); only where caps().runs_inline. Not counted against
  // max_in_flight: callers keep it for requests far below request_bytes.
  virtual Status RunInline(const ChannelRequest& request) {
    (void)request;
    return FailedPrecondition("channel '", caps().name, "' cannot run requests inline");
  }
  // Whether Submit would hand `request` to a party outside the channel's
  // own threads (the CMA channel: a client's hop, run by that client
  // through its hop window). Such a request takes none of max_in_flight:
  // a client that never answers must not hold the slots other clients'
  // copies need (the runtime counts it apart).
  virtual bool RunsElsewhere(const ChannelRequest& request) const {
    (void)request;
    return false;
  }
  // Some request's `cancelled` flag was set: look at the requests held now
  // and end the cancelled ones promptly (see ChannelRequest::cancelled).
  // Never blocks; may run under the caller's locks.
  virtual void Interrupt() {}
  // The runtime gave up on cross-node transfer `transfer` (it failed here,
  // or was cancelled): requests of it the channel still holds complete
  // with `why` (on a channel thread, never inside this call, which may run
  // under the caller's locks) and the other node is told. Channels without
  // network ends ignore it.
  virtual void AbandonTransfer(uint64_t transfer, const Status& why) {
    (void)transfer;
    (void)why;
  }
};

}  // namespace isometry
