// Both sides of the gRPC hello that opens a session (isometry.proto,
// PeerHello). The caller first asks the called node for a challenge; its
// hello then proves the cluster secret over both nodes' names, its own
// nonce and that challenge. A challenge is made by the called node in this
// boot (signed with a random key it never stores), is good for
// kChallengeLife and is used up by the one hello that proves it: a recorded
// hello is refused by any other node, by the same node after a restart,
// and a second time, and a refused hello leaves the caller's session as it
// was.
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "core/log_escape.h"
#include "core/log_limiter.h"
#include "core/random.h"
#include "daemon/cluster/cluster_impl.h"
#include "daemon/cluster/etcd_membership.h"
#include "daemon/cluster/peer_wire.h"
#include "daemon/cluster/secret.h"
#include "daemon/node/introspection.h"

namespace isometry {

using cluster::Clock;

namespace {

int64_t SteadyMs(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

// The hello's proof: every field of the hello, the node it is for and the
// challenge that node gave.
std::string HelloMac(std::string_view secret, const std::string& from, uint32_t node,
                     uint32_t version, const std::string& nonce, int64_t unix_ms,
                     const std::string& to, const std::string& challenge) {
  return Hmac(secret, {"hello", from, std::to_string(node), std::to_string(version), nonce,
                       std::to_string(unix_ms), to, challenge});
}

std::string WelcomeMac(std::string_view secret, const std::string& from, uint32_t node,
                       const std::string& caller, const std::string& nonce,
                       const std::string& challenge, const std::string& token,
                       const std::string& data_address) {
  return Hmac(secret, {"welcome", from, std::to_string(node), caller, nonce, challenge, token,
                       data_address});
}

}  // namespace

// ---- challenges ----

// "<random>.<steady ms>.<tag>", the tag an HMAC of the rest with boot_key.
std::string Cluster::Impl::Challenge() const {
  const std::string body = StrCat(RandomHex(16), ".", SteadyMs(Clock::now()));
  return StrCat(body, ".", absl::BytesToHexString(Hmac(boot_key, {"challenge", body})));
}

Status Cluster::Impl::CheckChallenge(const std::string& challenge) const {
  const size_t tag = challenge.rfind('.');
  if (challenge.empty() || tag == std::string::npos) {
    return absl::UnauthenticatedError(
        "the hello answers no challenge (ask HelloChallenge first; every node of a cluster "
        "must run the same version)");
  }
  const std::string body = challenge.substr(0, tag);
  if (!SameSecret(absl::BytesToHexString(Hmac(boot_key, {"challenge", body})),
                  std::string_view(challenge).substr(tag + 1))) {
    return absl::UnauthenticatedError(
        "its challenge was not made by this node since it started (a replayed hello?)");
  }
  int64_t made = 0;
  const size_t dot = body.rfind('.');
  const char* end = body.data() + body.size();
  if (dot == std::string::npos || std::from_chars(body.data() + dot + 1, end, made).ptr != end) {
    return absl::UnauthenticatedError("its challenge is malformed");
  }
  const int64_t age = SteadyMs(Clock::now()) - made;
  if (age < 0 || age > std::chrono::milliseconds(cluster::kChallengeLife).count()) {
    return absl::UnauthenticatedError(StrCat("its challenge expired (", age, " ms old)"));
  }
  return OkStatus();
}

Status Cluster::Impl::UseChallenge(const std::string& challenge) {
  absl::MutexLock lock(&mu);
  const auto now = Clock::now();
  for (auto it = used_challenges.begin(); it != used_challenges.end();) {
    // Used before it expired: gone once it is (CheckChallenge refuses it).
    it = now - it->second > cluster::kChallengeLife ? used_challenges.erase(it) : std::next(it);
  }
  if (!used_challenges.emplace(challenge, now).second) {
    return absl::UnauthenticatedError("replayed hello (its challenge was answered before)");
  }
  return OkStatus();
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
    return s;  // the caller's session, if any, is left as it was
  }
  const std::string token = RandomHex(16);
  bool again = false;
  {
    absl::MutexLock lock(&mu);
    again = sessions.count(hello.node_name) != 0;
  }
  if (again) {
    // A peer says hello only when it holds this node down (or restarted):
    // it failed its side of every copy with this node, and the halves
    // here wait for nothing.
    AbortHalvesWith(hello.node_name,
                    Unavailable("peer '", hello.node_name,
                                "' said hello anew (it took this node for down, or restarted): "
                                "its side of the transfer is gone"));
  }
  {
    absl::MutexLock lock(&mu);
    cluster::Session& session = sessions[hello.node_name];
    session = cluster::Session{};
    session.key = Hmac(secret, {"session", hello.nonce, token});
    session.node = hello.node;
  }
  cluster::WelcomeOut w;
  w.node_name = self();
  w.node = config.runtime.node;
  w.protocol_version = cluster::kPeerProtocolVersion;
  w.token = token;
  w.data_address = DataAddress();
  // The data address too: rewritten, it would send our peer's data
  // connections somewhere else.
  w.mac = WelcomeMac(secret, self(), config.runtime.node, hello.node_name, hello.nonce,
                     hello.challenge, token, w.data_address);
  w.topology = &node->runtime().topology();
  for (const PeerConfig& pc : config.cluster.peers) w.link_rates[pc.name] = LinkRate(pc.name);
  w.rdma = &node->introspection().rdma();
  return w;
}

Status Cluster::Impl::CheckHello(const cluster::HelloIn& req) {
  if (req.protocol_version != cluster::kPeerProtocolVersion) {
    return FailedPrecondition("peer protocol version ", req.protocol_version,
                              "; this node speaks version ", cluster::kPeerProtocolVersion,
                              " (every node of a cluster must run the same version)");
  }
  if (!FindPeer(req.node_name)) {
    if (etcd) etcd->Poke();  // it may have registered since our last read
    return absl::PermissionDeniedError(
        StrCat("node '", req.node_name, "' is not a [[peer]] of node '", self(), "'",
               etcd ? " (nor registered in etcd, as far as this node has seen)" : ""));
  }
  if (tls && std::find(req.identities.begin(), req.identities.end(), req.node_name) ==
                 req.identities.end()) {
    std::string names;
    for (const std::string& n : req.identities) StrAppend(&names, names.empty() ? "" : ", ", n);
    return absl::UnauthenticatedError(StrCat("the caller's TLS certificate does not name '",
                                             req.node_name, "' (it names '", names, "')"));
  }
  if (req.to_node_name != self()) {
    return absl::UnauthenticatedError(StrCat("the hello is for node '", req.to_node_name,
                                             "', not this node (a replayed hello?)"));
  }
  ISO_RETURN_IF_ERROR(CheckChallenge(req.challenge));
  const std::string expect = HelloMac(secret, req.node_name, req.node, req.protocol_version,
                                      req.nonce, req.unix_ms, req.to_node_name, req.challenge);
  if (!SameSecret(expect, req.mac)) {
    return absl::UnauthenticatedError(
        "authentication failed: the hello's proof does not match this node's cluster secret "
        "(wrong secret?)");
  }
  if (std::llabs(cluster::UnixMs() - req.unix_ms) > int64_t{5} * 60 * 1000) {
    return absl::UnauthenticatedError("hello is more than 5 minutes off this node's clock");
  }
  ISO_RETURN_IF_ERROR(UseChallenge(req.challenge));
  if (req.node == config.runtime.node) {
    return FailedPrecondition("node id ", req.node, " is this node's own runtime.node");
  }
  return OkStatus();
}

// ---- this node's hello to a peer ----

namespace {

// Whether an isometryd without TLS answers at `address` within
// `timeout_ms`: a plaintext challenge (anyone may ask for one) is answered.
// Tells "the peer has no TLS" from a refused certificate, for a TLS node.
bool AnswersPlain(const std::string& address, uint32_t timeout_ms) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // its own connection, closed with it
  auto stub = peer_api::IsometryPeer::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext ctx;
  cluster::SetDeadline(ctx, timeout_ms);
  peer_api::PeerChallenge challenge;
  return stub->HelloChallenge(&ctx, peer_api::PeerChallengeRequest(), &challenge).ok();
}

}  // namespace

