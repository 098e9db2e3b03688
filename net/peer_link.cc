#include "net/peer_link.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <system_error>

#include "core/log_escape.h"
#include "core/log_limiter.h"
#include "core/thread_name.h"
#include "core/thread_nice.h"
#include "core/thread_slice.h"
#include "layout/executor.h"
#include "net/peer_link_conn.h"

namespace isometry::net {

using Clock = std::chrono::steady_clock;

// ---- Completer ----

Completer::Completer() {
  thread_ = std::thread([this] {
    NameThisThread("link-complete");
    Run();
  });
}

void Completer::Run() {
  while (true) {
    std::function<void()> fn;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &Completer::ReadyLocked));
      if (queue_.empty()) return;
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    fn();
  }
}

Completer::~Completer() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void Completer::Post(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(fn));
}

// ---- connections ----

PeerLink::PeerLink(std::string peer, const DataOptions& options, Completer* completer,
                   std::function<void(const Status&, uint64_t)> on_down)
    : peer_(std::move(peer)),
      options_(options),
      completer_(completer),
      on_down_(std::move(on_down)),
      limiter_(options.rate_limit_bytes_per_s ? options.rate_limit_bytes_per_s : 1) {}

PeerLink::~PeerLink() {
  {
    // First: no resume, and no down report to a cluster going away.
    absl::MutexLock lock(&mu_);
    stop_resumer_ = true;
  }
  Fail(absl::CancelledError(StrCat("data link to peer '", peer_, "' closed")));
  if (resumer_.joinable()) resumer_.join();
  std::vector<std::shared_ptr<Conn>> old;
  {
    absl::MutexLock lock(&mu_);
    old.swap(closed_);
  }
  old.clear();  // joins, without the lock the threads may still take
}

std::string PeerLink::security() const {
  absl::MutexLock lock(&mu_);
  if (out_.empty()) return "";
  const Conn& c = *out_.front();
  const Wire& w = *c.wire;
  return StrCat(!w.tls()                         ? "plain"
                : w.ktls_send() && w.ktls_recv() ? "TLS 1.3, kTLS"
                : w.ktls_send()                  ? "TLS 1.3, kTLS send"
                                                 : "TLS 1.3",
                c.checksum ? ", checksums" : "");
}

int PeerLink::outgoing() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(out_.size());
}
int PeerLink::incoming() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(in_.size());
}
bool PeerLink::receiving() const {
  absl::MutexLock lock(&mu_);
  return ReceivingLocked();
}
uint64_t PeerLink::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}
uint64_t PeerLink::bytes_sent() const {
  absl::MutexLock lock(&mu_);
  return sent_;
}
uint64_t PeerLink::express_bytes_sent() const {
  absl::MutexLock lock(&mu_);
  return express_sent_;
}
uint64_t PeerLink::resumes() const {
  absl::MutexLock lock(&mu_);
  return resumes_;
}
uint64_t PeerLink::bytes_received() const {
  absl::MutexLock lock(&mu_);
  return received_;
}

Status PeerLink::AddIncoming(std::unique_ptr<Wire> wire, bool checksum, bool express) {
  auto c = std::make_shared<Conn>();
  c->wire = std::move(wire);
  c->checksum = checksum;
  c->express = express;
  TuneSocket(c->wire->fd(), options_.timeout_ms, options_.unsent_limit_bytes);
  Heard(Clock::now());  // its hello answered this node's challenge
  absl::MutexLock lock(&mu_);
  if (static_cast<int>(in_.size()) >= SetSize()) {
    // The peer opened a new set (it reconnected before this node saw the
    // old one break): the oldest connections are stale, and what went
    // over them is credited and ACKed again once the new set is in.
    std::vector<std::function<void()>> calls;
    in_.front()->Close(calls, Unavailable("replaced"));
    closed_.push_back(in_.front());
    in_.erase(in_.begin());
    for (auto& fn : calls) completer_->Post(std::move(fn));
    if (!in_down_since_) {
      in_down_since_ = Clock::now();
      in_down_why_ = Unavailable("peer '", peer_, "' opened a new set of data connections");
      fresh_in_ = 0;
    }
  }
  in_.push_back(c);
  if (Status s = StartConn(c); !s.ok()) {
    std::vector<std::function<void()>> calls;
    c->Close(calls, s);
    closed_.push_back(c);
    in_.pop_back();
    for (auto& fn : calls) completer_->Post(std::move(fn));
    return s;
  }
  if (in_down_since_ && ++fresh_in_ >= SetSize()) {
    RecreditLocked();
    spdlog::info("data link from peer '{}': resumed on {} new connection(s) from {} after {} ms",
                 peer_, in_.size(), c->wire->remote(), MsSince(*in_down_since_));
    in_down_since_.reset();
  }
  return OkStatus();
}

