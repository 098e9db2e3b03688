// The data path of one RDMA link, above the NIC: chunks of transfers
// written with immediate into the peer's ring slots (credits.h grants
// them), landed from this node's ring into their destination, credits sent
// back, and completion errors turned into failed chunks. The NIC is behind
// Fabric: rdma_link's verbs implementation posts work requests and polls
// the link's CQ; tests/unit/rdma_stream_test.cc joins two streams with an
// in-memory fabric that can fail a work request, so every line here runs
// without a device.
//
// Sending: Send(tag, chunk, bytes) queues a chunk; Progress() writes
// queued chunks into slots it holds credits for (striped over the QPs by
// chunk) and completes a chunk's `done` when its credit comes back, i.e.
// once the receiver has landed it. Queued chunks go out shared by weight
// between QoS classes and by priority within a class (core/fair_queue.h),
// as a TCP connection's do (net/peer_link_conn.h); the next one to go
// waits for a credit at the head, holding back the rest.
//
// Receiving: Expect(tag, chunk, dst) says where a chunk goes; an arrival
// is copied from its slot to `dst` (now, or when Expect comes later) and
// its credit is sent back.
//
// A failed completion (the device's text, ibv_wc_status_str) fails every
// chunk in flight or queued on this stream with UNAVAILABLE, and the
// stream resets (all slots free, all tags closed): the link's QPs must be
// connected again (RdmaLink::Connect) before the next transfer; `on_error`
// tells the owner.
//
// Thread safety: none; a stream belongs to the one thread that polls its
// CQ and calls every member. `done` callbacks run on it, inside Progress.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/fair_queue.h"
#include "core/status.h"
#include "net/rdma/credits.h"

namespace isometry::rdma {

// One completion as the stream needs it.
struct FabricCompletion {
  enum class Kind {
    kWrite,    // our RDMA WRITE with immediate completed (wr_id: ours)
    kCredit,   // our credit SEND completed
    kArrival,  // the peer's write landed in our ring (imm, bytes)
    kCreditIn  // the peer's credit arrived (imm)
  };
  Kind kind = Kind::kWrite;
  uint64_t wr_id = 0;
  uint32_t imm = 0;
  uint64_t bytes = 0;
  bool ok = true;
  std::string error;  // DescribeCompletion's text when !ok
};

class Fabric {
 public:
  virtual ~Fabric() = default;
  // RDMA WRITE with immediate `imm` of [src, src + bytes) to the peer's
  // ring at `offset`, on QP `qp`; completes as kWrite with `wr_id`.
  virtual Status PostWrite(uint32_t qp, uint64_t wr_id, const std::byte* src, uint64_t bytes,
                           uint64_t offset, uint32_t imm) = 0;
  // A SEND carrying only `imm` (a credit), on QP `qp`.
  virtual Status PostCredit(uint32_t qp, uint64_t wr_id, uint32_t imm) = 0;
  // Completions available now, appended to `out`.
  virtual void Poll(std::vector<FabricCompletion>& out) = 0;
  // This node's ring (where arrivals are).
  virtual const std::byte* Ring() const = 0;
};

using ChunkDone = std::function<void(Status)>;

// How a queued chunk shares the link with the others: its transfer's QoS
// class on this node, that class's weight on the link, and its priority.
struct SendShare {
  uint32_t qos_class = 0;
  uint32_t weight = 1;
  int priority = 0;
};

class RdmaStream {
 public:
  // `fabric` must outlive the stream; `ring` is the shape of both ends'
  // rings (the peer's, written by Send; this node's, read by Expect).
  RdmaStream(Fabric* fabric, RingShape ring, uint32_t qps,
             std::function<void(const Status&)> on_error);

  // A transfer's tag, opened by both ends before its first chunk
  // (credits.h): `sending` here, receiving at the peer, or the other way.
  Status Open(uint32_t tag, uint64_t chunks, bool sending);
  void Close(uint32_t tag, bool sending);

  // Sending half: chunk `chunk` of `tag`, `bytes` at `src` (which stays
  // valid until `done`).
  void Send(uint32_t tag, uint64_t chunk, const std::byte* src, uint64_t bytes, ChunkDone done,
            SendShare share = {});
  // Receiving half: what to do with chunk `chunk` of `tag` when it is in
  // the ring (`land` gets its bytes there, and may scatter them; its
  // error fails the chunk alone); `done` after it ran.
  using Lander = std::function<Status(const std::byte* data, uint64_t bytes)>;
  void Expect(uint32_t tag, uint64_t chunk, Lander land, ChunkDone done);
  // The same, copying the chunk to `dst` (room for `room` bytes).
  void Expect(uint32_t tag, uint64_t chunk, std::byte* dst, uint64_t room, ChunkDone done);
  // The transfer under `tag` gave up: its chunks queued or expected here
  // end with `why` (at once, on the caller's thread); chunks written
  // still end at their credits. Sending, the tag is closed; receiving, its
  // chunks still coming are dropped as they land, until Close.
  void Abandon(uint32_t tag, bool sending, const Status& why);
  // Polls the fabric once and moves everything that can move.
  void Progress();

  bool idle() const;

 private:
  struct Outgoing {
    uint32_t tag;
    uint64_t chunk;
    const std::byte* src;
    uint64_t bytes;
    ChunkDone done;
  };
  struct Incoming {
    Lander land;
    ChunkDone done;
  };
  using Key = std::pair<uint32_t, uint64_t>;  // tag, chunk

  void PumpSends();
  void Land(const Arrival& a, const Incoming& in);
  void Fail(const Status& why);

  Fabric* const fabric_;
  const RingShape ring_;
  const uint32_t qps_;
  const std::function<void(const Status&)> on_error_;
  SlotSender tx_;
  SlotReceiver rx_;
  FairQueue<Outgoing> queued_;
  std::optional<Outgoing> head_;          // the next to go, waiting for a credit
  std::map<uint32_t, Outgoing> written_;  // by slot: written, credit not back
  std::map<Key, Incoming> expected_;      // Expect before its arrival
  std::map<Key, Arrival> parked_;         // arrival before its Expect
  std::set<uint32_t> abandoned_;          // receiving tags given up, not closed
  uint64_t next_wr_ = 1;
  std::vector<FabricCompletion> polled_;
};

}  // namespace isometry::rdma
