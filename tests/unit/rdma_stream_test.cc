// The RDMA data path above the NIC (net/rdma/rdma_stream.h), joined
// by an in-memory fabric that behaves like a pair of RC QPs: a write's
// bytes land in the peer's ring and complete there as an arrival with its
// immediate, in order, when the test lets the wire move; a credit is a
// SEND with immediate. Chunks are verified byte for byte, with the
// receiver's places given before and after their chunks arrive, both
// directions at once; a failed completion fails what is in flight with
// the device's text and the next transfer runs after the reset; a peer
// breaking the protocol is caught.
#include "net/rdma/rdma_stream.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <deque>
#include <optional>
#include <random>
#include <vector>

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::rdma;

namespace {

class FakeFabric final : public Fabric {
 public:
  explicit FakeFabric(RingShape ring) : ring_(ring.slots * ring.slot_bytes) {}
  FakeFabric* peer = nullptr;
  std::optional<std::string> fail_next_write;  // its completion's error text

  std::vector<uint32_t> written_tags;  // every write's tag, in the order posted

  Status PostWrite(uint32_t, uint64_t wr_id, const std::byte* src, uint64_t bytes, uint64_t offset,
                   uint32_t imm) override {
    written_tags.push_back((imm >> kSeqBits) & kMaxTag);
    wire_.push_back({true, wr_id, std::vector<std::byte>(src, src + bytes), offset, imm});
    return OkStatus();
  }
  Status PostCredit(uint32_t, uint64_t wr_id, uint32_t imm) override {
    wire_.push_back({false, wr_id, {}, 0, imm});
    return OkStatus();
  }
  void Poll(std::vector<FabricCompletion>& out) override {
    for (auto& c : done_) out.push_back(std::move(c));
    done_.clear();
  }
  const std::byte* Ring() const override { return ring_.data(); }

  // The oldest work request reaches the peer.
  bool Move() {
    if (wire_.empty()) return false;
    Op op = std::move(wire_.front());
    wire_.pop_front();
    FabricCompletion mine;
    mine.kind = op.write ? FabricCompletion::Kind::kWrite : FabricCompletion::Kind::kCredit;
    mine.wr_id = op.wr_id;
    if (op.write && fail_next_write) {
      mine.ok = false;
      mine.error = *fail_next_write;
      fail_next_write.reset();
      done_.push_back(mine);
      // An RC QP in error flushes what follows.
      for (Op& rest : wire_) {
        FabricCompletion f;
        f.ok = false;
        f.wr_id = rest.wr_id;
        f.error = "Work Request Flushed Error (status 5, vendor error 0) on wr 0";
        done_.push_back(f);
      }
      wire_.clear();
      return true;
    }
    FabricCompletion theirs;
    theirs.imm = op.imm;
    if (op.write) {
      REQUIRE(op.offset + op.bytes.size() <= peer->ring_.size());
      std::memcpy(peer->ring_.data() + op.offset, op.bytes.data(), op.bytes.size());
      theirs.kind = FabricCompletion::Kind::kArrival;
      theirs.bytes = op.bytes.size();
    } else {
      theirs.kind = FabricCompletion::Kind::kCreditIn;
    }
    peer->done_.push_back(theirs);
    done_.push_back(mine);
    return true;
  }
  // A completion the peer never sent (a broken or hostile peer).
  void Inject(FabricCompletion c) { done_.push_back(std::move(c)); }
  void Clear() {
    wire_.clear();
    done_.clear();
  }