Status PeerLink::StartConn(const std::shared_ptr<Conn>& c) {
  Conn* raw = c.get();
  // The threads use the raw pointer: the link's vectors own the Conn and
  // destroy it (joining them) only from other threads.
  try {
    // The express connection's threads carry small chunks: a short slice
    // (core/thread_slice.h).
    raw->reader = std::thread([this, raw] {
      NameThisThread(raw->express ? "link-read-x" : "link-read");
      if (raw->express) RequestShortSlice();
      Reader(raw);
    });
    raw->writer = std::thread([this, raw] {
      NameThisThread(raw->express ? "link-write-x" : "link-write");
      if (raw->express) RequestShortSlice();
      Writer(raw);
    });
  } catch (const std::system_error& e) {
    return absl::ResourceExhaustedError(StrCat("data connection with peer '", peer_, "' (",
                                               raw->wire->remote(),
                                               "): cannot start its thread: ", e.what()));
  }
  return OkStatus();
}

void PeerLink::Fail(const Status& why, bool notify) {
  std::vector<std::function<void()>> calls;
  bool had = false;
  uint64_t generation;
  std::string address;
  {
    absl::MutexLock lock(&mu_);
    had = !out_.empty() || !in_.empty() || ResumingLocked();
    notify = notify && !stop_resumer_;
    generation = generation_;
    address = address_;
    FailLocked(why, calls);
  }
  for (auto& fn : calls) completer_->Post(std::move(fn));
  if (had) {
    spdlog::warn("data link to peer '{}' ({}) is down: {}", peer_,
                 address.empty() ? "not connected" : address, ForLog(why.ToString(), 512));
    if (notify && on_down_) on_down_(why, generation);
  }
}

void PeerLink::FailLocked(const Status& why, std::vector<std::function<void()>>& calls) {
  ++epoch_;  // a reconnect under way is not installed
  out_down_since_.reset();
  in_down_since_.reset();
  acked_.clear();
  acked_keys_.clear();
  for (auto* v : {&out_, &in_}) {
    for (auto& c : *v) {
      c->Close(calls, why);
      closed_.push_back(c);
    }
    v->clear();
  }
  for (auto* m : {&posted_, &waiting_credit_, &unacked_}) {
    for (auto& [key, r] : *m) calls.push_back([d = std::move(r.done), why] { d(why); });
    m->clear();
  }
  credits_.clear();
  landed_part_.clear();
  resent_.clear();
  resend_asked_.clear();
}

void PeerLink::FailConn(Conn* c, const Status& why) {
  if (c->Closing()) return;  // closed on purpose
  std::vector<std::function<void()>> calls;
  {
    absl::MutexLock lock(&mu_);
    SuspendLocked(
        c,
        Unavailable(StrCat("peer '", peer_, "': data connection ", c->outgoing ? "to " : "from ",
                           c->wire->remote(), " lost: ", why.message())),
        calls);
  }
  for (auto& fn : calls) completer_->Post(std::move(fn));
}

// ---- requests ----

bool PeerLink::RefusedLocked(uint64_t transfer, bool connected, const char* unconnected,
                             ChunkDone& done) {
  Status why;
  if (auto d = dead_.find(transfer); d != dead_.end()) {
    why = d->second.first;
  } else if (!connected) {
    why = Unavailable("peer '", peer_, "' ", unconnected);
  } else {
    return false;
  }
  completer_->Post([done = std::move(done), why] { done(why); });
  return true;
}

