// Internal to daemon/cluster: the state the cluster layer's parts share.
// Not a public interface; include daemon/cluster/cluster.h instead.
//
// The parts, by role (each in its own file, all on one Cluster::Impl):
//   peer_manager.cc   hello / ping / backoff per peer, peer state, sessions
//                     and the signatures of calls and data connections
//   tls_credentials.cc  mutual TLS for the peer service and data links
//   peer_service.cc   the IsometryPeer gRPC service: translation only
//   cross_copy.cc     the initiator's side of a cross-node copy: CrossOp,
//                     planning, setting up the halves
//   halves.cc         the halves this node runs for any initiator
//   eager_put.cc      small copies sent whole in one call, and landed
//   visibility.cc     the halves and network edges as isoctl shows them
//   peer_wire.cc      proto <-> domain for the peer messages
//   cluster.cc        the Cluster facade: create, start, stop, list
//   etcd_membership.cc  peers that come and go through etcd ([cluster.etcd])
//   rdma_links.cc     the RDMA link with each peer that has RDMA too
//
// One mutex, Impl::mu, guards the mutable state of peers, halves and
// copies: a peer going down touches all three at once.
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "channels/rdma/net_routes.h"
#include "core/random.h"
#include "daemon/cluster/cluster.h"
#include "daemon/cluster/declined_puts.h"
#include "daemon/cluster/form_exchange.h"
#include "isometry_peer.grpc.pb.h"
#include "net/data_plane.h"
#include "net/rdma/rdma_link.h"
#include "net/rdma/rdma_probe.h"
#include "planner/topology.h"
#include "planner/topology_join.h"

