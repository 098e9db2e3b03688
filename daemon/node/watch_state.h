// The daemon's side of Active Access (issue #19, seed 004): the watched
// regions of one pool allocation, its access log ring and the handlers.
//
// A WatchState lives while its allocation has watched regions and its
// owner session lasts. It owns the region table (active/watch.h), the log
// ring (a sealed memfd the owner maps) with the eventfd that wakes the
// owner, the built-in handlers' state (counters, file logs, dirty pages)
// and one worker thread that finishes active copies in the order they
// completed: a copy whose destination (put) or source (get) touches a
// region runs through the runtime with its destination redirected into a
// scratch buffer (puts), then the worker applies it piece by piece as each
// region's action says, appends the log entries, publishes them and only
// then lets the copy complete. A full log blocks the worker (the copy
// waits, for at most access_log_block_ms) or fails the copy before any of
// its bytes land, as the watch's `full` mode says; nothing is ever
// dropped.
//
// The ring has one consumer: the owner's mapping (the local socket hands
// it the memfd) or one daemon-side reader (WatchReader, watch_reader.h,
// for ReadAccessLog), never both: the daemon reads records only from a
// ring no client has mapped, since a mapping can write them.
//
// Thread-safety: every method may be called from any thread; callbacks
// (Enqueue's done, flush callbacks, a reader's Next) run on the worker
// thread or the caller's, never under the state's locks.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "active/access_log.h"
#include "active/watch.h"
#include "core/status.h"
#include "core/unique_fd.h"
#include "daemon/node/shared_memory.h"

namespace isometry {

enum class LogFullMode : uint8_t { kBlock, kFail };

struct WatchOptions {
  uint64_t log_bytes = 1 << 20;  // ring capacity, a power of two
  LogFullMode full = LogFullMode::kBlock;
  std::chrono::milliseconds block_limit{10000};  // kBlock: then the copy fails
  active::Limits limits;
  // Counts the worker thread while it runs (null: not counted).
  std::shared_ptr<std::atomic<uint32_t>> live_workers;
};

// A region as the owner asked for it, with what the built-in handlers need.
struct RegionSpec {
  active::Region region;
  UniqueFd file;  // kFileLog: opened (append) beneath the DSK directory
};

struct RegionStats {
  active::Region region;
  uint64_t puts = 0, gets = 0, bytes = 0, entries = 0, denied = 0;
  uint64_t inserts = 0;      // kHashInsert
  uint64_t dirty_pages = 0;  // kDirtyPages: pages written since the last checkpoint
};

struct WatchReport {
  uint64_t allocation = 0;
  uint64_t owner_session = 0;
  uint64_t log_bytes = 0;
  uint64_t published = 0;     // log bytes published
  uint64_t acknowledged = 0;  // log bytes the owner acknowledged
  uint64_t entries = 0;       // entries logged so far
  uint64_t pending_copies = 0;
  std::string full_mode;  // "block" or "fail"
  std::vector<RegionStats> regions;
};

// Who made an access (the log entry's source fields).
struct AccessSource {
  uint64_t session = 0;
  uint32_t node = 0;
  uint64_t transfer = 0;
};

// One active copy's touch of the allocation: `ranges` (sorted, disjoint,
// allocation offsets) read (kGet) or written (kPut). A put's bytes are in
// `scratch`, whose byte 0 is allocation offset `scratch_base`.
struct ActiveAccess {
  active::Op op = active::Op::kPut;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  std::unique_ptr<std::byte[]> scratch;
  uint64_t scratch_base = 0;
  AccessSource source;
  std::shared_ptr<void> scratch_charge;  // its bytes against the budgets (ByteBudget)
};

// One entry of the log as a daemon-side reader hands it out.
struct LoggedAccess {
  active::LogEntry entry;
  std::string data;  // entry.data_bytes of it
};
using LogBatchReady = std::function<void(Result<std::vector<LoggedAccess>>)>;

class WatchReader;

class WatchState : public std::enable_shared_from_this<WatchState> {
 public:
  // `memory`/`bytes`: the allocation's mapping (kept alive by the caller's
  // reference to the allocation for as long as this state lives).
  static Result<std::shared_ptr<WatchState>> Create(uint64_t allocation, uint64_t owner_session,
                                                    std::byte* memory, uint64_t bytes,
                                                    const WatchOptions& options);
  ~WatchState();
  WatchState(const WatchState&) = delete;
  WatchState& operator=(const WatchState&) = delete;