Status Cluster::Impl::HelloFailed(const Peer& p, const grpc::Status& s, std::string_view what) {
  if (tls && absl::StrContains(s.error_message(), "handshake failed") &&
      AnswersPlain(p.config.address, std::min<uint32_t>(config.cluster.peer_timeout_ms, 1000))) {
    // Not a certificate problem: the peer has no TLS at all.
    return FailedPrecondition("peer '", p.config.name, "' at ", p.config.address,
                              " answers without TLS: it has no [cluster.tls] and this node has "
                              "(every node of a cluster needs it once one has it): ",
                              s.error_message());
  }
  if (tls && absl::StrContains(s.error_message(), "handshake failed")) {
    // A refused certificate is not an outage: say so, once, as a refusal.
    return absl::UnauthenticatedError(StrCat(
        "TLS with peer '", p.config.name, "' at ", p.config.address, " failed: ", s.error_message(),
        " (do both certificates come from the CA in "
        "cluster.tls.ca_file, and does the peer's certificate name '",
        p.config.name, "'?)"));
  }
  if (!tls && s.error_code() == grpc::StatusCode::UNAVAILABLE &&
      net::AnswersTls(p.config.address, std::min<uint32_t>(config.cluster.peer_timeout_ms, 1000))) {
    // gRPC says only "Socket closed": a configuration to fix, not an outage.
    return FailedPrecondition("peer '", p.config.name, "' at ", p.config.address,
                              " requires TLS and this node has no [cluster.tls] (every node of "
                              "a cluster needs it once one has it): ",
                              s.error_message());
  }
  if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    return FailedPrecondition(
        "peer '", p.config.name, "' at ", p.config.address,
        " runs another isometryd version: it does not serve ",
        peer_api::IsometryPeer::service_full_name(),
        " (every node of a cluster must run the same version): ", s.error_message());
  }
  return cluster::FromGrpc(s, StrCat(what, " to peer '", p.config.name, "'"));
}