 private:
  struct Op {
    bool write;
    uint64_t wr_id;
    std::vector<std::byte> bytes;
    uint64_t offset;
    uint32_t imm;
  };
  std::vector<std::byte> ring_;
  std::deque<Op> wire_;
  std::deque<FabricCompletion> done_;
};

struct Pair {
  explicit Pair(RingShape ring, uint32_t qps = 2)
      : fa(ring),
        fb(ring),
        a(&fa, ring, qps, [this](const Status& s) { a_errors.push_back(s); }),
        b(&fb, ring, qps, [this](const Status& s) { b_errors.push_back(s); }) {
    fa.peer = &fb;
    fb.peer = &fa;
  }
  FakeFabric fa, fb;
  std::vector<Status> a_errors, b_errors;
  RdmaStream a, b;
  // One random step of the wire or of either stream.
  void Step(std::mt19937& rng) {
    switch (rng() % 4) {
      case 0:
        fa.Move();
        break;
      case 1:
        fb.Move();
        break;
      case 2:
        a.Progress();
        break;
      default:
        b.Progress();
    }
  }
};

// A transfer's bytes and where they land, chunk by chunk.
struct Payload {
  Payload(uint64_t chunks, uint64_t slot, std::mt19937& rng) : size(chunks), room(slot) {
    for (uint64_t c = 0; c < chunks; ++c) size[c] = 1 + rng() % slot;
    src.resize(chunks * slot);
    dst.assign(chunks * slot, std::byte{0});
    for (auto& b : src) b = static_cast<std::byte>(rng());
  }
  std::vector<uint64_t> size;
  uint64_t room;
  std::vector<std::byte> src, dst;
  int sent = 0, landed = 0, failed = 0;
  bool Same() const {
    for (uint64_t c = 0; c < size.size(); ++c) {
      if (std::memcmp(src.data() + c * room, dst.data() + c * room, size[c]) != 0) return false;
    }
    return true;
  }
};

// Queues every chunk of `p` from `from` to `to` under `tag`, the places
// at the receiver in a random order, half of them late.
void Start(RdmaStream& from, RdmaStream& to, uint32_t tag, Payload& p, std::mt19937& rng,
           std::vector<uint64_t>& late) {
  const uint64_t n = p.size.size();
  REQUIRE(from.Open(tag, n, true).ok());
  REQUIRE(to.Open(tag, n, false).ok());
  std::vector<uint64_t> order(n);
  for (uint64_t c = 0; c < n; ++c) order[c] = c;
  std::shuffle(order.begin(), order.end(), rng);
  for (uint64_t c : order) {
    if (rng() % 2) {
      late.push_back(c);
      continue;
    }
    to.Expect(tag, c, p.dst.data() + c * p.room, p.room, [&p](const Status& s) {
      REQUIRE(s.ok());
      ++p.landed;
    });
  }
  for (uint64_t c = 0; c < n; ++c) {
    from.Send(tag, c, p.src.data() + c * p.room, p.size[c], [&p](const Status& s) {
      REQUIRE(s.ok());
      ++p.sent;
    });
  }
}

}  // namespace

TEST_CASE("chunks land byte for byte, both ways, places given early or late") {
  std::mt19937 rng(5);
  for (uint32_t slots : {1u, 3u, 8u}) {
    const RingShape ring{slots, 64};
    Pair pair(ring, 3);
    Payload ab(150, 64, rng), ba(90, 64, rng);
    std::vector<uint64_t> late_ab, late_ba;
    Start(pair.a, pair.b, 7, ab, rng, late_ab);
    Start(pair.b, pair.a, 7, ba, rng, late_ba);  // the same tag the other way
    uint64_t steps = 0;
    while (ab.sent < 150 || ba.sent < 90 || ab.landed < 150 || ba.landed < 90) {
      pair.Step(rng);
      if (++steps % 50 == 0 && !late_ab.empty()) {
        const uint64_t c = late_ab.back();
        late_ab.pop_back();
        pair.b.Expect(7, c, ab.dst.data() + c * 64, 64, [&ab](const Status& s) {
          REQUIRE(s.ok());
          ++ab.landed;
        });
      }
      if (steps % 70 == 0 && !late_ba.empty()) {
        const uint64_t c = late_ba.back();
        late_ba.pop_back();
        pair.a.Expect(7, c, ba.dst.data() + c * 64, 64, [&ba](const Status& s) {
          REQUIRE(s.ok());
          ++ba.landed;
        });
      }
      REQUIRE(steps < 2000000);
    }
    CHECK(ab.Same());
    CHECK(ba.Same());
    CHECK(pair.a_errors.empty());
    CHECK(pair.b_errors.empty());
    CHECK(pair.a.idle());
    CHECK(pair.b.idle());
  }
}