void PeerLink::Send(const Chunk& chunk, ChunkDone done) {
  const Key key{chunk.transfer, chunk.chunk};
  absl::MutexLock lock(&mu_);
  if (RefusedLocked(key.first, !out_.empty() || out_down_since_.has_value(),
                    "is not connected (no data connection)", done)) {
    return;
  }
  if (waiting_credit_.count(key)) {
    completer_->Post([done = std::move(done), key] {
      done(absl::InternalError(
          StrCat("chunk ", key.second, " of transfer ", key.first, " submitted twice")));
    });
    return;
  }
  WaitForCreditLocked(key, Request{chunk, std::move(done)});
}

void PeerLink::WaitForCreditLocked(const Key& key, Request r) {
  auto credit = credits_.find(key);
  if (!out_.empty() && credit != credits_.end()) {
    r.from = credit->second;
    credits_.erase(credit);
    SendLocked(std::move(r));
  } else {
    waiting_credit_.insert_or_assign(key, std::move(r));
  }
}

PeerLink::Conn& PeerLink::OutFor(const Request& r) {
  const CopyProgram* program = r.chunk.program.get();
  const bool express = out_.back()->express;  // the set's last (OpenSet)
  if (express && program && DestinationSpan(*program) - r.from <= kExpressChunkBytes) {
    return *out_.back();
  }
  return *out_[r.chunk.chunk % (express ? out_.size() - 1 : out_.size())];
}

void PeerLink::SendLocked(Request r) {
  Conn& to = OutFor(r);
  Enqueue(to, Job::Data(std::move(r)));
}

void PeerLink::Post(const Chunk& chunk, ChunkDone done) {
  const Key key{chunk.transfer, chunk.chunk};
  absl::MutexLock lock(&mu_);
  if (RefusedLocked(key.first, ReceivingLocked(), "has no data connection to this node", done)) {
    return;
  }
  if (posted_.count(key)) {
    completer_->Post([done = std::move(done), key] {
      done(absl::InternalError(
          StrCat("chunk ", key.second, " of transfer ", key.first, " posted twice")));
    });
    return;
  }
  posted_.emplace(key, Request{chunk, std::move(done)});
  if (in_.empty() || in_down_since_) return;  // credited when the peer's new set is in
  AnswerOverInLocked(FrameType::kCredit, key);
}

void PeerLink::AnswerOverInLocked(FrameType type, const Key& key) {
  Job j = Job::Answer(type, key);
  if (auto part = landed_part_.find(key);
      type == FrameType::kCredit && part != landed_part_.end()) {
    j.header.code = static_cast<uint32_t>(part->second);  // chunks are at most 1 GiB
  }
  Enqueue(*in_[key.second % in_.size()], std::move(j));
}

void PeerLink::Abandon(uint64_t transfer, const Status& why) {
  std::vector<std::function<void()>> calls;
  {
    absl::MutexLock lock(&mu_);
    AbandonLocked(transfer, why, calls);
    Job j;
    j.header.type = FrameType::kAbort;
    j.header.transfer = transfer;
    j.header.code = static_cast<uint32_t>(why.code());
    j.control = std::string(why.message()).substr(0, kMaxControlPayload);
    j.header.length = j.control.size();
    if (!out_.empty()) {
      Enqueue(*out_.front(), std::move(j));
    } else if (!in_.empty()) {
      Enqueue(*in_.front(), std::move(j));
    }
  }
  for (auto& fn : calls) completer_->Post(std::move(fn));
}