Status Cluster::Impl::Hello(Peer& p) {
  peer_api::PeerChallenge challenge;
  {
    grpc::ClientContext ctx;
    cluster::SetDeadline(ctx, config.cluster.peer_timeout_ms);
    grpc::Status s = p.stub->HelloChallenge(&ctx, peer_api::PeerChallengeRequest(), &challenge);
    if (!s.ok()) return HelloFailed(p, s, "hello challenge");
  }
  peer_api::PeerHello req;
  req.set_node_name(self());
  req.set_node(config.runtime.node);
  req.set_protocol_version(protocol_version);
  req.set_nonce(RandomHex(16));
  req.set_unix_ms(cluster::UnixMs());
  // The node this node means to reach, whatever the answer calls itself.
  req.set_to_node_name(p.config.name);
  req.set_challenge(challenge.challenge());
  req.set_mac(HelloMac(secret, self(), config.runtime.node, protocol_version, req.nonce(),
                       req.unix_ms(), req.to_node_name(), req.challenge()));
  grpc::ClientContext ctx;
  cluster::SetDeadline(ctx, config.cluster.peer_timeout_ms);
  peer_api::PeerWelcome w;
  const auto t0 = Clock::now();
  grpc::Status s = p.stub->Hello(&ctx, req, &w);
  if (!s.ok()) return HelloFailed(p, s, "hello");
  const std::string expect = WelcomeMac(secret, w.node_name(), w.node(), self(), req.nonce(),
                                        req.challenge(), w.token(), w.data_address());
  if (!SameSecret(expect, w.mac())) {
    return absl::UnauthenticatedError(StrCat("peer '", p.config.name,
                                             "' answered without proof of the cluster secret "
                                             "(wrong secret on one side?)"));
  }
  return Welcomed(p, req.nonce(), w, t0);
}

Status Cluster::Impl::Welcomed(Peer& p, const std::string& nonce, const peer_api::PeerWelcome& w,
                               Clock::time_point t0) {
  if (w.node_name() != p.config.name) {
    return FailedPrecondition("the daemon at ", p.config.address, " is node '", w.node_name(),
                              "', not '", p.config.name, "'");
  }
  if (w.node() == config.runtime.node) {
    return FailedPrecondition("peer '", p.config.name, "' has runtime.node ", w.node(),
                              " like this node; node ids must differ");
  }
  ISO_ASSIGN_OR_RETURN(Topology topo, cluster::TopologyFromWelcome(w));
  std::map<std::string, double> link_rates = cluster::LinkRatesFromWelcome(w);
  const std::string key = Hmac(secret, {"session", nonce, w.token()});
  {
    absl::MutexLock lock(&mu);
    PeerState& st = StateLocked(p);
    st.session_key = key;
    st.calls = 0;
  }
  const std::string network =
      OfferRdma(p, {w.has_rdma(), w.has_rdma() && w.rdma().usable(), w.rdma().detail()});
  // Data connections prove themselves with MACs under the session key
  // (net/frame.h says what they cover).
  ISO_RETURN_IF_ERROR(data->Link(p.config.name)
                          .Connect(w.data_address(), config.runtime.node,
                                   [key](const std::vector<std::string>& transcript) {
                                     return Hmac(key, transcript);
                                   }));
  absl::MutexLock lock(&mu);
  PeerState& st = StateLocked(p);
  st.node = w.node();
  st.data_address = w.data_address();
  st.topology = std::move(topo);
  st.link_rates = std::move(link_rates);
  // The link may have connected meanwhile (the peer's offer, accepted
  // while this hello ran): then its line, not the one computed before.
  st.network = NetworkLine(p.config.name, network);
  st.rtt_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  st.last_answer = Clock::now();
  return OkStatus();
}

}  // namespace isometry
