#include "net/rdma/credits.h"

#include <cstdio>

#include "core/strings.h"

namespace isometry::rdma {
namespace {

constexpr uint32_t kSeqMask = (1u << kSeqBits) - 1;
constexpr uint32_t kTagMask = (1u << kTagBits) - 1;

std::string Hex32(uint32_t v) {
  char out[12];
  std::snprintf(out, sizeof out, "0x%08x", v);
  return out;
}

Status CheckTag(uint32_t tag) {
  if (tag == 0 || tag > kMaxTag) {
    return absl::InvalidArgumentError(StrCat("RDMA transfer tag ", tag, " is not 1..", kMaxTag));
  }
  return OkStatus();
}

// A chunk arrived (or had its credit back) above or at `low`: moves low
// past every chunk now seen.
void Advance(uint64_t chunk, uint64_t& low, std::set<uint64_t>& above) {
  if (chunk != low) {
    above.insert(chunk);
    return;
  }
  ++low;
  while (!above.empty() && *above.begin() == low) {
    above.erase(above.begin());
    ++low;
  }
}

}  // namespace

uint32_t ChunkImmediate(uint32_t slot, uint32_t tag, uint64_t chunk) {
  return (slot << (kTagBits + kSeqBits)) | ((tag & kTagMask) << kSeqBits) |
         static_cast<uint32_t>(chunk & kSeqMask);
}

uint32_t CreditImmediate(uint32_t slot) { return kCreditMark | slot; }

Result<uint32_t> SlotOfCredit(uint32_t imm, uint32_t slots) {
  const uint32_t slot = imm & ~kCreditMark;
  if ((imm & kCreditMark) != kCreditMark || slot >= slots) {
    return absl::InvalidArgumentError(
        StrCat("malformed RDMA credit ", Hex32(imm), " (ring of ", slots, " slots)"));
  }
  return slot;
}

Status RingShape::Validate() const {
  if (slots == 0 || slots > kMaxSlots) {
    return absl::InvalidArgumentError(
        StrCat("RDMA ring of ", slots, " slots; it must have 1 to ", kMaxSlots));
  }
  if (slot_bytes == 0 || slot_bytes > (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError(
        StrCat("RDMA ring slot of ", slot_bytes, " bytes; it must hold 1 byte to 4 GiB"));
  }
  return OkStatus();
}

// ---- sender ----

SlotSender::SlotSender(RingShape ring) : ring_(ring), slot_(ring.slots) { Reset(); }

void SlotSender::Reset() {
  free_.clear();
  for (uint32_t s = 0; s < ring_.slots; ++s) free_.push_back(s);
  for (InFlight& f : slot_) f = InFlight{};
  open_.clear();
}

Status SlotSender::Open(uint32_t tag, uint64_t chunks) {
  ISO_RETURN_IF_ERROR(CheckTag(tag));
  if (chunks == 0) return absl::InvalidArgumentError("an RDMA transfer of no chunks");
  if (!open_.emplace(tag, Transfer{chunks, 0, {}, {}}).second) {
    return absl::AlreadyExistsError(StrCat("RDMA transfer tag ", tag, " is in use"));
  }
  return OkStatus();
}

void SlotSender::Close(uint32_t tag) { open_.erase(tag); }

Result<std::optional<SlotGrant>> SlotSender::Next(uint32_t tag, uint64_t chunk, uint64_t bytes) {
  auto it = open_.find(tag);
  if (it == open_.end()) {
    return absl::FailedPreconditionError(StrCat("RDMA transfer tag ", tag, " is not open"));
  }
  Transfer& t = it->second;
  if (chunk >= t.chunks) {
    return absl::InvalidArgumentError(
        StrCat("chunk ", chunk, " of an RDMA transfer of ", t.chunks, " chunks"));
  }
  if (bytes == 0 || bytes > ring_.slot_bytes) {
    return absl::InvalidArgumentError(
        StrCat("an RDMA chunk of ", bytes, " bytes; a ring slot holds 1 to ", ring_.slot_bytes));
  }
  if (chunk < t.low || t.above.count(chunk) != 0 || t.flight.count(chunk) != 0) {
    return absl::FailedPreconditionError(
        StrCat("chunk ", chunk, " of RDMA transfer tag ", tag, " was sent before"));
  }
  if (free_.empty() || chunk - t.low >= kSeqSpan) return std::optional<SlotGrant>();
  const uint32_t slot = free_.front();
  free_.pop_front();
  slot_[slot] = InFlight{tag, chunk, true};
  t.flight.insert(chunk);
  return std::optional<SlotGrant>(
      SlotGrant{slot, uint64_t{slot} * ring_.slot_bytes, ChunkImmediate(slot, tag, chunk)});
}

Status SlotSender::Credit(uint32_t imm) {
  ISO_ASSIGN_OR_RETURN(uint32_t slot, SlotOfCredit(imm, ring_.slots));
  InFlight& f = slot_[slot];
  if (!f.busy) {
    return absl::InvalidArgumentError(
        StrCat("RDMA credit for slot ", slot, ", which holds no chunk of this sender"));
  }
  if (auto it = open_.find(f.tag); it != open_.end()) {
    it->second.flight.erase(f.chunk);
    Advance(f.chunk, it->second.low, it->second.above);
  }
  f = InFlight{};
  free_.push_back(slot);
  return OkStatus();
}

bool SlotSender::Delivered(uint32_t tag) const {
  auto it = open_.find(tag);
  return it != open_.end() && it->second.low == it->second.chunks;
}

// ---- receiver ----

SlotReceiver::SlotReceiver(RingShape ring) : ring_(ring), busy_(ring.slots, false) {}

void SlotReceiver::Reset() {
  busy_.assign(ring_.slots, false);
  occupied_ = 0;
  open_.clear();
}

Status SlotReceiver::Open(uint32_t tag, uint64_t chunks) {
  ISO_RETURN_IF_ERROR(CheckTag(tag));
  if (chunks == 0) return absl::InvalidArgumentError("an RDMA transfer of no chunks");
  if (!open_.emplace(tag, Transfer{chunks, 0, {}}).second) {
    return absl::AlreadyExistsError(StrCat("RDMA transfer tag ", tag, " is in use"));
  }
  return OkStatus();
}

void SlotReceiver::Close(uint32_t tag) { open_.erase(tag); }

Result<Arrival> SlotReceiver::Arrive(uint32_t imm, uint64_t bytes) {
  const uint32_t slot = imm >> (kTagBits + kSeqBits);
  const uint32_t tag = (imm >> kSeqBits) & kTagMask;
  const uint32_t seq = imm & kSeqMask;
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        StrCat("RDMA arrival ", Hex32(imm), " (slot ", slot, ", tag ", tag, "): ", why));
  };
  if (slot >= ring_.slots) return bad(StrCat("the ring has ", ring_.slots, " slots"));
  if (busy_[slot]) return bad("the slot still holds an earlier chunk (the sender overran)");
  if (bytes == 0 || bytes > ring_.slot_bytes) {
    return bad(StrCat(bytes, " bytes; a slot holds 1 to ", ring_.slot_bytes));
  }
  auto it = open_.find(tag);
  if (it == open_.end()) return bad("no transfer is open under that tag");
  Transfer& t = it->second;
  const uint64_t chunk = t.low + ((seq - t.low) & kSeqMask);
  if (chunk >= t.chunks) return bad(StrCat("chunk ", chunk, " of ", t.chunks));
  if (t.above.count(chunk) != 0) return bad(StrCat("chunk ", chunk, " arrived before"));
  Advance(chunk, t.low, t.above);
  busy_[slot] = true;
  ++occupied_;
  return Arrival{tag, chunk, slot, uint64_t{slot} * ring_.slot_bytes, bytes};
}

Result<uint32_t> SlotReceiver::Consumed(uint32_t slot) {
  if (slot >= ring_.slots || !busy_[slot]) {
    return absl::FailedPreconditionError(StrCat("RDMA ring slot ", slot, " holds no chunk"));
  }
  busy_[slot] = false;
  --occupied_;
  return CreditImmediate(slot);
}

bool SlotReceiver::Complete(uint32_t tag) const {
  auto it = open_.find(tag);
  return it != open_.end() && it->second.low == it->second.chunks;
}

}  // namespace isometry::rdma
