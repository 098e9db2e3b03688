// The receiver's answer to every chunk: ACK when it landed (and, with
// checksums on, its checksum held) or RESEND; the sender holds a chunk
// until then and sends it once more when asked (frame.h).
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include "channels/tcp/peer_link.h"
#include "channels/tcp/peer_link_conn.h"

namespace isometry::net {

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
  const CopyProgram& program = *r->request.program;
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
      Job j;
      j.header.type = FrameType::kData;
      j.data = std::move(it->second);
      unacked_.erase(it);
      if (!c.Closing()) {
        Enqueue(c, std::move(j));
      } else if (!out_.empty()) {
        Enqueue(*out_[key.second % out_.size()], std::move(j));  // the receiver posted it again
      } else {
        waiting_credit_.insert_or_assign(key, std::move(*j.data));  // credited after the resume
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
