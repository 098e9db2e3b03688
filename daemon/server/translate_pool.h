// Where the gRPC service runs its CPU-heavy calls: decoding a datatype,
// translating it to its canonical form and planning a datatype copy
// (RegisterDatatype, RegisterInstance, ExplainPlan). One such call may take
// a second of CPU; run on the gRPC callback threads a few of them starve
// every cheap call (GetStatus, Copy) of every client. They run here
// instead, on a few threads of their own behind a bounded queue, and each
// caller may have only a few of them queued or running.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "isometry.pb.h"

namespace isometry {

class TranslatePool {
 public:
  struct Limits {
    uint32_t threads = 2;          // daemon.translate_threads
    uint32_t queue = 32;           // daemon.translate_queue: waiting, all callers
    uint32_t per_caller = 2;       // daemon.max_translates_per_session: queued or running
    int64_t max_weight = 1 << 20;  // daemon.max_translate_weight
  };
  // How a call is answered; may be empty.
  using Answer = std::function<void()>;
  // With `status` OK: does the work and returns how to answer; any other:
  // returns the answer with it (the daemon is shutting down). Called
  // exactly once, on a pool thread or (shutting down) on the destroying
  // thread. The pool gives the answer only once the work is freed and the
  // caller's count released, so a caller that sends its next call as soon
  // as this one is answered finds its share free.
  using Work = std::function<Answer(const Status& status)>;

  // Threads start on demand, up to limits.threads.
  static std::unique_ptr<TranslatePool> Make(const Limits& limits);
  virtual ~TranslatePool() = default;
  // Waits for the running calls; those still queued, and any submitted
  // later, are answered UNAVAILABLE. The destructor does it too.
  virtual void Shutdown() = 0;

  // Queues `work` for `caller` (a session token; "" stands for every
  // session-less caller together). RESOURCE_EXHAUSTED naming the bound when
  // the caller has limits.per_caller calls queued or running, the queue is
  // full, or no thread could be started; `work` is then never called.
  // Thread-safe.
  virtual Status Submit(const std::string& caller, std::string_view what, Work work) = 0;

  // RESOURCE_EXHAUSTED when `weight` (DatatypeInfo::weight, or WeightOf a
  // request) exceeds limits.max_weight; `what` names the call.
  virtual Status CheckWeight(int64_t weight, std::string_view what) const = 0;
};

// RESOURCE_EXHAUSTED when `weight` exceeds `max_weight`
// (daemon.max_translate_weight); `what` names the call. TranslatePool's
// CheckWeight, and the local socket's, which translates on the session's
// own connection thread but burns CPU every client shares.
Status CheckTranslateWeight(int64_t weight, int64_t max_weight, std::string_view what);

// The weight a datatype message will have once decoded, counted as
// DatatypeInfo::weight counts it (nodes plus array entries), without
// decoding it: a registered handle counts 1 (its own weight is checked
// after decoding). Cheap: one walk over the message.
int64_t WeightOf(const v1::Datatype& type);

}  // namespace isometry
