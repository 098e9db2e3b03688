// Active Access: watched regions, access logs, flushes, dirty pages and incremental checkpoints
// (node_watch.cc, node_checkpoint.cc).
// Node::watches() hands it out (node.h: what every service promises).
#pragma once

#include "daemon/node/node.h"

namespace isometry::node {

class Watches {
 public:
  explicit Watches(Node::Impl& impl) : impl_(&impl) {}  // the node makes it

  // Active Access (node_watch.cc). Only the allocation's owner watches,
  // unwatches and reads the log (PERMISSION_DENIED for others); bad
  // ranges, overlaps and handler/action mismatches: INVALID_ARGUMENT;
  // more than daemon.max_watched_regions_per_session: RESOURCE_EXHAUSTED.
  // The watch (regions and log) ends with the owner's session, when the
  // allocation is freed, or when its last region is unwatched.
  Result<WatchHandle> Watch(SessionRef session, const WatchSpec& spec);

  Status Unwatch(SessionRef session, uint64_t allocation, uint64_t region);

  Result<WatchReport> GetWatch(SessionRef session, uint64_t allocation) const;

  // The daemon-side reader of the owner's watched allocation's log
  // (ReadAccessLog; watch_reader.h): PERMISSION_DENIED for others,
  // NOT_FOUND without a watch, FAILED_PRECONDITION when the owner's local
  // client mapped the ring, ALREADY_EXISTS while another reader lasts.
  Result<std::unique_ptr<WatchReader>> ReadAccessLog(SessionRef session, uint64_t allocation);

  // Active flush: `done` runs once every access to the allocation's
  // regions up to now has been handled (entries acknowledged by the owner,
  // built-in handlers run), or with DEADLINE_EXCEEDED after `limit`
  // (capped at daemon.max_flush_ms). Any session that may use the
  // allocation may flush. OK at once for an allocation not watched.
  Status ActiveFlush(SessionRef session, uint64_t allocation, std::chrono::milliseconds limit,
                     std::function<void(Status)> done);

  // The dirty pages (kDirtyPages regions) of the owner's allocation;
  // `clear` starts a new epoch.
  Result<std::vector<uint64_t>> DirtyPages(SessionRef session, uint64_t allocation, bool clear);

  // Incremental checkpoint (node_checkpoint.cc): the owner's allocation
  // as a base image `file` of DSK memory `memory` plus a delta chain in
  // `file`.delta (active/checkpoint_delta.h). The first time (or with
  // `full`, or when the base is not the allocation's size, or the chain is
  // damaged) the whole image goes to the base and the chain is dropped;
  // afterwards the pages its dirty_pages regions saw written since the
  // last checkpoint, and the client's own `client_pages`, are appended as
  // one record with one write and one fdatasync. The chain is merged into
  // the base when asked, when it would hold more than
  // daemon.checkpoint_max_deltas records, or when it outgrows the image.
  // The disk I/O runs on the calling thread (never a gRPC one: the
  // service hands these calls to a worker).
  Result<CheckpointReport> Checkpoint(SessionRef session, uint64_t allocation,
                                      const std::string& memory, const std::string& file,
                                      const CheckpointOptions& options);

  // Reads base + chain into the owner's `allocation` (the image's size),
  // streaming the chain into a private image: DATA_LOSS (damaged,
  // truncated, forged, larger than any checkpoint leaves) or
  // INVALID_ARGUMENT (another image size) change nothing. The files must
  // be the session's uid's or the daemon's (checkpoint_files.h).
  Result<RestoreReport> Restore(SessionRef session, uint64_t allocation, const std::string& memory,
                                const std::string& file);

  // Merges the chain into the base (crash-safe: the chain is cut only
  // after the base is synced), once the whole chain is verified. Any
  // session whose uid owns the files (or the daemon's files).
  Result<RestoreReport> CompactCheckpoint(SessionRef session, const std::string& memory,
                                          const std::string& file);

  // Every watch on this node (isoctl status; never a log's contents).
  std::vector<WatchReport> ListWatches() const;

 private:
  Node::Impl* impl_;
};

}  // namespace isometry::node
