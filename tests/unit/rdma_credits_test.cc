// The RDMA ring's credit protocol (net/rdma/credits.h) without a
// device: a sender and a receiver joined by queues that deliver writes in
// order (as an RC QP does) and credits in order, with the receiver
// consuming its slots in every order a small ring allows, in random orders
// for big transfers, and past the 2^14 wrap of the chunk numbers; forged
// immediates and credits are refused.
#include <catch2/catch.hpp>
#include <deque>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "net/rdma/credits.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::rdma;

namespace {

struct Write {
  uint32_t imm;
  uint64_t bytes;
  uint32_t slot;
};

// Both ends and the wire between them. Every chunk's arrival is checked
// against what was sent into that slot.
struct Link {
  explicit Link(RingShape ring) : ring(ring), tx(ring), rx(ring) {}
  RingShape ring;
  SlotSender tx;
  SlotReceiver rx;
  std::deque<Write> wire;        // writes posted, not yet completed at the receiver
  std::deque<uint32_t> credits;  // credits sent back, not yet taken
  std::map<uint32_t, std::pair<uint32_t, uint64_t>> in_slot;  // slot -> (tag, chunk) sent there
  std::vector<uint32_t> held;                                 // receiver's slots holding chunks
  std::map<uint32_t, std::set<uint64_t>> arrived;             // by tag
  uint64_t waits = 0;

  // Sends chunk `c` of `tag`; false when the sender must wait.
  bool Send(uint32_t tag, uint64_t c) {
    auto g = tx.Next(tag, c, 1 + c % ring.slot_bytes);
    REQUIRE(g.ok());
    if (!g->has_value()) {
      ++waits;
      return false;
    }
    const SlotGrant& grant = **g;
    REQUIRE(grant.offset == uint64_t{grant.slot} * ring.slot_bytes);
    // Never a slot the receiver still holds: no overrun.
    REQUIRE(std::find(held.begin(), held.end(), grant.slot) == held.end());
    REQUIRE(in_slot.count(grant.slot) == 0);
    in_slot[grant.slot] = {tag, c};
    wire.push_back({grant.imm, 1 + c % ring.slot_bytes, grant.slot});
    return true;
  }
  // The oldest write completes at the receiver.
  void Deliver() {
    REQUIRE(!wire.empty());
    const Write w = wire.front();
    wire.pop_front();
    auto a = rx.Arrive(w.imm, w.bytes);
    REQUIRE(a.ok());
    REQUIRE(a->slot == w.slot);
    REQUIRE(a->offset == uint64_t{w.slot} * ring.slot_bytes);
    REQUIRE(a->bytes == w.bytes);
    REQUIRE(std::make_pair(a->tag, a->chunk) == in_slot.at(w.slot));
    REQUIRE(arrived[a->tag].insert(a->chunk).second);
    held.push_back(a->slot);
  }
  // The receiver is done with held[i]: its credit goes back.
  void Consume(size_t i) {
    const uint32_t slot = held[i];
    held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
    auto credit = rx.Consumed(slot);
    REQUIRE(credit.ok());
    in_slot.erase(slot);
    credits.push_back(*credit);
  }
  void TakeCredit() {
    REQUIRE(!credits.empty());
    REQUIRE(tx.Credit(credits.front()).ok());
    credits.pop_front();
  }
};

// Runs one transfer of `chunks` chunks to the end; `pick` chooses which
// held slot the receiver consumes next (out of order), `slow` how many
// steps it idles between consumptions.
void RunTransfer(Link& l, uint32_t tag, uint64_t chunks, std::mt19937& rng, int slow) {
  REQUIRE(l.tx.Open(tag, chunks).ok());
  REQUIRE(l.rx.Open(tag, chunks).ok());
  uint64_t next = 0;
  int idle = 0;
  while (!l.tx.Delivered(tag)) {
    switch (rng() % 4) {
      case 0:
        if (next < chunks && l.Send(tag, next)) ++next;
        break;
      case 1:
        if (!l.wire.empty()) l.Deliver();
        break;
      case 2:
        if (!l.held.empty() && ++idle > slow) {
          idle = 0;
          l.Consume(rng() % l.held.size());
        }
        break;
      default:
        if (!l.credits.empty()) l.TakeCredit();
    }
  }
  REQUIRE(l.rx.Complete(tag));
  REQUIRE(l.arrived[tag].size() == chunks);
  REQUIRE(l.tx.idle());
  REQUIRE(l.rx.occupied() == 0);
  l.tx.Close(tag);
  l.rx.Close(tag);
}

}  // namespace

