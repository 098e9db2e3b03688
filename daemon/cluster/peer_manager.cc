// The peer manager: one loop per configured peer says hello (with
// backoff; the hello itself is peer_hello.cc), pings, and declares the
// peer down after silence or a broken data connection; and the checks of
// the signed calls and data connections of the sessions peers opened.
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <chrono>

#include "core/log_escape.h"
#include "core/random.h"
#include "daemon/cluster/cluster_impl.h"
#include "daemon/cluster/cross_op.h"
#include "daemon/cluster/peer_wire.h"
#include "daemon/cluster/secret.h"

namespace isometry {

namespace cluster {

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status FromGrpc(const grpc::Status& s, std::string_view what) {
  return Status(static_cast<absl::StatusCode>(s.error_code()),
                StrCat(what, ": ", s.error_message()));
}

void SetDeadline(grpc::ClientContext& ctx, uint32_t ms) {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
}

}  // namespace cluster

using cluster::Clock;

Cluster::Impl::Peer* Cluster::Impl::FindPeer(const std::string& name) const {
  absl::ReaderMutexLock lock(&peers_mu);
  for (const auto& p : peers) {
    if (p->config.name == name && !p->removed) return p.get();
  }
  return nullptr;
}

std::vector<Cluster::Impl::Peer*> Cluster::Impl::PeerList() const {
  std::vector<Peer*> out;
  absl::ReaderMutexLock lock(&peers_mu);
  for (const auto& p : peers) {
    if (!p->removed) out.push_back(p.get());
  }
  return out;
}

bool Cluster::Impl::Post(std::function<void()> fn) {
  absl::MutexLock lock(&mu);
  if (!worker || stopping) return false;
  worker->Post(std::move(fn));
  return true;
}

void Cluster::Impl::Authorize(grpc::ClientContext& ctx, const Peer& p, std::string_view method,
                              const google::protobuf::MessageLite& req) {
  std::string key;
  uint64_t counter;
  {
    absl::MutexLock lock(&mu);
    PeerState& st = StateLocked(p);
    key = st.session_key;
    counter = ++st.calls;
  }
  const std::string n = std::to_string(counter);
  ctx.AddMetadata(cluster::kCallerKey, self());
  ctx.AddMetadata(cluster::kCounterKey, n);
  ctx.AddMetadata(cluster::kCallMacKey,
                  Hmac(key, {"call", std::string(method), n, req.SerializeAsString()}));
}

Result<std::string> Cluster::Impl::Caller(const cluster::CallIn& call) {
  auto refuse = [&](std::string_view why) {
    return absl::UnauthenticatedError(StrCat("peer call ", call.method, " refused: ", why));
  };
  if (call.caller.empty() || call.counter.empty() || call.mac.empty()) {
    return refuse("it is not signed (say hello first)");
  }
  if (call.tls && std::find(call.identities.begin(), call.identities.end(), call.caller) ==
                      call.identities.end()) {
    return refuse(StrCat("the caller's TLS certificate does not name '", call.caller, "'"));
  }
  uint64_t counter = 0;
  const auto [end, ec] =
      std::from_chars(call.counter.data(), call.counter.data() + call.counter.size(), counter);
  if (ec != std::errc() || end != call.counter.data() + call.counter.size() || counter == 0) {
    return refuse("its counter is not a number");
  }
  absl::MutexLock lock(&mu);
  auto it = sessions.find(call.caller);
  if (it == sessions.end()) return refuse("no session with the caller (say hello first)");
  cluster::Session& session = it->second;
  const std::string expect =
      Hmac(session.key, {"call", std::string(call.method), call.counter, call.body});
  if (!SameSecret(expect, call.mac)) return refuse("its MAC does not match the caller's session");
  if (session.highest >= cluster::kCallWindow &&
      counter <= session.highest - cluster::kCallWindow) {
    return refuse("its counter is too old (a replayed call?)");
  }
  if (!session.seen.insert(counter).second) return refuse("replayed (its counter was used)");
  session.highest = std::max(session.highest, counter);
  session.last_call = Clock::now();
  if (session.highest > cluster::kCallWindow) {
    session.seen.erase(session.seen.begin(),
                       session.seen.lower_bound(session.highest - cluster::kCallWindow));
  }
  return call.caller;
}

Result<net::HelloAnswer> Cluster::Impl::DataPeer(const net::DataPlane::HelloProof& hello) {
  absl::MutexLock lock(&mu);
  for (const auto& [peer, session] : sessions) {
    if (session.node != hello.node) continue;
    // The proof covers the options the connecting node asked for: one
    // changed on the way does not match.
    if (!SameSecret(Hmac(session.key, net::ProofTranscript(hello)), hello.proof)) {
      return absl::UnauthenticatedError(
          StrCat("its proof for node ", hello.node, " ('", peer,
                 "') does not match that peer's session (a replayed or forged hello, or its "
                 "options changed on the way?)"));
    }
    return net::HelloAnswer{peer, Hmac(session.key, net::AnswerTranscript(hello))};
  }
  return absl::UnauthenticatedError(
      StrCat("node ", hello.node, " has no session with this node (say hello over gRPC first)"));
}

// The listener's address, or for a wildcard listener the host peers
// already dial (daemon.grpc_tcp's, or loopback when that is a wildcard too)
// with the listener's port.
std::string Cluster::Impl::DataAddress() const {
  if (!advertised_data_address.empty()) return advertised_data_address;
  const std::string& bound = data->address();
  const size_t colon = bound.rfind(':');
  const std::string host = bound.substr(0, colon), port = bound.substr(colon + 1);
  if (host != "0.0.0.0" && host != "[::]") return bound;
  const std::string& grpc_tcp = config.daemon.grpc_tcp;
  const std::string ghost = grpc_tcp.substr(0, grpc_tcp.rfind(':'));
  return StrCat(ghost.empty() || ghost == "0.0.0.0" ? "127.0.0.1" : ghost, ":", port);
}

// ---- pings to a peer (the hello: peer_hello.cc) ----

Status Cluster::Impl::Ping(Peer& p, bool fresh) {
  grpc::ClientContext ctx;
  cluster::SetDeadline(ctx, config.cluster.keepalive_ms * 2);
  peer_api::PeerPing req;
  Authorize(ctx, p, "Ping", req);
  peer_api::PeerPong resp;
  const auto t0 = Clock::now();
  std::unique_ptr<peer_api::IsometryPeer::Stub> own;
  // A probe channel is never destroyed while it connects: gRPC keeps the
  // socket of a channel dropped mid-handshake (a stopped peer's) for ever.
  const bool connecting = p.probe && p.probe->GetState(false) == GRPC_CHANNEL_CONNECTING;
  if (fresh) {
    // Its own subchannel pool: a new TCP connection (a SYN now), not the
    // shared one still backing off; or the last probe's, still connecting.
    if (!connecting) {
      grpc::ChannelArguments args = p.channel_args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      p.probe = grpc::CreateCustomChannel(p.config.address, p.credentials, args);
    }
    own = peer_api::IsometryPeer::NewStub(p.probe);
  } else if (!connecting) {
    p.probe.reset();  // the shared channel answers again
  }
  grpc::Status s = (own ? own : p.stub)->Ping(&ctx, req, &resp);
  if (!s.ok()) return cluster::FromGrpc(s, "ping");
  absl::MutexLock lock(&mu);
  PeerState& st = StateLocked(p);
  st.rtt_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  st.last_answer = Clock::now();
  return OkStatus();
}

Status Cluster::Impl::SignedPing(const std::string& name) {
  Peer* p = FindPeer(name);
  if (!p) return NotFound("no peer '", name, "'");
  {
    absl::MutexLock lock(&mu);
    if (!StateLocked(*p).up) return Unavailable("peer '", name, "' is not up");
  }
  grpc::ClientContext ctx;
  cluster::SetDeadline(ctx, config.cluster.keepalive_ms * 2);
  peer_api::PeerPing req;
  Authorize(ctx, *p, "Ping", req);
  peer_api::PeerPong resp;
  if (grpc::Status s = p->stub->Ping(&ctx, req, &resp); !s.ok()) {
    return cluster::FromGrpc(s, "ping");
  }
  return OkStatus();
}

// How soon a ping follows one that went unanswered (PeerLoop).
constexpr uint32_t kPingAfterMissMs = 50;

void Cluster::Impl::PeerLoop(Peer& p) {
  auto backoff = std::chrono::milliseconds(100);
  std::optional<Clock::time_point> missed;  // since when pings go unanswered
  std::string logged;
  while (true) {
    bool up;
    {
      absl::MutexLock lock(&mu);
      if (stopping || p.removed) return;
      up = StateLocked(p).up;
    }
    if (!up) {
      Status s = Hello(p);
      absl::MutexLock lock(&mu);
      if (stopping || p.removed) return;
      PeerState& st = StateLocked(p);
      if (s.ok()) {
        st.up = true;
        st.state = "up";
        st.last_error.clear();
        backoff = std::chrono::milliseconds(100);
        logged.clear();
        spdlog::info(
            "peer '{}' is up: node {}, {} memories, data at {}, rtt {:.2f} ms; network "
            "hops over {}",
            p.config.name, st.node, st.topology.memories.size(), st.data_address, st.rtt_ms,
            st.network);
        continue;
      }
      st.state = (absl::IsUnauthenticated(s) || absl::IsFailedPrecondition(s) ||
                  absl::IsPermissionDenied(s))
                     ? "refused"
                     : "down";
      st.last_error = std::string(s.message());
      if (logged != st.last_error) {
        spdlog::warn("peer '{}' ({}): {}", p.config.name, p.config.address,
                     ForLog(s.ToString(), 512));
        logged = st.last_error;
      }
      const absl::Time until = absl::Now() + absl::FromChrono(backoff);
      while (!stopping && !p.removed && !cv.WaitWithDeadline(&mu, until)) {
      }
      backoff = std::min<std::chrono::milliseconds>(backoff * 2, std::chrono::seconds(5));
      continue;
    }
    {
      // While pings go unanswered, the next goes sooner: an outage may
      // give way for only a moment before the next, and a ping that
      // misses every such moment lets short outages, one after another,
      // add up to peer_timeout_ms of silence.
      const uint32_t wait_ms = missed ? std::min(config.cluster.keepalive_ms, kPingAfterMissMs)
                                      : config.cluster.keepalive_ms;
      absl::MutexLock lock(&mu);
      const absl::Time until = absl::Now() + absl::Milliseconds(wait_ms);
      while (!stopping && !p.removed && StateLocked(p).up && !cv.WaitWithDeadline(&mu, until)) {
      }
      if (stopping || p.removed) return;
      if (!StateLocked(p).up) continue;
    }
    const auto asked = Clock::now();
    Status s = Ping(p, missed.has_value());
    if (s.ok()) data->Link(p.config.name).Heard(Clock::now());
    if (s.ok() && missed) {
      // Back after an outage: data connections that heard nothing since
      // are re-opened now, not after TCP's retransmission backoff.
      data->Link(p.config.name).Nudge(*missed);
      missed.reset();
    } else if (!s.ok() && !missed) {
      missed = asked;
    }
    if (!s.ok()) {
      // Silence counts from the last time the peer was heard at all: a
      // ping answered, a data frame, or a call of its own (a ping of ours
      // stuck behind a lost SYN says nothing while its data flows).
      Clock::time_point last = data->Link(p.config.name).last_heard();
      {
        absl::MutexLock lock(&mu);
        last = std::max(last, StateLocked(p).last_answer);
        if (auto it = sessions.find(p.config.name); it != sessions.end()) {
          last = std::max(last, it->second.last_call);
        }
      }
      if (Clock::now() - last >= std::chrono::milliseconds(config.cluster.peer_timeout_ms)) {
        MarkDown(p.config.name,
                 Unavailable("peer '", p.config.name, "' did not answer for ",
                             config.cluster.peer_timeout_ms, " ms (", s.message(), ")"));
      }
    }
  }
}

void Cluster::Impl::MarkDown(const std::string& name, const Status& why,
                             std::optional<uint64_t> generation) {
  if (Peer* p = FindPeer(name)) MarkDownPeer(*p, why, generation);
}

void Cluster::Impl::MarkDownPeer(Peer& peer, const Status& why,
                                 std::optional<uint64_t> generation) {
  const std::string& name = peer.config.name;
  Peer* p = &peer;
  net::PeerLink& link = data->Link(name);
  if (generation && *generation != link.generation()) return;
  link.Fail(why, /*notify=*/false);  // before `up` goes: Connect() must open new ones
  std::vector<std::optional<Transfer>> hs;
  std::vector<std::shared_ptr<CrossOp>> os;
  {
    absl::MutexLock lock(&mu);
    PeerState& st = StateLocked(*p);
    const bool was_up = st.up;
    st.up = false;
    st.state = "down";
    st.last_error = std::string(why.message());
    if (was_up) {
      spdlog::warn("peer '{}' ({}) is down: {}", name, p->config.address,
                   ForLog(why.ToString(), 512));
    }
    for (auto& [key, h] : halves) {
      if (!h->finished &&
          (h->partner == name || h->initiator == name || h->relay_partner == name)) {
        h->aborted = why;
        hs.push_back(h->transfer);
      }
    }
    for (auto& [key, w] : ops) {
      if (auto o = w.lock(); o && o->Involves(name)) os.push_back(o);
    }
    cv.SignalAll();
  }
  for (auto& t : hs) {
    if (t) t->Abort(why);
  }
  for (auto& o : os) o->Fail(why);
  FailPartsWith(name, why);
  FailEagerPutsTo(name, why);  // else each waits out its call's deadline
  // Its RDMA link (if any) is stale: new copies take TCP until a hello
  // connects a new one.
  DropRdma(name, nullptr, why, /*offer_again=*/false);
}

std::string Cluster::Impl::MemoryName(MemoryId id) const {
  const Topology& local = node->runtime().topology();
  if (local.FindMemory(id)) return local.NameOf(id);
  const std::vector<Peer*> list = PeerList();
  absl::MutexLock lock(&mu);
  for (const Peer* p : list) {
    const PeerState& st = StateLocked(*p);
    if (st.node != id.node) continue;
    if (const TopologyMemory* m = st.topology.FindMemory(id)) {
      return StrCat(p->config.name, ":", m->name);
    }
  }
  return StrCat("memory ", id.memory, " of node ", id.node);
}

}  // namespace isometry
