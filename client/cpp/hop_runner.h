// The client's side of a hop window (layout/hop_window.h): runs, in this
// process, the hops of this session's copies that read or write its own
// private memory, which the daemon would otherwise do one system call per
// run (docs/guides/client-memory.md, "Hops the client runs itself").
//
// The Client runs posted work while a thread of it waits for a
// completion (Client::Copy, Wait): a copy that hands hops to this process
// is only submitted by a caller that then waits for it.
//
// Thread-safety: RunPending may be called from any thread; one runs the
// work at a time.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "core/shm_ring.h"
#include "core/status.h"
#include "layout/hop_window.h"

namespace isometry::client {

class HopRunner {
 public:
  // Maps the window memfd `fd` (`bytes` long; the caller keeps ownership
  // of the fd) and checks the header the daemon wrote.
  static Result<std::unique_ptr<HopRunner>> Map(int fd, uint64_t bytes);
  ~HopRunner();
  HopRunner(const HopRunner&) = delete;
  HopRunner& operator=(const HopRunner&) = delete;

  // Whether the daemon has posted work not yet run.
  bool Pending() const;
  // Runs every posted work entry and answers each; returns how many ran.
  int RunPending();
  // Work entries run since Map, and those refused (bad program, a range
  // outside the data area): for tests and statistics.
  uint64_t ran() const { return ran_.load(std::memory_order_relaxed); }
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  HopRunner() = default;
  Status RunOne(const hop_window::WorkEntry& e);

  std::byte* base_ = nullptr;
  uint64_t bytes_ = 0;
  hop_window::HopWindowHeader* header_ = nullptr;
  std::mutex mu_;
  shm::RingReader<hop_window::WorkEntry> work_;  // guarded by mu_
  shm::RingWriter<hop_window::DoneEntry> done_;  // guarded by mu_
  std::atomic<uint64_t> ran_{0};
  std::atomic<uint64_t> refused_{0};
};

}  // namespace isometry::client