TEST_CASE("immediates encode slot, tag and chunk; credits only their own form") {
  for (uint32_t slot = 0; slot < kMaxSlots; ++slot) {
    for (uint32_t tag : {1u, 2u, 77u, kMaxTag}) {
      for (uint64_t chunk : {uint64_t{0}, uint64_t{1}, kSeqSpan - 1, kSeqSpan, uint64_t{123456}}) {
        const uint32_t imm = ChunkImmediate(slot, tag, chunk);
        REQUIRE(imm >> 22 == slot);
        REQUIRE(((imm >> 14) & 0xFF) == tag);
        REQUIRE((imm & 0x3FFF) == chunk % kSeqSpan);
      }
    }
    auto back = SlotOfCredit(CreditImmediate(slot), kMaxSlots);
    REQUIRE(back.ok());
    REQUIRE(*back == slot);
  }
  CHECK_FALSE(SlotOfCredit(CreditImmediate(8), 8).ok());       // beyond the ring
  CHECK_FALSE(SlotOfCredit(ChunkImmediate(1, 1, 0), 8).ok());  // a chunk's, not a credit
  CHECK_FALSE(SlotOfCredit(0, 8).ok());
  CHECK_FALSE(SlotOfCredit(kCreditMark | 0x8000, kMaxSlots).ok());
}

TEST_CASE("ring shapes are bounded") {
  CHECK(RingShape{1, 1}.Validate().ok());
  CHECK(RingShape{kMaxSlots, uint64_t{1} << 32}.Validate().ok());
  CHECK_FALSE(RingShape{0, 4096}.Validate().ok());
  CHECK_FALSE(RingShape{kMaxSlots + 1, 4096}.Validate().ok());
  CHECK_FALSE(RingShape{4, 0}.Validate().ok());
  CHECK_FALSE(RingShape{4, (uint64_t{1} << 32) + 1}.Validate().ok());
}

// The exhaustive walk below takes 3 s in the Release build and 50 times
// that under ASan's -O0: there it walks 4 chunks (the same code paths for
// the memory checks), the Release run all 5.
#if defined(__SANITIZE_ADDRESS__)
constexpr uint64_t kWalkChunks = 4;
#else
constexpr uint64_t kWalkChunks = 5;
#endif

TEST_CASE("every consumption order of a small ring delivers each chunk once") {
  // Depth-first over every choice at every step (send, deliver, consume
  // slot i, take a credit) for rings of 1 to 3 slots and 5 chunks (4
  // under ASan).
  for (uint32_t slots = 1; slots <= 3; ++slots) {
    const RingShape ring{slots, 4};
    constexpr uint64_t kChunks = kWalkChunks;
    uint64_t ends = 0;
    std::function<void(Link&, uint64_t)> explore = [&](Link& l, uint64_t next) {
      if (l.tx.Delivered(1)) {
        REQUIRE(l.rx.Complete(1));
        REQUIRE(l.arrived[1].size() == kChunks);
        REQUIRE(l.tx.idle());
        ++ends;
        return;
      }
      bool moved = false;
      if (next < kChunks) {
        Link copy = l;
        if (copy.Send(1, next)) {
          moved = true;
          explore(copy, next + 1);
        }
      }
      if (!l.wire.empty()) {
        Link copy = l;
        copy.Deliver();
        moved = true;
        explore(copy, next);
      }
      for (size_t i = 0; i < l.held.size(); ++i) {
        Link copy = l;
        copy.Consume(i);
        moved = true;
        explore(copy, next);
      }
      if (!l.credits.empty()) {
        Link copy = l;
        copy.TakeCredit();
        moved = true;
        explore(copy, next);
      }
      REQUIRE(moved);  // never stuck: a waiting sender always gets a credit
    };
    Link l(ring);
    REQUIRE(l.tx.Open(1, kChunks).ok());
    REQUIRE(l.rx.Open(1, kChunks).ok());
    explore(l, 0);
    INFO(slots << " slots: " << ends << " orders");
    CHECK(ends > 0);
  }
}

