// Test support for the RDMA data path without a device: an in-memory
// fabric joining two channels (a write lands in the peer's ring as it is
// posted; a thread-safe stand-in for a pair of RC QPs, able to fail the
// next write with a device's text), a fallback channel that records what
// reached it, and strided copy programs with a dense wire side.
#pragma once

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "channels/channel.h"
#include "net/rdma/rdma_stream.h"

namespace isometry::rdma::test {

// Both ends' fabrics share one lock; a post completes at once.
struct Wire {
  std::mutex mu;
  std::optional<std::string> fail_next_write;
};

class ThreadedFabric final : public Fabric {
 public:
  ThreadedFabric(Wire* wire, RingShape ring) : wire_(wire), ring_(ring.slots * ring.slot_bytes) {}
  ThreadedFabric* peer = nullptr;

  Status PostWrite(uint32_t, uint64_t wr_id, const std::byte* src, uint64_t bytes, uint64_t offset,
                   uint32_t imm) override {
    std::lock_guard<std::mutex> lock(wire_->mu);
    FabricCompletion mine;
    mine.wr_id = wr_id;
    if (wire_->fail_next_write) {
      mine.ok = false;
      mine.error = *wire_->fail_next_write;
      wire_->fail_next_write.reset();
      done_.push_back(mine);
      return OkStatus();
    }
    std::memcpy(peer->ring_.data() + offset, src, bytes);
    FabricCompletion theirs;
    theirs.kind = FabricCompletion::Kind::kArrival;
    theirs.imm = imm;
    theirs.bytes = bytes;
    peer->done_.push_back(theirs);
    done_.push_back(mine);
    return OkStatus();
  }
  Status PostCredit(uint32_t, uint64_t wr_id, uint32_t imm) override {
    std::lock_guard<std::mutex> lock(wire_->mu);
    FabricCompletion theirs;
    theirs.kind = FabricCompletion::Kind::kCreditIn;
    theirs.imm = imm;
    peer->done_.push_back(theirs);
    FabricCompletion mine;
    mine.kind = FabricCompletion::Kind::kCredit;
    mine.wr_id = wr_id;
    done_.push_back(mine);
    return OkStatus();
  }
  void Poll(std::vector<FabricCompletion>& out) override {
    std::lock_guard<std::mutex> lock(wire_->mu);
    out.insert(out.end(), done_.begin(), done_.end());
    done_.clear();
  }
  const std::byte* Ring() const override { return ring_.data(); }

 private:
  Wire* const wire_;
  std::vector<std::byte> ring_;
  std::vector<FabricCompletion> done_;
};

// A fallback that records what reached it and completes it at once.
class Recording final : public Channel {
 public:
  const ChannelCaps& caps() const override { return caps_; }
  void Submit(ChannelRequest, RequestDone done) override {
    ++requests;
    std::thread([done = std::move(done)] { done(absl::AbortedError("went to TCP")); }).detach();
  }
  void AbandonTransfer(uint64_t, const Status&) override { ++abandoned; }
  std::atomic<int> requests{0}, abandoned{0};

 private:
  ChannelCaps caps_;
};

// `rows` rows of `row` bytes `stride` apart (stride >= row) to or from a
// dense run at offset 0: the wire side is dense.
inline std::shared_ptr<const CopyProgram> Strided(uint64_t rows, uint64_t row, uint64_t stride,
                                                  bool to_wire) {
  auto p = std::make_shared<CopyProgram>();
  CopyOp op;
  op.run_bytes = row;
  op.num_loops = 1;
  op.loops[0] = CopyLoop{rows, to_wire ? stride : row, to_wire ? row : stride};
  p->ops.push_back(op);
  p->bytes = rows * row;
  p->runs = rows;
  return p;
}

}  // namespace isometry::rdma::test
