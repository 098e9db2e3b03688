// One session's registered datatypes (FALCON-X's memoized translation): the
// handles it registered, the forms translated for the counts its
// instances used, and what they make the daemon hold.
//
// Thread-safety: every call may come from any thread; the table has its
// own lock and takes no other, so registering a handle or looking one up
// waits on no other session.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "core/datatype.h"
#include "core/status.h"
#include "daemon/node/byte_budget.h"
#include "layout/datatype_form.h"

namespace isometry {

class SessionDatatypes {
 public:
  // Forms kept per handle: a few counts each, the rest translated again.
  static constexpr size_t kFormsKept = 16;

  // `budget` bounds this session's datatype bytes
  // (daemon.max_datatype_bytes_per_session); `node_budget` every session's.
  SessionDatatypes(std::shared_ptr<ByteBudget> budget, std::shared_ptr<ByteBudget> node_budget)
      : budget_(std::move(budget)), node_budget_(std::move(node_budget)) {}

  // Registers `type` as `handle` with its form of one element, charging
  // `cost` bytes (and its entry here) to both budgets. RESOURCE_EXHAUSTED when `max` handles
  // are registered or a budget has no room; FAILED_PRECONDITION once the
  // session ended (Close). Nothing is kept on an error.
  Status Add(uint64_t handle, const Datatype& type, CanonicalForm one, uint64_t cost, uint32_t max)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The type `handle` names; NOT_FOUND when this session has no such handle.
  Result<Datatype> Type(uint64_t handle) const ABSL_LOCKS_EXCLUDED(mu_);

  // The form kept for `count` elements of `handle`, or null when none is
  // kept (translate it, then Keep); NOT_FOUND for an unknown handle.
  Result<std::shared_ptr<const CanonicalForm>> KeptForm(uint64_t handle, int64_t count) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Keeps `form` for `count` elements of `handle` while it has fewer than
  // kFormsKept and both budgets have room; otherwise it is translated again
  // next time, never refused. Nothing when the handle or session is gone.
  void Keep(uint64_t handle, int64_t count, std::shared_ptr<const CanonicalForm> form)
      ABSL_LOCKS_EXCLUDED(mu_);

  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

  // The session ended: every handle goes and its bytes go back to the
  // budgets; later Adds are refused.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Registered {
    Datatype type;
    std::map<int64_t, std::shared_ptr<const CanonicalForm>> forms;  // by count
    // Its charges against both budgets (the type and each form kept),
    // given back when it goes.
    std::vector<std::shared_ptr<void>> charges;
  };

  // The entry of `handle`; NOT_FOUND naming it when there is none.
  Result<const Registered*> FindLocked(uint64_t handle) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<ByteBudget> budget_, node_budget_;
  mutable absl::Mutex mu_;
  std::map<uint64_t, Registered> types_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

// Bytes a form's pieces hold (charged when a form is kept).
uint64_t FormBytes(const std::vector<FormPiece>& pieces);

}  // namespace isometry
