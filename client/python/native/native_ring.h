// The completions of copies Python submitted through the rings without
// waiting (isometry.Client.copy_future, acopy; isometry/native.py), read
// by one thread of the extension that never touches Python:
//
//   ticket = ring.Submit(src, dst, priority)      // the SQ; no wait
//   batch = ring.Take(200)                        // every completion so far
//
// The C++ client has no call that waits for any completion, only
// Client::Wait(ticket), so the reader waits for the tickets in the order
// they were submitted: a completion that arrives early is collected by
// the client meanwhile and handed over as soon as the ones before it are.
// Take() hands over every completion collected so far in one call, so
// Python pays one GIL round trip per batch, not per copy.
//
// Stop() lets the reader finish the copies in flight (their completions
// still come out of Take), then ends it; a session the daemon closed fails
// the tickets left at once with the reason. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/cpp/isometry_client.h"

namespace isometry::python {

struct RingDone {
  uint64_t ticket = 0;
  uint64_t transfer = 0;  // 0: the daemon refused the submission
  std::string code;       // "OK" when the copy is done
  std::string message;
};

class RingReader {
 public:
  RingReader() = default;
  RingReader(const RingReader&) = delete;
  RingReader& operator=(const RingReader&) = delete;
  ~RingReader() { Stop(); }

  // Queues a copy on `c`'s SQ (blocks only while it is full) and hands its
  // ticket to the reader, started at the first. With `transfer`, the copy
  // is submitted tracked (Client::SubmitTracked) and its transfer id is
  // stored there before the reader may take the completion (which would
  // end the ticket first); the daemon's refusal then comes back as the
  // error, its completion still handed out by Take. Call without the GIL.
  Result<uint64_t> Submit(const std::shared_ptr<client::Client>& c, const client::Instance& src,
                          const client::Instance& dst, int priority, uint64_t* transfer = nullptr);
  // Waits up to `timeout_ms` for completions and returns all there are;
  // *ended once the reader has stopped and nothing is left. Call without
  // the GIL.
  std::vector<RingDone> Take(int timeout_ms, bool* ended);
  // No more submissions; returns once the copies in flight completed.
  // Call without the GIL.
  void Stop();
  // Copies submitted whose completions Take() has not returned yet.
  uint64_t pending() const;

 private:
  void Run();

  mutable std::mutex mu_;
  std::condition_variable work_cv_;         // tickets_ or stop_ changed
  std::condition_variable done_cv_;         // done_ or ended_ changed
  std::shared_ptr<client::Client> client_;  // the reader's, until it ends
  std::deque<uint64_t> tickets_;
  std::vector<RingDone> done_;
  uint64_t pending_ = 0;
  bool stop_ = false;
  bool started_ = false;  // the thread was started (thread_ is Stop()'s)
  bool ended_ = false;
  std::thread thread_;
  std::mutex join_mu_;  // one Stop() joins
};

}  // namespace isometry::python
