// The peer manager: one loop per configured peer says hello (with
// backoff), pings, and declares the peer down after silence or a broken
// data connection; and the other side of the hello, tokens issued to peers.
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>

#include "core/log_escape.h"
#include "core/log_limiter.h"
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
  for (const auto& p : peers) {
    if (p->config.name == name) return p.get();
  }
  return nullptr;
}

void Cluster::Impl::Post(std::function<void()> fn) {
  absl::MutexLock lock(&mu);
  if (worker && !stopping) worker->Post(std::move(fn));
}

void Cluster::Impl::Authorize(grpc::ClientContext& ctx, const Peer& p) {
  absl::MutexLock lock(&mu);
  ctx.AddMetadata(cluster::kTokenKey, StateLocked(p).token);
}

const std::string* Cluster::Impl::PeerOfTokenLocked(const std::string& token) const {
  for (const auto& [peer, t] : issued) {
    if (SameSecret(t, token)) return &peer;
  }
  return nullptr;
}

Result<std::string> Cluster::Impl::PeerOfToken(const std::string& token) const {
  absl::MutexLock lock(&mu);
  if (const std::string* peer = PeerOfTokenLocked(token)) return *peer;
  return absl::UnauthenticatedError("no valid peer token: say hello first");
}

// The listener's address, or for a wildcard listener the host peers
// already dial (daemon.grpc_tcp's, or loopback when that is a wildcard too)
// with the listener's port.
std::string Cluster::Impl::DataAddress() const {
  const std::string& bound = data->address();
  const size_t colon = bound.rfind(':');
  const std::string host = bound.substr(0, colon), port = bound.substr(colon + 1);
  if (host != "0.0.0.0" && host != "[::]") return bound;
  const std::string& grpc_tcp = config.daemon.grpc_tcp;
  const std::string ghost = grpc_tcp.substr(0, grpc_tcp.rfind(':'));
  return StrCat(ghost.empty() || ghost == "0.0.0.0" ? "127.0.0.1" : ghost, ":", port);
}

// ---- a peer's hello to this node ----

Result<cluster::WelcomeOut> Cluster::Impl::AcceptHello(const cluster::HelloIn& hello) {
  Status s = CheckHello(hello);
  if (!s.ok()) {
    // Anyone who reaches the TCP port can send hellos: their names are
    // escaped and their lines limited per address.
    static LogLimiter limiter(5, std::chrono::seconds(10));
    const std::string& from = hello.from;  // "ipv4:10.0.0.9:51234": key by host
    if (const auto v = limiter.Allow(std::string_view(from).substr(0, from.rfind(':'))); v.log) {
      if (v.suppressed) {
        spdlog::warn("suppressed {} similar peer hello lines from {}", v.suppressed, ForLog(from));
      }
      spdlog::warn("peer hello from '{}' ({}) refused: {}", ForLog(hello.node_name), ForLog(from),
                   ForLog(s.ToString(), 512));
    }
    return s;
  }
  const std::string token = RandomHex(16);
  {
    absl::MutexLock lock(&mu);
    issued[hello.node_name] = token;
    peer_nodes[hello.node_name] = hello.node;
  }
  cluster::WelcomeOut w;
  w.node_name = self();
  w.node = config.runtime.node;
  w.protocol_version = cluster::kPeerProtocolVersion;
  w.token = token;
  w.mac =
      Hmac(secret, {"welcome", self(), std::to_string(config.runtime.node), hello.nonce, token});
  w.data_address = DataAddress();
  w.topology = &node->runtime().topology();
  return w;
}

Status Cluster::Impl::CheckHello(const cluster::HelloIn& req) {
  if (req.protocol_version != cluster::kPeerProtocolVersion) {
    return FailedPrecondition("peer protocol version ", req.protocol_version,
                              "; this node speaks version ", cluster::kPeerProtocolVersion);
  }
  if (!FindPeer(req.node_name)) {
    return absl::PermissionDeniedError(
        StrCat("node '", req.node_name, "' is not a [[peer]] of node '", self(), "'"));
  }
  const std::string expect =
      Hmac(secret, {"hello", req.node_name, std::to_string(req.node),
                    std::to_string(req.protocol_version), req.nonce, std::to_string(req.unix_ms)});
  if (!SameSecret(expect, req.mac)) {
    return absl::UnauthenticatedError(
        "authentication failed: the hello's proof does not match this node's cluster secret "
        "(wrong secret?)");
  }
  if (std::llabs(cluster::UnixMs() - req.unix_ms) > int64_t{5} * 60 * 1000) {
    return absl::UnauthenticatedError("hello is more than 5 minutes off this node's clock");
  }
  {
    // A hello is good once: a recorded one replayed within its 5 minutes
    // of validity is refused.
    absl::MutexLock lock(&mu);
    const auto now = Clock::now();
    for (auto it = nonces.begin(); it != nonces.end();) {
      it = now - it->second > std::chrono::minutes(6) ? nonces.erase(it) : std::next(it);
    }
    if (!nonces.emplace(req.nonce, now).second) {
      return absl::UnauthenticatedError("replayed hello (its nonce was used before)");
    }
  }
  if (req.node == config.runtime.node) {
    return FailedPrecondition("node id ", req.node, " is this node's own runtime.node");
  }
  return OkStatus();
}

