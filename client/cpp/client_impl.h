// Client::Impl, the connection behind a Client and its handles: the
// control socket, the mapped rings and the hop window. Internal to the
// client library (isometry_client.cc, its handles and its rings).
#pragma once

#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "client/cpp/direct_read.h"
#include "client/cpp/hop_runner.h"
#include "client/cpp/isometry_client.h"
#include "client/cpp/read_server.h"
#include "core/shm_ring.h"
#include "core/spin_wait.h"
#include "core/strings.h"
#include "isometry.pb.h"
#include "proto/local_wire.h"
#include "proto/ring_abi.h"

namespace isometry::client {

inline Status FromCode(int32_t code, const std::string& message) {
  if (code == 0) {
    return OkStatus();
  }
  return Status(static_cast<absl::StatusCode>(code), message);
}

inline void CloseAll(const std::vector<int>& fds) {
  for (int fd : fds) {
    ::close(fd);
  }
}

struct Client::Impl {
  int socket = -1;
  std::string session;
  uint64_t session_id = 0;  // the public number (HelloResponse.session_id)
  std::mutex control_mu;    // one request/response at a time
  uint64_t next_tag = 1;    // guarded by control_mu

  std::byte* control = nullptr;
  uint64_t control_mapped = 0;
  ring::ControlHeader* header = nullptr;
  int sq_event = -1, cq_event = -1;

  std::mutex sq_mu;
  shm::RingWriter<ring::SubmissionEntry> sq;  // guarded by sq_mu
  shm::RingReader<ring::CompletionEntry> cq;  // guarded by cq_mu
  std::atomic<uint64_t> next_ticket{1};

  // The hop window (run_own_hops), mapped at the first RegisterPrivate.
  bool want_own_hops = false;
  std::chrono::microseconds spin{50};  // ClientOptions::spin_us
  std::once_flag hops_once;
  std::atomic<HopRunner*> hops{nullptr};  // set once; owned by hops_owner
  std::unique_ptr<HopRunner> hops_owner;

  // Direct reads (direct_read.h): this session's own ranges, the range of
  // each private instance it registered, and its leases by (src, dst)
  // instance (null: the daemon refused the pair; it copies those).
  bool want_direct_reads = false;
  std::mutex direct_mu;
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> own_ranges;  // id -> [begin, end)
  std::map<uint64_t, uint64_t> private_instances;                // instance -> range
  std::map<std::pair<uint64_t, uint64_t>, std::shared_ptr<const DirectLease>> leases;
  std::atomic<uint64_t> direct_reads_run{0};
  std::unique_ptr<DirectHelper> direct_helper;  // null: direct_read_threads 1
  // Served reads (served_read.h, read_server.h): the windows of publishers
  // this process reads from, by (pid, token), null where it could not
  // attach; and this process's own ReadServer, made at its first Publish.
  bool want_served_reads = true;
  std::mutex served_mu;
  std::map<std::pair<int32_t, uint64_t>, std::shared_ptr<ServedWindow>> served_windows;
  std::shared_ptr<ServedWindow> ServedWindowOf(const v1::DirectReadResponse& r, int pidfd);
  bool want_serve = true;
  std::chrono::microseconds serve_spin{1000};  // ClientOptions::serve_spin_us
  std::mutex serve_mu;
  std::unique_ptr<ReadServer> read_server;  // guarded by serve_mu (set once)
  // Copies src into dst by a lease when the pair has one or gets one; no
  // value when the copy must go through the daemon (no lease, or the
  // lease's range may have ended meanwhile: the daemon then tells).
  std::optional<Completion> TryDirect(uint64_t src, uint64_t dst);
  // Forgets an instance and the leases naming it.
  void ForgetInstance(uint64_t id);

  std::mutex cq_mu;
  std::condition_variable cq_cv;
  std::map<uint64_t, Completion> done;  // guarded by cq_mu
  // SubmitTracked tickets not waited for yet, each with its transfer id
  // once the daemon accepted the copy (0 until then). Guarded by cq_mu.
  std::map<uint64_t, uint64_t> tracked;
  bool reaping = false;  // guarded by cq_mu: one thread polls the eventfd

  // Ends the session now (the daemon sees the socket close); handles that
  // outlive the Client then fail their calls harmlessly.
  void Close() { shutdown(socket, SHUT_RDWR); }

  ~Impl() {
    if (control) {
      munmap(control, control_mapped);
    }
    for (int fd : {socket, sq_event, cq_event}) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
  }