namespace isometry {

// The peer protocol's generated types (proto/isometry_peer.proto) under one
// name, so that a new protocol version changes this line and the package.
namespace peer_api = ::isometry::peer::v4;

namespace cluster {

using Clock = std::chrono::steady_clock;
// 2: session keys, per-call MACs and challenged data connections.
// 3: challenged hellos naming both nodes; data hellos MAC their options.
// 4: the peer service moves to its own package (isometry.peer.v4).
// Every node of a cluster runs the same version; it is the package's.
inline constexpr uint32_t kPeerProtocolVersion = 4;
// How long a hello challenge stays good.
inline constexpr auto kChallengeLife = std::chrono::seconds(30);
// A peer call's metadata: the caller's name, its call counter, and
// HMAC(session key, "call" | method | counter | serialized request).
inline constexpr char kCallerKey[] = "isometry-peer";
inline constexpr char kCounterKey[] = "isometry-peer-call";
inline constexpr char kCallMacKey[] = "isometry-peer-mac-bin";
// How far behind the highest counter seen a call may arrive (calls made
// at once on several threads overtake each other).
inline constexpr uint64_t kCallWindow = 4096;

// An asynchronous peer call's context, request and answer, shared with its
// callback (which keeps them alive until the call ends).
template <typename Request, typename Response>
struct AsyncCall {
  std::shared_ptr<grpc::ClientContext> ctx = std::make_shared<grpc::ClientContext>();
  std::shared_ptr<Request> req = std::make_shared<Request>();
  std::shared_ptr<Response> resp = std::make_shared<Response>();
};

int64_t UnixMs();
Status FromGrpc(const grpc::Status& s, std::string_view what);
void SetDeadline(grpc::ClientContext& ctx, uint32_t ms);

// A peer: a [[peer]] (made in Cluster::Create) or one etcd announced
// (made when discovery sees it). Constant once made, but for `removed`;
// never destroyed before the cluster, so a Peer* stays valid. Its loop
// starts in Start (or when added later) and is joined in Stop.
struct Peer {
  PeerConfig config;
  std::string source = "config";  // "config" or "etcd" (isoctl peers)
  // It left the cluster (its etcd key went): FindPeer no longer sees it
  // and its loop ends. A return makes a new Peer.
  std::atomic<bool> removed{false};
  std::unique_ptr<peer_api::IsometryPeer::Stub> stub;
  // For a probe over a fresh connection (Ping after a miss): the stub's
  // connection may sit in TCP's retransmission backoff long after an
  // outage ended, and would make a short cut look as long as the timeout.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  grpc::ChannelArguments channel_args;
  // The loop's own: the channel of the last such probe, kept while the
  // peer is missed (Impl::Ping).
  std::shared_ptr<grpc::Channel> probe;
  std::thread loop;
  // Its loop returned (it left): the thread is joined at the next peer
  // change (Impl::ReapLoopsLocked), not kept until the daemon stops.
  std::atomic<bool> loop_ended{false};
  size_t index = 0;  // of its PeerState in Impl::peer_states
};

// What this node knows of a peer now (Impl::StateLocked).
struct PeerState {
  std::string state = "connecting";  // connecting, up, down, refused
  std::string last_error;
  // The key of our session with it (from our hello; never sent): MACs of
  // our calls and proofs of our data connections.
  std::string session_key;
  uint64_t calls = 0;  // counter of our calls in this session
  uint32_t node = 0;
  std::string data_address;
  Topology topology;                         // its memories and edges, ids {node, index}
  std::map<std::string, double> link_rates;  // its links to its peers (welcome), bytes/s
  double rtt_ms = 0;
  // Which transport network hops with it take, and why (isoctl peers).
  std::string network;
  Clock::time_point last_answer{};
  bool up = false;
};

// A planned cross-node path and the chunking both halves share.
// One node's stretch of a cross-node path: the hops it runs, between the
// crossing that reaches it (in_hop; none for the source's node) and the
// one that leaves it (out_hop; none for the destination's).
struct PathStretch {
  static constexpr size_t kNone = ~size_t{0};
  std::string node;
  size_t in_hop = kNone, out_hop = kNone;
};

// What one node does in a cross-node copy (SetUpHalves).
struct HalfRole {
  bool sending = false;
  std::string here, partner;  // the node, and the one across its net hop
  size_t net_hop = 0;
  size_t relay_hop = 0;  // a relay: also sends here to relay_partner
  std::string relay_partner;
  uint32_t rdma_tag = 0;  // a direct sending half: the receiver's RDMA tag
};

struct CrossPlan {
  Topology topo;  // the nodes' graphs, memories named "node:memory"
  Path path;
  // Source node first; more than two when the path relays through other
  // nodes (crosses the network more than once).
  std::vector<PathStretch> stretches;
  uint64_t chunk_target = 0, slot_limit = 0;
  // Both ends on one other node (one stretch): that node runs the whole
  // copy (path is then its plan as this node sees it).
  bool forward() const { return stretches.size() == 1; }
};

// A half this node runs for a cross-node copy. Its mutable fields are
// guarded by Impl::mu, but not annotated: a Half outlives its entry in
// Impl::halves (its runtime completion holds it), and clang's analysis names
// a lock by the expression that reaches it, so it cannot tie h->field to
// Impl::mu. Touch them only under Impl::mu.
struct Half {
  uint64_t key = 0;
  std::string partner, initiator;
  // For isoctl transfers (Cluster::Halves): the copy's id on the
  // initiator, the plan, and its memories named "node:memory".
  uint64_t source_transfer = 0;
  bool sending = false;
  size_t net_hop = 0;
  bool whole = false;  // a forwarded copy: every hop runs here, none crosses
  // A relay: also sends at relay_hop to relay_partner (RemotePart).
  size_t relay_hop = 0;
  std::string relay_partner;
  // The network hop runs over the RDMA link with `partner` under this tag
  // (set when routed: before the half's first request); 0: over TCP.
  uint32_t rdma_tag = 0;
  Path path;
  std::map<MemoryId, std::string> names;
  int priority = 0;
  std::optional<Transfer> transfer;
  Status aborted;  // set when an abort came before or during the start
  bool finished = false;
  Status status;
  Clock::time_point finished_at{};
  std::vector<std::function<void(const Status&)>> waiters;
};

// A hello as the peer service received it (peer_api::PeerHello's fields).
struct HelloIn {
  std::string node_name;
  uint32_t node = 0;
  uint32_t protocol_version = 0;
  std::string nonce;
  int64_t unix_ms = 0;
  std::string mac;
  std::string to_node_name, challenge;  // the node it is for, its challenge
  std::string from;                     // the caller's address, for the log
  // TLS: the names of the caller's verified certificate; empty without TLS.
  std::vector<std::string> identities;
  bool tls = false;
};

// A session a peer opened with its hello to this node: how its calls and
// data connections prove who they are.
struct Session {
  std::string key;
  uint32_t node = 0;        // its node id, from the hello
  uint64_t highest = 0;     // the highest call counter seen
  std::set<uint64_t> seen;  // counters seen within kCallWindow of it
  // Its last authenticated call: a peer that calls is heard (its pings
  // count when this node's own go unanswered).
  std::chrono::steady_clock::time_point last_call{};
};

// A peer call as the service received it, to authenticate.
struct CallIn {
  std::string caller, counter, mac;  // the metadata
  std::string_view method;
  std::string body;  // the request, serialized
  std::vector<std::string> identities;
  bool tls = false;
};

// What this node answers an accepted hello with (peer_api::PeerWelcome).
struct WelcomeOut {
  std::string node_name;
  uint32_t node = 0;
  uint32_t protocol_version = 0;
  std::string token, mac, data_address;      // token: the session's id, sent once
  const Topology* topology = nullptr;        // this node's; lives as long as the node
  std::map<std::string, double> link_rates;  // to its peers, bytes/s
  const rdma::RdmaChoice* rdma = nullptr;    // this node's; lives as long as the node
};

// A half a peer asks this node to run (peer_api::StartHalfRequest, parsed).
struct HalfRequest {
  RemotePart part;  // without peer: set from `partner`
  std::string partner;
  InstanceSpec local;
  InstanceShape other;
  Box box;
  CopyOptions options;
  std::string remote_qos_class;  // the copy's class on the caller (StartHalfRequest.qos_class)
  CopySource source;             // the initiator's client: Active Access log entries
  // A datatype copy (form_hash != 0): this node's end is the form with
  // that hash (its bytes in `form`, or known from the caller's earlier
  // requests) over form_span bytes from local.offset.
  uint64_t form_hash = 0;
  std::string form;
  uint64_t form_span = 0;
  // Forwarding: this node runs the whole copy from `local` to this end;
  // of a datatype copy, with this form (hash, bytes, span) for it.
  std::optional<InstanceSpec> forward_dst;
  uint64_t dst_form_hash = 0;
  std::string dst_form;
  uint64_t dst_form_span = 0;
  // A sending half: the receiving half's RDMA tag (0: TCP).
  uint32_t rdma_tag = 0;
};

class CrossOp;
class EtcdMembership;  // etcd_membership.h
class PartCall;        // distributed_peers.cc
struct EagerCall;      // eager_put.cc
struct HalfOut;        // peer_wire.h

}  // namespace cluster

struct Cluster::Impl {
  using Peer = cluster::Peer;
  using PeerState = cluster::PeerState;
  using Half = cluster::Half;
  using CrossOp = cluster::CrossOp;
  using CrossPlan = cluster::CrossPlan;
  using Clock = cluster::Clock;