TEST_CASE("a slow receiver makes the sender wait, never overrun") {
  std::mt19937 rng(7);
  for (uint32_t slots : {1u, 2u, 7u, 64u}) {
    Link l(RingShape{slots, 1024});
    RunTransfer(l, 5, 500, rng, /*slow=*/20);
    CHECK(l.waits > 0);
  }
}

TEST_CASE("interleaved transfers share the ring; tags are reused after both ends close") {
  std::mt19937 rng(11);
  Link l(RingShape{8, 64});
  for (uint32_t round = 0; round < 3; ++round) {
    uint64_t next[3] = {0, 0, 0};
    const uint64_t chunks[3] = {40, 1, 300};
    for (uint32_t t = 0; t < 3; ++t) {
      REQUIRE(l.tx.Open(t + 1, chunks[t]).ok());
      REQUIRE(l.rx.Open(t + 1, chunks[t]).ok());
    }
    auto delivered = [&] {
      for (uint32_t t = 0; t < 3; ++t) {
        if (!l.tx.Delivered(t + 1)) return false;
      }
      return true;
    };
    while (!delivered()) {
      const uint32_t t = rng() % 3;
      switch (rng() % 4) {
        case 0:
          if (next[t] < chunks[t] && l.Send(t + 1, next[t])) ++next[t];
          break;
        case 1:
          if (!l.wire.empty()) l.Deliver();
          break;
        case 2:
          if (!l.held.empty()) l.Consume(rng() % l.held.size());
          break;
        default:
          if (!l.credits.empty()) l.TakeCredit();
      }
    }
    for (uint32_t t = 0; t < 3; ++t) {
      REQUIRE(l.rx.Complete(t + 1));
      REQUIRE(l.arrived[t + 1].size() == chunks[t]);
      l.tx.Close(t + 1);
      l.rx.Close(t + 1);
      l.arrived.erase(t + 1);
    }
  }
}

TEST_CASE("chunk numbers wrap past 2^14 and the sender keeps within the window") {
  std::mt19937 rng(3);
  Link l(RingShape{16, 8});
  RunTransfer(l, 9, 3 * kSeqSpan + 77, rng, 0);

  // Chunk 0 outstanding: chunk 2^14 would read as chunk 0 at the
  // receiver, so the sender waits though slots are free.
  SlotSender tx(RingShape{4, 8});
  REQUIRE(tx.Open(1, 4 * kSeqSpan).ok());
  auto g0 = tx.Next(1, 0, 8);
  REQUIRE(g0.ok());
  REQUIRE(g0->has_value());
  auto far = tx.Next(1, kSeqSpan, 8);
  REQUIRE(far.ok());
  CHECK_FALSE(far->has_value());
  auto near = tx.Next(1, kSeqSpan - 1, 8);
  REQUIRE(near.ok());
  CHECK(near->has_value());
  REQUIRE(tx.Credit(CreditImmediate((*g0)->slot)).ok());
  auto now = tx.Next(1, kSeqSpan, 8);  // chunk 0 is back: the window moved
  REQUIRE(now.ok());
  CHECK(now->has_value());
}

TEST_CASE("the sender refuses bad tags, chunks, sizes and credits") {
  SlotSender tx(RingShape{2, 100});
  CHECK_FALSE(tx.Open(0, 5).ok());
  CHECK_FALSE(tx.Open(kMaxTag + 1, 5).ok());
  CHECK_FALSE(tx.Open(3, 0).ok());
  REQUIRE(tx.Open(3, 5).ok());
  CHECK(tx.Open(3, 5).code() == absl::StatusCode::kAlreadyExists);
  CHECK_FALSE(tx.Next(4, 0, 10).ok());   // not open
  CHECK_FALSE(tx.Next(3, 5, 10).ok());   // beyond the transfer
  CHECK_FALSE(tx.Next(3, 0, 0).ok());    // empty
  CHECK_FALSE(tx.Next(3, 0, 101).ok());  // bigger than a slot
  auto g = tx.Next(3, 0, 100);
  REQUIRE(g.ok());
  REQUIRE(g->has_value());
  CHECK_FALSE(tx.Next(3, 0, 100).ok());                          // sent before
  CHECK_FALSE(tx.Credit(CreditImmediate(1 - (*g)->slot)).ok());  // a slot it never wrote
  CHECK_FALSE(tx.Credit(CreditImmediate(2)).ok());               // beyond the ring
  CHECK_FALSE(tx.Credit((*g)->imm).ok());                        // a chunk's immediate
  REQUIRE(tx.Credit(CreditImmediate((*g)->slot)).ok());
  CHECK_FALSE(tx.Credit(CreditImmediate((*g)->slot)).ok());  // twice
  CHECK_FALSE(tx.Next(3, 0, 100).ok());                      // delivered before
  CHECK(tx.credits() == 2);
}

