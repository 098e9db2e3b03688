// Client process memory: ranges a local-socket client registers of its
// own process, reached by CMA. The permission model (docs/operations/security.md, "Client
// process memory (CMA)"): the daemon reaches a process only for a client of that process's uid —
// the registering session, or another session of the same uid after PublishPrivate — never for any
// other uid, whatever it asks; the process itself passed ClientProcess::Open's identity check
// against the session's SO_PEERCRED.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/checked.h"
#include "core/strings.h"
#include "daemon/node/node_impl.h"

namespace isometry {

Status CheckWritable(const PrivateRange& r, std::string_view what) {
  if (r.writable) return OkStatus();
  // The gist first: a ring completion carries the message's first 100 bytes.
  return InvalidArgument(what, ": private range ", r.id,
                         " may only be read: not all of it was writable in its process when "
                         "registered (first read-only mapping: ",
                         r.read_only_pages, "); register writable memory as a destination");
}

Result<std::shared_ptr<PrivateRange>> Node::Impl::UsablePrivateRange(const Session& s,
                                                                     uint64_t id) const {
  auto it = private_ranges.find(id);
  if (it != private_ranges.end() && it->second->alive) {
    const PrivateRange& r = *it->second;
    const bool same_uid = s.creds.known() && s.creds.uid == r.uid;
    if (r.session == s.id || (r.published && same_uid)) return it->second;
  }
  return NotFound("no private range ", id,
                  " usable by this session (ranges are usable by their session, and once "
                  "published by sessions of the same uid, until their session ends)");
}

Status Node::Impl::RegisterPrivateInstanceLocked(Session& s, const InstanceSpec& spec,
                                                 uint64_t total, uint64_t& id) {
  ISO_ASSIGN_OR_RETURN(std::shared_ptr<PrivateRange> r, UsablePrivateRange(s, spec.private_range));
  if (spec.offset > r->bytes || total > r->bytes - spec.offset) {
    return OutOfRange("instance of ", total, " bytes (", InstanceWhat(spec), ") at offset ",
                      spec.offset, " does not fit private range ", r->id, " of ", r->bytes,
                      " bytes");
  }
  id = next_instance++;
  Instance in{id, s.id, nullptr, spec.offset, spec.shape, 0, ""};
  in.private_range = std::move(r);
  instances[id] = std::move(in);
  s.instances.insert(id);
  return OkStatus();
}

void Node::Impl::ReleasePrivateLocked(Session& s) {
  for (uint64_t id : s.private_ranges) {
    auto it = private_ranges.find(id);
    if (it == private_ranges.end()) continue;
    // Instances of other sessions over it still hold it: they are refused
    // from now on; transfers in flight keep the pidfd until they end.
    it->second->alive = false;
    private_ranges.erase(it);
    RevokeLeasesLocked(id);
  }
  s.private_ranges.clear();
  // Its copies' hops still waiting on the client fail now.
  if (s.own_hops) std::exchange(s.own_hops, nullptr)->Close();
}

Result<uint64_t> node::Instances::RegisterPrivate(SessionRef session, uint64_t address,
                                                  uint64_t bytes, UniqueFd mem, UniqueFd maps) {
  if (bytes == 0) return InvalidArgument("private range: 0 bytes");
  if (address == 0) return InvalidArgument("private range: address 0");
  if (!CheckedAdd(address, bytes)) {
    return InvalidArgument("private range: address ", address, " + ", bytes,
                           " bytes wraps past 2^64");
  }
  // No process's memory lies there (x86-64 and arm64 user space ends at
  // 2^47, or 2^56 with 5-level paging): a kernel address is the caller's
  // mistake, not the daemon's error at the first copy.
  constexpr uint64_t kUserSpaceEnd = uint64_t{1} << 56;
  if (*CheckedAdd(address, bytes) > kUserSpaceEnd) {
    return InvalidArgument("private range: [", address, ", +", bytes,
                           ") lies outside any process's user address space");
  }
  if (!impl_->runtime->FindMemory(kProcessMemoryName).ok()) {
    return FailedPrecondition("private memory needs a cma channel in the daemon's config");
  }
  std::shared_ptr<const ClientProcess> process;
  {
    absl::MutexLock lock(&impl_->mu);
    ISO_ASSIGN_OR_RETURN(Session * s, impl_->FindSession(session));
    if (!s->creds.known() || s->creds.pid <= 0) {
      return FailedPrecondition(
          "private memory is registered over the local socket only (the daemon needs the "
          "process's SO_PEERCRED credentials)");
    }
    if (!s->process) {
      // Once per session: the pidfd pins the process SO_PEERCRED named at
      // connect() for the session's life.
      ISO_ASSIGN_OR_RETURN(ClientProcess p,
                           ClientProcess::Open({s->creds.pid, s->creds.uid, s->creds.gid},
                                               std::move(mem), std::move(maps)));
      s->process = std::make_shared<const ClientProcess>(std::move(p));
    }
    process = s->process;
  }
  // Its mappings, outside the lock (a large process's maps is long): the
  // daemon writes through /proc/<pid>/mem, which passes page protections,
  // so it learns here which ranges it may only read.
  ISO_ASSIGN_OR_RETURN(RangeProtection protection, process->Protection(address, bytes));
  absl::MutexLock lock(&impl_->mu);
  ISO_ASSIGN_OR_RETURN(Session * s, impl_->FindSession(session));
  const uint32_t max_ranges = impl_->config.daemon.max_private_ranges_per_session;
  if (s->private_ranges.size() >= max_ranges) {
    return ResourceExhausted(
        "this session has ", s->private_ranges.size(),
        " private ranges registered; daemon.max_private_ranges_per_session is ", max_ranges);
  }
  auto r = std::make_shared<PrivateRange>();
  r->writable = protection.writable;
  r->read_only_pages = std::move(protection.first_read_only);
  r->id = impl_->next_private++;
  r->session = s->id;
  r->uid = s->creds.uid;
  r->address = address;
  r->bytes = bytes;
  r->process = s->process;
  impl_->private_ranges[r->id] = r;
  s->private_ranges.insert(r->id);
  spdlog::debug("session {}: private range {} of pid {}: {} bytes", s->id, r->id, s->creds.pid,
                bytes);
  return r->id;
}

Result<node::Instances::OwnHopsWindow> node::Instances::EnableOwnHops(SessionRef session,
                                                                      std::function<void()> wake) {
  const DaemonConfig& dc = impl_->config.daemon;
  if (dc.own_hop_window_mib == 0) {
    return FailedPrecondition("hop windows are off here (daemon.own_hop_window_mib = 0)");
  }
  if (!impl_->runtime->FindMemory(kProcessMemoryName).ok()) {
    return FailedPrecondition("running its own hops needs a cma channel in the daemon's config");
  }
  absl::MutexLock lock(&impl_->mu);
  ISO_ASSIGN_OR_RETURN(Session * s, impl_->FindSession(session));
  if (!s->creds.known() || s->creds.pid <= 0) {
    return FailedPrecondition("a hop window is for local-socket sessions only");
  }
  if (s->own_hops) return FailedPrecondition("this session already has its hop window");
  const uint64_t bytes = uint64_t{dc.own_hop_window_mib} << 20;
  ISO_ASSIGN_OR_RETURN(SharedMemory shm,
                       SharedMemory::Create(StrCat("isometry-hops-", s->id), bytes, false));
  auto keep = std::make_shared<SharedMemory>(std::move(shm));
  // Programs: a quarter of the window (irregular types compile to
  // thousands of ops per chunk, 32 bytes and up each).
  ISO_ASSIGN_OR_RETURN(
      s->own_hops,
      OwnHops::Create(keep->data(), keep->size(), std::max<uint64_t>(bytes / 4, 1 << 16),
                      std::move(wake), keep, std::chrono::milliseconds(dc.own_hop_timeout_ms),
                      StrCat("session ", s->id, " (pid ", s->creds.pid, ")"),
                      impl_->own_hops_totals, std::chrono::microseconds(dc.ring_poll_us)));
  spdlog::debug("session {}: hop window of {} bytes", s->id, bytes);
  return OwnHopsWindow{keep->fd(), keep->size()};
}

Status node::Instances::PublishPrivate(SessionRef session, uint64_t range,
                                       std::optional<ServeWindowRef> serve) {
  // The daemon never opens the window; a reader checks what it maps. The
  // bounds keep what it hands on plausible.
  if (serve && (serve->fd < 0 || serve->bytes == 0 || serve->bytes > (uint64_t{1} << 30) ||
                serve->token == 0)) {
    return InvalidArgument("serve window: fd ", serve->fd, ", ", serve->bytes, " bytes, token ",
                           serve->token == 0 ? "0" : "set",
                           ": not a window the client library makes");
  }
  absl::MutexLock lock(&impl_->mu);
  ISO_ASSIGN_OR_RETURN(Session * s, impl_->FindSession(session));
  auto it = impl_->private_ranges.find(range);
  if (it == impl_->private_ranges.end() || it->second->session != s->id) {
    return NotFound("no private range ", range, " registered by this session");
  }
  it->second->published = true;
  it->second->serve = serve;
  return OkStatus();
}

}  // namespace isometry
