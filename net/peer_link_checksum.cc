// The receiving side of every chunk: its DATA landed in place (or where
// it left off when a connection dropped half-way through it), then the
// answer: ACK when it landed (and, with checksums on, its checksum held) or
// RESEND; the sender holds a chunk until then and sends it once more when
// asked (frame.h).
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>

#include "core/log_limiter.h"
#include "core/thread_nice.h"
#include "layout/executor.h"
#include "net/peer_link.h"
#include "net/peer_link_conn.h"

namespace isometry::net {

namespace {

// A chunk arrives in slices of this size: when its connection drops, the
// slices that landed in place stay, and the resume sends only the rest
// (a cut costs the bytes in flight, not every chunk half-sent).
constexpr uint64_t kSlice = 256 << 10;

}  // namespace

Status PeerLink::ReceiveData(Conn& c, const FrameHeader& h) {
  const Key key{h.transfer, h.chunk};
  std::optional<Request> r;
  bool again = false;
  uint64_t have = 0;  // bytes of it in place from an earlier connection
  {
    absl::MutexLock lock(&mu_);
    auto it = posted_.find(key);
    if (it == posted_.end() && acked_keys_.count(key)) {
      // Landed already (its ACK was lost, and a credit repeated after a
      // drop crossed it): the same bytes again, dropped, and ACKed again.
      again = true;
    } else if (it == posted_.end()) {
      if (!dead_.count(h.transfer)) {
        return absl::DataLossError(
            StrCat("chunk ", h.chunk, " of transfer ", h.transfer, " arrived without credit"));
      }
    } else {
      r = std::move(it->second);
      posted_.erase(it);
      if (auto p = landed_part_.find(key); p != landed_part_.end()) have = p->second;
    }
  }
  if (again) {
    ISO_RETURN_IF_ERROR(c.wire->Discard(h.length));
    Answer(c, FrameType::kAck, h);
    return OkStatus();
  }
  if (!r) return c.wire->Discard(h.length);  // the transfer ended meanwhile
  const CopyProgram& program = *r->chunk.program;
  const uint64_t span = SourceSpan(program);
  const uint64_t from = h.code;  // the sender starts where this node's credit said
  if (from > have || h.length != span - from) {
    ISO_RETURN_IF_ERROR(c.wire->Discard(h.length));
    r->done(absl::DataLossError(StrCat("peer '", peer_, "': chunk ", h.chunk, " has ", h.length,
                                       " bytes from byte ", from, ", expected ", span - from, " (",
                                       have, " of its ", span, " in place)")));
    return OkStatus();
  }
  const bool direct = WireIsOneRun(program, /*wire_is_dst=*/false);
  std::byte* const dst = r->chunk.memory;
  std::byte* target;
  if (direct) {
    target = dst + program.ops[0].dst_offset;  // straight into place
  } else {
    c.recv_bounce.resize(span);
    target = c.recv_bounce.data();
  }
  bool dropped = false;
  if (options_.drop_chunk) {  // tests only: no lock a chunk otherwise
    absl::MutexLock lock(&mu_);
    dropped = MaybeDropLocked(c, options_.drop_chunk, key);
  }
  if (dropped) StallAfterDrop();
  const Landed landed = dropped ? Landed{Unavailable("dropped by fault injection"), from}
                                : ReceiveAtClassNice(c, key, target, from, span, r->chunk.qos_nice);
  if (!landed.status.ok()) {
    // Half-landed: posted again, so the resume credits it once more, from
    // where it stopped when its bytes went straight into place (no bounce
    // buffer, no checksum over the whole chunk to check).
    absl::MutexLock lock(&mu_);
    if (auto d = dead_.find(h.transfer); d != dead_.end()) {
      completer_->Post([r = std::move(*r), why = d->second.first]() mutable { r.done(why); });
      return landed.status;
    }
    if (direct && !c.checksum && landed.upto > have) landed_part_[key] = landed.upto;
    posted_.emplace(key, std::move(*r));
    if (c.Closing() && !in_.empty() && !in_down_since_) {
      // `c`'s set was replaced and the new one credited already: this
      // chunk's credit goes over the live set.
      AnswerOverInLocked(FrameType::kCredit, key);
      spdlog::info(
          "data link from peer '{}': chunk {} of transfer {} credited again over the "
          "new connections",
          peer_, key.second, key.first);
    }
    return landed.status;
  }
  ISO_RETURN_IF_ERROR(CheckChunk(c, h, r, target, span));
  if (!r) return OkStatus();  // asked again, or failed
  if (!direct) ExecuteProgram(program, target, dst);
  {
    absl::MutexLock lock(&mu_);
    received_ += h.length;
    landed_part_.erase(key);
  }
  r->done(OkStatus());
  return OkStatus();
}

PeerLink::Landed PeerLink::ReceiveAtClassNice(Conn& c, const Key& key, std::byte* target,
                                              uint64_t from, uint64_t span, int nice) {
  // At the class's value while its bytes come off the socket, and only
  // then (core/thread_nice.h). Meanwhile the peer's kernel drops the
  // connection when this node's window stays shut for timeout_ms (its
  // TCP_USER_TIMEOUT counts a zero window too): a busy node that leaves
  // the reader without a CPU that long gets it lifted back to the
  // daemon's value (LiftStarvedReaders).
  if (nice != 0) c.lowered_since_ns = std::chrono::steady_clock::now().time_since_epoch().count();
  Landed landed;
  {
    ClassNiceScope lowered(nice);
    landed = ReceivePayload(c, key, target, from, span);
  }
  c.lowered_since_ns = 0;
  return landed;
}

void PeerLink::LiftStarvedReaders(std::chrono::nanoseconds after) {
  const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  int lifted = 0;
  {
    absl::MutexLock lock(&mu_);
    for (const std::shared_ptr<Conn>& c : in_) {
      int64_t since = c->lowered_since_ns;
      // Each chunk's reader is lifted once: it stays lifted until the
      // chunk is in (ClassNiceScope comes back to the daemon's value).
      if (since != 0 && now - since >= after.count() &&
          c->lowered_since_ns.compare_exchange_strong(since, 0) &&
          RestoreThreadNice(c->reader_tid)) {
        ++lifted;
      }
    }
    readers_lifted_ += lifted;
  }
  if (lifted == 0) return;
  // Once a minute at most: on a node kept busy, every chunk may need it.
  if (const LogLimiter::Verdict v = lifted_log_.Allow(peer_); v.log) {
    spdlog::info(
        "data link from peer '{}': {} reader(s) left without a CPU for {} ms at their class's "
        "nice value go on at the daemon's own for the rest of their chunk ({} such lines left "
        "out since the last; the peer drops a connection this node stops reading for {} ms)",
        peer_, lifted, std::chrono::duration_cast<std::chrono::milliseconds>(after).count(),
        v.suppressed, options_.timeout_ms);
  }
}

uint64_t PeerLink::readers_lifted() const {
  absl::MutexLock lock(&mu_);
  return readers_lifted_;
}

PeerLink::Landed PeerLink::ReceivePayload(Conn& c, const Key& key, std::byte* target, uint64_t from,
                                          uint64_t span) {
  uint64_t at = from;
  while (at < span) {
    const uint64_t n = std::min(kSlice, span - at);
    if (Status s = c.wire->Recv(target + at, n); !s.ok()) return {s, at};
    at += n;
    if (options_.drop_mid_chunk && at >= span / 2 && at < span) {  // tests only
      absl::MutexLock lock(&mu_);
      if (MaybeDropLocked(c, options_.drop_mid_chunk, key)) {
        return {Unavailable("dropped half-way through a chunk by fault injection"), at};
      }
    }
  }
  return {OkStatus(), at};
}

Status PeerLink::CheckChunk(Conn& c, const FrameHeader& h, std::optional<Request>& r,
                            std::byte* data, uint64_t span) {
  const Key key{h.transfer, h.chunk};
  if (options_.corrupt_chunk && *options_.corrupt_chunk == h.chunk && span > 0) {
    absl::MutexLock lock(&mu_);
    if (!options_.corrupt_once || corrupted_.insert(key).second) {
      data[span / 2] ^= std::byte{0x5a};  // fault injection (tests)
    }
  }
  const bool summed = (h.flags & kFlagChecksum) != 0;
  if (c.checksum && !summed) {
    // The runtime's message names the transfer (by the client's id, not
    // this link's key) and the chunk's hop.
    r->done(absl::DataLossError(StrCat("node '", options_.node_name, "': chunk ", h.chunk,
                                       " from peer '", peer_,
                                       "' came without the checksum its connection agreed on")));
    r.reset();
    return OkStatus();
  }
  if (!summed) {
    Answer(c, FrameType::kAck, h);
    return OkStatus();
  }
  const uint64_t got = XXH3_64bits(data, span);
  const CopyProgram& program = *r->chunk.program;
  const uint64_t offset = program.ops.empty() ? 0 : program.ops[0].dst_offset;
  if (got == h.checksum) {
    {
      absl::MutexLock lock(&mu_);
      resend_asked_.erase(key);
    }
    Answer(c, FrameType::kAck, h);
    return OkStatus();
  }
  const std::string what =
      StrCat("node '", options_.node_name, "': chunk ", h.chunk, " from peer '", peer_, "' (", span,
             " bytes at offset ", offset, " of its destination) failed its checksum (sent ",
             h.checksum, ", received ", got, ")");
  bool again = false;
  {
    absl::MutexLock lock(&mu_);
    if (!dead_.count(h.transfer) && resend_asked_.insert(key).second) {
      posted_.emplace(key, std::move(*r));
      again = true;
    } else {
      resend_asked_.erase(key);
    }
  }
  if (again) {
    spdlog::warn("{} (cross-node key {}); asking for it once more", what, h.transfer);
    r.reset();
    Answer(c, FrameType::kResend, h);
    return OkStatus();
  }
  r->done(absl::DataLossError(StrCat(what, " again after it was re-sent")));
  r.reset();
  return OkStatus();
}

void PeerLink::Answer(Conn& c, FrameType type, const FrameHeader& h) {
  const Key key{h.transfer, h.chunk};
  {
    absl::MutexLock lock(&mu_);
    // Noted first: once the ACK is in acked_, any resume repeats it.
    if (type == FrameType::kAck) NoteAckLocked(key);
    const bool dropped =
        type == FrameType::kAck && MaybeDropLocked(c, options_.drop_after_chunk, key);
    if (!dropped) {
      if (!c.Closing()) {
        Enqueue(c, Job::Answer(type, key));
      } else if (!in_.empty() && !in_down_since_) {
        // Its set was replaced while the chunk landed: the answer goes over
        // the live set (or, while the peer reconnects, with the resume:
        // recent ACKs are repeated; a RESEND's chunk is posted, so credited
        // again).
        AnswerOverInLocked(type, key);
      }
      return;
    }
  }
  StallAfterDrop();
}

Status PeerLink::OnAnswer(Conn& c, const FrameHeader& h) {
  const Key key{h.transfer, h.chunk};
  std::optional<Request> r;
  {
    absl::MutexLock lock(&mu_);
    auto it = unacked_.find(key);
    if (it != unacked_.end() && h.type == FrameType::kResend) {
      if (!resent_.insert(key).second) {
        return absl::DataLossError(StrCat("peer '", peer_, "' asked for chunk ", h.chunk,
                                          " of transfer ", h.transfer, " a third time"));
      }
      Request again = std::move(it->second);
      unacked_.erase(it);
      if (!c.Closing()) {
        Enqueue(c, Job::Data(std::move(again)));
      } else if (!out_.empty()) {
        SendLocked(std::move(again));  // the receiver posted it again
      } else {
        waiting_credit_.insert_or_assign(key, std::move(again));  // credited after the resume
      }
      return OkStatus();
    }
    if (it != unacked_.end()) {
      r = std::move(it->second);
      unacked_.erase(it);
    } else if (auto w = waiting_credit_.find(key);
               h.type == FrameType::kAck && w != waiting_credit_.end()) {
      // An ACK repeated after a drop, for a chunk waiting to be sent again:
      // it landed before the drop.
      r = std::move(w->second);
      waiting_credit_.erase(w);
    } else {
      return OkStatus();  // its transfer ended meanwhile, or a repeated ACK
    }
    resent_.erase(key);
  }
  r->done(OkStatus());
  return OkStatus();
}

}  // namespace isometry::net
