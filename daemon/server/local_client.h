// What the local server (local_server.cc) keeps of one attached process:
// its session, socket, control segment, eventfds and the completion ring
// it writes; and the gate that orders a tracked copy's two completions.
// Internal to daemon/server.
#pragma once

#include <absl/synchronization/mutex.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "core/shm_ring.h"
#include "core/status.h"
#include "core/unique_fd.h"
#include "daemon/node/node_reports.h"
#include "daemon/node/session_ref.h"
#include "daemon/node/shared_memory.h"
#include "proto/ring_abi.h"

namespace isometry {

// One attached process: its session, socket, control segment and eventfds.
struct LocalClient {
  uint64_t key = 0;                   // epoll data
  std::string session;                // the token: never logged
  SessionRef ref;                     // what node calls take (resolved at hello)
  uint64_t session_id = 0;            // its public number, for logs
  std::atomic<bool> attached{false};  // hello done (read by the accept thread)
  std::atomic<bool> late{false};      // shut down for want of a hello
  std::chrono::steady_clock::time_point accepted_at;
  Credentials creds;
  UniqueFd socket;
  SharedMemory control;
  UniqueFd sq_event;  // client -> daemon
  UniqueFd cq_event;  // daemon -> client
  ring::ControlHeader* header = nullptr;
  shm::RingReader<ring::SubmissionEntry> sq;  // only the ring thread takes
  absl::Mutex cq_mu;                          // producers: the ring thread and completion callbacks
  shm::RingWriter<ring::CompletionEntry> cq ABSL_GUARDED_BY(cq_mu);
  // Completions owed: one per submission taken from the SQ, and one per
  // interim completion posted (ring::kFlagReportAccepted). Only the ring
  // thread touches it.
  uint32_t accepted = 0;
  // Fds a response owns (a lease's pidfd): closed once it is sent. Only
  // the control thread touches it.
  std::vector<UniqueFd> sent_fds;
  std::vector<UniqueFd> passed;  // the fds a RegisterPrivate frame came with, for its handler
  std::atomic<bool> closed{false};
  std::thread thread;

  // Posts one completion. The CQ never overflows: see CompletionSlotFree.
  void Complete(uint64_t user_data, uint64_t transfer, const Status& s) ABSL_LOCKS_EXCLUDED(cq_mu) {
    Post(user_data, transfer, static_cast<int32_t>(s.code()),
         std::string_view(s.message().data(), s.message().size()));
  }
  // Posts the interim completion of a copy that asked for its id
  // (ring::kFlagReportAccepted).
  void CompleteAccepted(uint64_t user_data, uint64_t transfer) ABSL_LOCKS_EXCLUDED(cq_mu) {
    Post(user_data, transfer, ring::kCodeAccepted, {});
  }
  void Post(uint64_t user_data, uint64_t transfer, int32_t code, std::string_view msg)
      ABSL_LOCKS_EXCLUDED(cq_mu) {
    {
      ring::CompletionEntry e{};
      e.user_data = user_data;
      e.transfer = transfer;
      e.code = code;
      e.message_len = static_cast<uint32_t>(std::min(msg.size(), sizeof e.message));
      if (e.message_len > 0) std::memcpy(e.message, msg.data(), e.message_len);
      absl::MutexLock lock(&cq_mu);
      cq.Push(e, std::memory_order_seq_cst);
    }
    // A client spinning on cq_tail sees the entry without the eventfd.
    if (header->client_spinning.value.load(std::memory_order_seq_cst) == 1) return;
    const uint64_t one = 1;
    (void)!::write(cq_event.get(), &one, sizeof one);
  }

  // A submission may be taken only while its completion has a free CQ slot:
  // completions owed (accepted) minus those the client consumed (cq_head,
  // client-written: a lying client only stalls itself) stays below the size.
  bool CompletionSlotFree(uint32_t cq_entries) const {
    const uint32_t consumed = header->cq_head.value.load(std::memory_order_acquire);
    return accepted - consumed < cq_entries;
  }
};

// Holds a copy's own completion back until its interim one is posted
// (ring::kFlagReportAccepted): a copy may end inside Copies::Copy (an
// inline one) before the ring thread knows its id, and a client reads
// the interim completion first.
class AcceptedGate {
 public:
  struct Held {
    uint64_t transfer = 0;
    Status status;
  };
  // Whether the copy's completion must wait; if so it is kept for Open.
  bool Hold(uint64_t transfer, const Status& status) {
    absl::MutexLock lock(&mu_);
    if (open_) return false;
    held_ = Held{transfer, status};
    return true;
  }
  // Lets completions through; the one held meanwhile, if any.
  std::optional<Held> Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
    return std::move(held_);
  }

 private:
  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<Held> held_ ABSL_GUARDED_BY(mu_);
};

}  // namespace isometry
