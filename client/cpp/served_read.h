// The reading side of served reads (layout/serve_window.h; docs/guides/client-memory.md, "Served
// reads"): a copy out of another process's published range, packed there
// by its ReadServer (client/cpp/read_server.h) and unpacked here, piece by
// piece while the next pieces are packed.
//
// A process attaches once to each publisher's window (pidfd_getfd on the
// pidfd of its lease: the kernel allows that only where it would let this
// process read the publisher's memory) and owns one lane there while it
// lives. One copy at a time runs on the lane; a copy that finds it busy,
// or a publisher that does not answer, reads the other way (the caller's
// direct read), so served reads never make a copy fail that a direct read
// would do.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/unique_fd.h"
#include "layout/copy_program.h"
#include "layout/flat_program.h"
#include "layout/serve_window.h"

namespace isometry::client {

// One lease's program, ready for a lane: its records (written to the lane
// when it holds another program) and its unpack pieces, cut once.
struct ServedProgram {
  uint64_t id = 0;  // unique in this process, from a random start: nonzero
  std::string records;
  uint64_t ops = 0;
  uint64_t bytes = 0;
  uint64_t remote_address = 0;  // the program's source offset 0, in the publisher
  std::byte* local = nullptr;   // its destination offset 0, here
  uint64_t piece_bytes = 0;
  std::vector<FlatProgram> unpack;  // PackSide::kUnpack
  // False once the publisher refused the program: its copies read the
  // other way from then on.
  mutable std::atomic<bool> usable{true};
};

// The piece size for a copy of `bytes` (serve_window::PieceBytesFor).
uint64_t PieceBytesFor(uint64_t bytes);

// A staged lease's program made ready for a lane: `program` packs the
// source's stream densely (its destination offsets are stream positions)
// and `pieces` unpack it here, piece k being bytes [k * piece_bytes, ...)
// of the stream (source offsets in the piece, destination offsets from
// `local`). Nullopt when the records do not fit the lane's program area.
std::optional<std::unique_ptr<ServedProgram>> MakeStagedServedProgram(
    const CopyProgram& program, const std::vector<CopyProgram>& pieces, uint64_t piece_bytes,
    uint64_t remote_address, std::byte* local);

// `program` made ready for a lane; nullopt when its records do not fit the
// lane's program area.
std::optional<std::unique_ptr<ServedProgram>> MakeServedProgram(const CopyProgram& program,
                                                                uint64_t remote_address,
                                                                std::byte* local);

class ServedWindow {
 public:
  // Takes fd `fd_number` of the process behind `pidfd`, checks it is the
  // sealed window the lease named (`bytes`, `token`), maps it and claims a
  // lane. UNAVAILABLE when every lane is owned by a live process.
  static Result<std::shared_ptr<ServedWindow>> Attach(int pidfd, int fd_number, uint64_t bytes,
                                                      uint64_t token);
  ~ServedWindow();  // gives the lane back
  ServedWindow(const ServedWindow&) = delete;
  ServedWindow& operator=(const ServedWindow&) = delete;

  // One copy of `p` through this process's lane. Nullopt when it did not
  // run here (the lane is busy with another thread's copy, the publisher
  // refused the program or did not answer in time): the caller copies the
  // other way. NOT_FOUND when the publisher (`pidfd`) has exited.
  // `spin_us`: how long to spin on a piece before sleeping on it.
  std::optional<Status> Copy(const ServedProgram& p, int pidfd, uint32_t spin_us);

  // Copies run to the end here, for tests and statistics.
  uint64_t copies() const { return copies_.load(std::memory_order_relaxed); }

 private:
  ServedWindow() = default;
  enum class Waited { kReady, kEnded, kExited, kStalled };
  // Waits until `produced` passes `piece` or the request ends.
  Waited WaitForPiece(uint32_t seq, uint64_t piece, int pidfd, uint32_t spin_us);
  // Cancels request `seq` and waits for the publisher to end it; marks the
  // lane broken when it does not.
  void GiveUp(uint32_t seq);
  // Sleeps (at most a millisecond) until the publisher moves on request
  // `seq`, unless it already has.
  void Sleep(uint32_t seq);

  UniqueFd fd_;
  std::byte* window_ = nullptr;
  serve_window::Header* header_ = nullptr;
  serve_window::Lane* lane_ = nullptr;
  uint32_t lane_index_ = 0;
  uint64_t owner_ = 0;

  std::mutex mu_;         // one copy on the lane at a time
  uint32_t seq_ = 0;      // guarded by mu_: the last request posted
  uint64_t in_area_ = 0;  // guarded by mu_: ServedProgram::id in the program area
  bool broken_ = false;   // guarded by mu_: a request the publisher never ended
  std::atomic<uint64_t> copies_{0};
};

}  // namespace isometry::client
