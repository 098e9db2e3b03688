// The extension's ring copies and their completion reader (native_ring.h).
#include "client/python/native/native_ring.h"

#include <unistd.h>

#include <chrono>
#include <optional>
#include <utility>

#include "client/python/native/native_errors.h"

namespace isometry::python {

Result<uint64_t> RingReader::Submit(const std::shared_ptr<client::Client>& c,
                                    std::shared_ptr<client::Instance> src,
                                    std::shared_ptr<client::Instance> dst,
                                    const CopyOptions& options, bool tracked, bool to_loop) {
  std::lock_guard lock(mu_);
  if (!gone_.ok()) return gone_;
  if (stop_) return FailedPrecondition("this native session is closed");
  if (!started_) {
    started_ = true;
    client_ = c;
    thread_ = std::thread([this] { Run(); });
  }
  const uint64_t id = ++next_job_;
  Job job{id, std::move(src), std::move(dst), options, tracked, to_loop};
  ++pending_;
  // Behind a backlog it waits its turn: copies go on the SQ in order.
  if (!backlog_.empty() || !PushLocked(job)) backlog_.push_back(std::move(job));
  work_cv_.notify_one();
  return id;
}

bool RingReader::PushLocked(const Job& job) {
  const Result<uint64_t> ticket = client_->TrySubmit(*job.src, *job.dst, job.options, job.tracked);
  if (absl::IsResourceExhausted(ticket.status())) return false;
  if (ticket.ok()) {
    on_ring_.push_back({job.id, *ticket, job.to_loop});
    if (job.tracked) tracked_[job.id] = {*ticket, OkStatus()};
  } else {
    // The daemon cannot be told (it is gone): the copy completes with why.
    AddDoneLocked({job.id, job.to_loop, 0, CodeName(ticket.status().code()),
                   std::string(ticket.status().message())});
    if (job.tracked) tracked_[job.id] = {0, ticket.status()};
  }
  if (job.tracked) tracked_cv_.notify_all();
  return true;
}

void RingReader::AddDoneLocked(RingDone d) {
  --pending_;
  std::vector<RingDone>& done = done_[d.to_loop];
  // One wake-up while completions wait untaken: whoever takes, takes
  // them all.
  if (done.empty()) {
    if (d.to_loop) {
      const uint64_t one = 1;
      (void)!::write(event_.get(), &one, sizeof one);
    } else {
      done_cv_.notify_all();
    }
  }
  done.push_back(std::move(d));
}

void RingReader::MoveBacklogLocked() {
  while (!backlog_.empty() && PushLocked(backlog_.front())) backlog_.pop_front();
}

void RingReader::EndBacklogLocked(const Status& why) {
  for (const Job& job : backlog_) {
    AddDoneLocked({job.id, job.to_loop, 0, CodeName(why.code()), std::string(why.message())});
    if (job.tracked) tracked_[job.id] = {0, why};
  }
  backlog_.clear();
  tracked_cv_.notify_all();
}

Result<uint64_t> RingReader::TransferOf(uint64_t job) {
  std::unique_lock lock(mu_);
  // Still in the backlog: move it on as room appears (the reader does
  // too, every kMoveEvery at most).
  while (!tracked_.contains(job)) {
    MoveBacklogLocked();
    if (!tracked_.contains(job)) tracked_cv_.wait_for(lock, std::chrono::milliseconds(1));
  }
  const Tracked t = tracked_[job];
  std::shared_ptr<client::Client> c = client_;
  if (t.ticket == 0 || !c) {
    tracked_.erase(job);
    return t.ticket == 0 ? t.failed : gone_;
  }
  lock.unlock();
  // The reader waits for this ticket only once it is out of tracked_:
  // the client forgets a ticket's id when its completion is taken.
  Result<uint64_t> id = c->TransferOf(t.ticket);
  lock.lock();
  tracked_.erase(job);
  work_cv_.notify_all();
  return id;
}

void RingReader::Run() {
  std::unique_lock lock(mu_);
  while (true) {
    MoveBacklogLocked();
    const auto head_ready = [this] {
      return !on_ring_.empty() && !tracked_.contains(on_ring_.front().job);
    };
    if (!head_ready()) {
      if (on_ring_.empty() && backlog_.empty() && stop_) break;
      // Nothing of ours on the SQ yet the backlog waits: the ring is full
      // of this session's other submissions (its waited copies); look
      // again shortly.
      const auto again = backlog_.empty() || !on_ring_.empty() ? std::chrono::milliseconds(100)
                                                               : std::chrono::milliseconds(1);
      work_cv_.wait_for(lock, again);
      continue;
    }
    const OnRing head = on_ring_.front();
    on_ring_.pop_front();
    lock.unlock();
    // Waits in steps: the copy at the head may run long while others end
    // behind it, and their room takes the backlog on meanwhile.
    std::optional<client::Completion> waited;
    while (!(waited = client_->WaitFor(head.ticket, kMoveEvery))) {
      lock.lock();
      MoveBacklogLocked();
      lock.unlock();
    }
    const client::Completion c = *std::move(waited);
    const bool gone = c.transfer == 0 && absl::IsUnavailable(c.status) && !client_->alive();
    lock.lock();
    AddDoneLocked({head.job, head.to_loop, c.transfer, CodeName(c.status.code()),
                   std::string(c.status.message())});
    if (gone) {
      // The daemon closed the session: no other completion comes.
      const std::string code = CodeName(c.status.code());
      for (const OnRing& r : on_ring_) {
        AddDoneLocked({r.job, r.to_loop, 0, code, std::string(c.status.message())});
        // A tracked one whose id nobody asked yet: TransferOf answers why.
        if (auto t = tracked_.find(r.job); t != tracked_.end()) t->second = {0, c.status};
      }
      on_ring_.clear();
      EndBacklogLocked(c.status);  // wakes TransferOf's waiters too
      gone_ = c.status;
      stop_ = true;
    }
  }
  ended_ = true;
  done_cv_.notify_all();
  std::shared_ptr<client::Client> last = std::move(client_);
  lock.unlock();
  last.reset();  // the session may end here (the Python session closed)
}

std::vector<RingDone> RingReader::Take(int timeout_ms, bool for_loop, bool* ended) {
  std::unique_lock lock(mu_);
  std::vector<RingDone>& done = done_[for_loop];
  if (timeout_ms > 0) {
    done_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                      [&] { return !done.empty() || ended_ || (stop_ && !started_); });
  }
  std::vector<RingDone> out;
  out.swap(done);
  *ended = out.empty() && (ended_ || (stop_ && !started_));
  return out;
}

namespace {
Status ClosedBeforeQueued() {
  return absl::CancelledError("the session closed before the copy reached the daemon");
}
}  // namespace

void RingReader::EndBacklog() {
  std::lock_guard lock(mu_);
  EndBacklogLocked(ClosedBeforeQueued());
}

void RingReader::Stop() {
  std::lock_guard join(join_mu_);
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    EndBacklogLocked(ClosedBeforeQueued());
    work_cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  done_cv_.notify_all();
}

uint64_t RingReader::pending() const {
  std::lock_guard lock(mu_);
  return pending_;
}

}  // namespace isometry::python
