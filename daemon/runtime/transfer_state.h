// Internal state of transfers and XDs. Fields marked "runtime's" are
// guarded by the owning runtime's mutex (Runtime::Impl::mu); the analysis
// cannot name it from here, so runtime_impl.h's functions that touch them
// require that lock. The completion block has its own annotated lock.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/synchronization/mutex.h"
#include "core/copy_options.h"
#include "core/instance.h"
#include "daemon/runtime/chunker.h"
#include "daemon/runtime/disk_endpoint.h"
#include "daemon/runtime/runtime.h"
#include "planner/topology.h"

namespace isometry {

// An intermediate ring buffer between hop i and hop i+1: `slots` slots, each
// holding one chunk linearized in `layout`. Chunk k lives in slot k % slots.
struct RingBuffer {
  MemoryId memory;
  size_t pool = 0;  // index of the memory's staging pool
  Layout layout;
  uint64_t slot_bytes = 0;
  int slots = 0;
  std::byte* data = nullptr;  // null until admitted
  // >= 0: an FBM buffer on this GPU; `data` is then a device address.
  int device = -1;
  bool remote = false;  // lives on the other node of a cross-node copy
  // Next to a user end whose client runs that hop itself: taken from that
  // client's hop window when free (`data` then points into it), else from
  // the staging pool as any buffer.
  OwnHops* own_hops = nullptr;
  bool in_window = false;
  uint64_t bytes() const { return slot_bytes * static_cast<uint64_t>(slots); }
};

// One hop of a transfer: moves every chunk from its input (the source or a
// ring buffer) to its output (a ring buffer or the destination), in chunk
// order, on one channel.
struct XdState {
  TransferState* transfer = nullptr;
  size_t hop = 0;
  size_t channel = 0;
  uint64_t next = 0;  // next chunk to issue
  // Per chunk; inline for the small copies of a few chunks, which then
  // allocate nothing for it.
  absl::InlinedVector<uint8_t, 16> done;
  uint64_t done_count = 0;
  int in_flight = 0;
  bool remote = false;  // runs on the other node of a cross-node copy
  // When its first chunk could go: admission, or for a hop fed by this
  // node's previous hop, that hop's first chunk done (the queue wait runs
  // from here to chunk 0's dispatch; runtime's).
  std::chrono::steady_clock::time_point ready{};
  // Where this hop writes a ring whose pace is timed
  // (Runtime::Impl::TimesRing): per epoch of RingStores::kEpochChunks
  // chunks, whether it wrote them with streaming stores (ring_stores.h).
  // Empty elsewhere.
  std::vector<uint8_t> streamed;
  // Where this hop reads such a ring: when its finished chunks last made
  // up a whole number of epochs.
  std::chrono::steady_clock::time_point epoch_mark{};
};

struct TransferState {
  enum class Phase { kWaiting, kRunning, kDraining, kFinished };

  // Constant after construction.
  uint64_t id = 0;
  CopyOptions options;   // CopyRequest::options
  uint64_t share = 0;    // CopyRequest::share
  size_t qos = 0;        // its traffic class's number (QosTable), set when submitted
  std::string qos_name;  // ... and its name
  InstanceRef src;
  InstanceRef dst;
  Box box;
  // Its path: the plan cache's own (a copy only where the transfer's path
  // differs: ends costed by their forms, a peer's plan adopted), so a small copy
  // neither copies nor frees one.
  std::shared_ptr<const Path> shared_path;
  // What it should move per second: the path's figure, or for a copy with
  // durable = false the path's with its disk writes unsynced (the path's
  // own counts the fdatasync, as calibration measured a durable write).
  double predicted_bps = 0;
  std::optional<ChunkGrid> grid;
  std::function<void(Status)> on_complete;  // run and cleared by Finish's Completion
  std::unique_ptr<DiskEndpoint> src_disk;   // DSK source, open for the transfer
  std::unique_ptr<DiskEndpoint> dst_disk;   // DSK destination (temporary file until commit)
  std::optional<RemotePart> remote;         // one node's part of a cross-node copy
  size_t last_hop = 0;                      // the last hop that runs on this node
  int net_channel = -1;                     // local channel of the network hop
  int relay_channel = -1;                   // a relay's outgoing network hop's
  // The last hop writes the user's destination with non-temporal stores
  // (ChannelRequest::stream_stores): a local transfer larger than the
  // last-level cache.
  bool stream_last_hop = false;

  // The runtime's (see above).
  Phase phase = Phase::kWaiting;
  Status failure;  // why it is draining
  // Set once the transfer gives up (cancel, a failed hop, shutdown): the
  // channels end its requests early (ChannelRequest::cancelled).
  std::atomic<bool> cancelled{false};
  int in_flight = 0;
  std::vector<RingBuffer> buffers;                       // buffers[i] sits between hop i and i+1
  absl::InlinedVector<std::unique_ptr<XdState>, 2> xds;  // one per hop
  TransferTimes times;
  bool dispatched = false;
  bool abandoned = false;  // the network channel was told (once)

  // Completion block, under its own lock (so handles work without the
  // runtime's). Taken inside the runtime's lock, never around it.
  mutable absl::Mutex done_mu;
  mutable absl::CondVar done_cv;
  bool finished ABSL_GUARDED_BY(done_mu) = false;
  Status status ABSL_GUARDED_BY(done_mu);
  TransferTimes final_times ABSL_GUARDED_BY(done_mu);

  // Back pointer for Cancel(); valid while the runtime lives.
  Runtime* runtime = nullptr;

  const Path& path() const { return *shared_path; }
};

}  // namespace isometry
