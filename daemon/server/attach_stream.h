// The Attach stream (isometry.v1.Isometry/Attach): it opens a session,
// sends the session's token first and then one event per finished
// transfer of the session, and closes the session when the stream ends
// (the client went away, or the server shuts down). Internal to the gRPC
// service (grpc_service.cc).
#pragma once

#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "daemon/node/node.h"
#include "isometry.pb.h"

namespace isometry {

// State shared between an Attach stream and the session callback, which may
// fire on any thread until the session is closed.
struct AttachState {
  absl::Mutex mu;
  // Null once done.
  grpc::ServerWriteReactor<v1::SessionEvent>* reactor ABSL_GUARDED_BY(mu) = nullptr;
  std::deque<v1::SessionEvent> queue ABSL_GUARDED_BY(mu);  // front is being written
  bool writing ABSL_GUARDED_BY(mu) = false;
  bool finished ABSL_GUARDED_BY(mu) = false;
  SessionRef session ABSL_GUARDED_BY(mu);  // once opened

  SessionRef Session() ABSL_LOCKS_EXCLUDED(mu) {
    absl::MutexLock lock(&mu);
    return session;
  }

  void WriteNext() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (writing || finished || queue.empty() || !reactor) return;
    writing = true;
    reactor->StartWrite(&queue.front());
  }
  void Push(v1::SessionEvent e) ABSL_LOCKS_EXCLUDED(mu) {
    absl::MutexLock lock(&mu);
    if (finished) return;
    queue.push_back(std::move(e));
    WriteNext();
  }
  void FinishOnce(const grpc::Status& s) ABSL_LOCKS_EXCLUDED(mu) {
    absl::MutexLock lock(&mu);
    if (finished || !reactor) return;
    finished = true;
    reactor->Finish(s);
  }
};

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
