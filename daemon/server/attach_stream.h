// The Attach stream (isometry.v1.Isometry/Attach): it opens a session,
// sends the session's token first and then one event per finished
// transfer of the session, and closes the session when the stream ends
// (the client went away, or the server shuts down). Internal to the gRPC
// service (grpc_service.cc).
#pragma once

#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "daemon/node/node.h"
#include "isometry.pb.h"

namespace isometry {

// State shared between an Attach stream and the session callback, which may
// fire on any thread until the session is closed.
//
// The events a client has not read yet are bounded
// (daemon.max_attach_backlog_bytes, their encoded bytes; at least one is
// always held): a client that stops reading while its copies go on cannot
// grow the daemon's memory. Completions beyond are dropped and counted; the
// next event the stream sends says how many (SessionEvent.
// dropped_completions), so the client asks Wait for what it still expects.
struct AttachState {
  explicit AttachState(uint64_t max_backlog_bytes) : max_backlog_bytes(max_backlog_bytes) {}

  const uint64_t max_backlog_bytes;
  absl::Mutex mu;
  // Null once done.
  grpc::ServerWriteReactor<v1::SessionEvent>* reactor ABSL_GUARDED_BY(mu) = nullptr;
  // Front is being written; each with its encoded size.
  std::deque<std::pair<v1::SessionEvent, uint64_t>> queue ABSL_GUARDED_BY(mu);
  uint64_t queued_bytes ABSL_GUARDED_BY(mu) = 0;
  uint64_t dropped ABSL_GUARDED_BY(mu) = 0;        // not yet told to the client
  uint64_t dropped_total ABSL_GUARDED_BY(mu) = 0;  // over the session's life
  bool writing ABSL_GUARDED_BY(mu) = false;
  bool finished ABSL_GUARDED_BY(mu) = false;
  SessionRef session ABSL_GUARDED_BY(mu);  // once opened
  std::string who ABSL_GUARDED_BY(mu);     // "session N (client 'name')", escaped

  SessionRef Session() ABSL_LOCKS_EXCLUDED(mu) {
    absl::MutexLock lock(&mu);
    return session;
  }

  void WriteNext() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (writing || finished || queue.empty() || !reactor) return;
    writing = true;
    reactor->StartWrite(&queue.front().first);
  }
  // Queues `e`, or drops it (a completion) when the backlog is full.
  void Push(v1::SessionEvent e) ABSL_LOCKS_EXCLUDED(mu);
  // The front event was written (or the stream broke): the next one.
  void WriteDone(bool ok) ABSL_LOCKS_EXCLUDED(mu);
  void FinishOnce(const grpc::Status& s) ABSL_LOCKS_EXCLUDED(mu) {
    absl::MutexLock lock(&mu);
    if (finished || !reactor) return;
    finished = true;
    reactor->Finish(s);
  }

 private:
  void QueueLocked(v1::SessionEvent e, uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
};

// Completion events dropped so far, all sessions together (the metric
// isometry_attach_events_dropped_total).
uint64_t AttachEventsDropped();

class AttachReactor final : public grpc::ServerWriteReactor<v1::SessionEvent> {
 public:
  // Opens a session named `name` ("grpc" when empty); `track(this, true)`
  // once it is open, `track(this, false)` when the stream is done.
  AttachReactor(Node& node, std::function<void(AttachReactor*, bool)> track,
                const std::string& name);

  // Outlives the reactor (OnDone deletes it): what Shutdown holds.
  std::shared_ptr<AttachState> state() const { return state_; }

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void CloseSession();

  Node& node_;
  std::function<void(AttachReactor*, bool)> track_;
  std::shared_ptr<AttachState> state_;
  std::string session_;  // the token, sent once to the client
  SessionRef ref_;
  std::atomic<bool> closed_{false};
};

}  // namespace isometry
