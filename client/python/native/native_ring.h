// The copies Python submits through the rings without waiting
// (isometry.Client.copy_future, acopy, copy(wait=False); isometry/ring.py),
// and their completions, read by one thread of the extension that never
// touches Python:
//
//   job = ring.Submit(c, src, dst, options, tracked, to_loop)  // never blocks
//   batch = ring.Take(200, to_loop, &ended)  // every completion so far
//
// Submit never waits, so an event loop that submits is never held up: a
// copy goes on the SQ at once when it has room and no earlier copy waits,
// and otherwise into a backlog in this process that the reader moves to
// the SQ as completions make room (the daemon takes no more submissions
// than the CQ can answer). The copy's job number names it in Take.
//
// The C++ client has no call that waits for any completion, only
// Client::WaitFor(ticket), so the reader waits for the tickets in the
// order they were queued: a completion that arrives early is collected by
// the client meanwhile (its ring room freed) and handed over as soon as
// the ones before it are; between steps of a long wait the reader moves
// the backlog into the room the others left.
// Take() hands over every completion collected so far in one call, so
// Python pays one GIL round trip per batch, not per copy.
//
// Stop() ends the backlog (its copies complete CANCELLED, as EndBacklog()
// makes them at once), lets the reader finish the copies on the rings
// (their completions still come out of Take), then ends it; a session the
// daemon closed fails the copies left at once with the reason.
// Thread-safe.
#pragma once

#include <sys/eventfd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "client/cpp/isometry_client.h"
#include "core/copy_options.h"
#include "core/unique_fd.h"

namespace isometry::python {

struct RingDone {
  uint64_t job = 0;
  bool to_loop = false;   // for an event loop's Take (see Submit)
  uint64_t transfer = 0;  // 0: the daemon refused the submission, or it never reached it
  std::string code;       // "OK" when the copy is done
  std::string message;
};

class RingReader {
 public:
  RingReader() = default;
  RingReader(const RingReader&) = delete;
  RingReader& operator=(const RingReader&) = delete;
  ~RingReader() { Stop(); }

  // Queues a copy of `src`'s whole index space into `dst` (see above) and
  // returns its job number; starts the reader at the first. `tracked`: the
  // daemon reports its transfer id at acceptance (TransferOf). `to_loop`:
  // its completion goes to Take(…, true), which an event loop calls when
  // event_fd() is readable, else to Take(…, false), which wakes a waiting
  // thread. Fails only once stopped, or with the reason once the daemon
  // ended the session. Never blocks; the GIL may be held.
  Result<uint64_t> Submit(const std::shared_ptr<client::Client>& c,
                          std::shared_ptr<client::Instance> src,
                          std::shared_ptr<client::Instance> dst, const CopyOptions& options,
                          bool tracked, bool to_loop);
  // A tracked job's transfer id: waits until it is on the SQ and the
  // daemon accepted it; the daemon's refusal as the error (its completion
  // is still handed out by Take). Once per job. Call without the GIL.
  Result<uint64_t> TransferOf(uint64_t job);
  // Waits up to `timeout_ms` for completions of one kind (`for_loop`:
  // Submit's to_loop) and returns all there are; *ended once the reader
  // has stopped and none is left. Call without the GIL.
  std::vector<RingDone> Take(int timeout_ms, bool for_loop, bool* ended);
  // The copies still in the backlog complete CANCELLED now (a closing
  // session: they never reached the daemon).
  void EndBacklog();
  // No more submissions; returns once the copies on the rings completed.
  // Call without the GIL.
  void Stop();
  // Copies submitted whose completions have not arrived yet (in the
  // backlog or on the rings).
  uint64_t pending() const;
  // An eventfd (non-blocking) that turns readable when completions wait
  // for Take(…, true): an event loop watches it and takes them on its own
  // thread. Read it before Take(0), so a completion that arrives after
  // the Take makes it readable again. Open as long as this reader.
  int event_fd() const { return event_.get(); }

 private:
  // A copy not yet on the SQ.
  struct Job {
    uint64_t id = 0;
    std::shared_ptr<client::Instance> src, dst;
    CopyOptions options;
    bool tracked = false;
    bool to_loop = false;
  };
  // A copy on the SQ.
  struct OnRing {
    uint64_t job = 0;
    uint64_t ticket = 0;
    bool to_loop = false;
  };
  // How long the reader waits for the copy at the head before it moves
  // the backlog on (the room of copies that ended behind it).
  static constexpr std::chrono::milliseconds kMoveEvery{2};
  void Run();
  // Puts `job` on the SQ if it has room: false when full; any other
  // failure completes the job with it. Under mu_.
  bool PushLocked(const Job& job);
  // Hands a completion to Take(). Under mu_.
  void AddDoneLocked(RingDone d);
  // Moves the backlog to the SQ while it has room. Under mu_.
  void MoveBacklogLocked();
  // Completes the jobs of the backlog with `why`. Under mu_.
  void EndBacklogLocked(const Status& why);

  mutable std::mutex mu_;
  std::condition_variable work_cv_;         // on_ring_, backlog_ or stop_ changed
  std::condition_variable done_cv_;         // done_ or ended_ changed
  std::condition_variable tracked_cv_;      // tracked_ changed
  std::shared_ptr<client::Client> client_;  // the reader's, until it ends
  std::deque<Job> backlog_;
  std::deque<OnRing> on_ring_;  // in SQ order
  // Tracked jobs whose transfer id TransferOf has not asked yet: their
  // ticket once on the SQ (the reader waits for it only after), or why
  // they never got there (ticket 0).
  struct Tracked {
    uint64_t ticket = 0;
    Status failed;
  };
  std::unordered_map<uint64_t, Tracked> tracked_;
  std::vector<RingDone> done_[2];  // by to_loop
  uint64_t next_job_ = 0;
  uint64_t pending_ = 0;
  bool stop_ = false;
  bool started_ = false;  // the thread was started (thread_ is Stop()'s)
  bool ended_ = false;
  Status gone_;  // why the daemon ended the session, once it did
  std::thread thread_;
  std::mutex join_mu_;  // one Stop() joins
  UniqueFd event_{eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
};

}  // namespace isometry::python