  // One control round trip; fds in the response are returned to the caller.
  Result<v1::LocalResponse> Call(v1::LocalRequest req, std::vector<int>* fds,
                                 const std::vector<int>& send_fds = {}) {
    std::lock_guard lock(control_mu);
    req.set_tag(next_tag++);
    // A connection the daemon refused (too many of this uid's, see
    // docs/operations/security.md, "Security model") has its reason waiting to be read, tag 0, even
    // when the send already failed because the daemon closed it.
    const Status sent = wire::SendFrame(socket, req, send_fds);
    // Nothing was written: no answer will come.
    if (absl::IsOutOfRange(sent) || absl::IsInvalidArgument(sent)) return sent;
    v1::LocalResponse resp;
    std::vector<int> got;
    const Status received = wire::RecvFrame(socket, &resp, &got);
    if (!received.ok()) {
      return sent.ok() ? received : sent;
    }
    if (resp.tag() == 0 && resp.code() != 0) {
      CloseAll(got);
      return FromCode(resp.code(), "isometryd refused the connection: " + resp.message());
    }
    if (!sent.ok()) {
      CloseAll(got);
      return sent;
    }
    if (resp.tag() != req.tag()) {
      CloseAll(got);
      return Internal("response tag ", resp.tag(), " does not match request ", req.tag());
    }
    Status s = FromCode(resp.code(), resp.message());
    if (!s.ok()) {
      CloseAll(got);
      return s;
    }
    if (fds) {
      *fds = std::move(got);
    } else {
      CloseAll(got);
    }
    return resp;
  }

  // Moves every available completion into `done`. Under cq_mu.
  int Reap() {
    int n = 0;
    const uint32_t tail = cq.tail();
    // The daemon never runs a ring ahead; if it did, nothing here is sure.
    const uint32_t ready = cq.Ready(tail).value_or(0);
    for (; n < static_cast<int>(ready); ++n) {
      const ring::CompletionEntry e = cq.Take();
      if (e.code == ring::kCodeAccepted) {  // interim: the copy's own completion follows
        // A raw entry's (SubmitRaw) ticket is not tracked: nothing to keep.
        if (auto t = tracked.find(e.user_data); t != tracked.end()) t->second = e.transfer;
        continue;
      }
      const uint32_t len = std::min<uint32_t>(e.message_len, sizeof e.message);
      done[e.user_data] = {e.transfer, FromCode(e.code, std::string(e.message, len))};
    }
    cq.Publish();
    // Submissions the daemon left waiting for CQ room can go now. A daemon
    // still polling (daemon_awake) sees the room itself: the eventfd is
    // for one that went to sleep. The fence pairs with the daemon's after
    // it clears daemon_awake (local_server.cc, RingLoop): either it sees
    // this head or this thread sees the flag cleared.
    if (n == 0) return 0;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (sq.Unconsumed() && header->daemon_awake.value.load(std::memory_order_seq_cst) == 0) {
      const uint64_t one = 1;
      (void)!::write(sq_event, &one, sizeof one);
    }
    return n;
  }

  // Sequentially consistent: after clearing client_spinning, the one load
  // that closes the race with the daemon (ring_abi.h).
  bool CompletionsPending() const { return cq.Waiting(std::memory_order_seq_cst); }
  // A completion or hop work waiting.
  bool AnythingPending() const {
    const HopRunner* h = hops.load(std::memory_order_acquire);
    return CompletionsPending() || (h && h->Pending());
  }

  // Asks for the hop window once; without one, copies stay with CMA.
  void EnableOwnHops() {
    v1::LocalRequest req;
    req.mutable_own_hops();
    std::vector<int> fds;
    auto resp = Call(req, &fds);
    if (!resp.ok() || fds.size() != 1) {
      CloseAll(fds);
      return;
    }
    auto runner = HopRunner::Map(fds[0], resp->own_hops().bytes());
    CloseAll(fds);
    if (!runner.ok()) return;
    hops_owner = *std::move(runner);
    hops.store(hops_owner.get(), std::memory_order_release);
  }

  // Queues `e`; while the ring is full, waits for room (`wait_for_room`)
  // or answers RESOURCE_EXHAUSTED.
  Result<uint64_t> Push(ring::SubmissionEntry e, bool wait_for_room = true) {
    std::unique_lock lock(sq_mu);
    if (!wait_for_room && sq.Room() == 0) {
      // Made once: a caller that keeps a backlog (the Python extension's
      // reader) meets a full ring at every completion, and building the
      // message each time cost more than the copy's own submission.
      static const Status full =
          ResourceExhausted("the submission ring is full: consume completions, then submit again");
      return full;
    }
    // Ring full: the daemon drains it as it goes, as long as completions
    // are consumed; collect them here so a submit-only caller cannot stall
    // both rings.
    for (int spins = 0; sq.Room() == 0; ++spins) {
      lock.unlock();
      {
        std::unique_lock cq_lock(cq_mu, std::try_to_lock);
        if (cq_lock.owns_lock() && Reap() > 0) {
          cq_cv.notify_all();
        }
      }
      if (spins > 1000) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      lock.lock();
    }
    sq.Push(e, std::memory_order_seq_cst);
    // The daemon polls for a while after serving requests: no syscall then.
    if (header->daemon_awake.value.load(std::memory_order_seq_cst) == 0) {
      const uint64_t one = 1;
      if (::write(sq_event, &one, sizeof one) != sizeof one) {
        return Unavailable("cannot signal the daemon: ", ErrnoString(errno));
      }
    }
    return e.user_data;
  }

  Completion Wait(uint64_t ticket) { return *WaitFor(ticket, std::nullopt); }