TEST_CASE("the receiver refuses forged and overrunning arrivals") {
  SlotReceiver rx(RingShape{4, 100});
  REQUIRE(rx.Open(2, 3).ok());
  CHECK_FALSE(rx.Arrive(ChunkImmediate(4, 2, 0), 10).ok());   // slot beyond the ring
  CHECK_FALSE(rx.Arrive(ChunkImmediate(0, 3, 0), 10).ok());   // tag not open
  CHECK_FALSE(rx.Arrive(ChunkImmediate(0, 0, 0), 10).ok());   // tag 0
  CHECK_FALSE(rx.Arrive(ChunkImmediate(0, 2, 3), 10).ok());   // beyond the transfer
  CHECK_FALSE(rx.Arrive(ChunkImmediate(0, 2, 0), 0).ok());    // empty
  CHECK_FALSE(rx.Arrive(ChunkImmediate(0, 2, 0), 101).ok());  // more than a slot
  CHECK(rx.occupied() == 0);
  auto a = rx.Arrive(ChunkImmediate(1, 2, 1), 100);
  REQUIRE(a.ok());
  CHECK(a->chunk == 1);
  CHECK(a->offset == 100);
  CHECK_FALSE(rx.Arrive(ChunkImmediate(1, 2, 0), 10).ok());  // slot 1 not given back: overrun
  CHECK_FALSE(rx.Arrive(ChunkImmediate(2, 2, 1), 10).ok());  // chunk 1 again
  REQUIRE(rx.Arrive(ChunkImmediate(2, 2, 0), 10).ok());
  CHECK_FALSE(rx.Arrive(ChunkImmediate(3, 2, 0), 10).ok());  // chunk 0 again (below low)
  CHECK_FALSE(rx.Consumed(0).ok());                          // holds nothing
  CHECK_FALSE(rx.Consumed(4).ok());
  auto c = rx.Consumed(1);
  REQUIRE(c.ok());
  CHECK(*c == CreditImmediate(1));
  CHECK_FALSE(rx.Consumed(1).ok());
  REQUIRE(rx.Arrive(ChunkImmediate(1, 2, 2), 10).ok());
  CHECK(rx.Complete(2));
  CHECK(rx.occupied() == 2);
}

TEST_CASE("reset after a completion error frees every slot and closes every tag") {
  SlotSender tx(RingShape{3, 10});
  SlotReceiver rx(RingShape{3, 10});
  REQUIRE(tx.Open(1, 10).ok());
  REQUIRE(rx.Open(1, 10).ok());
  for (uint64_t c = 0; c < 3; ++c) {
    auto g = tx.Next(1, c, 10);
    REQUIRE(g.ok());
    REQUIRE(g->has_value());
    REQUIRE(rx.Arrive((*g)->imm, 10).ok());
  }
  auto wait = tx.Next(1, 3, 10);
  REQUIRE(wait.ok());
  CHECK_FALSE(wait->has_value());
  tx.Reset();
  rx.Reset();
  CHECK(tx.idle());
  CHECK(tx.credits() == 3);
  CHECK(rx.occupied() == 0);
  CHECK_FALSE(tx.Next(1, 3, 10).ok());  // the tag was closed
  REQUIRE(tx.Open(1, 2).ok());          // and may be opened again
  REQUIRE(rx.Open(1, 2).ok());
}

}  // namespace ISOMETRY_TEST_FILE
