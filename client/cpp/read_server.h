// The publishing side of served reads (layout/serve_window.h; docs/guides/client-memory.md,
// "Served reads"): a serve window and one thread that packs, in this
// process, what readers of this uid ask of the private ranges this
// session published, while they unpack. A reader thus copies a fragmented
// datatype out of this process at memcpy speed instead of one system call
// a run, as MPI's receiver does with a sender that packs.
//
// The thread spins `spin` after its last piece of work (a reader's next
// copy then starts within a microsecond), then sleeps on the window's
// doorbell. It reads only inside ranges given to Serve(); each must stay
// mapped while served, as this process's own accesses would need.
//
// Thread-safety: Serve() may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "client/cpp/pack_chooser.h"
#include "core/status.h"
#include "core/unique_fd.h"
#include "layout/copy_program.h"
#include "layout/flat_program.h"
#include "layout/serve_window.h"

namespace isometry::client {

class ReadServer {
 public:
  // Makes the window (a sealed memfd with a random token) and starts the
  // thread.
  static Result<std::unique_ptr<ReadServer>> Start(std::chrono::microseconds spin);
  ~ReadServer();  // stops the thread: readers mid-copy see their lane fail
  ReadServer(const ReadServer&) = delete;
  ReadServer& operator=(const ReadServer&) = delete;

  // What a reader needs to find the window (through isometryd's lease).
  int fd() const { return fd_.get(); }
  uint64_t bytes() const { return serve_window::kWindowBytes; }
  uint64_t token() const { return token_; }

  // Serves [address, address + bytes) of this process from now on.
  void Serve(uint64_t address, uint64_t bytes);

  // Requests packed to the end, and refused (a program outside the served
  // ranges, a bad request): for tests and statistics.
  uint64_t served() const { return served_.load(std::memory_order_relaxed); }
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  // Pieces packed into a buffer first, and straight into their slot.
  uint64_t pieces_staged() const { return staged_.load(std::memory_order_relaxed); }
  uint64_t pieces_direct() const { return direct_.load(std::memory_order_relaxed); }

 private:
  // What a request asks (serve_window::Request's fields).
  struct Asked {
    uint64_t program_id = 0, program_ops = 0, program_bytes = 0;
    uint64_t remote_address = 0, piece_bytes = 0, bytes = 0;
    bool operator==(const Asked&) const = default;
  };
  // What a lane's program was cut into, kept while its request names it
  // (memoized translation: a reader's later copies reuse it).
  struct LaneCache {
    Asked asked;
    std::vector<FlatProgram> pieces;  // PackSide::kPack, absolute source offsets
    bool valid = false;
  };

  ReadServer() = default;
  void Loop();
  bool AnyRequest() const;
  void ServeLane(uint32_t lane, uint32_t seq);
  // The lane's pieces for its current request (cut or kept), or why not.
  Status Prepare(uint32_t lane);
  // Waits until slot `piece` % kSlots is free; false when the request was
  // cancelled, the server stops, or the reader made no progress for long.
  bool WaitForSlot(serve_window::Lane& l, uint32_t seq, uint64_t piece);
  bool Inside(uint64_t lo, uint64_t hi) const;

  UniqueFd fd_;
  std::byte* window_ = nullptr;
  serve_window::Header* header_ = nullptr;
  uint64_t token_ = 0;
  std::chrono::microseconds spin_{0};

  mutable std::mutex ranges_mu_;
  std::vector<std::pair<uint64_t, uint64_t>> ranges_;  // [begin, end), guarded by ranges_mu_

  // The thread's own.
  LaneCache cache_[serve_window::kLanes];
  uint32_t done_[serve_window::kLanes] = {};  // the last request ended, per lane
  // Where staged pieces are packed before one copy into their slot (see
  // ServeLane); kSlotBytes, allocated with the thread.
  std::vector<std::byte> stage_;
  PackChooser chooser_;

  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> served_{0};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> staged_{0};
  std::atomic<uint64_t> direct_{0};
  std::thread thread_;
};

}  // namespace isometry::client