void PeerLink::AbandonLocked(uint64_t transfer, const Status& why,
                             std::vector<std::function<void()>>& calls) {
  PruneDeadLocked();
  dead_[transfer] = {why, Clock::now()};
  for (auto* m : {&posted_, &waiting_credit_, &unacked_}) {
    auto it = m->lower_bound({transfer, 0});
    while (it != m->end() && it->first.first == transfer) {
      calls.push_back([d = std::move(it->second.done), why] { d(why); });
      it = m->erase(it);
    }
  }
  for (auto* set : {&resent_, &resend_asked_, &corrupted_, &dropped_}) {
    set->erase(set->lower_bound({transfer, 0}), set->lower_bound({transfer + 1, 0}));
  }
  for (auto* m : {&credits_, &landed_part_}) {
    m->erase(m->lower_bound({transfer, 0}), m->lower_bound({transfer + 1, 0}));
  }
}

void PeerLink::PruneDeadLocked() {
  // A transfer's halves end within a timeout of each other; a minute later
  // nothing of it can still arrive.
  const auto cutoff = Clock::now() - std::chrono::minutes(1);
  for (auto it = dead_.begin(); it != dead_.end();) {
    it = it->second.second < cutoff ? dead_.erase(it) : std::next(it);
  }
}

void PeerLink::OnAbortFrame(const FrameHeader& h, const std::string& message) {
  std::vector<std::function<void()>> calls;
  {
    absl::MutexLock lock(&mu_);
    if (dead_.count(h.transfer)) return;  // we ended it first
    const Status why(ErrorCodeFromWire(h.code),
                     StrCat("peer '", peer_, "' ended the transfer: ", message));
    AbandonLocked(h.transfer, why, calls);
  }
  for (auto& fn : calls) completer_->Post(std::move(fn));
}

void PeerLink::Enqueue(Conn& c, Job job) {
  absl::MutexLock lock(&c.mu);
  if (!job.data) {
    // Control frames overtake queued DATA: credits and aborts are small and
    // what the other side waits for.
    c.control.push_back(std::move(job));
  } else {
    const Chunk& chunk = job.data->chunk;
    const uint64_t bytes = chunk.program ? chunk.program->bytes : 0;
    c.data.Push(chunk.qos_class, chunk.qos_weight, chunk.priority, bytes, std::move(job));
  }
}

// ---- threads ----

void PeerLink::Writer(Conn* c) {
  while (true) {
    Job job;
    {
      absl::MutexLock lock(&c->mu);
      c->mu.Await(absl::Condition(c, &Conn::WriterHasWorkLocked));
      if (c->closing) return;
      if (!c->control.empty()) {
        job = std::move(c->control.front());
        c->control.pop_front();
      } else {
        job = c->data.Pop();
      }
    }
    if (job.data) {
      const Key key{job.data->chunk.transfer, job.data->chunk.chunk};
      std::optional<Status> dead;
      {
        absl::MutexLock lock(&mu_);
        if (auto d = dead_.find(key.first); d != dead_.end()) {
          dead = d->second.first;
        } else if (c->Closing()) {
          // Its set broke after the job left the queue: it waits for the
          // resume's credit, or goes out on the new set when that credit
          // came already (this thread may run only after the resume); it
          // fails only with the link.
          if (out_down_since_ || !out_.empty()) {
            WaitForCreditLocked(key, std::move(*job.data));
            continue;
          }
          dead = Unavailable("peer '", peer_, "': the data link closed");
        } else {
          // Held until the receiver's ACK (a RESEND, or a resume after a
          // drop, needs the bytes); before it is sent, since the answer
          // may come back first.
          Chunk chunk = job.data->chunk;
          const uint64_t from = job.data->from;
          unacked_.insert_or_assign(key, std::move(*job.data));
          job.data = Request{std::move(chunk), nullptr, from};
        }
      }
      if (dead) {
        job.data->done(*dead);
        continue;
      }
    }
    // A chunk whose write fails stays held: the drop's resume sends it
    // again, or the link's failure fails it.
    Status s = WriteJob(*c, job);
    if (!s.ok()) {
      FailConn(c, s);
      return;
    }
  }
}

