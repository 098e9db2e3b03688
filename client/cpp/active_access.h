// Active Access from the C++ client (docs/guides/active-access.md, "Active Access").
//
//   isometry::client::ActiveAccess aa(*client);
//   auto region = aa.Watch(alloc, {.offset = 0, .bytes = 4096,
//                                  .action = active::Action::kApplyLog});
//   ... other clients put into the allocation ...
//   aa.Log(alloc.id())->Poll([](const active::LogEntry& e, std::string_view data) {...});
//   aa.Log(alloc.id())->Ack();   // handled: copies blocked on a full log go on,
//                                // flushes waiting for these entries return
//
// Only the allocation's owner (the session that allocated it) watches it
// and reads its log; any session that may use the allocation may Flush it.
// The log is a ring in shared memory (active/log_abi.h) mapped here on the
// allocation's first Watch; its eventfd is written by the daemon whenever
// it publishes entries.
//
// Thread-safety: an ActiveAccess may be used from several threads; one
// AccessLog is read by one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "active/access_log.h"
#include "active/watch.h"
#include "client/cpp/isometry_client.h"

namespace isometry::client {

struct WatchOptions {
  uint64_t offset = 0;  // page aligned (4096)
  uint64_t bytes = 0;   // a page multiple, or up to the allocation's end
  active::Action action = active::Action::kApplyLog;
  active::Handler handler = active::Handler::kClient;
  uint64_t tag = 0;          // echoed in entries: this client's own handler id
  bool log_data = true;      // kApplyLog: entries carry the bytes
  uint32_t value_bytes = 8;  // kHashInsert
  std::string file_memory;   // kFileLog: a DSK memory and a file in it
  std::string file;
  // The allocation's first watch: ring bytes (0: daemon.access_log_bytes)
  // and what a full log does (kDefault: daemon.access_log_full).
  uint64_t log_bytes = 0;
  enum class Full : uint8_t { kDefault, kBlock, kFail } full = Full::kDefault;
};

struct WatchedRegionStats {
  uint64_t region = 0, offset = 0, bytes = 0;
  uint64_t puts = 0, gets = 0, bytes_accessed = 0, denied = 0, inserts = 0, dirty_pages = 0;
};
struct CheckpointStats {
  bool full = false;
  uint64_t pages_written = 0, bytes_written = 0, file_bytes = 0;
  uint64_t deltas = 0, delta_file_bytes = 0;  // the chain afterwards
  bool compacted = false;
  // Why the daemon took it in full ("" for an incremental one).
  std::string full_reason;
  // Why the client's own writes were not listed (the tracker failed): the
  // checkpoint was then taken in full. OK otherwise.
  Status tracker_status;
};
class WriteTracker;
struct CheckpointOptions {
  bool full = false;     // rewrite the base, drop the delta chain
  bool compact = false;  // merge the delta chain into the base afterwards
  // Lists this process's own stores into the allocation (write_tracker.h)
  // with the checkpoint; null: only the daemon's dirty pages count.
  WriteTracker* tracker = nullptr;
};
struct RestoreStats {
  uint64_t image_bytes = 0, deltas = 0, pages_applied = 0;
};
struct WatchStats {
  uint64_t log_bytes = 0, published = 0, acknowledged = 0, entries = 0;
  std::vector<WatchedRegionStats> regions;
};

// One watched allocation's access log, mapped here.
class AccessLog {
 public:
  ~AccessLog();
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  // Hands every published entry not yet handed out to `fn` (data follows
  // the entry when its kLogHasData flag is set); returns how many.
  size_t Poll(const std::function<void(const active::LogEntry&, std::string_view data)>& fn);
  // Acknowledges every entry handed out so far.
  void Ack();
  // Waits up to `timeout` for entries (the eventfd); true when some wait.
  bool Wait(std::chrono::milliseconds timeout);
  int event_fd() const { return event_fd_; }

 private:
  friend class ActiveAccess;
  AccessLog(std::byte* map, uint64_t mapped, int event_fd, active::LogReader reader)
      : map_(map), mapped_(mapped), event_fd_(event_fd), reader_(reader) {}
  std::byte* map_;
  uint64_t mapped_;
  int event_fd_;
  active::LogReader reader_;
};

class ActiveAccess {
 public:
  explicit ActiveAccess(Client& client) : client_(client) {}

  // Watches a range of `allocation` (this session's own). Returns the
  // region's id. Errors: PERMISSION_DENIED (not the owner),
  // INVALID_ARGUMENT (bounds, alignment, overlap, handler/action),
  // RESOURCE_EXHAUSTED (daemon.max_watched_regions_per_session).
  Result<uint64_t> Watch(const Allocation& allocation, const WatchOptions& options);
  // The last region's unwatch ends the allocation's watch and its log.
  Status Unwatch(uint64_t allocation, uint64_t region);
  // Returns once every access to the allocation's regions so far has been
  // handled (this client's log entries acknowledged, built-in handlers
  // run); DEADLINE_EXCEEDED after `timeout` (0: daemon.max_flush_ms).
  Status Flush(uint64_t allocation, std::chrono::milliseconds timeout = {});
  Result<WatchStats> Stats(uint64_t allocation);
  // kDirtyPages regions: the pages written since the last clear.
  Result<std::vector<uint64_t>> DirtyPages(uint64_t allocation, bool clear);
  // Writes the allocation's image into `file` of DSK memory `memory`: all
  // of it the first time (or with `full`), then only the pages written
  // since, appended as one record to `file`.delta (docs/guides/active-access.md, "Incremental
  // checkpoints"): those its kDirtyPages regions saw written and, with a
  // tracker, those this process stored into. A tracker that fails makes
  // the checkpoint full (`tracker_status` says why). Only the owner.
  Result<CheckpointStats> Checkpoint(uint64_t allocation, const std::string& memory,
                                     const std::string& file, const CheckpointOptions& options);
  Result<CheckpointStats> Checkpoint(uint64_t allocation, const std::string& memory,
                                     const std::string& file, bool full = false) {
    CheckpointOptions o;
    o.full = full;
    return Checkpoint(allocation, memory, file, o);
  }
  // Rebuilds `allocation` (this session's, the image's size) from the
  // base and its delta chain, byte-exact. DATA_LOSS or INVALID_ARGUMENT
  // for a damaged, truncated or mismatched checkpoint: nothing changed.
  Result<RestoreStats> Restore(uint64_t allocation, const std::string& memory,
                               const std::string& file);
  // Merges the delta chain into the base now.
  Result<RestoreStats> Compact(const std::string& memory, const std::string& file);
  // The allocation's log once watched here (null before), kept until the
  // allocation's last region is unwatched.
  AccessLog* Log(uint64_t allocation);

 private:
  Client& client_;
  std::mutex mu_;
  std::map<uint64_t, std::unique_ptr<AccessLog>> logs_;  // guarded by mu_
};

}  // namespace isometry::client