  Config config;
  std::string secret;                          // empty with TLS and no secret_file
  std::shared_ptr<const net::TlsContext> tls;  // null without [cluster.tls]
  std::shared_ptr<grpc::ServerCredentials> server_credentials;
  uint32_t protocol_version = cluster::kPeerProtocolVersion;  // what our hellos claim
  std::string advertised_data_address;  // fault injection: what welcomes say instead
  uint32_t setup_delay_ms = 0;          // fault injection: halves set up this late
  std::unique_ptr<net::DataPlane> data;
  Node* node = nullptr;
  // How peer channels are made (for peers added after Create).
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials;
  grpc::ChannelArguments channel_args;
  // Every peer ever made (removed ones too); only grows. Taken after mu
  // when both are held; nothing takes mu while holding it.
  mutable absl::Mutex peers_mu ABSL_ACQUIRED_AFTER(mu);
  std::vector<std::unique_ptr<Peer>> peers ABSL_GUARDED_BY(peers_mu);
  std::unique_ptr<cluster::EtcdMembership> etcd;  // null without [cluster.etcd]

  mutable absl::Mutex mu;
  absl::CondVar cv;  // wakes peer loops (stop, peer down)
  bool stopping ABSL_GUARDED_BY(mu) = false;
  // One per peers[i]; a deque, so adding one moves none.
  std::deque<PeerState> peer_states ABSL_GUARDED_BY(mu);
  // Sessions peers opened with their hellos to this node, by peer name.
  std::map<std::string, cluster::Session> sessions ABSL_GUARDED_BY(mu);
  // Signs this boot's hello challenges (random, never stored or sent):
  // a challenge from before a restart is not good after it.
  const std::string boot_key = RandomHex(32);
  // Challenges answered by a proven hello, until they expire: each is good once.
  std::map<std::string, Clock::time_point> used_challenges ABSL_GUARDED_BY(mu);
  std::map<uint64_t, std::shared_ptr<Half>> halves ABSL_GUARDED_BY(mu);
  // Halves as they ended (finished, or tombstones), oldest first: what
  // PruneEndedHalvesLocked drops from `halves`, without a scan of it.
  std::deque<std::pair<Clock::time_point, uint64_t>> ended_halves ABSL_GUARDED_BY(mu);
  // The keys of `halves` by the copy they are part of (Half::source_transfer),
  // so that a copy's own halves are found without a scan (HalfReports).
  std::multimap<uint64_t, uint64_t> halves_of_copy ABSL_GUARDED_BY(mu);
  std::map<uint64_t, std::weak_ptr<CrossOp>> ops ABSL_GUARDED_BY(mu);
  // Cross-node copy keys: this node's id, then a counter that starts at a
  // random point so keys of a restarted node do not meet its old ones.
  uint64_t next_key ABSL_GUARDED_BY(mu) = 0;

