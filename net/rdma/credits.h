// The credit protocol of an RDMA link's receive ring, as pure logic: no
// verbs, no threads, no clock; the data path (rdma_stream.h) drives it and
// tests/unit/rdma_credits_test.cc runs it through every order.
//
// The receiver owns a ring of `slots` slots of `slot_bytes` each,
// registered for remote write. The sender holds one credit per slot it may
// write: all of them at first. A chunk goes to a slot the sender holds
// (SlotSender::Next), as an RDMA WRITE with immediate whose 32 bits say
// where it belongs:
//
//   bits 31..22  the slot (so at most kMaxSlots = 1024 slots)
//   bits 21..14  the transfer's tag on this link (1..255; 0 is never used)
//   bits 13..0   the chunk's number modulo 2^14
//
// The receiver (SlotReceiver::Arrive) rebuilds the chunk's number from the
// lowest chunk of that transfer it has not seen yet, which is exact as long
// as no chunk is sent 2^14 or more beyond the lowest one the sender has not
// had a credit back for (Next waits instead). When the receiver is done
// with a slot (its bytes moved on), Consumed gives the credit to send back,
// an immediate of its own (kCreditMark | slot); the sender's Credit takes
// it, and the slot is free for any chunk again. Slots come back in any
// order; a slow receiver only makes Next wait: the sender never writes a
// slot it holds no credit for, and a receiver whose slot is written again
// before it gave the credit back refuses the arrival (an overrun).
//
// Tags are bound to transfers by both ends before the first chunk (the
// data path says how); a closed tag may be used again once both ends
// closed it. After a completion error both ends Reset: the QP is flushed
// and recovered, every slot is free, every tag closed.
//
// Thread safety: none; each object belongs to one channel thread.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "core/status.h"

namespace isometry::rdma {

inline constexpr uint32_t kMaxSlots = 1024;
inline constexpr uint32_t kSlotBits = 10;
inline constexpr uint32_t kTagBits = 8;
inline constexpr uint32_t kSeqBits = 14;
inline constexpr uint32_t kMaxTag = (1u << kTagBits) - 1;  // 255
inline constexpr uint64_t kSeqSpan = uint64_t{1} << kSeqBits;
// A credit's immediate: this mark with the slot in its low bits.
inline constexpr uint32_t kCreditMark = 0xC4ED0000u;

// The immediate of a chunk in `slot` (< kMaxSlots) of transfer `tag`
// (1..kMaxTag): its number modulo 2^14.
uint32_t ChunkImmediate(uint32_t slot, uint32_t tag, uint64_t chunk);
uint32_t CreditImmediate(uint32_t slot);
// The slot a credit gives back; InvalidArgument for anything but
// kCreditMark | slot with slot < `slots`.
Result<uint32_t> SlotOfCredit(uint32_t imm, uint32_t slots);

struct RingShape {
  uint32_t slots = 0;       // 1..kMaxSlots
  uint64_t slot_bytes = 0;  // > 0
  Status Validate() const;
};

// Where the sender puts one chunk.
struct SlotGrant {
  uint32_t slot = 0;
  uint64_t offset = 0;  // in the ring: slot * slot_bytes
  uint32_t imm = 0;     // ChunkImmediate
};

class SlotSender {
 public:
  explicit SlotSender(RingShape ring);  // ring must Validate()

  // A transfer of `chunks` chunks (> 0) under `tag`; AlreadyExists while
  // the tag is open.
  Status Open(uint32_t tag, uint64_t chunks);
  // Forgets the tag (its chunks in flight still hold their slots until
  // their credits come back).
  void Close(uint32_t tag);

  // The slot for chunk `chunk` (< chunks, not sent before) of `bytes`
  // bytes (1..slot_bytes) of transfer `tag`; none when the caller must
  // wait for a credit (no slot held, or the chunk is 2^14 or more beyond
  // the transfer's lowest chunk without a credit back). An error for a
  // bad tag, chunk or size.
  Result<std::optional<SlotGrant>> Next(uint32_t tag, uint64_t chunk, uint64_t bytes);
  // A credit came back: its slot is free again, and its chunk is known
  // to have arrived. InvalidArgument for a malformed credit or one for a
  // slot the sender did not write.
  Status Credit(uint32_t imm);
  // After a completion error and the QP's recovery: all slots free, all
  // tags closed.
  void Reset();

  uint32_t credits() const { return static_cast<uint32_t>(free_.size()); }
  bool idle() const { return free_.size() == ring_.slots; }
  // Whether every chunk of `tag` has had its credit back.
  bool Delivered(uint32_t tag) const;

 private:
  struct Transfer {
    uint64_t chunks = 0;
    uint64_t low = 0;           // the lowest chunk without a credit back
    std::set<uint64_t> above;   // chunks > low with a credit back
    std::set<uint64_t> flight;  // chunks written, no credit back yet
  };
  struct InFlight {
    uint32_t tag = 0;
    uint64_t chunk = 0;
    bool busy = false;
  };
  const RingShape ring_;
  std::deque<uint32_t> free_;
  std::vector<InFlight> slot_;  // by slot
  std::map<uint32_t, Transfer> open_;
};

// One chunk as the receiver found it in its ring.
struct Arrival {
  uint32_t tag = 0;
  uint64_t chunk = 0;
  uint32_t slot = 0;
  uint64_t offset = 0;  // in the ring
  uint64_t bytes = 0;
};

class SlotReceiver {
 public:
  explicit SlotReceiver(RingShape ring);  // ring must Validate()

  Status Open(uint32_t tag, uint64_t chunks);
  void Close(uint32_t tag);

  // A write with immediate `imm` of `bytes` bytes completed. An error
  // (InvalidArgument; the link is then broken) for a slot out of range,
  // a slot still holding an earlier chunk (the sender overran the ring),
  // an unknown tag, a chunk beyond the transfer or seen before, or more
  // bytes than a slot holds.
  Result<Arrival> Arrive(uint32_t imm, uint64_t bytes);
  // The chunk in `slot` has been moved on: the credit to send back.
  // FailedPrecondition when the slot holds nothing.
  Result<uint32_t> Consumed(uint32_t slot);
  void Reset();

  // Whether every chunk of `tag` has arrived.
  bool Complete(uint32_t tag) const;
  uint32_t occupied() const { return occupied_; }

 private:
  struct Transfer {
    uint64_t chunks = 0;
    uint64_t low = 0;          // the lowest chunk not arrived
    std::set<uint64_t> above;  // chunks > low that arrived
  };
  const RingShape ring_;
  std::vector<bool> busy_;  // by slot
  uint32_t occupied_ = 0;
  std::map<uint32_t, Transfer> open_;
};

}  // namespace isometry::rdma