  // Wait() until `deadline` (none: for ever): nullopt past it.
  std::optional<Completion> WaitFor(uint64_t ticket,
                                    std::optional<std::chrono::steady_clock::time_point> deadline) {
    std::unique_lock lock(cq_mu);
    Completion c;
    const Waited got = WaitUntil(
        lock,
        [&] {
          auto it = done.find(ticket);
          if (it == done.end()) return false;
          c = std::move(it->second);
          done.erase(it);
          tracked.erase(ticket);
          return true;
        },
        deadline);
    if (got == Waited::kTimedOut) return std::nullopt;
    if (got == Waited::kClosed) {
      return Completion{0, Unavailable("isometryd closed the connection")};
    }
    return c;
  }

  // The transfer id of a copy submitted with ring::kFlagReportAccepted:
  // its interim completion's, or its own completion's where that came
  // first (left for Wait); the refusal of a copy the daemon refused;
  // FAILED_PRECONDITION for a ticket that is no such copy or was waited
  // for already (nothing would ever answer).
  Result<uint64_t> TransferOf(uint64_t ticket) {
    std::unique_lock lock(cq_mu);
    Result<uint64_t> id = uint64_t{0};
    const Waited got = WaitUntil(lock, [&] {
      const auto t = tracked.find(ticket);
      if (t != tracked.end() && t->second != 0) {
        id = t->second;
        return true;
      }
      auto d = done.find(ticket);
      if (d == done.end()) {
        if (t != tracked.end()) return false;  // not accepted yet
        id = FailedPrecondition("ticket ", ticket,
                                " is not a SubmitTracked copy waiting for its completion");
        return true;
      }
      if (d->second.transfer != 0) {
        id = d->second.transfer;
      } else {
        id = d->second.status.ok() ? Internal("ticket ", ticket, " completed without a transfer")
                                   : d->second.status;
      }
      return true;
    });
    if (got != Waited::kReady) return Unavailable("isometryd closed the connection");
    return id;
  }

  enum class Waited { kReady, kClosed, kTimedOut };
  static constexpr uint32_t kLooksPerClock = 16;

  // Reaps completions and runs the hops the daemon hands over until
  // `ready()` (called under cq_mu, as `lock` holds it) says so: kReady;
  // kClosed when the daemon closed the session first, kTimedOut past
  // `deadline` (none: no limit).
  template <class Ready>
  Waited WaitUntil(std::unique_lock<std::mutex>& lock, Ready ready,
                   std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt) {
    using Clock = std::chrono::steady_clock;
    const auto past = [&] { return deadline && Clock::now() >= *deadline; };
    while (true) {
      if (ready()) return Waited::kReady;
      if (Reap() > 0) {
        cq_cv.notify_all();
        continue;
      }
      if (HopRunner* h = hops.load(std::memory_order_acquire); h && h->Pending()) {
        // Work the daemon handed this process: run it without the lock, so
        // other threads keep reaping their completions.
        lock.unlock();
        h->RunPending();
        lock.lock();
        continue;
      }
      if (past()) return Waited::kTimedOut;
      if (reaping) {
        if (deadline) {
          cq_cv.wait_until(lock, *deadline);
        } else {
          cq_cv.wait(lock);
        }
        continue;
      }
      reaping = true;
      lock.unlock();
      // Small copies complete within microseconds: spin briefly before
      // sleeping on the eventfd.
      // While it spins the daemon skips the completion eventfd
      // (ring_abi.h, client_spinning); clearing the flag and then looking
      // once more closes the race with a completion published meanwhile.
      if (spin.count() > 0) {
        header->client_spinning.value.store(1, std::memory_order_seq_cst);
        auto spin_until = Clock::now() + spin;
        if (deadline) spin_until = std::min(spin_until, *deadline);
        // Pauses with a yield every few microseconds (core/spin_wait.h);
        // the clock read every kLooksPerClock looks, so a completion is
        // seen a pause after it lands, not a clock read later.
        SpinWait wait;
        for (uint32_t looks = 1; !AnythingPending(); ++looks) {
          if (looks % kLooksPerClock == 0 && Clock::now() >= spin_until) break;
          wait.Step();
        }
        header->client_spinning.value.store(0, std::memory_order_seq_cst);
      }
      if (!AnythingPending() && !past()) {
        int ms = 100;
        if (deadline) {
          const auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now());
          ms = static_cast<int>(std::clamp<int64_t>(left.count(), 0, ms));
        }
        pollfd p{cq_event, POLLIN, 0};
        const int r = poll(&p, 1, ms);
        uint64_t count;
        if (r > 0) {
          (void)!::read(cq_event, &count, sizeof count);
        }
        if (r == 0 && !DaemonAlive()) {
          lock.lock();
          reaping = false;
          cq_cv.notify_all();
          return Waited::kClosed;
        }
      }
      lock.lock();
      reaping = false;
      // Threads that waited because this one was reaping take over: this
      // one may return next without reaping (another thread reaped its
      // completion meanwhile), and then nobody would wake them.
      cq_cv.notify_all();
    }
  }

  bool DaemonAlive() const {
    pollfd p{socket, POLLRDHUP, 0};
    return poll(&p, 1, 0) == 0;
  }
};

}  // namespace isometry::client
