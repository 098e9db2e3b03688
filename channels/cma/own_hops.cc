#include "channels/cma/own_hops.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <deque>
#include <system_error>

#include "core/spin_wait.h"
#include "core/strings.h"
#include "core/thread_name.h"

namespace isometry {

namespace {

using hop_window::DoneEntry;
using hop_window::kHopEntries;
using hop_window::WorkEntry;

// Sleeps while `*word` still holds `seen`, at most `ns` nanoseconds. Not
// FUTEX_PRIVATE_FLAG: the word is in memory shared with the client, whose
// FUTEX_WAKE must reach this process.
void FutexWait(std::atomic<uint32_t>* word, uint32_t seen, long ns) {
  timespec ts{0, ns};
  (void)syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

Status ClientStatus(int32_t code, std::string_view who) {
  if (code == 0) return OkStatus();
  // Codes the client reports are its own: any out of range reads as INTERNAL.
  const auto c =
      code > 0 && code <= 16 ? static_cast<absl::StatusCode>(code) : absl::StatusCode::kInternal;
  return Status(c, StrCat("the hop the client ", who, " runs itself failed there (",
                          absl::StatusCodeToString(c), ")"));
}

}  // namespace

struct OwnHops::Queue {
  absl::Mutex mu;
  std::deque<std::function<void()>> work ABSL_GUARDED_BY(mu);
  bool stop ABSL_GUARDED_BY(mu) = false;

