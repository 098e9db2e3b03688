// Resume of a PeerLink after a dropped connection (peer_link.h): nothing
// in flight is lost while the peer comes back within timeout_ms.
//
// Each direction is a set of connections that breaks as a whole: the
// sending side closes its set, takes back every chunk the receiver has
// not ACKed (queued, being written, or written and unanswered) and
// reconnects; the receiving side closes its set, keeps what it posted
// (a chunk half-landed is posted again) and, once the peer's new set is
// in, credits it all again and repeats the ACKs of the last few timeouts
// (one may have been lost with the old set). A chunk lands at most once
// per credit, over the same bytes, so a repeat is harmless.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <system_error>
#include <thread>

#include "core/log_escape.h"
#include "core/thread_name.h"
#include "net/peer_link.h"
#include "net/peer_link_conn.h"

namespace isometry::net {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

void PeerLink::SuspendLocked(Conn* c, const Status& why,
                             std::vector<std::function<void()>>& calls) {
  auto& set = c->outgoing ? out_ : in_;
  auto& since = c->outgoing ? out_down_since_ : in_down_since_;
  if (std::find_if(set.begin(), set.end(), [c](const auto& x) { return x.get() == c; }) ==
      set.end()) {
    return;  // an older set's connection: that drop is handled already
  }
  std::deque<Job> leftover;
  for (auto& x : set) {
    x->Close(calls, why, &leftover, /*keep_data=*/c->outgoing);
    closed_.push_back(x);
  }
  set.clear();
  // The peer's new set counts from none: connections of a set that broke
  // half-way in (the peer's reconnect failed) are gone with it.
  if (!c->outgoing) fresh_in_ = 0;
  if (!since) {
    since = Clock::now();
    ++resumes_;
    (c->outgoing ? out_down_why_ : in_down_why_) = why;
    spdlog::warn("{}; {} for up to {} ms", ForLog(why.ToString(), 512),
                 c->outgoing ? "reconnecting" : "waiting for the peer to reconnect",
                 options_.timeout_ms);
  }
  if (c->outgoing) {
    // Everything not ACKed waits for the receiver's new credit; early
    // credits are void (the receiver credits again).
    for (Job& j : leftover) {
      if (!j.data) continue;
      const Chunk& chunk = j.data->chunk;
      // A transfer abandoned while this chunk sat in the queue (Abandon
      // cannot reach it there) ends it now: no credit comes for it again,
      // and held for one it would keep its transfer running for good.
      if (auto d = dead_.find(chunk.transfer); d != dead_.end()) {
        calls.push_back([done = std::move(j.data->done), why = d->second.first] { done(why); });
        continue;
      }
      waiting_credit_.insert_or_assign(Key{chunk.transfer, chunk.chunk}, std::move(*j.data));
    }
    for (auto& [key, r] : unacked_) waiting_credit_.insert_or_assign(key, std::move(r));
    unacked_.clear();
    credits_.clear();
  }
  if (!StartResumerLocked()) {
    // No resume without its thread: the link fails (what is in flight
    // with it) and comes back with the next hello.
    FailLocked(absl::ResourceExhaustedError(
                   StrCat("data link with peer '", peer_, "': cannot start its resume thread")),
               calls);
  }
}

bool PeerLink::StartResumerLocked() {
  if (resumer_.joinable()) return true;
  try {
    resumer_ = std::thread([this] {
      NameThisThread("link-resume");
      Resumer();
    });
  } catch (const std::system_error& e) {
    spdlog::error("data link with peer '{}': cannot start its resume thread: {}", peer_, e.what());
    return false;
  }
  return true;
}

void PeerLink::Heard(Clock::time_point when) {
  const int64_t ns = when.time_since_epoch().count();
  int64_t seen = last_heard_ns_.load();
  while (seen < ns && !last_heard_ns_.compare_exchange_weak(seen, ns)) {
  }
}

Clock::time_point PeerLink::last_heard() const {
  return Clock::time_point(Clock::duration(last_heard_ns_.load()));
}

int64_t PeerLink::SilentMsLocked(Clock::time_point since) const {
  return MsSince(std::max(since, last_heard()));
}

std::optional<Status> PeerLink::StalledLocked() const {
  if (unacked_.empty() || out_.empty() || out_down_since_) return std::nullopt;
  // A retransmission timeout is at least 200 ms; one with no ACK since
  // for this long is an outage, not a loss that TCP repairs on its own.
  const uint32_t stall_ms = std::max<uint32_t>(250, options_.timeout_ms / 12);
  for (const auto& c : out_) {
    tcp_info info{};
    socklen_t len = sizeof info;
    if (::getsockopt(c->wire->fd(), IPPROTO_TCP, TCP_INFO, &info, &len) != 0) continue;
    if (info.tcpi_unacked == 0 || info.tcpi_backoff == 0 || info.tcpi_last_ack_recv < stall_ms) {
      continue;
    }
    return Unavailable("peer '", peer_, "': data connection to ", c->wire->remote(),
                       " stalled: no ACK for ", info.tcpi_last_ack_recv, " ms after ",
                       static_cast<int>(info.tcpi_backoff),
                       " retransmission timeout(s); re-opening the data connections");
  }
  return std::nullopt;
}

bool PeerLink::WaitForTrouble(bool& idle) {
  idle = false;
  while (true) {
    std::vector<std::function<void()>> calls;
    {
      absl::MutexLock lock(&mu_);
      if (stop_resumer_) return false;
      if (ResumingLocked()) return true;
      idle = true;
      // Only a set with chunks on the wire can stall; until one is, no
      // watch (it costs a getsockopt per connection).
      mu_.Await(absl::Condition(this, &PeerLink::WatchWakeLocked));
      mu_.AwaitWithTimeout(absl::Condition(this, &PeerLink::ResumerWakeLocked),
                           absl::Milliseconds(50));
      if (stop_resumer_) return false;
      if (ResumingLocked()) return true;
      if (std::optional<Status> why = StalledLocked()) {
        SuspendLocked(out_.front().get(), *why, calls);
      }
    }
    for (auto& fn : calls) completer_->Post(std::move(fn));
  }
}

void PeerLink::Nudge(Clock::time_point since) {
  std::vector<std::function<void()>> calls;
  {
    absl::MutexLock lock(&mu_);
    if (ResumingLocked() || (posted_.empty() && unacked_.empty() && waiting_credit_.empty())) {
      return;
    }
    const int64_t t = since.time_since_epoch().count();
    for (const auto* set : {&out_, &in_}) {
      for (const auto& c : *set) {
        if (c->last_frame_ns.load() >= t) return;  // alive through it
      }
    }
    const Status why = Unavailable("peer '", peer_,
                                   "': no data frame since its pings went unanswered; "
                                   "re-opening the data connections");
    if (!out_.empty()) SuspendLocked(out_.front().get(), why, calls);
    if (!in_.empty()) SuspendLocked(in_.front().get(), why, calls);
  }
  for (auto& fn : calls) completer_->Post(std::move(fn));
}

void PeerLink::NoteAckLocked(const Key& key) {
  const auto now = Clock::now();
  // An ACK can be lost only with its set, which breaks within a timeout
  // and is back (or failed) within another: older ones need no repeat.
  const auto keep = std::chrono::milliseconds(4 * uint64_t{options_.timeout_ms} + 1000);
  while (!acked_.empty() && now - acked_.front().first > keep) {
    acked_keys_.erase(acked_keys_.find(acked_.front().second));
    acked_.pop_front();
  }
  acked_.emplace_back(now, key);
  acked_keys_.insert(key);
}

void PeerLink::RecreditLocked() {
  if (in_.empty()) return;
  for (const auto& [key, r] : posted_) AnswerOverInLocked(FrameType::kCredit, key);
  for (const auto& [when, key] : acked_) {
    if (!dead_.count(key.first)) AnswerOverInLocked(FrameType::kAck, key);
  }
  spdlog::info("data link from peer '{}': {} chunk(s) credited again, {} ACK(s) repeated", peer_,
               posted_.size(), acked_.size());
}

bool PeerLink::MaybeDropLocked(Conn& c, const std::optional<uint64_t>& option, const Key& key) {
  if (!option || *option != key.second) return false;
  if (!dropped_.insert(key).second) return false;
  spdlog::warn("fault injection: dropping the data connection {} {} at chunk {} of transfer {}",
               c.outgoing ? "to" : "from", c.wire->remote(), key.second, key.first);
  c.wire->Shutdown();
  return true;
}

void PeerLink::StallAfterDrop() const {
  if (options_.drop_stall_ms == 0) return;
  spdlog::warn("fault injection: the dropping thread stalls for {} ms", options_.drop_stall_ms);
  std::this_thread::sleep_for(std::chrono::milliseconds(options_.drop_stall_ms));
}

std::optional<Status> PeerLink::GiveUpLocked(IdleAt& idle_at) {
  // A direction with nothing waiting on it has no limit: an idle set the
  // keepalive broke during an outage loses nothing while the peer takes
  // its time to re-open it (it notices only at its own keepalive), and
  // failing the link for it would fail the copies of the other direction.
  // The cluster's pings still fail a link whose peer is gone.
  // Otherwise the limit counts from the latest of the drop, the last time
  // the direction was idle and the last time the peer was heard (a frame,
  // a ping answered, a hello); a set that cannot be re-opened while the
  // peer answers otherwise is given up after three limits.
  const auto limit = static_cast<int64_t>(options_.timeout_ms);
  struct Direction {
    const std::optional<Clock::time_point>& since;
    const Status& why;
    bool waiting;
  };
  const std::array<Direction, 2> dirs = {
      Direction{out_down_since_, out_down_why_, !waiting_credit_.empty() || !unacked_.empty()},
      Direction{in_down_since_, in_down_why_, !posted_.empty()}};
  for (size_t d = 0; d < dirs.size(); ++d) {
    const auto& since = dirs[d].since;
    if (!since) {
      idle_at[d].reset();
    } else if (!dirs[d].waiting) {
      idle_at[d] = Clock::now();
    } else {
      const Clock::time_point from = std::max(*since, idle_at[d].value_or(*since));
      if (SilentMsLocked(from) >= limit || MsSince(from) >= 3 * limit) return dirs[d].why;
    }
  }
  return std::nullopt;
}

void PeerLink::Resumer() {
  // Short attempts, retried soon: a SYN lost in an outage is retried by
  // the kernel only a second later, and the link may be back long before;
  // they grow only when they keep failing (a long round trip). The TLS
  // handshake and the hello are bounded too, so an attempt cut half-way
  // is retried well within the time limit.
  const uint32_t t = options_.timeout_ms;
  const uint32_t first_connect_ms = std::clamp<uint32_t>(t / 30, 50, 250);
  const uint32_t hello_ms = std::clamp<uint32_t>(t / 3, 100, 1000);
  auto backoff = std::chrono::milliseconds(25);
  int attempts = 0;
  // When each direction (out, in) was last down with nothing waiting on it.
  IdleAt idle_at;
  while (true) {
    bool idle = false;
    if (!WaitForTrouble(idle)) return;
    if (idle) {
      backoff = std::chrono::milliseconds(25);
      attempts = 0;
    }
    std::string address;
    uint32_t self_node = 0;
    Prover prove;
    uint64_t epoch = 0;
    std::optional<Status> give_up;
    bool reconnect = false;
    {
      absl::MutexLock lock(&mu_);
      if (stop_resumer_) return;
      give_up = GiveUpLocked(idle_at);
      reconnect = out_down_since_ && out_.empty() && !address_.empty() && prove_;
      address = address_;
      self_node = self_node_;
      prove = prove_;
      epoch = epoch_;
    }
    if (give_up) {
      Fail(
          Unavailable("peer '", peer_, "' unreachable for ", t, " ms after: ", give_up->message()));
      continue;
    }
    if (reconnect) {
      const uint32_t connect_ms =
          std::min<uint32_t>(first_connect_ms << std::min(attempts / 4, 4), t / 2);
      ++attempts;
      Status s = OpenSet(address, self_node, prove, epoch, connect_ms, hello_ms);
      if (s.ok()) continue;
      if (IsConnectionRefused(s) || absl::IsPermissionDenied(s) || absl::IsUnauthenticated(s) ||
          absl::IsFailedPrecondition(s)) {
        // Nothing listens there any more, or the peer no longer knows this
        // node's session: its daemon restarted; waiting cannot help.
        Fail(Unavailable("peer '", peer_, "' refused the data link's reconnection: ", s.message()));
        continue;
      }
    }
    absl::MutexLock lock(&mu_);
    const absl::Time until = absl::Now() + absl::FromChrono(backoff);
    mu_.AwaitWithDeadline(absl::Condition(&stop_resumer_), until);
    backoff = std::min<std::chrono::milliseconds>(backoff * 2, std::chrono::milliseconds(50));
  }
}

}  // namespace isometry::net
