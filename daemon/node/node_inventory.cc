// node::Sessions::ListSessions and node::Pools::ListAllocations (inventory.h): a snapshot
// of the tables under the node lock, for isoctl.
#include <chrono>

#include "daemon/node/node.h"
#include "daemon/node/node_impl.h"

namespace isometry {
namespace {

int64_t UidOf(const Credentials& c) { return c.known() ? int64_t{c.uid} : -1; }

}  // namespace

Result<std::vector<SessionListing>> node::Sessions::ListSessions(const SessionRef* only) const {
  absl::MutexLock lock(&impl_->mu);
  const Session* mine = nullptr;
  if (only) {
    ISO_ASSIGN_OR_RETURN(mine, impl_->FindSession(*only));
  }
  const auto now = std::chrono::steady_clock::now();
  std::vector<SessionListing> out;
  for (const auto& [id, session] : impl_->sessions) {
    const Session& s = *session;
    if (mine && mine != &s) continue;
    SessionListing l;
    l.id = id;
    l.client_name = s.name;
    l.uid = UidOf(s.creds);
    l.pid = s.creds.pid;
    l.age_s = std::chrono::duration<double>(now - s.opened).count();
    l.allocations = static_cast<uint32_t>(s.allocations.size());
    for (uint64_t a : s.allocations) {
      if (auto it = impl_->allocations.find(a); it != impl_->allocations.end()) {
        l.allocated_bytes += it->second->shm.size();
      }
    }
    l.instances = static_cast<uint32_t>(s.instances.size());
    l.transfers_active = static_cast<uint32_t>(s.transfers.size());
    l.private_ranges = static_cast<uint32_t>(s.private_ranges.size());
    l.datatypes = static_cast<uint32_t>(s.datatypes.size());
    out.push_back(std::move(l));
  }
  return out;
}

Result<std::vector<AllocationListing>> node::Pools::ListAllocations(const SessionRef* only) const {
  absl::MutexLock lock(&impl_->mu);
  const Session* mine = nullptr;
  if (only) {
    ISO_ASSIGN_OR_RETURN(mine, impl_->FindSession(*only));
  }
  std::vector<AllocationListing> out;
  for (const auto& [id, a] : impl_->allocations) {
    if (mine && a->owner != mine->id) continue;
    AllocationListing l;
    l.id = id;
    l.memory = a->pool->name;
    l.bytes = a->shm.size();
    l.owner = a->owner;
    l.owner_uid = a->owner_uid;
    if (auto s = impl_->sessions.find(a->owner); s != impl_->sessions.end()) {
      l.owner_name = s->second->name;
      l.owner_uid = UidOf(s->second->creds);
      l.owner_pid = s->second->creds.pid;
    }
    l.published = a->published;
    l.watched = a->watch != nullptr;
    l.mapped_by_others = a->mapped_by_others;
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace isometry
