// One session's datatype table (session_datatypes.h).
#include "daemon/node/session_datatypes.h"

#include "core/strings.h"

namespace isometry {

uint64_t FormBytes(const std::vector<FormPiece>& pieces) {
  uint64_t n = pieces.capacity() * sizeof(FormPiece);
  for (const FormPiece& p : pieces) {
    n += p.loops.capacity() * sizeof(FormLoop) + FormBytes(p.body);
  }
  return n;
}

Status SessionDatatypes::Add(uint64_t handle, const Datatype& type, CanonicalForm one,
                             uint64_t cost, uint32_t max) {
  absl::MutexLock lock(&mu_);
  if (closed_) return FailedPrecondition("unknown or closed session");
  if (types_.size() >= max) {
    return ResourceExhausted("this session has ", types_.size(),
                             " datatypes registered; daemon.max_datatypes_per_session is ", max);
  }
  ISO_ASSIGN_OR_RETURN(std::shared_ptr<void> charge,
                       ByteBudget::Take({budget_, node_budget_}, cost + sizeof(Registered),
                                        "registering a datatype"));
  Registered reg{type, {}, {std::move(charge)}};
  reg.forms[1] = std::make_shared<const CanonicalForm>(std::move(one));
  types_.emplace(handle, std::move(reg));
  return OkStatus();
}

Result<const SessionDatatypes::Registered*> SessionDatatypes::FindLocked(uint64_t handle) const {
  auto it = types_.find(handle);
  if (it == types_.end()) return NotFound("no datatype ", handle, " registered in this session");
  return &it->second;
}

Result<Datatype> SessionDatatypes::Type(uint64_t handle) const {
  absl::MutexLock lock(&mu_);
  ISO_ASSIGN_OR_RETURN(const Registered* r, FindLocked(handle));
  return r->type;
}

Result<std::shared_ptr<const CanonicalForm>> SessionDatatypes::KeptForm(uint64_t handle,
                                                                        int64_t count) const {
  absl::MutexLock lock(&mu_);
  ISO_ASSIGN_OR_RETURN(const Registered* r, FindLocked(handle));
  auto f = r->forms.find(count);
  return f == r->forms.end() ? nullptr : f->second;
}

void SessionDatatypes::Keep(uint64_t handle, int64_t count,
                            std::shared_ptr<const CanonicalForm> form) {
  const uint64_t bytes = FormBytes(form->pieces);
  absl::MutexLock lock(&mu_);
  auto it = types_.find(handle);  // the handle (or the session) may have ended meanwhile
  if (it == types_.end() || it->second.forms.size() >= kFormsKept) return;
  auto charge = ByteBudget::Take({budget_, node_budget_}, bytes, "a datatype translation");
  if (!charge.ok()) return;
  it->second.forms.emplace(count, std::move(form));
  it->second.charges.push_back(*std::move(charge));
}

size_t SessionDatatypes::size() const {
  absl::MutexLock lock(&mu_);
  return types_.size();
}

void SessionDatatypes::Close() {
  std::map<uint64_t, Registered> gone;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    gone.swap(types_);
  }
  // Trees and forms are freed here, after this table's lock is released,
  // so a copy of this session translating meanwhile does not wait on it.
}

}  // namespace isometry
