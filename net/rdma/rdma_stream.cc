#include "net/rdma/rdma_stream.h"

#include <cstring>

#include "core/strings.h"

namespace isometry::rdma {

RdmaStream::RdmaStream(Fabric* fabric, RingShape ring, uint32_t qps,
                       std::function<void(const Status&)> on_error)
    : fabric_(fabric),
      ring_(ring),
      qps_(qps == 0 ? 1 : qps),
      on_error_(std::move(on_error)),
      tx_(ring),
      rx_(ring) {}

Status RdmaStream::Open(uint32_t tag, uint64_t chunks, bool sending) {
  return sending ? tx_.Open(tag, chunks) : rx_.Open(tag, chunks);
}

void RdmaStream::Close(uint32_t tag, bool sending) {
  if (sending) {
    tx_.Close(tag);
  } else {
    rx_.Close(tag);
    abandoned_.erase(tag);
  }
}

void RdmaStream::Send(uint32_t tag, uint64_t chunk, const std::byte* src, uint64_t bytes,
                      ChunkDone done, SendShare share) {
  queued_.Push(share.qos_class, share.weight, share.priority, bytes,
               Outgoing{tag, chunk, src, bytes, std::move(done)});
}

void RdmaStream::Expect(uint32_t tag, uint64_t chunk, Lander land, ChunkDone done) {
  expected_[{tag, chunk}] = Incoming{std::move(land), std::move(done)};
}

void RdmaStream::Expect(uint32_t tag, uint64_t chunk, std::byte* dst, uint64_t room,
                        ChunkDone done) {
  Expect(
      tag, chunk,
      [dst, room, chunk](const std::byte* data, uint64_t bytes) -> Status {
        if (bytes > room) {
          return absl::InvalidArgumentError(
              StrCat("RDMA chunk ", chunk, " of ", bytes, " bytes for a place of ", room));
        }
        std::memcpy(dst, data, bytes);
        return OkStatus();
      },
      std::move(done));
}

void RdmaStream::Abandon(uint32_t tag, bool sending, const Status& why) {
  std::vector<ChunkDone> dones;
  if (sending) {
    if (head_ && head_->tag == tag) {
      dones.push_back(std::move(head_->done));
      head_.reset();
    }
    queued_.RemoveIf([tag](const Outgoing& o) { return o.tag == tag; },
                     [&dones](Outgoing&& o) { dones.push_back(std::move(o.done)); });
  } else {
    for (auto it = expected_.lower_bound({tag, 0});
         it != expected_.end() && it->first.first == tag;) {
      dones.push_back(std::move(it->second.done));
      it = expected_.erase(it);
    }
    // Parked arrivals of it give their slots back.
    std::vector<Arrival> parked;
    for (auto it = parked_.lower_bound({tag, 0}); it != parked_.end() && it->first.first == tag;) {
      parked.push_back(it->second);
      it = parked_.erase(it);
    }
    for (const Arrival& a : parked) {
      Land(a,
           Incoming{[](const std::byte*, uint64_t) { return OkStatus(); }, [](const Status&) {}});
    }
  }
  if (sending) {
    tx_.Close(tag);
  } else {
    abandoned_.insert(tag);  // open until Close: chunks still coming are dropped
  }
  for (ChunkDone& d : dones) d(why);
}

bool RdmaStream::idle() const {
  return !head_ && queued_.empty() && written_.empty() && expected_.empty() && parked_.empty();
}

void RdmaStream::PumpSends() {
  // The chunk whose turn it is (by class weight, then priority) goes
  // first: one that must wait for a credit holds back those behind it
  // (they would take the slots it waits for).
  while (head_ || !queued_.empty()) {
    if (!head_) head_ = queued_.Pop();
    Outgoing& o = *head_;
    auto grant = tx_.Next(o.tag, o.chunk, o.bytes);
    if (!grant.ok()) {
      ChunkDone done = std::move(o.done);
      head_.reset();
      done(grant.status());
      continue;
    }
    if (!grant->has_value()) return;
    const SlotGrant g = **grant;
    const auto qp = static_cast<uint32_t>(o.chunk % qps_);
    const Status s = fabric_->PostWrite(qp, g.slot, o.src, o.bytes, g.offset, g.imm);
    written_.emplace(g.slot, std::move(o));
    head_.reset();
    if (!s.ok()) {
      Fail(s);
      return;
    }
  }
}

void RdmaStream::Land(const Arrival& a, const Incoming& in) {
  const Status result = in.land(fabric_->Ring() + a.offset, a.bytes);
  auto credit = rx_.Consumed(a.slot);
  if (credit.ok()) {
    const Status s = fabric_->PostCredit(a.slot % qps_, next_wr_++, *credit);
    if (!s.ok()) {
      in.done(s);
      Fail(s);
      return;
    }
  }
  in.done(credit.ok() ? result : credit.status());
}

void RdmaStream::Progress() {
  polled_.clear();
  fabric_->Poll(polled_);
  for (const FabricCompletion& c : polled_) {
    if (!c.ok) {
      const char* what = c.kind == FabricCompletion::Kind::kWrite    ? "write of a chunk"
                         : c.kind == FabricCompletion::Kind::kCredit ? "credit"
                                                                     : "receive";
      Fail(absl::UnavailableError(StrCat("RDMA ", what, " failed: ", c.error)));
      return;  // the rest are flushed requests of the same error
    }
    switch (c.kind) {
      case FabricCompletion::Kind::kWrite:
      case FabricCompletion::Kind::kCredit:
        break;  // a write completes at its credit; a credit needs nothing
      case FabricCompletion::Kind::kCreditIn: {
        auto slot = SlotOfCredit(c.imm, ring_.slots);
        Status s = slot.ok() ? tx_.Credit(c.imm) : slot.status();
        if (!s.ok()) {
          Fail(absl::UnavailableError(StrCat("RDMA peer broke the protocol: ", s.message())));
          return;
        }
        auto it = written_.find(*slot);
        if (it != written_.end()) {
          ChunkDone done = std::move(it->second.done);
          written_.erase(it);
          done(OkStatus());
        }
        break;
      }
      case FabricCompletion::Kind::kArrival: {
        auto a = rx_.Arrive(c.imm, c.bytes);
        if (!a.ok()) {
          Fail(absl::UnavailableError(
              StrCat("RDMA peer broke the protocol: ", a.status().message())));
          return;
        }
        if (abandoned_.count(a->tag) != 0) {
          Land(*a, Incoming{[](const std::byte*, uint64_t) { return OkStatus(); },
                            [](const Status&) {}});
          break;
        }
        auto it = expected_.find({a->tag, a->chunk});
        if (it == expected_.end()) {
          parked_.emplace(Key{a->tag, a->chunk}, *a);
          break;
        }
        Incoming in = std::move(it->second);
        expected_.erase(it);
        Land(*a, in);
        break;
      }
    }
  }
  // Arrivals whose place is known now.
  for (auto it = parked_.begin(); it != parked_.end();) {
    auto e = expected_.find(it->first);
    if (e == expected_.end()) {
      ++it;
      continue;
    }
    const Arrival a = it->second;
    Incoming in = std::move(e->second);
    expected_.erase(e);
    it = parked_.erase(it);
    Land(a, in);
  }
  PumpSends();
}

void RdmaStream::Fail(const Status& why) {
  std::vector<ChunkDone> dones;
  if (head_) dones.push_back(std::move(head_->done));
  head_.reset();
  queued_.Drain([&dones](Outgoing&& o) { dones.push_back(std::move(o.done)); });
  for (auto& [slot, o] : written_) dones.push_back(std::move(o.done));
  for (auto& [key, in] : expected_) dones.push_back(std::move(in.done));
  written_.clear();
  expected_.clear();
  parked_.clear();
  abandoned_.clear();
  tx_.Reset();
  rx_.Reset();
  for (ChunkDone& d : dones) d(why);
  if (on_error_) on_error_(why);
}

}  // namespace isometry::rdma