  uint64_t allocation() const { return allocation_; }
  uint64_t owner_session() const { return owner_; }
  int log_fd() const { return log_.fd(); }
  uint64_t log_mapped_bytes() const { return log_.size(); }
  int event_fd() const { return event_.get(); }

  Result<uint64_t> AddRegion(RegionSpec spec);
  Status RemoveRegion(uint64_t id);
  bool empty() const;
  // The ranges of [begin, end) that lie in watched regions would deny
  // `op` (PERMISSION_DENIED naming the first, counted in that region's
  // `denied`), or whether the range is watched at all (`watched`).
  Status CheckAccess(active::Op op, const std::vector<std::pair<uint64_t, uint64_t>>& ranges,
                     bool& watched);
  // Whether any of `ranges` lies in a watched region (no access is made,
  // none counted).
  bool Watches(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) const;
  // Finishes `access` on the worker: applies it, logs it, publishes, then
  // calls `done` with the outcome (an error: nothing of a put applied,
  // unless the log had to be streamed past its capacity in block mode and
  // timed out, which the message says).
  void Enqueue(ActiveAccess access, std::function<void(Status)> done);
  // Calls `done` once every access enqueued before it has been applied and
  // every entry published by then acknowledged by the owner (OK), or after
  // `limit` (DEADLINE_EXCEEDED), or when the watch ends (ABORTED).
  void Flush(std::chrono::milliseconds limit, std::function<void(Status)> done);
  // Ends the watch: the worker fails what is queued (ABORTED, nothing
  // applied), wakes blocked copies and flushes, and exits. Idempotent.
  void Close(const std::string& why);
  WatchReport Report() const;
  // kDirtyPages (watch_dirty.cc): the dirty page numbers of all regions;
  // `clear` resets them (and, when that drops any, the dirty set no longer
  // counts from a checkpoint).
  std::vector<uint64_t> DirtyPages(bool clear);
  // Marks `pages` dirty again (in kDirtyPages regions): a checkpoint that
  // took them and then failed hands them back for the next one.
  void MarkDirty(const std::vector<uint64_t>& pages);
  // A daemon-side write into [offset, offset + length) that does not pass
  // through the watch (the owner's Write, a Restore): its pages are marked
  // in kDirtyPages regions. Called after the bytes landed, so a checkpoint
  // that took the dirty set meanwhile copies them or the next one does.
  void NoteWrite(uint64_t offset, uint64_t length);
  // What an incremental checkpoint needs: the dirty pages (taken and
  // cleared), the checkpoint they count from and what would make them
  // miss a write. Until a CountFrom with its epoch, the set counts from
  // no checkpoint.
  struct DirtyTake {
    std::vector<uint64_t> pages;
    std::string since;        // the files of the checkpoint they count from; "": none
    std::string since_why;    // why they count from none
    uint64_t generation = 0;  // that checkpoint's (CheckpointMarks)
    uint64_t epoch = 0;       // for CountFrom
    std::string untracked;    // why a write may be missing from them; "": none
  };
  DirtyTake TakeDirty();
  // The dirty set counts from checkpoint `generation` of `files` from now
  // (a failed checkpoint hands back what it took), unless it was taken
  // again, a clear dropped pages or a region changed since the TakeDirty
  // that answered `epoch`.
  // `why`: why it counts from none (`files` "").
  void CountFrom(uint64_t epoch, std::string files, uint64_t generation, std::string why);

  // ---- the ring's consumer (watch_reader.cc) ----
  // The owner maps the ring from now on (a local-socket Watch hands it the
  // memfd); false, and nothing changes, while a WatchReader reads it.
  bool HandOutLog();
  // Whether a WatchReader reads the ring now.
  bool ReadByDaemon() const;
  // The daemon-side reader, from the first entry not acknowledged:
  // FAILED_PRECONDITION when the owner mapped the ring, ALREADY_EXISTS
  // while another reader lasts.
  Result<std::unique_ptr<WatchReader>> OpenReader();

