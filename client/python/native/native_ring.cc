// The extension's completion reader (native_ring.h).
#include "client/python/native/native_ring.h"

#include <chrono>
#include <utility>

#include "client/python/native/native_errors.h"
#include "core/copy_options.h"

namespace isometry::python {

Result<uint64_t> RingReader::Submit(const std::shared_ptr<client::Client>& c,
                                    const client::Instance& src, const client::Instance& dst,
                                    int priority, uint64_t* transfer) {
  {
    std::lock_guard lock(mu_);
    if (stop_) return FailedPrecondition("this native session is closed");
    if (!started_) {
      started_ = true;
      client_ = c;
      thread_ = std::thread([this] { Run(); });
    }
    ++pending_;
  }
  const CopyOptions options{.priority = priority};
  Result<uint64_t> ticket =
      transfer ? c->SubmitTracked(src, dst, options) : c->Submit(src, dst, options);
  Status refused;
  if (ticket.ok() && transfer) {
    const Result<uint64_t> id = c->TransferOf(*ticket);
    if (id.ok()) {
      *transfer = *id;
    } else {
      refused = id.status();
    }
  }
  std::lock_guard lock(mu_);
  if (!ticket.ok()) {
    --pending_;
    return ticket;
  }
  tickets_.push_back(*ticket);
  work_cv_.notify_one();
  if (!refused.ok()) return refused;
  return ticket;
}

void RingReader::Run() {
  std::unique_lock lock(mu_);
  while (true) {
    work_cv_.wait(lock, [this] { return !tickets_.empty() || stop_; });
    if (tickets_.empty()) break;  // stopped, nothing in flight
    const uint64_t ticket = tickets_.front();
    tickets_.pop_front();
    lock.unlock();
    client::Completion c = client_->Wait(ticket);
    const bool gone = c.transfer == 0 && absl::IsUnavailable(c.status) && !client_->alive();
    lock.lock();
    done_.push_back(
        {ticket, c.transfer, CodeName(c.status.code()), std::string(c.status.message())});
    if (gone) {
      // The daemon closed the session: no other completion comes.
      for (uint64_t t : tickets_) done_.push_back({t, 0, done_.back().code, done_.back().message});
      tickets_.clear();
    }
    done_cv_.notify_all();
  }
  ended_ = true;
  done_cv_.notify_all();
  std::shared_ptr<client::Client> last = std::move(client_);
  lock.unlock();
  last.reset();  // the session may end here (the Python session closed)
}

std::vector<RingDone> RingReader::Take(int timeout_ms, bool* ended) {
  std::unique_lock lock(mu_);
  done_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                    [this] { return !done_.empty() || ended_ || (stop_ && !started_); });
  std::vector<RingDone> out;
  out.swap(done_);
  pending_ -= out.size();
  *ended = out.empty() && (ended_ || (stop_ && !started_));
  return out;
}

void RingReader::Stop() {
  std::lock_guard join(join_mu_);
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    work_cv_.notify_all();
    done_cv_.notify_all();
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