  bool Ready() const ABSL_SHARED_LOCKS_REQUIRED(mu) { return stop || !work.empty(); }
  // Runs work until stopped with none left.
  void Serve() {
    while (true) {
      std::function<void()> next;
      {
        absl::MutexLock lock(&mu);
        mu.Await(absl::Condition(this, &Queue::Ready));
        if (work.empty()) return;
        next = std::move(work.front());
        work.pop_front();
      }
      next();
    }
  }
};

Result<std::shared_ptr<OwnHops>> OwnHops::Create(std::byte* window, uint64_t bytes,
                                                 uint64_t arena_bytes, std::function<void()> wake,
                                                 std::shared_ptr<void> keep,
                                                 std::chrono::milliseconds timeout, std::string who,
                                                 std::shared_ptr<OwnHopsTotals> totals,
                                                 std::chrono::microseconds answer_spin) {
  if (!totals) return Internal("a hop window needs the daemon's totals");
  const std::optional<hop_window::Geometry> g = hop_window::GeometryFor(bytes, arena_bytes);
  if (!g) {
    return InvalidArgument("a hop window of ", bytes, " bytes leaves no data area beside ",
                           arena_bytes, " bytes of programs");
  }
  std::shared_ptr<OwnHops> h(new OwnHops());
  h->window_ = window;
  h->answer_spin_ = answer_spin;
  h->header_ = reinterpret_cast<hop_window::HopWindowHeader*>(window);
  hop_window::InitHeader(*h->header_, *g);
  {
    absl::MutexLock lock(&h->mu_);  // not shared yet; the annotations ask
    hop_window::HopWindowHeader& w = *h->header_;
    h->work_ = {w.work, kHopEntries, &w.work_head, &w.work_tail};
    h->done_ = {w.done, kHopEntries, &w.done_head, &w.done_tail};
  }
  h->data_ = window + g->data_offset;
  h->data_bytes_ = g->data_bytes;
  h->arena_ = window + g->arena_offset;
  h->arena_slot_bytes_ = g->arena_slot_bytes;
  h->wake_ = std::move(wake);
  h->keep_ = std::move(keep);
  h->timeout_ = timeout;
  h->who_ = std::move(who);
  h->totals_ = std::move(totals);
  h->Count(&OwnHopsTotals::windows);
  h->queue_ = std::make_shared<Queue>();
  try {
    h->thread_ = std::thread([q = h->queue_] {
      NameThisThread("own-hops");
      q->Serve();
    });
  } catch (const std::system_error& e) {
    // The task limit (TasksMax=, pids.max, RLIMIT_NPROC): this window is
    // refused, the daemon goes on.
    return ResourceExhausted("cannot start the hop window's thread (", e.what(),
                             "): the daemon is at its task limit");
  }
  return h;
}

OwnHops::~OwnHops() {
  Close();
  if (!queue_) return;
  {
    absl::MutexLock lock(&queue_->mu);
    queue_->stop = true;
  }
  if (!thread_.joinable()) return;  // it never started (Create failed)
  // The last reference may go inside a piece of work (its transfer ended):
  // the thread then finishes on its own, holding only the queue.
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();
  } else {
    thread_.join();
  }
}

void OwnHops::Enqueue(std::function<void()> work) {
  absl::MutexLock lock(&queue_->mu);
  queue_->work.push_back(std::move(work));
}

void OwnHops::Count(std::atomic<uint64_t> OwnHopsTotals::*total) const {
  ((*totals_).*total).fetch_add(1, std::memory_order_relaxed);
}

std::byte* OwnHops::TryTake(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  // Answers to hops given up on free the blocks they held.
  DrainLocked(header_->done_tail.value.load(std::memory_order_acquire));
  if (closed_ || broken_ || bytes == 0 || bytes > data_bytes_) {
    Count(&OwnHopsTotals::not_lent);
    return nullptr;
  }
  // First fit: blocks_ is sorted by offset; try the gap before each block,
  // then the one after the last.
  uint64_t at = 0;
  auto it = blocks_.begin();
  for (; it != blocks_.end(); ++it) {
    if (it->offset - at >= bytes) break;
    at = it->offset + it->bytes;
  }
  if (it == blocks_.end() && data_bytes_ - at < bytes) {
    Count(&OwnHopsTotals::not_lent);
    return nullptr;
  }
  blocks_.insert(it, Block{at, bytes, false});
  return data_ + at;
}

void OwnHops::Give(const std::byte* block) {
  absl::MutexLock lock(&mu_);
  for (auto it = blocks_.begin(); it != blocks_.end(); ++it) {
    if (data_ + it->offset != block) continue;
    if (AbandonedInLocked(*it)) {
      it->given = true;
    } else {
      blocks_.erase(it);
    }
    return;
  }
}

bool OwnHops::AbandonedInLocked(const Block& b) const {
  for (const auto& [id, p] : pending_) {
    if (p.abandoned && p.data >= data_ + b.offset && p.data < data_ + b.offset + b.bytes) {
      return true;
    }
  }
  return false;
}

void OwnHops::ReleaseGivenLocked() {
  std::erase_if(blocks_, [this](const Block& b) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return b.given && !AbandonedInLocked(b);
  });
}

void OwnHops::WakeWaiters() {
  (void)syscall(SYS_futex, reinterpret_cast<uint32_t*>(&header_->done_tail.value), FUTEX_WAKE,
                INT_MAX, nullptr, nullptr, 0);
}

void OwnHops::Close() {
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return;
    closed_ = true;
    totals_->windows.fetch_sub(1, std::memory_order_relaxed);
  }
  if (header_) WakeWaiters();
}

void OwnHops::BreakLocked(const std::string& why) {
  broken_ = true;
  for (auto& [id, p] : pending_) {
    if (!p.status) p.status = FailedPrecondition("client ", who_, " broke its hop window: ", why);
  }
}

void OwnHops::DrainLocked(uint32_t tail) {
  if (broken_) return;
  const std::optional<uint32_t> ready = done_.Ready(tail);
  if (!ready) {
    return BreakLocked(StrCat("done index ", tail, " runs ", tail - done_.head(),
                              " entries past the daemon's ", done_.head()));
  }
  for (uint32_t i = 0; i < *ready; ++i) {
    const DoneEntry e = done_.Take();  // copied once out of shared memory, then checked
    auto it = pending_.find(e.id);
    if (it == pending_.end() || it->second.status) {
      Count(&OwnHopsTotals::bogus);
      continue;
    }
    if (it->second.abandoned) {
      busy_slots_ &= ~(1u << it->second.program_slot);
      pending_.erase(it);
      ReleaseGivenLocked();
      continue;
    }
    it->second.status = ClientStatus(e.code, who_);
  }
  done_.Publish();
}