Status PeerLink::WriteJob(Conn& c, Job& job) {
  if (!job.data) return c.wire->SendFrame(job.header, job.control.data());
  const Chunk& chunk = job.data->chunk;
  const CopyProgram& program = *chunk.program;
  const uint64_t span = DestinationSpan(program);
  // The receiver holds the bytes before `from` (its credit said so).
  const uint64_t from = job.data->from;
  if (from > 0 && from >= span) {
    return absl::DataLossError(StrCat("peer '", peer_, "' asked for chunk ", chunk.chunk,
                                      " from byte ", from, " of its ", span));
  }
  FrameHeader& h = job.header;
  h.transfer = chunk.transfer;
  h.chunk = chunk.chunk;
  h.code = static_cast<uint32_t>(from);
  h.length = span - from;
  const auto until = options_.rate_limit_bytes_per_s ? limiter_.Reserve(h.length) : Clock::now();
  {
    // At the chunk's class value while its bytes go out, and only then
    // (core/thread_nice.h).
    ClassNiceScope nice(chunk.qos_nice);
    const std::byte* src = chunk.memory;
    const std::byte* payload;
    if (WireIsOneRun(program, /*wire_is_dst=*/true)) {
      payload = src + program.ops[0].src_offset;  // straight from memory
    } else {
      c.send_bounce.resize(span);
      ExecuteProgram(program, src, c.send_bounce.data());
      payload = c.send_bounce.data();
    }
    if (c.checksum) {
      h.flags |= kFlagChecksum;
      h.checksum = XXH3_64bits(payload + from, h.length);
    }
    ISO_RETURN_IF_ERROR(c.wire->SendFrame(h, payload + from));
  }
  {
    // Counted as sent before the pacing sleep: the receiver may ACK the
    // chunk, and its copy complete, meanwhile.
    absl::MutexLock lock(&mu_);
    sent_ += h.length;
    if (c.express) express_sent_ += h.length;
  }
  std::this_thread::sleep_until(until);
  return OkStatus();
}

void PeerLink::Reader(Conn* c) {
  c->reader_tid = gettid();
  while (true) {
    FrameHeader h;
    Status s = c->wire->Recv(&h, sizeof h);
    if (s.ok()) {
      const auto now = Clock::now();
      c->last_frame_ns = now.time_since_epoch().count();
      Heard(now);
      s = CheckHeader(h);
    }
    if (s.ok()) {
      switch (h.type) {
        case FrameType::kData:
          s = c->outgoing ? absl::DataLossError("DATA on an outgoing connection")
                          : ReceiveData(*c, h);
          break;
        case FrameType::kCredit: {
          if (!c->outgoing) {
            s = absl::DataLossError("CREDIT on an incoming connection");
            break;
          }
          absl::MutexLock lock(&mu_);
          const Key key{h.transfer, h.chunk};
          // Sent already (a credit repeated after a drop): the ACK or the
          // next resume settles it.
          if (dead_.count(h.transfer) || out_.empty() || unacked_.count(key)) break;
          auto it = waiting_credit_.find(key);
          if (it == waiting_credit_.end()) {
            // Early credits are bounded by what the peer's runtime posts;
            // a flood of unsolicited ones is a broken peer.
            if (credits_.size() >= (1u << 20)) {
              s = absl::DataLossError("more than 2^20 credits for chunks never sent");
              break;
            }
            credits_.insert_or_assign(key, h.code);
            break;
          }
          it->second.from = h.code;
          SendLocked(std::move(it->second));
          waiting_credit_.erase(it);
          break;
        }
        case FrameType::kAck:
        case FrameType::kResend:
          s = c->outgoing ? OnAnswer(*c, h)
                          : absl::DataLossError("ACK or RESEND on an incoming connection");
          break;
        case FrameType::kAbort: {
          std::string message(h.length, '\0');
          s = c->wire->Recv(message.data(), h.length);
          if (s.ok()) OnAbortFrame(h, message);
          break;
        }
        case FrameType::kHello:
        case FrameType::kChallenge:
        case FrameType::kProof:
          s = absl::DataLossError("unexpected hello frame after the hello");
          break;
      }
    }
    if (!s.ok()) {
      FailConn(c, s);
      return;
    }
  }
}

}  // namespace isometry::net