// ---- this node's hello and pings to a peer ----

Status Cluster::Impl::Hello(Peer& p) {
  v1::PeerHello req;
  req.set_node_name(self());
  req.set_node(config.runtime.node);
  req.set_protocol_version(protocol_version);
  req.set_nonce(RandomHex(16));
  req.set_unix_ms(cluster::UnixMs());
  req.set_mac(
      Hmac(secret, {"hello", self(), std::to_string(config.runtime.node),
                    std::to_string(protocol_version), req.nonce(), std::to_string(req.unix_ms())}));
  grpc::ClientContext ctx;
  cluster::SetDeadline(ctx, config.cluster.peer_timeout_ms);
  v1::PeerWelcome w;
  const auto t0 = Clock::now();
  grpc::Status s = p.stub->Hello(&ctx, req, &w);
  if (!s.ok()) return cluster::FromGrpc(s, StrCat("hello to peer '", p.config.name, "'"));
  const std::string expect =
      Hmac(secret, {"welcome", w.node_name(), std::to_string(w.node()), req.nonce(), w.token()});
  if (!SameSecret(expect, w.mac())) {
    return absl::UnauthenticatedError(StrCat("peer '", p.config.name,
                                             "' answered without proof of the cluster secret "
                                             "(wrong secret on one side?)"));
  }
  if (w.node_name() != p.config.name) {
    return FailedPrecondition("the daemon at ", p.config.address, " is node '", w.node_name(),
                              "', not '", p.config.name, "'");
  }
  if (w.node() == config.runtime.node) {
    return FailedPrecondition("peer '", p.config.name, "' has runtime.node ", w.node(),
                              " like this node; node ids must differ");
  }
  ISO_ASSIGN_OR_RETURN(Topology topo, cluster::TopologyFromWelcome(w));
  ISO_RETURN_IF_ERROR(
      data->Link(p.config.name).Connect(w.data_address(), config.runtime.node, w.token()));
  absl::MutexLock lock(&mu);
  PeerState& st = StateLocked(p);
  st.token = w.token();
  st.node = w.node();
  st.data_address = w.data_address();
  st.topology = std::move(topo);
  st.rtt_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  st.last_answer = Clock::now();
  return OkStatus();
}

Status Cluster::Impl::Ping(Peer& p) {
  grpc::ClientContext ctx;
  cluster::SetDeadline(ctx, config.cluster.keepalive_ms * 2);
  Authorize(ctx, p);
  v1::PeerPing req;
  v1::PeerPong resp;
  const auto t0 = Clock::now();
  grpc::Status s = p.stub->Ping(&ctx, req, &resp);
  if (!s.ok()) return cluster::FromGrpc(s, "ping");
  absl::MutexLock lock(&mu);
  PeerState& st = StateLocked(p);
  st.rtt_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  st.last_answer = Clock::now();
  return OkStatus();
}

void Cluster::Impl::PeerLoop(Peer& p) {
  auto backoff = std::chrono::milliseconds(100);
  std::string logged;
  while (true) {
    bool up;
    {
      absl::MutexLock lock(&mu);
      if (stopping) return;
      up = StateLocked(p).up;
    }
    if (!up) {
      Status s = Hello(p);
      absl::MutexLock lock(&mu);
      if (stopping) return;
      PeerState& st = StateLocked(p);
      if (s.ok()) {
        st.up = true;
        st.state = "up";
        st.last_error.clear();
        backoff = std::chrono::milliseconds(100);
        logged.clear();
        spdlog::info("peer '{}' is up: node {}, {} memories, data at {}, rtt {:.2f} ms",
                     p.config.name, st.node, st.topology.memories.size(), st.data_address,
                     st.rtt_ms);
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
      while (!stopping && !cv.WaitWithDeadline(&mu, until)) {
      }
      backoff = std::min<std::chrono::milliseconds>(backoff * 2, std::chrono::seconds(5));
      continue;
    }
    {
      absl::MutexLock lock(&mu);
      const absl::Time until = absl::Now() + absl::Milliseconds(config.cluster.keepalive_ms);
      while (!stopping && StateLocked(p).up && !cv.WaitWithDeadline(&mu, until)) {
      }
      if (stopping) return;
      if (!StateLocked(p).up) continue;
    }
    Status s = Ping(p);
    if (!s.ok()) {
      Clock::time_point last;
      {
        absl::MutexLock lock(&mu);
        last = StateLocked(p).last_answer;
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
  Peer* p = FindPeer(name);
  if (!p) return;
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
    if (was_up) spdlog::warn("peer '{}' is down: {}", name, ForLog(why.ToString(), 512));
    for (auto& [key, h] : halves) {
      if (!h->finished && (h->partner == name || h->initiator == name)) {
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
}

std::string Cluster::Impl::MemoryName(MemoryId id) const {
  const Topology& local = node->runtime().topology();
  if (local.FindMemory(id)) return local.NameOf(id);
  absl::MutexLock lock(&mu);
  for (const auto& p : peers) {
    const PeerState& st = StateLocked(*p);
    if (st.node != id.node) continue;
    if (const TopologyMemory* m = st.topology.FindMemory(id)) {
      return StrCat(p->config.name, ":", m->name);
    }
  }
  return StrCat("memory ", id.memory, " of node ", id.node);
}

}  // namespace isometry
