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
  uint64_t rate_limit_bytes_per_s = 0;  // 0 = unlimited
  bool runs_inline = false;             // RunInline() is supported
};

// An instance that lives in a file (DSK memory): its first byte is at
// `offset` of the file. `direct_fd`, when >= 0, is the same file opened
// with O_DIRECT, for aligned runs.
struct FileRef {
  int fd = -1;
  int direct_fd = -1;
  uint64_t offset = 0;
  std::string path;  // for error messages
  bool valid() const { return fd >= 0; }
};

// The network end of a request (RemoteMemcpy): chunk `chunk` of the
// cross-node transfer `transfer`, as it travels between the two nodes (the
// chunk linearized densely in the receiving side's layout).
struct NetRef {
  uint64_t transfer = 0;
  uint64_t chunk = 0;
  bool valid = false;
};

// One request: run `program` from the source to the destination. Host
// endpoints are pointers to the instance's (or slot's) first byte; a disk
// endpoint is a FileRef instead (and its pointer is null); a network end is
// a NetRef (sending half: dst_net; receiving half: src_net).
struct ChannelRequest {
  std::shared_ptr<const CopyProgram> program;
  const std::byte* src = nullptr;  // base of the source instance or slot
  std::byte* dst = nullptr;        // base of the destination instance or slot
  FileRef src_file;                // DiskRead
  FileRef dst_file;                // DiskWrite
  NetRef src_net;                  // RemoteMemcpy, receiving half
  NetRef dst_net;                  // RemoteMemcpy, sending half
  int priority = 0;                // the transfer's; channels that queue honour it
  // Set (never cleared) when the transfer gives up: a request not started
  // yet completes with CANCELLED at once, a running one at its next safe
  // point (between I/Os, between pieces of a paced copy). Null: never.
  // Must stay valid until `done` runs; the runtime calls Interrupt() after
  // setting it so a sleeping channel looks.
  const std::atomic<bool>* cancelled = nullptr;
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