TEST_CASE("a failed write fails the transfer with the device's text; the next one runs") {
  std::mt19937 rng(9);
  const RingShape ring{4, 32};
  Pair pair(ring);
  Payload p(40, 32, rng);
  REQUIRE(pair.a.Open(1, 40, true).ok());
  REQUIRE(pair.b.Open(1, 40, false).ok());
  std::vector<Status> ends;
  for (uint64_t c = 0; c < 40; ++c) {
    pair.b.Expect(1, c, p.dst.data() + c * 32, 32, [&](const Status& s) { ends.push_back(s); });
    pair.a.Send(1, c, p.src.data() + c * 32, p.size[c],
                [&](const Status& s) { ends.push_back(s); });
  }
  for (int i = 0; i < 200; ++i) pair.Step(rng);
  pair.fa.fail_next_write = "remote access error (status 10, vendor error 136) on wr 2";
  while (pair.a_errors.empty()) pair.Step(rng);
  REQUIRE(pair.a_errors.size() == 1);
  CHECK(pair.a_errors[0].code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(pair.a_errors[0].message()), Catch::Contains("remote access error"));
  CHECK(pair.a.idle());
  size_t failed = 0;
  for (const Status& s : ends) failed += !s.ok();
  CHECK(failed > 0);  // the sender's chunks in flight or queued
  // The owner reconnects the QPs (here: the wire is emptied) and resets
  // the receiving end too, as a reconnection does.
  pair.fa.Clear();
  pair.fb.Clear();
  RdmaStream fresh_b(&pair.fb, ring, 2, nullptr);
  Payload q(25, 32, rng);
  std::vector<uint64_t> late;
  Start(pair.a, fresh_b, 1, q, rng, late);  // tag 1 again: closed by the reset
  for (uint64_t c : late) {
    fresh_b.Expect(1, c, q.dst.data() + c * 32, 32, [&q](const Status& s) {
      REQUIRE(s.ok());
      ++q.landed;
    });
  }
  while (q.sent < 25 || q.landed < 25) {
    switch (rng() % 4) {
      case 0:
        pair.fa.Move();
        break;
      case 1:
        pair.fb.Move();
        break;
      case 2:
        pair.a.Progress();
        break;
      default:
        fresh_b.Progress();
    }
  }
  CHECK(q.Same());
}

TEST_CASE("a peer that breaks the protocol fails the link") {
  const RingShape ring{4, 32};
  std::mt19937 rng(1);
  for (int kind = 0; kind < 3; ++kind) {
    Pair pair(ring);
    REQUIRE(pair.b.Open(2, 10, false).ok());
    std::vector<std::byte> dst(32);
    Status end = OkStatus();
    pair.b.Expect(2, 0, dst.data(), 32, [&](const Status& s) { end = s; });
    FabricCompletion c;
    if (kind == 0) {
      c.kind = FabricCompletion::Kind::kArrival;  // a slot beyond the ring
      c.imm = ChunkImmediate(9, 2, 0);
      c.bytes = 8;
    } else if (kind == 1) {
      c.kind = FabricCompletion::Kind::kArrival;  // a tag never opened
      c.imm = ChunkImmediate(0, 3, 0);
      c.bytes = 8;
    } else {
      c.kind = FabricCompletion::Kind::kCreditIn;  // a credit for nothing sent
      c.imm = CreditImmediate(1);
    }
    pair.fb.Inject(c);
    pair.b.Progress();
    REQUIRE(pair.b_errors.size() == 1);
    CHECK_THAT(std::string(pair.b_errors[0].message()), Catch::Contains("broke the protocol"));
    CHECK(end.code() == absl::StatusCode::kUnavailable);
    CHECK(pair.b.idle());
  }
}