 private:
  friend class WatchReader;
  // A reader's calls (WatchReader's); `id` names it: a reader cancelled
  // or replaced gets CANCELLED and never touches the ring again.
  void ReadNext(uint64_t id, uint64_t max_bytes, LogBatchReady ready);
  void AckRead(uint64_t id);
  // Frees the slot; a pending ReadNext is answered CANCELLED when
  // `answer`, else dropped.
  void EndRead(uint64_t id, bool answer);
  // After entries are published or the worker exits: a waiting reader
  // reads again.
  void NotifyReader();

  struct Job {
    std::optional<ActiveAccess> access;  // none: a flush marker
    std::function<void(Status)> done;
    std::chrono::steady_clock::time_point flush_deadline;
  };
  struct FlushWaiter {
    uint64_t target = 0;
    std::chrono::steady_clock::time_point deadline;
    std::function<void(Status)> done;
  };
  struct RegionState {
    RegionStats stats;
    UniqueFd file;
    std::vector<bool> dirty;  // per page of the region
  };
  WatchState(uint64_t allocation, uint64_t owner, std::byte* memory, uint64_t bytes,
             WatchOptions options, SharedMemory log);
  void Run();
  Status Apply(ActiveAccess& a);
  // Appends `entry` (+ data) when the log has room, else waits or fails
  // per mode. Called without mu_ on the worker (the writer is the
  // worker's), taking mu_ for waits.
  Status Append(active::LogEntry entry, std::string_view data, bool& waited);
  bool WaitForRoom(uint64_t need);
  void Wake();
  Status RunBuiltin(RegionState& rs, const active::Piece& p, const active::Effect& e,
                    const ActiveAccess& a, std::string_view data);
  // The dirty set no longer holds every write since its checkpoint.
  void ForgetDirtyBaseLocked(std::string why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FireFlushes(std::vector<std::pair<std::function<void(Status)>, Status>>& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // ---- constant after Create ----
  const uint64_t allocation_;
  const uint64_t owner_;
  std::byte* const memory_;
  const uint64_t bytes_;
  const WatchOptions options_;
  SharedMemory log_;
  UniqueFd event_;

  // ---- the worker's own (only Run and what it calls touch them); the
  // worker thread holds a reference to this state until it exits ----
  active::LogWriter writer_;

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  active::RegionTable table_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, RegionState> regions_ ABSL_GUARDED_BY(mu_);  // by region id
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  std::vector<FlushWaiter> flushes_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::string close_why_ ABSL_GUARDED_BY(mu_);
  // The checkpoint the dirty set counts from (TakeDirty).
  std::string dirty_since_ ABSL_GUARDED_BY(mu_);
  uint64_t dirty_since_generation_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dirty_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  std::string dirty_why_ ABSL_GUARDED_BY(mu_);
  // The ring's consumer (watch_reader.cc). Taken alone, never with mu_.
  enum class Consumer : uint8_t { kNone, kMapped, kReader };
  mutable absl::Mutex reader_mu_;
  Consumer consumer_ ABSL_GUARDED_BY(reader_mu_) = Consumer::kNone;
  uint64_t reader_id_ ABSL_GUARDED_BY(reader_mu_) = 0;  // the reader's (kReader)
  uint64_t last_reader_id_ ABSL_GUARDED_BY(reader_mu_) = 0;
  std::optional<active::LogReader> log_reader_ ABSL_GUARDED_BY(reader_mu_);
  uint64_t reader_max_bytes_ ABSL_GUARDED_BY(reader_mu_) = 0;
  LogBatchReady reader_waiting_ ABSL_GUARDED_BY(reader_mu_);  // a ReadNext waiting for entries
  bool worker_exited_ ABSL_GUARDED_BY(reader_mu_) = false;    // nothing more is published
  // Mirrors of the writer's figures for Report and flushes.
  std::atomic<uint64_t> published_{0};
  std::atomic<uint64_t> entries_{0};
  std::atomic<uint64_t> acked_{0};
  std::atomic<uint64_t> pending_{0};
};

}  // namespace isometry
