// The daemon's side of a hop window (layout/hop_window.h): a local client
// that runs, in its own process, the hops of its copies that read or
// write its own private memory.
//
// Why: the CMA channel reaches another process one system call per run
// (cma_copy.h), ~1.5 us each, so a fragmented type into a client's
// private buffer moves a few MB/s; the client itself copies its memory at
// memcpy speed. The runtime puts the intermediate buffer next to such a
// hop in the window's data area (TryTake); the CMA channel, given a
// request between that buffer and the client's own memory, hands it to
// the client through Run instead of copying it itself.
//
// What the client can do: write anything into the window. It can stall
// or fail only its own copies (Run gives up after `timeout`, and on
// `cancelled`); a done entry that names no pending work, or indexes that
// run past the ring, are counted and ignored or end the window's use
// (every pending run fails, later ones go by CMA). It never sees another
// client's bytes: the window is its own, and its data area holds only
// buffers of its own transfers (several at once, each a block of it).
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "core/shm_ring.h"
#include "core/status.h"
#include "layout/copy_program.h"
#include "layout/hop_window.h"
#include "procmem/cma_copy.h"

namespace isometry {

// What every window of the daemon did, summed (isoctl status, /metrics):
// windows open now and counters since the start. Shared by the windows,
// so it outlives each of them.
struct OwnHopsTotals {
  std::atomic<uint64_t> windows{0};
  std::atomic<uint64_t> runs{0};       // requests the client ran
  std::atomic<uint64_t> fallbacks{0};  // requests left to CMA (program too big, ring full)
  std::atomic<uint64_t> bogus{0};      // done entries that named nothing pending
  std::atomic<uint64_t> timeouts{0};   // requests the client did not answer in time
  // Buffers that went to staging instead: the data area had no room left
  // beside other transfers' blocks, or the window was closed or broken.
  // Counted per attempt (a transfer waiting for staging may try again).
  std::atomic<uint64_t> not_lent{0};
};

class OwnHops {
 public:
  // `window`: this process's mapping of the window, `bytes` long, zeroed;
  // Create writes its header with `arena_bytes` of program slots. `wake`
  // tells the client that work is waiting (its completion eventfd);
  // `keep` holds the mapping for as long as this object lives.
  // `who`: the client, for messages ("session 7 (pid 123)"). `totals`
  // (not null) adds up what every window does. `answer_spin`: how long Run
  // looks for the client's answer (yielding) before it sleeps on the futex
  // (daemon.ring_poll_us; 0: sleeps at once). A small hop's answer comes
  // within microseconds while the client waits on its copy, and a futex
  // wakeup can cost more than the hop (docs/benchmarks/design-measurements.md,
  // "Wake-ups").
  static Result<std::shared_ptr<OwnHops>> Create(
      std::byte* window, uint64_t bytes, uint64_t arena_bytes, std::function<void()> wake,
      std::shared_ptr<void> keep, std::chrono::milliseconds timeout, std::string who,
      std::shared_ptr<OwnHopsTotals> totals,
      std::chrono::microseconds answer_spin = std::chrono::microseconds(0));
  ~OwnHops();
  OwnHops(const OwnHops&) = delete;
  OwnHops& operator=(const OwnHops&) = delete;

  uint64_t data_bytes() const { return data_bytes_; }
  // A block of the data area for one transfer's buffer, first fit among
  // the blocks other transfers hold: null when none of `bytes` is free, or
  // the window is closed or broken. A block given back while a hop given
  // up on (cancelled, timed out) still runs in it stays held until the
  // client answers that hop or leaves: a late run must not write under
  // the next transfer.
  std::byte* TryTake(uint64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  void Give(const std::byte* block) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether `p` lies in the data area.
  bool InData(const std::byte* p) const { return p >= data_ && p < data_ + data_bytes_; }

  // Has the client run `program` between `slot` (in the data area) and
  // `address` in its own memory: kRead takes the client's memory as the
  // source (it packs into the window), kWrite as the destination. Blocks
  // until the client answers, `cancelled` is set, the client leaves or
  // the timeout passes. Nullopt: not handed over (the program does not
  // fit a program slot, every slot is busy, the window is broken or
  // closed): the caller copies by CMA as before.
  std::optional<Status> Run(const CopyProgram& program, const std::byte* slot, uint64_t address,
                            CmaDirection direction, const std::atomic<bool>* cancelled)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Runs `work` on this window's own thread, in order. The CMA channel
  // runs every request it hands to the client there, so a client that
  // does not answer holds only that thread, never the channel's threads
  // that serve everyone else.
  void Enqueue(std::function<void()> work);

  // The client left: pending runs fail at once, later ones are not handed
  // over.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Pending {
    uint32_t program_slot = 0;
    const std::byte* data = nullptr;  // its buffer in the data area
    bool abandoned = false;           // its Run gave up; the slot frees when it is answered
    std::optional<Status> status;
  };
  // A block of the data area a transfer holds; `given` once given back
  // while an abandoned hop still runs in it.
  struct Block {
    uint64_t offset = 0;
    uint64_t bytes = 0;
    bool given = false;
  };
  OwnHops() = default;
  // Whether an abandoned hop still runs in `b`.
  bool AbandonedInLocked(const Block& b) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Frees the given blocks no abandoned hop runs in any more.
  void ReleaseGivenLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts one in the totals.
  void Count(std::atomic<uint64_t> OwnHopsTotals::*total) const;
  // Takes the done entries the client published up to `tail`.
  void DrainLocked(uint32_t tail) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void BreakLocked(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WakeWaiters();

  std::byte* window_ = nullptr;
  hop_window::HopWindowHeader* header_ = nullptr;
  std::byte* data_ = nullptr;
  uint64_t data_bytes_ = 0;
  std::byte* arena_ = nullptr;
  uint64_t arena_slot_bytes_ = 0;
  std::function<void()> wake_;
  std::shared_ptr<void> keep_;
  std::chrono::milliseconds timeout_{0};
  std::chrono::microseconds answer_spin_{0};
  std::string who_;
  std::shared_ptr<OwnHopsTotals> totals_;
  // Enqueue's queue and thread. The queue outlives this object when the
  // last reference goes on the thread itself (it then detaches).
  struct Queue;
  std::shared_ptr<Queue> queue_;
  std::thread thread_;

  mutable absl::Mutex mu_;
  std::vector<Block> blocks_ ABSL_GUARDED_BY(mu_);  // by offset
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  uint32_t busy_slots_ ABSL_GUARDED_BY(mu_) = 0;  // one bit per program slot
  shm::RingWriter<hop_window::WorkEntry> work_ ABSL_GUARDED_BY(mu_);
  shm::RingReader<hop_window::DoneEntry> done_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Pending> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace isometry