std::optional<Status> OwnHops::Run(const CopyProgram& program, const std::byte* slot,
                                   uint64_t address, CmaDirection direction,
                                   const std::atomic<bool>* cancelled) {
  uint64_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return Unavailable("client ", who_, " has left; its hop cannot run");
    uint32_t program_slot = kHopEntries;
    for (uint32_t s = 0; s < kHopEntries; ++s) {
      if (!(busy_slots_ & (1u << s))) {
        program_slot = s;
        break;
      }
    }
    std::optional<uint64_t> program_bytes;
    if (!broken_ && program_slot < kHopEntries) {
      program_bytes = hop_window::EncodeProgram(program, arena_ + program_slot * arena_slot_bytes_,
                                                arena_slot_bytes_);
    }
    if (!program_bytes) {
      Count(&OwnHopsTotals::fallbacks);
      return std::nullopt;
    }
    busy_slots_ |= 1u << program_slot;
    id = next_id_++;
    pending_[id] = Pending{program_slot, slot, false, std::nullopt};
    WorkEntry e{};
    e.id = id;
    e.window_offset = static_cast<uint64_t>(slot - window_);
    e.address = address;
    e.program_slot = program_slot;
    e.program_ops = static_cast<uint32_t>(program.ops.size());
    e.direction = static_cast<uint32_t>(direction == CmaDirection::kWrite
                                            ? hop_window::Direction::kIntoClient
                                            : hop_window::Direction::kFromClient);
    e.bytes = program.bytes;
    e.program_bytes = *program_bytes;
    work_.Push(e);
  }
  wake_();
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  bool spun = false;
  while (true) {
    uint32_t seen = 0;
    {
      absl::MutexLock lock(&mu_);
      seen = header_->done_tail.value.load(std::memory_order_acquire);
      DrainLocked(seen);
      auto it = pending_.find(id);
      if (it->second.status) {
        Status s = *std::move(it->second.status);
        busy_slots_ &= ~(1u << it->second.program_slot);
        pending_.erase(it);
        if (s.ok()) Count(&OwnHopsTotals::runs);
        return s;
      }
      Status gave_up;
      if (closed_) {
        gave_up = Unavailable("client ", who_, " left before running its hop");
      } else if (cancelled && cancelled->load(std::memory_order_acquire)) {
        gave_up = absl::CancelledError(StrCat("cancelled while client ", who_, " ran its hop"));
      } else if (std::chrono::steady_clock::now() >= deadline) {
        Count(&OwnHopsTotals::timeouts);
        // The key first: ring completions keep 104 bytes of the message.
        gave_up =
            absl::DeadlineExceededError(StrCat("own_hop_timeout_ms (", timeout_.count(),
                                               ") passed: client ", who_, " did not run its hop"));
      }
      if (!gave_up.ok()) {
        // Its program slot stays busy until the client answers (it may be
        // reading it now) or leaves.
        it->second.abandoned = true;
        if (closed_) {
          busy_slots_ &= ~(1u << it->second.program_slot);
          pending_.erase(it);
          ReleaseGivenLocked();
        }
        return gave_up;
      }
    }
    if (!spun && answer_spin_.count() > 0) {
      // Once per hop: look for the answer a while before sleeping (Create).
      spun = true;
      const auto until = std::chrono::steady_clock::now() + answer_spin_;
      SpinWait wait;  // pauses, a yield every few microseconds
      while (header_->done_tail.value.load(std::memory_order_acquire) == seen &&
             std::chrono::steady_clock::now() < until) {
        wait.Step();
      }
      continue;
    }
    FutexWait(&header_->done_tail.value, seen, 2'000'000);
  }
}

}  // namespace isometry
