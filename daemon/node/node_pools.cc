// Client pool memory: each allocation its own memfd, charged to its pool
// and its session's quota; freed, published to other clients, read and
// written through the daemon for clients without the shared mapping.
#include <spdlog/spdlog.h>

#include <cstring>

#include "core/checked.h"
#include "core/strings.h"
#include "daemon/node/node_impl.h"

namespace isometry {

Result<std::shared_ptr<Allocation>> Node::Impl::UsableAllocation(uint64_t session,
                                                                 uint64_t id) const {
  auto it = allocations.find(id);
  if (it == allocations.end()) return NotFound("no allocation ", id);
  const Allocation& a = *it->second;
  if (a.owner != session && !a.published) {
    return PermissionDenied("allocation ", id, " belongs to another client and is not published");
  }
  return it->second;
}

std::shared_ptr<PoolAccount> Node::Impl::PoolByName(const std::string& name) const {
  for (const auto& p : pools) {
    if (p->name == name) return p;
  }
  return nullptr;
}

Result<AllocationReport> node::Pools::Allocate(SessionRef session, const std::string& memory,
                                               uint64_t bytes) {
  std::shared_ptr<PoolAccount> pool = impl_->PoolByName(memory);
  if (!pool) return NotFound("no memory named '", memory, "'");
  if (pool->capacity == 0) {
    return FailedPrecondition("memory '", memory, "' has no client pool (set pool = \"...\" ",
                              "for it in the config)");
  }
  if (bytes == 0) return InvalidArgument("allocation of 0 bytes");
  if (bytes > pool->capacity) {
    return ResourceExhausted("allocation of ", bytes, " bytes exceeds memory '", memory,
                             "' pool of ", pool->capacity, " bytes");
  }
  uint64_t id, session_id;
  int64_t owner_uid;
  {
    absl::MutexLock lock(&impl_->mu);
    ISO_ASSIGN_OR_RETURN(Session * s, impl_->FindSession(session));
    const uint32_t max_allocations = impl_->config.daemon.max_allocations_per_session;
    if (s->allocations.size() >= max_allocations) {
      return ResourceExhausted("this session holds ", s->allocations.size(),
                               " allocations; daemon.max_allocations_per_session is ",
                               max_allocations);
    }
    session_id = s->id;
    owner_uid = OwnerOf(*s).uid;
    uint64_t& used = s->quota_used[pool->memory];
    if (bytes > pool->quota - used) {
      return ResourceExhausted("client quota of memory '", memory, "' exhausted: ", used, " of ",
                               pool->quota, " bytes held, ", bytes, " asked");
    }
    if (!pool->TryTake(bytes)) {
      return ResourceExhausted("memory '", memory, "' pool is full: ", pool->used.load(), " of ",
                               pool->capacity, " bytes in use, ", bytes, " asked");
    }
    used += bytes;
    id = impl_->next_allocation++;
  }
  auto shm = SharedMemory::Create(StrCat("isometry:", memory, ":", id), bytes, pool->hugetlb);
  // ZCM: pinned and mapped for the GPUs, so GPU hops from and to it run
  // asynchronously; where CUDA refuses, it stays usable as host memory.
  std::shared_ptr<void> pinned;
  if (shm.ok() && pool->gpu) {
    if (Status s = pool->gpu->PinHost(shm->data(), shm->size()); s.ok()) {
      pinned =
          std::shared_ptr<void>(shm->data(), [gpu = pool->gpu](void* p) { gpu->UnpinHost(p); });
    } else if (!pool->pin_warned.exchange(true)) {
      spdlog::warn("memory '{}': allocations are not pinned for the GPUs: {}", memory,
                   s.ToString());
    }
  }
  absl::MutexLock lock(&impl_->mu);
  auto sit = impl_->sessions.find(session_id);
  if (!shm.ok() || sit == impl_->sessions.end()) {
    pool->used -= bytes;
    if (sit != impl_->sessions.end()) sit->second->quota_used[pool->memory] -= bytes;
    return shm.ok() ? FailedPrecondition("session closed during allocation") : shm.status();
  }
  if (pool->hugetlb && !shm->used_hugetlb() && !pool->hugetlb_warned.exchange(true)) {
    spdlog::warn(
        "memory '{}': hugetlb is configured but no 2 MiB huge pages could be had "
        "(see /proc/sys/vm/nr_hugepages); using normal pages",
        memory);
  }
  spdlog::debug("memory '{}': allocation {} of {} bytes populated in {:.1f} ms", memory, id, bytes,
                shm->populate_seconds() * 1e3);
  auto a = std::make_shared<Allocation>();
  a->id = id;
  a->owner = session_id;
  a->owner_uid = owner_uid;
  a->shm = *std::move(shm);
  a->pinned = std::move(pinned);
  a->pool = pool;  // from here on the destructor returns the bytes
  impl_->allocations[id] = a;
  sit->second->allocations.insert(id);
  return AllocationReport{id, memory, bytes, a->shm.fd()};
}

Status node::Pools::Free(SessionRef session, uint64_t allocation, bool is_operator) {
  absl::MutexLock lock(&impl_->mu);
  // The operator frees orphans with its token alone.
  Session* s = const_cast<Session*>(impl_->FindSessionOrNull(session));
  if (!s && !is_operator) ISO_RETURN_IF_ERROR(impl_->FindSession(session).status());
  auto it = impl_->allocations.find(allocation);
  if (it == impl_->allocations.end()) return NotFound("no allocation ", allocation);
  Allocation& a = *it->second;
  // A published allocation whose owner has gone: a later session of the
  // same uid (the publisher's job, restarted) or the operator frees it;
  // other users may read it but not destroy it.
  const bool orphan = a.published && a.owner == 0;
  const int64_t uid = s ? OwnerOf(*s).uid : -1;
  const bool same_uid = uid >= 0 && uid == a.owner_uid;
  if ((!s || a.owner != s->id) && !(orphan && (same_uid || is_operator))) {
    return PermissionDenied("allocation ", allocation,
                            s ? " belongs to another client" : " is not an orphan",
                            orphan ? "; its publisher has left: a session of the same uid, or "
                                     "the operator (--operator-token), may free it"
                                   : (s ? ""
                                        : ": the operator token alone frees only published "
                                          "allocations whose owner has left (isoctl orphans)"));
  }
  if (a.published) {
    uint64_t& held = impl_->published_bytes[{a.owner_uid, a.pool->memory}];
    held -= std::min(held, a.shm.size());
  }
  if (s) {
    for (auto i = s->instances.begin(); i != s->instances.end();) {
      auto inst = impl_->instances.find(*i);
      if (inst != impl_->instances.end() && inst->second.allocation.get() == &a) {
        impl_->instances.erase(inst);
        i = s->instances.erase(i);
      } else {
        ++i;
      }
    }
    if (a.owner == s->id) s->quota_used[a.pool->memory] -= a.shm.size();
    s->allocations.erase(allocation);
  } else {
    spdlog::info("operator freed orphaned allocation {} ({} bytes of memory '{}', uid {})",
                 allocation, a.shm.size(), a.pool->name, a.owner_uid);
  }
  if (a.watch) {
    a.watch->Close("the allocation was freed");
    a.watch.reset();
  }
  impl_->allocations.erase(it);
  return OkStatus();
}

Status node::Pools::Publish(SessionRef session, uint64_t allocation) {
  absl::MutexLock lock(&impl_->mu);
  ISO_ASSIGN_OR_RETURN(Session * s, impl_->FindSession(session));
  auto it = impl_->allocations.find(allocation);
  if (it == impl_->allocations.end()) return NotFound("no allocation ", allocation);
  Allocation& a = *it->second;
  if (a.owner != s->id) {
    return PermissionDenied("allocation ", allocation, " belongs to another client");
  }
  if (a.published) return OkStatus();
  uint64_t& held = impl_->published_bytes[{a.owner_uid, a.pool->memory}];
  if (a.shm.size() > a.pool->quota - std::min(held, a.pool->quota)) {
    return ResourceExhausted(
        "publishing allocation ", allocation, " (", a.shm.size(), " bytes) would put ",
        a.owner_uid >= 0 ? StrCat("uid ", a.owner_uid, "'s") : std::string("gRPC clients'"),
        " published allocations in memory '", a.pool->name, "' past its client_quota of ",
        a.pool->quota, " bytes (", held,
        " already published; published allocations outlive their session and count until "
        "freed, see isoctl orphans)");
  }
  held += a.shm.size();
  a.published = true;
  return OkStatus();
}

std::vector<OrphanReport> node::Pools::ListOrphans() const {
  std::vector<OrphanReport> out;
  absl::MutexLock lock(&impl_->mu);
  for (const auto& [id, a] : impl_->allocations) {
    if (a->published && a->owner == 0) {
      out.push_back({id, a->pool->name, a->shm.size(), a->owner_uid});
    }
  }
  return out;
}

Result<AllocationReport> node::Pools::Lookup(SessionRef session, uint64_t allocation) const {
  absl::MutexLock lock(&impl_->mu);
  ISO_ASSIGN_OR_RETURN(const Session* s, impl_->FindSession(session));
  ISO_ASSIGN_OR_RETURN(auto a, impl_->UsableAllocation(s->id, allocation));
  return AllocationReport{a->id, a->pool->name, a->shm.size(), a->shm.fd()};
}

Result<AllocationReport> node::Pools::Map(SessionRef session, uint64_t allocation) {
  absl::MutexLock lock(&impl_->mu);
  ISO_ASSIGN_OR_RETURN(const Session* s, impl_->FindSession(session));
  ISO_ASSIGN_OR_RETURN(auto a, impl_->UsableAllocation(s->id, allocation));
  if (a->owner != s->id) {
    if (a->watch) {
      // Other clients reach it only through copies and Read/Write, which
      // apply its watch: a handle to register instances on, no memory.
      AllocationReport handle{a->id, a->pool->name, a->shm.size(), -1};
      handle.watched = true;
      return handle;
    }
    // Sticky: the mapping outlives any revocation the daemon could make.
    a->mapped_by_others = true;
  }
  return AllocationReport{a->id, a->pool->name, a->shm.size(), a->shm.fd()};
}

namespace {
Status CheckRange(uint64_t offset, uint64_t length, uint64_t size, uint64_t allocation) {
  if (offset > size || length > size - offset) {
    return OutOfRange("bytes [", offset, ", ", offset, "+", length, ") lie outside allocation ",
                      allocation, " of ", size, " bytes");
  }
  return OkStatus();
}
}  // namespace

Status node::Pools::Write(SessionRef session, uint64_t allocation, uint64_t offset,
                          std::string_view data) {
  std::shared_ptr<Allocation> a;
  std::shared_ptr<WatchState> watch;
  std::vector<std::shared_ptr<ByteBudget>> budgets;
  uint64_t sid = 0;
  {
    absl::MutexLock lock(&impl_->mu);
    ISO_ASSIGN_OR_RETURN(const Session* s, impl_->FindSession(session));
    ISO_ASSIGN_OR_RETURN(a, impl_->UsableAllocation(s->id, allocation));
    watch = a->watch;
    sid = s->id;
    budgets = {s->scratch_budget, impl_->scratch_all};
  }
  ISO_RETURN_IF_ERROR(CheckRange(offset, data.size(), a->shm.size(), allocation));
  // The owner's own writes and reads are not active accesses: it reaches
  // the memory directly anyway (docs/guides/active-access.md, "Active Access").
  if (watch && watch->owner_session() != sid && !data.empty()) {
    ISO_ASSIGN_OR_RETURN(bool active, RunActiveBytes(*watch, active::Op::kPut, sid, offset, data,
                                                     data.size(), std::move(budgets)));
    if (active) return OkStatus();
  }
  if (!data.empty()) std::memcpy(a->shm.data() + offset, data.data(), data.size());
  // Not logged, but dirty for the next incremental checkpoint all the same.
  if (watch) watch->NoteWrite(offset, data.size());
  return OkStatus();
}

Result<std::string> node::Pools::Read(SessionRef session, uint64_t allocation, uint64_t offset,
                                      uint64_t length) const {
  std::shared_ptr<Allocation> a;
  std::shared_ptr<WatchState> watch;
  uint64_t sid = 0;
  {
    absl::MutexLock lock(&impl_->mu);
    ISO_ASSIGN_OR_RETURN(const Session* s, impl_->FindSession(session));
    ISO_ASSIGN_OR_RETURN(a, impl_->UsableAllocation(s->id, allocation));
    watch = a->watch;
    sid = s->id;
  }
  ISO_RETURN_IF_ERROR(CheckRange(offset, length, a->shm.size(), allocation));
  if (length > (64ull << 20)) return OutOfRange("a read returns at most 64 MiB; asked ", length);
  // An active get: logged (and refused where denied) before it is served.
  if (watch && watch->owner_session() != sid && length > 0) {
    ISO_RETURN_IF_ERROR(
        RunActiveBytes(*watch, active::Op::kGet, sid, offset, {}, length, {}).status());
  }
  return std::string(reinterpret_cast<const char*>(a->shm.data() + offset), length);
}

}  // namespace isometry
