// Node sessions: opened per client (local socket or gRPC), found by their
// secret token, closed when the client leaves, releasing what they held.
#include <spdlog/spdlog.h>

#include "core/log_escape.h"
#include "core/random.h"
#include "core/strings.h"
#include "daemon/node/node_impl.h"

namespace isometry {

// The number a token claims; the token is then compared in full.
std::optional<uint64_t> TokenNumber(const std::string& token) {
  const size_t dot = token.find('.');
  if (dot == std::string::npos) return std::nullopt;
  return ParseNumber<uint64_t>(std::string_view(token).substr(0, dot));
}

SessionOwner OwnerOf(const Session& s) {
  return SessionOwner{s.id, s.name, s.creds.known() ? static_cast<int64_t>(s.creds.uid) : -1,
                      s.creds.pid};
}

bool Node::Impl::SessionLineAllowed(const Credentials& creds) {
  const std::string key = creds.known() ? std::to_string(creds.uid) : std::string("gRPC");
  const LogLimiter::Verdict v = session_lines.Allow(key);
  if (v.log && v.suppressed > 0) {
    spdlog::info("sessions of uid {}: {} open/close line(s) suppressed", key, v.suppressed);
  }
  return v.log;
}

const Session* Node::Impl::FindByTokenLocked(const std::string& token) const {
  const std::optional<uint64_t> n = TokenNumber(token);
  if (!n) return nullptr;
  auto it = sessions.find(*n);
  if (it == sessions.end() || !SameSecret(it->second->token, token)) return nullptr;
  return it->second.get();
}

const Session* Node::Impl::FindSessionOrNull(SessionRef ref) const {
  if (!ref.has_value()) return nullptr;
  auto it = sessions.find(ref.id());
  return it == sessions.end() ? nullptr : it->second.get();
}

Result<Session*> Node::Impl::FindSession(SessionRef ref) {
  const Session* s = FindSessionOrNull(ref);
  if (!s) {
    return FailedPrecondition(
        "unknown or closed session: attach first (gRPC Attach or the local handshake) and "
        "pass the token it returned");
  }
  return const_cast<Session*>(s);
}

Result<std::shared_ptr<Session>> Node::Impl::SessionFor(SessionRef ref) {
  absl::MutexLock lock(&mu);
  ISO_RETURN_IF_ERROR(FindSession(ref).status());
  return sessions.at(ref.id());
}

Session::Session(uint64_t id, std::string token, const std::string& name, const Credentials& creds,
                 TransferCallback on_done, const Budgets& budgets)
    : id(id),
      token(std::move(token)),
      name(name.substr(0, kMaxClientName)),
      creds(creds),
      disk_owner(creds.known() ? StrCat("uid ", creds.uid) : StrCat("session ", id)),
      on_done(std::move(on_done)),
      scratch_budget(std::make_shared<ByteBudget>("daemon.max_watch_scratch_bytes_per_session",
                                                  budgets.watch_scratch_bytes)),
      datatypes(std::make_shared<ByteBudget>("daemon.max_datatype_bytes_per_session",
                                             budgets.datatype_bytes),
                budgets.node_datatypes) {}

void Node::Impl::ReleaseSessionLocked(Session& s) {
  s.datatypes.Close();
  ReleasePrivateLocked(s);
  for (uint64_t id : s.instances) instances.erase(id);
  for (uint64_t id : s.allocations) {
    auto it = allocations.find(id);
    if (it == allocations.end()) continue;
    // Its watch ends with its owner: regions and log released now, copies
    // waiting on the log fail.
    if (it->second->watch) {
      it->second->watch->Close("its owner's session ended");
      it->second->watch.reset();
    }
    if (it->second->published) {
      it->second->owner = 0;  // outlives its session
    } else {
      allocations.erase(it);  // memory goes when in-flight transfers drain
    }
  }
}

Result<OpenedSession> node::Sessions::OpenSession(const std::string& client_name,
                                                  const Credentials& creds,
                                                  TransferCallback on_transfer_done) {
  absl::MutexLock lock(&impl_->mu);
  if (impl_->draining) return Unavailable("isometryd is shutting down");
  const DaemonConfig& dc = impl_->config.daemon;
  if (impl_->sessions.size() >= dc.max_sessions) {
    return ResourceExhausted("too many sessions (", impl_->sessions.size(),
                             "); daemon.max_sessions is ", dc.max_sessions);
  }
  // One uid (or, where gRPC hides it, the gRPC clients together) cannot
  // take every session slot from the others.
  uint32_t same = 0;
  for (const auto& [id, other] : impl_->sessions) {
    same += creds.known() ? other->creds.known() && other->creds.uid == creds.uid
                          : !other->creds.known();
  }
  if (creds.known() && same >= dc.max_sessions_per_uid) {
    return ResourceExhausted("uid ", creds.uid, " already has ", same,
                             " sessions; daemon.max_sessions_per_uid is ", dc.max_sessions_per_uid);
  }
  if (!creds.known() && same >= dc.max_grpc_sessions) {
    return ResourceExhausted("too many gRPC sessions (", same, "); daemon.max_grpc_sessions is ",
                             dc.max_grpc_sessions);
  }
  const uint64_t id = impl_->next_session++;
  auto s = std::make_shared<Session>(
      id, StrCat(id, ".", RandomHex(32)), client_name, creds, std::move(on_transfer_done),
      Session::Budgets{dc.max_datatype_bytes_per_session, dc.max_watch_scratch_bytes_per_session,
                       impl_->datatypes_all});
  s->qos_class = impl_->QosClassByRulesLocked(*s);
  OpenedSession opened{s->token, s->id, SessionRef(s->id)};
  if (impl_->SessionLineAllowed(s->creds)) {
    spdlog::info("session {} opened: client '{}' pid {} uid {}, class '{}'", s->id, ForLog(s->name),
                 creds.pid,
                 creds.known() ? std::to_string(creds.uid) : std::string("unknown (gRPC)"),
                 ForLog(s->qos_class));
  }
  impl_->sessions.emplace(id, std::move(s));
  return opened;
}

void node::Sessions::CloseSession(SessionRef session) {
  std::vector<Transfer> to_cancel;
  std::vector<std::shared_ptr<CrossTransfer>> cross;
  std::vector<std::shared_ptr<CrossTransfer>> redistributions;
  std::vector<EndedDistributed> ended_distributed;
  uint64_t number = 0;
  {
    absl::MutexLock lock(&impl_->mu);
    const Session* found = impl_->FindSessionOrNull(session);
    if (!found) return;
    auto it = impl_->sessions.find(found->id);
    Session& s = *it->second;
    for (uint64_t id : s.transfers) {
      auto t = impl_->active.find(id);
      if (t == impl_->active.end()) continue;
      if (t->second->handle) to_cancel.push_back(*t->second->handle);
      if (t->second->cross) cross.push_back(t->second->cross);
    }
    size_t published = 0;
    for (uint64_t id : s.allocations) {
      auto a = impl_->allocations.find(id);
      published += a != impl_->allocations.end() && a->second->published;
    }
    if (impl_->SessionLineAllowed(s.creds)) {
      spdlog::info(
          "session {} closed: client '{}' pid {}; cancelling {} transfer(s), freeing {} "
          "allocation(s), keeping {} published",
          s.id, ForLog(s.name), s.creds.pid, to_cancel.size() + cross.size(),
          s.allocations.size() - published, published);
    }
    number = s.id;
    redistributions = impl_->ReleaseDistributedLocked(s.id, ended_distributed);
    impl_->ReleaseSessionLocked(s);
    // Completions of its transfers no longer reach it.
    impl_->sessions.erase(it);
  }
  for (Transfer& t : to_cancel) t.Cancel();
  for (auto& c : cross) c->Cancel();
  const Status why =
      absl::AbortedError(StrCat("session ", number,
                                ", a rank of a distributed instance this redistribution uses, "
                                "ended"));
  AbortRedistributions(redistributions, why);
  if (impl_->cross) {
    for (const EndedDistributed& e : ended_distributed) {
      if (e.peers.empty()) continue;
      impl_->cross->AnnounceDistributedEnded(e.key, e.peers, std::string(why.message()));
    }
  }
}

SessionRef node::Sessions::Resolve(const std::string& token) const {
  absl::MutexLock lock(&impl_->mu);
  const Session* s = impl_->FindByTokenLocked(token);
  return s ? SessionRef(s->id) : SessionRef();
}

}  // namespace isometry