TEST_CASE("a chunk bigger than its place, or of a closed tag, fails alone") {
  const RingShape ring{2, 32};
  std::mt19937 rng(2);
  Pair pair(ring);
  std::vector<std::byte> src(32, std::byte{1}), dst(32);
  Status sent = OkStatus(), landed = OkStatus(), stray = OkStatus();
  pair.a.Send(4, 0, src.data(), 8, [&](const Status& s) { stray = s; });  // tag 4 not open
  REQUIRE(pair.a.Open(1, 1, true).ok());
  REQUIRE(pair.b.Open(1, 1, false).ok());
  pair.a.Send(1, 0, src.data(), 32, [&](const Status& s) { sent = s; });
  pair.b.Expect(1, 0, dst.data(), 16, [&](const Status& s) { landed = s; });
  for (int i = 0; i < 200; ++i) pair.Step(rng);
  CHECK(stray.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(landed.code() == absl::StatusCode::kInvalidArgument);
  CHECK(sent.ok());  // its slot came back: the link goes on
  CHECK(pair.a.idle());
  CHECK(pair.b.idle());
  CHECK(pair.a_errors.empty());
}

TEST_CASE("an abandoned transfer ends its chunks; the link and other transfers go on") {
  std::mt19937 rng(8);
  const RingShape ring{3, 16};
  Pair pair(ring);
  // Transfer 1: the receiver gives up midway; the sender's chunks still
  // land (dropped) and their credits come back. Transfer 2 runs beside.
  Payload p1(30, 16, rng), p2(30, 16, rng);
  REQUIRE(pair.a.Open(1, 30, true).ok());
  REQUIRE(pair.b.Open(1, 30, false).ok());
  int sent1 = 0, expected_failed = 0, expected_ok = 0;
  for (uint64_t c = 0; c < 30; ++c) {
    pair.b.Expect(1, c, p1.dst.data() + c * 16, 16, [&](const Status& s) {
      if (s.ok()) {
        ++expected_ok;
      } else {
        CHECK(s.code() == absl::StatusCode::kCancelled);
        ++expected_failed;
      }
    });
    pair.a.Send(1, c, p1.src.data() + c * 16, p1.size[c], [&](const Status& s) {
      REQUIRE(s.ok());
      ++sent1;
    });
  }
  std::vector<uint64_t> late;
  Start(pair.a, pair.b, 2, p2, rng, late);
  for (uint64_t c : late) {
    pair.b.Expect(2, c, p2.dst.data() + c * 16, 16, [&p2](const Status& s) {
      REQUIRE(s.ok());
      ++p2.landed;
    });
  }
  for (int i = 0; i < 40; ++i) pair.Step(rng);
  pair.b.Abandon(1, false, absl::CancelledError("given up"));
  CHECK(expected_failed + expected_ok == 30);
  CHECK(expected_failed > 0);
  while (sent1 < 30 || p2.sent < 30 || p2.landed < 30) pair.Step(rng);
  CHECK(p2.Same());
  CHECK(pair.a_errors.empty());
  CHECK(pair.b_errors.empty());
  pair.b.Close(1, false);
  CHECK(pair.b.idle());
  // The sender gives up: what it still queues ends at once.
  REQUIRE(pair.a.Open(3, 10, true).ok());
  int cancelled = 0;
  for (uint64_t c = 0; c < 10; ++c) {
    pair.a.Send(3, c, p1.src.data(), 16, [&](const Status& s) { cancelled += !s.ok(); });
  }
  pair.a.Abandon(3, true, absl::CancelledError("given up"));
  CHECK(cancelled == 10);
  CHECK(pair.a.idle());
}

TEST_CASE("queued chunks share the link by class weight, by priority within a class") {
  std::mt19937 rng(11);
  const RingShape ring{2, 64};
  Pair pair(ring);
  Payload p(60, 64, rng);
  int sent = 0;
  // Sends every chunk of `tag` (60 of 64 bytes) with `share`; the
  // receiver takes them all.
  auto send_all = [&](uint32_t tag, SendShare share) {
    REQUIRE(pair.a.Open(tag, 60, true).ok());
    REQUIRE(pair.b.Open(tag, 60, false).ok());
    for (uint64_t c = 0; c < 60; ++c) {
      pair.b.Expect(tag, c, p.dst.data() + c * 64, 64, [](const Status& s) { REQUIRE(s.ok()); });
      pair.a.Send(
          tag, c, p.src.data() + c * 64, 64,
          [&sent](const Status& s) {
            REQUIRE(s.ok());
            ++sent;
          },
          share);
    }
  };
  SECTION("weights 3:1 between two busy classes") {
    // The lighter class queues first: in the order they came, all its
    // chunks would go before any of the other's.
    send_all(2, {.qos_class = 2, .weight = 1});
    send_all(1, {.qos_class = 1, .weight = 3});
    while (sent < 120) pair.Step(rng);
    const std::vector<uint32_t>& order = pair.fa.written_tags;
    REQUIRE(order.size() == 120);
    // While both are queued, class 1 gets three writes of every four.
    const auto heavy = std::count(order.begin(), order.begin() + 40, 1u);
    CHECK(heavy >= 29);
    CHECK(heavy <= 31);
  }
  SECTION("a higher priority in the same class goes first") {
    send_all(1, {.qos_class = 1, .weight = 1, .priority = 0});
    send_all(2, {.qos_class = 1, .weight = 1, .priority = 5});
    while (sent < 120) pair.Step(rng);
    const std::vector<uint32_t>& order = pair.fa.written_tags;
    CHECK(std::all_of(order.begin(), order.begin() + 60, [](uint32_t t) { return t == 2; }));
  }
  SECTION("the chunk waiting for a credit ends with its transfer") {
    REQUIRE(pair.a.Open(1, 10, true).ok());
    int ok = 0, cancelled = 0;
    for (uint64_t c = 0; c < 10; ++c) {
      pair.a.Send(1, c, p.src.data(), 64, [&](const Status& s) { s.ok() ? ++ok : ++cancelled; },
                  {.qos_class = 1, .weight = 1});
    }
    pair.a.Progress();  // two written (two slots); the third waits at the head
    CHECK(pair.fa.written_tags.size() == 2);
    pair.a.Abandon(1, true, absl::CancelledError("given up"));
    CHECK(cancelled == 8);  // the head and the seven behind it
    CHECK(ok == 0);         // the two written end at their credits
  }
}

}  // namespace ISOMETRY_TEST_FILE
