// The reactor of a Copy that waits for its transfer (CopyRequest.wait):
// when the call ends before the transfer does (the client's deadline
// passed, it cancelled, its connection dropped), the transfer is
// cancelled, so that nothing keeps running that its caller has given up
// on. A client that wants the copy to outlive the call copies without
// `wait` and calls Wait.
//
// Lifetime: gRPC calls OnDone once Finish has been sent, and the reactor
// deletes itself there. Finish comes from the transfer's completion
// (Ended), never from OnCancel: a cancelled transfer still completes, and
// that completion finishes the call.
//
// A transfer that ended before it was started (a small copy runs inline,
// on the calling thread) needs no reactor of its own: Started says so, and
// the handler answers on gRPC's default reactor instead and deletes this
// one, which gRPC never saw. gRPC runs the OnDone of an application's
// reactor on its executor thread, one more thread wake-up on every call;
// its default reactor's runs inline.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>

#include "absl/synchronization/mutex.h"

namespace isometry {

class WaitingCopy final : public grpc::ServerUnaryReactor {
 public:
  // `cancel(id)` cancels transfer `id` (errors ignored: it may have ended).
  explicit WaitingCopy(std::function<void(uint64_t)> cancel) : cancel_(std::move(cancel)) {}

  // The transfer started as `id`. False when it had ended already (its
  // response is filled): the caller answers the call, not this reactor
  // (above). Otherwise its end finishes the call, and it is cancelled at
  // once if the call already ended.
  [[nodiscard]] bool Started(uint64_t id) {
    bool abandoned = false;
    {
      absl::MutexLock lock(&mu_);
      if (ended_) return false;
      id_ = id;
      abandoned = abandoned_;
    }
    if (abandoned) cancel_(id);
    return true;
  }

  // The transfer ended (the response is filled): finishes the call, or,
  // when Started has not run yet, leaves the answer to its caller (the
  // transfer may end before Start returns its id).
  void Ended() {
    {
      absl::MutexLock lock(&mu_);
      if (id_ == 0) {
        ended_ = true;
        return;
      }
    }
    Finish(grpc::Status::OK);
  }

  void OnCancel() override {
    uint64_t id = 0;
    {
      absl::MutexLock lock(&mu_);
      abandoned_ = true;
      id = id_;
    }
    if (id != 0) cancel_(id);
  }

  void OnDone() override { delete this; }

 private:
  const std::function<void(uint64_t)> cancel_;
  absl::Mutex mu_;
  uint64_t id_ ABSL_GUARDED_BY(mu_) = 0;
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace isometry