  // Set-up of halves and reactions to dead links run here, never on a
  // gRPC, ring or link thread. Made in Start, ended in Stop.
  std::unique_ptr<net::Completer> worker ABSL_GUARDED_BY(mu);

  // Redistribution parts this node runs on peers (by a local number) and for peers (by key).
  std::map<uint64_t, std::weak_ptr<cluster::PartCall>> part_calls ABSL_GUARDED_BY(mu);
  uint64_t next_part_call ABSL_GUARDED_BY(mu) = 0;
  std::map<std::pair<std::string, uint64_t>, std::shared_ptr<CrossTransfer>> served_parts
      ABSL_GUARDED_BY(mu);
  // Eager puts in flight: a peer that goes down ends them (FailEagerPutsTo), not a deadline.
  std::map<uint64_t, std::weak_ptr<cluster::EagerCall>> eager_calls ABSL_GUARDED_BY(mu);
  uint64_t next_eager_call ABSL_GUARDED_BY(mu) = 0;
  cluster::DeclinedPuts declined_puts;  // (peer, class) a peer's caps keep off eager puts

  std::unique_ptr<peer_api::IsometryPeer::CallbackService> service;
  cluster::FormExchange forms;  // canonical forms sent to / received from peers

  const std::string& self() const { return config.cluster.node_name; }
  bool Stopping() const ABSL_LOCKS_EXCLUDED(mu) {
    absl::MutexLock lock(&mu);
    return stopping;
  }
  // The peer named `name` now (not one that left), or null.
  Peer* FindPeer(const std::string& name) const ABSL_LOCKS_EXCLUDED(peers_mu);
  // The peers now (not those that left).
  std::vector<Peer*> PeerList() const ABSL_LOCKS_EXCLUDED(peers_mu);
  std::unique_ptr<Peer> MakePeer(const PeerConfig& pc, std::string source) const;
  // A peer etcd announced: made, and its loop started when the cluster
  // runs. AlreadyExists for a known name (a [[peer]] wins over etcd).
  Status AddPeer(const PeerConfig& pc, std::string source) ABSL_LOCKS_EXCLUDED(mu, peers_mu);
  // Peer `name` left (etcd): like MarkDown with `why`, then its session
  // and its loop end. [[peer]]s never leave.
  void RemovePeer(const std::string& name, const Status& why) ABSL_LOCKS_EXCLUDED(mu, peers_mu);
  // Joins the loops of peers that left and whose loop has returned (each
  // would keep its stack until Stop otherwise). None once `stopping`: Stop
  // joins them all.
  void ReapLoopsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) ABSL_LOCKS_EXCLUDED(peers_mu);
  PeerState& StateLocked(const Peer& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return peer_states[p.index];
  }
  const PeerState& StateLocked(const Peer& p) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return peer_states[p.index];
  }
  bool Post(std::function<void()> fn) ABSL_LOCKS_EXCLUDED(mu);  // false: stopping, not run

  // ---- peers (peer_manager.cc) ----

  // Signs an outgoing call `method` (the RPC's name) with `req` to peer
  // `p`: a fresh counter and the MAC of both, with our session key.
  void Authorize(grpc::ClientContext& ctx, const Peer& p, std::string_view method,
                 const google::protobuf::MessageLite& req) ABSL_LOCKS_EXCLUDED(mu);
  // The peer that made a call: its MAC under that peer's session, a
  // counter not seen before, and with TLS its certificate's name. A
  // recorded call replayed, or a request altered, is refused.
  Result<std::string> Caller(const cluster::CallIn& call) ABSL_LOCKS_EXCLUDED(mu);
  // The peer a data connection's hello proves to be (frame.h).
  Result<net::HelloAnswer> DataPeer(const net::DataPlane::HelloProof& hello)
      ABSL_LOCKS_EXCLUDED(mu);
  // Where peers open data connections.
  std::string DataAddress() const;
  // Checks a peer's hello and opens its session (replacing an older one).
  Result<cluster::WelcomeOut> AcceptHello(const cluster::HelloIn& hello) ABSL_LOCKS_EXCLUDED(mu);
  Status CheckHello(const cluster::HelloIn& hello) ABSL_LOCKS_EXCLUDED(mu);
  // A fresh challenge for a hello, and the check of one a hello answers
  // (made by this boot, not expired; consumed when the hello is proven).
  std::string Challenge() const;
  Status CheckChallenge(const std::string& challenge) const;
  Status UseChallenge(const std::string& challenge) ABSL_LOCKS_EXCLUDED(mu);
  // This node's hello to `p` (peer_hello.cc): its challenge, the hello,
  // then what the welcome says is taken in (Welcomed) and the data link
  // connected.
  Status Hello(Peer& p) ABSL_LOCKS_EXCLUDED(mu);
  Status Welcomed(Peer& p, const std::string& nonce, const peer_api::PeerWelcome& w,
                  Clock::time_point t0) ABSL_LOCKS_EXCLUDED(mu);
  // A failed hello call as a status that says what to fix.
  Status HelloFailed(const Peer& p, const grpc::Status& s, std::string_view what);
  // `fresh`: over a new connection of its own (after a missed ping).
  Status Ping(Peer& p, bool fresh) ABSL_LOCKS_EXCLUDED(mu);
  // Whether peer `name` is up and answers a signed ping now, over its
  // shared channel (not the loop's probe: callable from any thread).
  Status SignedPing(const std::string& name) ABSL_LOCKS_EXCLUDED(mu);
  void PeerLoop(Peer& p) ABSL_LOCKS_EXCLUDED(mu);
  // A peer is gone: everything that involves it fails with UNAVAILABLE
  // (its buffers are freed as the halves drain) and the loop says hello
  // again.
  // `generation`: the data link's generation the failure was seen on
  // (none: now); a stale report about replaced connections changes nothing.
  void MarkDown(const std::string& name, const Status& why,
                std::optional<uint64_t> generation = std::nullopt) ABSL_LOCKS_EXCLUDED(mu);
  void MarkDownPeer(Peer& p, const Status& why, std::optional<uint64_t> generation)
      ABSL_LOCKS_EXCLUDED(mu);
  // A memory as users name it: "sys0" on this node, "node-b:sys0" on a
  // peer (by the topology its welcome gave), its id when neither has it.
  // Not under mu.
  std::string MemoryName(MemoryId id) const ABSL_LOCKS_EXCLUDED(mu);

  // ---- this node's halves (halves.cc) ----

  // Starts this node's half; `end` is this node's end, `other` the shape
  // of the other end.
  // `rdma_tag`: sending, the receiving half's tag (0: TCP); receiving,
  // set to the tag this half routed its network hop under (0: TCP).
  Status StartLocalHalf(uint64_t key, RemotePart part, const CrossEnd& end,
                        const InstanceShape& other, std::optional<Box> box, CopyOptions options,
                        const std::string& initiator, uint64_t source_transfer,
                        const std::function<void(Status)>& on_done, uint32_t* rdma_tag)
      ABSL_LOCKS_EXCLUDED(mu);
  // Routes the network hop of `h` (a direct half with `h->partner`) over
  // RDMA when the link is there: `part.on_grid` does it as the runtime
  // builds the copy. Sending with a tag of 0, or a relay: TCP, untouched.
  void RouteOverRdma(const std::shared_ptr<Half>& h, RemotePart& part, uint32_t tag);
  // visibility.cc: the halves and network edges, for isoctl.
  std::vector<HalfReport> HalfReports(uint64_t id, bool running_only) const ABSL_LOCKS_EXCLUDED(mu);
  std::vector<std::string> LinkEdges(const std::string& peer) const ABSL_LOCKS_EXCLUDED(mu);
  // `s` as another node may see it: this node's DSK directories become
  // "node:memory:" (a peer's client names the file relative to them and
  // must not learn where they are).
  Status ForPeer(const Status& s) const;
  // A half `caller` asks this node to run. A datatype half naming a form
  // this node does not hold fails with cluster::UnknownFormError.
  Status StartPeerHalf(const std::string& caller, cluster::HalfRequest req, uint32_t* rdma_tag);
  // The form end a datatype half from `caller` describes, checked.
  Result<std::shared_ptr<const EndForm>> PeerEndForm(const std::string& caller,
                                                     const cluster::HalfRequest& req);
  // A forwarded copy (req.forward_dst): both ends here, the whole copy
  // run by this node's runtime as a half the initiator awaits.
  Status StartForwardedHalf(const std::string& caller, cluster::HalfRequest req);
  // A relay (req.part.relays()): receives from the partner and sends on
  // to the relay partner, through this node's staging; holds no end.
  Status StartRelayHalf(const std::string& caller, cluster::HalfRequest req);
  std::map<MemoryId, std::string> QualifiedNames(const Path& path) const ABSL_LOCKS_EXCLUDED(mu);
  // How a half for peer `caller` touches this node's ends (Active Access):
  // its node id from the session its hello opened, the client and box.
  PeerAccess AccessOf(const std::string& caller, const CopySource& source,
                      const std::optional<Box>& box) const ABSL_LOCKS_EXCLUDED(mu);
  // Registers `h` and starts its runtime copy; `ends` are kept alive and
  // their watches (Active Access) finish before the half ends.
  Status RunHalf(const std::shared_ptr<Half>& h, CopyRequest req,
                 const std::vector<const CrossEnd*>& ends,
                 const std::function<void(Status)>& on_done) ABSL_LOCKS_EXCLUDED(mu);
  // Drops the halves that ended over kEndedHalfKept ago, and the oldest
  // past kMaxEndedHalves.
  void PruneEndedHalvesLocked(Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Removes `it` from `halves` and from halves_of_copy.
  void EraseHalfLocked(std::map<uint64_t, std::shared_ptr<Half>>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Runs `on_end` with the half's final status, now when it has ended;
  // NotFound when this node has no half `key`.
  Status AwaitHalf(uint64_t key, std::function<void(const Status&)> on_end) ABSL_LOCKS_EXCLUDED(mu);
  // Ends half `key` with `why` (or its start, when it has not started).
  void AbortHalf(const std::string& caller, uint64_t key, const Status& why)
      ABSL_LOCKS_EXCLUDED(mu);
  // Ends every half that `peer` started or exchanges data with (it said
  // hello anew: it dropped its side of them).
  void AbortHalvesWith(const std::string& peer, const Status& why) ABSL_LOCKS_EXCLUDED(mu);

  // ---- cross-node copies, initiator (cross_copy.cc) ----

  // Node `name`'s graph, for the cluster-wide one; an error when it is unknown or cannot take
  // part in a copy now (a relay, unlike an `end`, also while its data link is being resumed).
  Status AddNodeGraph(const std::string& name, bool end, std::vector<NodeGraph>& graphs,
                      std::map<std::string, double>* links = nullptr) ABSL_LOCKS_EXCLUDED(mu);
  // This node's declared rate to `peer` ([[peer]] link_rate, else
  // cluster.link_rate), bytes/s.
  double LinkRate(const std::string& peer) const;
  // The plan over the graphs of `nodes` (the ends' first: one node when
  // both ends are on it, a forwarded copy) joined by the links their
  // nodes declare.
  Result<CrossPlan> PlanOver(const std::vector<std::string>& nodes, const NodeMemory& src,
                             const NodeMemory& dst, const Layout& src_layout,
                             const Layout& dst_layout, const Box& box, const FieldSpace& fields);
  // `relays`: other nodes may relay (paths crossing the network more
  // than once) where that is clearly faster; layout copies only.
  Result<CrossPlan> PlanCross(const NodeMemory& src, const NodeMemory& dst,
                              const Layout& src_layout, const Layout& dst_layout, const Box& box,
                              const FieldSpace& fields, bool relays);
  NodeMemory NameOf(const CrossEnd& e) const;
  Result<std::shared_ptr<CrossTransfer>> Copy(CrossCopySpec spec, std::function<void(Status)> done)
      ABSL_LOCKS_EXCLUDED(mu);
  // Copy, past the eager put: planned, as halves.
  Result<std::shared_ptr<CrossTransfer>> CopyAsHalves(CrossCopySpec spec,
                                                      std::function<void(Status)> done);
  Result<PlanReport> Explain(const std::string& src_memory, const Layout& src_layout,
                             const std::string& dst_memory, const Layout& dst_layout,
                             const Box& bounds, const FieldSpace& fields);
  Result<PlanReport> ExplainForms(const std::string& src_memory, const std::string& dst_memory,
                                  const EndForm& src, const EndForm& dst);
  void SetUp(const std::shared_ptr<CrossOp>& op, const CrossCopySpec& spec, const CrossPlan& plan);
  // A node of `plan` (other than this one) that is not up now; empty if
  // none is.
  std::string NodeDownIn(const CrossPlan& plan) const ABSL_LOCKS_EXCLUDED(mu);
  void SetUpHalves(const std::shared_ptr<CrossOp>& op, const CrossCopySpec& spec,
                   const CrossPlan& plan);
  // This node's half of `op`; false when the copy cannot go on.
  // `rdma_tag`: where a receiving half puts its RDMA tag (0: TCP).
  bool SetUpOwnHalf(const std::shared_ptr<CrossOp>& op, const CrossCopySpec& spec,
                    const cluster::HalfRole& role, const CrossPlan& plan, uint32_t* rdma_tag);
  // StartHalf at peer `p` (named `here`), sending the end's form by hash
  // or by bytes (exchange-once).
  Status CallStartHalf(const Peer& p, const std::string& here, cluster::HalfOut& out,
                       uint32_t* rdma_tag = nullptr);
  // ---- eager puts (eager_put.cc) ----

  // A small copy into a peer's allocation sent whole in one PutBytes call
  // (cluster.eager_put_size): none when `spec` does not qualify (then
  // `done` is untouched and the copy is planned as usual).
  std::optional<Result<std::shared_ptr<CrossTransfer>>> TryEagerPut(
      const CrossCopySpec& spec, std::function<void(Status)>& done) ABSL_LOCKS_EXCLUDED(mu);
  // Lands a peer's PutBytes, or declines it (resp->declined: this node caps its class on the
  // network); `done` runs once, after the watch's log entries where the end is watched.
  void ServePutBytes(const std::string& caller, const peer_api::PutBytesRequest& req,
                     peer_api::PutBytesResponse* resp, std::function<void(Status)> done)
      ABSL_LOCKS_EXCLUDED(mu);
  // Ends the puts in flight to `name` (down, `why`): failed, saying they may have landed there.
  void FailEagerPutsTo(const std::string& name, const Status& why) ABSL_LOCKS_EXCLUDED(mu);
  // Stop: waits (bounded) for the puts in flight (a declined one reaches this Impl).
  void AwaitEagerPuts() ABSL_LOCKS_EXCLUDED(mu);
  // The eager puts in flight to `peer` (empty: to every peer).
  std::vector<std::shared_ptr<cluster::EagerCall>> EagerPutsInFlight(const std::string& peer);

  // ---- RDMA links (rdma_links.cc) ----

  // One per peer with RDMA, both nodes using it: the node whose name
  // sorts first offers it (ConnectRdma) after each hello, the other
  // accepts; an offer replaces the link. Taken after mu; never held
  // while calling a peer.
  mutable absl::Mutex rdma_mu ABSL_ACQUIRED_AFTER(mu);
  std::map<std::string, std::shared_ptr<rdma::RdmaLink>> rdma_links ABSL_GUARDED_BY(rdma_mu);
  // The RDMA channel of each connected link, behind each peer's network
  // channel (channel_context() hands it to them).
  const std::shared_ptr<rdma::NetRoutes> net_routes = std::make_shared<rdma::NetRoutes>();
  rdma::LinkOptions RdmaLinkOptions() const;
  // Puts `link` (connected) behind the network hops with `peer`: its RDMA
  // channel, and what breaking it does (TCP for new copies, the log and
  // isoctl peers say so). Returns the line isoctl peers shows.
  std::string AttachRdma(const std::string& peer, const std::shared_ptr<rdma::RdmaLink>& link)
      ABSL_LOCKS_EXCLUDED(mu, rdma_mu);
  // The RDMA link with `peer` (`link`; null: whichever) is gone: new
  // copies take TCP. `why` for the log and isoctl peers. `offer_again`
  // (a break, not the peer going down): the node that offers links
  // offers a new one at once (at most once per 10 s per peer).
  void DropRdma(const std::string& peer, const rdma::RdmaLink* link, const Status& why,
                bool offer_again) ABSL_LOCKS_EXCLUDED(mu, rdma_mu);
  // The line isoctl peers shows for `peer`: the connected link's, else
  // `line`. May run under mu (rdma_mu is taken after it).
  std::string NetworkLine(const std::string& peer, std::string line) const
      ABSL_LOCKS_EXCLUDED(rdma_mu);
  // A copy this node routed over RDMA with `peer` failed with `why`; when
  // `peer` refused it for want of a link there, this node drops its own.
  void RdmaRefused(const std::string& peer, const Status& why) ABSL_LOCKS_EXCLUDED(mu, rdma_mu);
  std::map<std::string, Clock::time_point> rdma_offered_again ABSL_GUARDED_BY(rdma_mu);
  // After a hello to `p` that says what it has: joins the link when both
  // nodes use RDMA and this one offers it. Returns the line isoctl peers
  // shows for network hops with it (NetworkTransportWhy, or why the link
  // failed).
  std::string OfferRdma(Peer& p, const rdma::PeerRdma& theirs) ABSL_LOCKS_EXCLUDED(mu, rdma_mu);
  // `caller`'s offer (signed, checked by the service): this node's end,
  // connected, answered with the proof of `caller`'s session.
  Result<peer_api::PeerRdmaLink> AcceptRdma(const std::string& caller,
                                            const peer_api::PeerRdmaLink& offer)
      ABSL_LOCKS_EXCLUDED(mu, rdma_mu);

  // ---- distributed instances across nodes (distributed_peers.cc) ----

  Result<std::vector<DistributedRanks>> QueryDistributed(const std::string& key,
                                                         const std::string& grant_digest)
      ABSL_LOCKS_EXCLUDED(mu);
  Result<std::shared_ptr<CrossTransfer>> RunRedistributePart(
      const std::string& name, const RedistributePart& part,
      std::function<void(Status, uint64_t)> done) ABSL_LOCKS_EXCLUDED(mu);
  void AnnounceDistributedEnded(const std::string& key, const std::set<std::string>& to,
                                const std::string& why) ABSL_LOCKS_EXCLUDED(mu);
  // Runs the part `caller` asks for; `done` once when it ends (not when
  // this returns an error).
  Status ServePart(const std::string& caller, const peer_api::PeerRedistributePart& req,
                   std::function<void(Status, uint64_t)> done) ABSL_LOCKS_EXCLUDED(mu);
  void AbortServedPart(const std::string& caller, uint64_t key, const Status& why)
      ABSL_LOCKS_EXCLUDED(mu);
  // Peer `name` is down: the parts it runs for this node and those this
  // node runs for it end with `why`.
  void FailPartsWith(const std::string& name, const Status& why) ABSL_LOCKS_EXCLUDED(mu);

  // Peer `role.here`'s half of `op`, then awaits its end; false when the
  // copy cannot go on.
  bool SetUpPeerHalf(const std::shared_ptr<CrossOp>& op, const CrossCopySpec& spec,
                     const cluster::HalfRole& role, const CrossPlan& plan, uint32_t* rdma_tag);
};

}  // namespace isometry
