#include "daemon/cluster/cluster.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "channels/tcp/data_plane.h"
#include "channels/tcp/tcp_channel.h"
#include "core/log_escape.h"
#include "core/log_limiter.h"
#include "daemon/cluster/secret.h"
#include "daemon/runtime/chunker.h"
#include "daemon/server/convert.h"
#include "planner/planner.h"

namespace isometry {

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kPeerProtocolVersion = 1;
constexpr char kTokenKey[] = "isometry-peer-token";

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

// A configured peer as this node sees it.
struct Peer {
  PeerConfig config;
  std::unique_ptr<v1::IsometryPeer::Stub> stub;
  std::thread loop;
  // Guarded by the cluster mutex.
  std::string state = "connecting";  // connecting, up, down, refused
  std::string last_error;
  std::string token;  // what it issued us (our calls and data connections)
  uint32_t node = 0;
  std::string data_address;
  Topology topology;  // its memories and edges, ids {node, index}
  double rtt_ms = 0;
  Clock::time_point last_answer{};
  bool up = false;
};

// A planned cross-node path and the chunking both halves share.
struct CrossPlan {
  Topology topo;  // both nodes' graphs, memories named "node:memory"
  Path path;
  size_t net_hop = 0;
  uint64_t chunk_target = 0, slot_limit = 0;
};

// A half this node runs for a cross-node copy.
struct Half {
  uint64_t key = 0;
  std::string partner, initiator;
  std::optional<Transfer> transfer;
  Status aborted;  // set when an abort came before or during the start
  bool finished = false;
  Status status;
  Clock::time_point finished_at{};
  std::vector<std::function<void(const Status&)>> waiters;
};

}  // namespace

// ---- the initiator's view of a cross-node copy ----

class CrossOp final : public CrossTransfer, public std::enable_shared_from_this<CrossOp> {
 public:
  CrossOp(Cluster::Impl* impl, uint64_t key, std::string path, uint64_t bytes,
          std::function<void(Status)> done)
      : impl_(impl), key_(key), path_(std::move(path)), bytes_(bytes), done_(std::move(done)) {}

  void Cancel() override;
  std::string PathText() const override { return path_; }
  uint64_t bytes() const override { return bytes_; }
  Clock::time_point started() const override { return started_; }

  uint64_t key() const { return key_; }
  // A half is being set up (counted until HalfDone).
  void AddHalf(const std::string& node) {
    std::lock_guard lock(mu_);
    ++pending_;
    nodes_.push_back(node);
  }
  void SetLocal(Transfer t) {
    Status failed;
    {
      std::lock_guard lock(mu_);
      local_ = t;
      failed = failure_;
    }
    if (!failed.ok()) t.Abort(failed);  // the copy failed while this half started
  }
  void AddAwait(const std::string& node, std::shared_ptr<grpc::ClientContext> ctx) {
    std::lock_guard lock(mu_);
    awaits_.emplace_back(node, std::move(ctx));
  }
  void HalfDone(Status s);
  void Finish(std::function<void(Status)> done, Status final);
  // Set-up is over (every half it started was counted): the copy ends when
  // the last of them has, or now when none runs.
  void SetUpDone();
  void Fail(Status why);  // ends every half with `why`
  bool Involves(const std::string& node) const {
    std::lock_guard lock(mu_);
    return std::find(nodes_.begin(), nodes_.end(), node) != nodes_.end();
  }
  bool failed() const {
    std::lock_guard lock(mu_);
    return !failure_.ok();
  }

 private:
  Cluster::Impl* const impl_;
  const uint64_t key_;
  const std::string path_;
  const uint64_t bytes_;
  const Clock::time_point started_ = Clock::now();
  mutable std::mutex mu_;
  std::function<void(Status)> done_;  // guarded by mu_
  int pending_ = 0;
  bool setup_done_ = false;
  Status failure_;
  std::optional<Transfer> local_;
  std::vector<std::string> nodes_;  // nodes running remote halves ("" = here)
  std::vector<std::pair<std::string, std::shared_ptr<grpc::ClientContext>>> awaits_;
};

// ---- the cluster ----

struct Cluster::Impl {
  Config config;
  std::string secret;
  uint32_t protocol_version = kPeerProtocolVersion;  // what our hellos claim
  std::unique_ptr<net::DataPlane> data;
  Node* node = nullptr;
  std::vector<std::unique_ptr<Peer>> peers;  // constant after Create

  mutable std::mutex mu;
  std::condition_variable cv;  // wakes peer loops (stop, peer down)
  bool stopping = false;
  std::map<std::string, std::string> issued;        // peer -> token we issued it
  std::map<std::string, uint32_t> peer_nodes;       // peer -> node id it said hello with
  std::map<std::string, Clock::time_point> nonces;  // hellos seen in the last 5 minutes
  std::map<uint64_t, std::shared_ptr<Half>> halves;
  std::map<uint64_t, std::weak_ptr<CrossOp>> ops;
  // Cross-node copy keys: this node's id, then a counter that starts at a
  // random point so keys of a restarted node do not meet its old ones.
  uint64_t next_key = 0;

  // Set-up of halves and reactions to dead links run here, never on a
  // gRPC, ring or link thread. Made in Start, ended in Stop.
  std::unique_ptr<net::Completer> worker;

  std::unique_ptr<v1::IsometryPeer::CallbackService> service;

  const std::string& self() const { return config.cluster.node_name; }

  Peer* FindPeer(const std::string& name) const {
    for (const auto& p : peers) {
      if (p->config.name == name) return p.get();
    }
    return nullptr;
  }

  // Our token at peer `p` on an outgoing call.
  void Authorize(grpc::ClientContext& ctx, const Peer& p) {
    std::lock_guard lock(mu);
    ctx.AddMetadata(kTokenKey, p.token);
  }

  // The peer this node issued `token` to; under mu.
  const std::string* PeerOfTokenLocked(const std::string& token) const {
    for (const auto& [peer, t] : issued) {
      if (SameSecret(t, token)) return &peer;
    }
    return nullptr;
  }

  // Where peers open data connections: the listener's address, or for a
  // wildcard listener the host peers already dial (daemon.grpc_tcp's, or
  // loopback when that is a wildcard too) with the listener's port.
  std::string DataAddress() const {
    const std::string& bound = data->address();
    const size_t colon = bound.rfind(':');
    const std::string host = bound.substr(0, colon), port = bound.substr(colon + 1);
    if (host != "0.0.0.0" && host != "[::]") return bound;
    const std::string& grpc_tcp = config.daemon.grpc_tcp;
    const std::string ghost = grpc_tcp.substr(0, grpc_tcp.rfind(':'));
    return StrCat(ghost.empty() || ghost == "0.0.0.0" ? "127.0.0.1" : ghost, ":", port);
  }

  void Post(std::function<void()> fn) {
    std::lock_guard lock(mu);
    if (worker && !stopping) worker->Post(std::move(fn));
  }

  // ---- topology ----

  void DescribeSelf(v1::PeerWelcome* w) const {
    const Topology& topo = node->runtime().topology();
    for (const TopologyMemory& m : topo.memories) {
      auto* pm = w->add_memories();
      pm->set_index(m.id.memory);
      pm->set_name(m.name);
      pm->set_kind(std::string(MemoryKindName(m.kind)));
    }
    for (const TopologyEdge& e : topo.edges) {
      auto* pe = w->add_edges();
      pe->set_src(e.src.memory);
      pe->set_dst(e.dst.memory);
      pe->set_channel(e.channel_name);
      pe->set_kind(std::string(ChannelKindName(e.kind)));
      for (const ThroughputSample& s : e.tp.Breakpoints()) {
        auto* r = pe->add_rates();
        r->set_request_bytes(s.request_bytes);
        r->set_bytes_per_s(s.bytes_per_second);
      }
    }
  }

  static Result<Topology> TopologyOf(const v1::PeerWelcome& w) {
    Topology t;
    for (const auto& m : w.memories()) {
      auto kind = ParseMemoryKind(m.kind());
      if (!kind) return InvalidArgument("peer memory '", m.name(), "' has unknown kind ", m.kind());
      t.memories.push_back({MemoryId{w.node(), m.index()}, *kind, m.name()});
    }
    for (const auto& e : w.edges()) {
      auto kind = ParseChannelKind(e.kind());
      if (!kind) return InvalidArgument("peer channel '", e.channel(), "' has unknown kind");
      TopologyEdge te{MemoryId{w.node(), e.src()}, MemoryId{w.node(), e.dst()}, -1, *kind,
                      e.channel()};
      std::vector<ThroughputSample> samples;
      for (const auto& r : e.rates()) samples.push_back({r.request_bytes(), r.bytes_per_s()});
      if (!samples.empty()) {
        auto tp = ThroughputFunction::FromSamples(std::move(samples));
        if (tp.ok()) te.tp = *tp;
      }
      t.edges.push_back(std::move(te));
    }
    return t;
  }

  // ---- peers ----

  Status Hello(Peer& p) {
    v1::PeerHello req;
    req.set_node_name(self());
    req.set_node(config.runtime.node);
    req.set_protocol_version(protocol_version);
    req.set_nonce(RandomHex(16));
    req.set_unix_ms(UnixMs());
    req.set_mac(Hmac(
        secret, {"hello", self(), std::to_string(config.runtime.node),
                 std::to_string(protocol_version), req.nonce(), std::to_string(req.unix_ms())}));
    grpc::ClientContext ctx;
    SetDeadline(ctx, config.cluster.peer_timeout_ms);
    v1::PeerWelcome w;
    const auto t0 = Clock::now();
    grpc::Status s = p.stub->Hello(&ctx, req, &w);
    if (!s.ok()) return FromGrpc(s, StrCat("hello to peer '", p.config.name, "'"));
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
    ISO_ASSIGN_OR_RETURN(Topology topo, TopologyOf(w));
    ISO_RETURN_IF_ERROR(
        data->Link(p.config.name).Connect(w.data_address(), config.runtime.node, w.token()));
    std::lock_guard lock(mu);
    p.token = w.token();
    p.node = w.node();
    p.data_address = w.data_address();
    p.topology = std::move(topo);
    p.rtt_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    p.last_answer = Clock::now();
    return OkStatus();
  }

  Status Ping(Peer& p) {
    grpc::ClientContext ctx;
    SetDeadline(ctx, config.cluster.keepalive_ms * 2);
    Authorize(ctx, p);
    v1::PeerPing req;
    v1::PeerPong resp;
    const auto t0 = Clock::now();
    grpc::Status s = p.stub->Ping(&ctx, req, &resp);
    if (!s.ok()) return FromGrpc(s, "ping");
    std::lock_guard lock(mu);
    p.rtt_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    p.last_answer = Clock::now();
    return OkStatus();
  }

  void PeerLoop(Peer& p) {
    auto backoff = std::chrono::milliseconds(100);
    std::string logged;
    while (true) {
      bool up;
      {
        std::unique_lock lock(mu);
        if (stopping) return;
        up = p.up;
      }
      if (!up) {
        Status s = Hello(p);
        std::unique_lock lock(mu);
        if (stopping) return;
        if (s.ok()) {
          p.up = true;
          p.state = "up";
          p.last_error.clear();
          backoff = std::chrono::milliseconds(100);
          logged.clear();
          spdlog::info("peer '{}' is up: node {}, {} memories, data at {}, rtt {:.2f} ms",
                       p.config.name, p.node, p.topology.memories.size(), p.data_address, p.rtt_ms);
          continue;
        }
        p.state = (absl::IsUnauthenticated(s) || absl::IsFailedPrecondition(s) ||
                   absl::IsPermissionDenied(s))
                      ? "refused"
                      : "down";
        p.last_error = std::string(s.message());
        if (logged != p.last_error) {
          spdlog::warn("peer '{}' ({}): {}", p.config.name, p.config.address,
                       ForLog(s.ToString(), 512));
          logged = p.last_error;
        }
        cv.wait_for(lock, backoff, [&] { return stopping; });
        backoff = std::min<std::chrono::milliseconds>(backoff * 2, std::chrono::seconds(5));
        continue;
      }
      {
        std::unique_lock lock(mu);
        cv.wait_for(lock, std::chrono::milliseconds(config.cluster.keepalive_ms),
                    [&] { return stopping || !p.up; });
        if (stopping) return;
        if (!p.up) continue;
      }
      Status s = Ping(p);
      if (!s.ok()) {
        Clock::time_point last;
        {
          std::lock_guard lock(mu);
          last = p.last_answer;
        }
        if (Clock::now() - last >= std::chrono::milliseconds(config.cluster.peer_timeout_ms)) {
          MarkDown(p.config.name,
                   Unavailable("peer '", p.config.name, "' did not answer for ",
                               config.cluster.peer_timeout_ms, " ms (", s.message(), ")"));
        }
      }
    }
  }

  // A peer is gone: everything that involves it fails with UNAVAILABLE
  // (its buffers are freed as the halves drain) and the loop says hello
  // again.
  // `generation`: the data link's generation the failure was seen on
  // (none: now); a stale report about replaced connections changes nothing.
  void MarkDown(const std::string& name, Status why,
                std::optional<uint64_t> generation = std::nullopt) {
    Peer* p = FindPeer(name);
    if (!p) return;
    net::PeerLink& link = data->Link(name);
    if (generation && *generation != link.generation()) return;
    link.Fail(why, /*notify=*/false);  // before `up` goes: Connect() must open new ones
    std::vector<std::optional<Transfer>> hs;
    std::vector<std::shared_ptr<CrossOp>> os;
    {
      std::lock_guard lock(mu);
      const bool was_up = p->up;
      p->up = false;
      p->state = "down";
      p->last_error = std::string(why.message());
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
      cv.notify_all();
    }
    for (auto& t : hs) {
      if (t) t->Abort(why);
    }
    for (auto& o : os) o->Fail(why);
  }

  // A memory as users name it: "sys0" on this node, "node-b:sys0" on a
  // peer (by the topology its welcome gave), its id when neither has it.
  // Not under mu.
  std::string MemoryName(MemoryId id) const {
    const Topology& local = node->runtime().topology();
    if (local.FindMemory(id)) return local.NameOf(id);
    std::lock_guard lock(mu);
    for (const auto& p : peers) {
      if (p->node != id.node) continue;
      if (const TopologyMemory* m = p->topology.FindMemory(id)) {
        return StrCat(p->config.name, ":", m->name);
      }
    }
    return StrCat("memory ", id.memory, " of node ", id.node);
  }

  // ---- halves ----

  // Starts this node's half; `end` is this node's end, `other` the shape
  // of the other end.
  Status StartLocalHalf(uint64_t key, RemotePart part, const CrossEnd& end,
                        const InstanceShape& other, std::optional<Box> box, int priority,
                        bool durable, const std::string& initiator,
                        std::function<void(Status)> on_done) {
    auto h = std::make_shared<Half>();
    h->key = key;
    h->partner = part.peer;
    h->initiator = initiator;
    CopyRequest req;
    const MemoryId other_mem =
        part.sending ? part.path.nodes.back().memory : part.path.nodes.front().memory;
    InstanceRef other_ref{other_mem, nullptr, 0, other};
    req.src = part.sending ? end.local : other_ref;
    req.dst = part.sending ? other_ref : end.local;
    const MemoryId mine =
        part.sending ? part.path.nodes.front().memory : part.path.nodes.back().memory;
    if (end.local.memory != mine) {
      return InvalidArgument("cross-node copy ", key, ": the instance lives in memory '",
                             MemoryName(end.local.memory), "', the plan says '", MemoryName(mine),
                             "'");
    }
    for (const PathNode& n : part.path.nodes) part.names[n.memory] = MemoryName(n.memory);
    req.box = box;
    req.priority = priority;
    req.durable = durable;
    req.remote = std::move(part);
    std::shared_ptr<const void> keep = end.keep;
    Impl* self = this;
    req.on_complete = [self, h, keep, on_done](Status s) {
      std::vector<std::function<void(const Status&)>> waiters;
      {
        std::lock_guard lock(self->mu);
        h->finished = true;
        h->status = s;
        h->finished_at = Clock::now();
        waiters.swap(h->waiters);
      }
      for (auto& w : waiters) w(s);
      if (on_done) on_done(s);
    };
    {
      std::lock_guard lock(mu);
      // Finished halves stay a while for a late AwaitHalf.
      const auto cutoff = Clock::now() - std::chrono::minutes(5);
      for (auto it = halves.begin(); it != halves.end();) {
        // Over: finished, or a tombstone (an abort for a half that never
        // started). A half still starting has neither and stays.
        const Half& old = *it->second;
        const bool over = old.finished || (!old.transfer && !old.aborted.ok());
        it = over && old.finished_at < cutoff ? halves.erase(it) : std::next(it);
      }
      if (auto it = halves.find(key); it != halves.end()) {
        if (it->second->transfer || it->second->finished) {
          return absl::AlreadyExistsError(StrCat("half ", key, " exists"));
        }
        h->aborted = it->second->aborted;  // a tombstone: AbortHalf came first
      }
      halves[key] = h;
    }
    auto t = node->runtime().Copy(std::move(req));
    Status aborted;
    {
      std::lock_guard lock(mu);
      if (!t.ok()) {
        halves.erase(key);
        return t.status();
      }
      h->transfer = *t;
      aborted = h->aborted;
    }
    if (!aborted.ok()) t->Abort(aborted);
    return OkStatus();
  }

  // ---- cross-node copies (initiator) ----

  Result<CrossPlan> PlanCross(const NodeMemory& src, const NodeMemory& dst,
                              const Layout& src_layout, const Layout& dst_layout, const Box& box,
                              uint64_t field_bytes);
  NodeMemory NameOf(const CrossEnd& e) const;
  Result<std::shared_ptr<CrossTransfer>> Copy(CrossCopySpec spec, std::function<void(Status)> done);
  Result<PlanReport> Explain(const std::string& src_memory, const Layout& src_layout,
                             const std::string& dst_memory, const Layout& dst_layout,
                             const Box& bounds, const FieldSpace& fields);
  void SetUp(std::shared_ptr<CrossOp> op, CrossCopySpec spec, Path path, size_t net_hop,
             uint64_t chunk_target, uint64_t slot_limit);
  void SetUpHalves(const std::shared_ptr<CrossOp>& op, CrossCopySpec spec, Path path,
                   size_t net_hop, uint64_t chunk_target, uint64_t slot_limit);
};

// ---- CrossOp ----

void CrossOp::Cancel() {
  Fail(absl::CancelledError(StrCat("cross-node transfer ", key_, " was cancelled")));
}

void CrossOp::Fail(Status why) {
  std::optional<Transfer> local;
  std::vector<std::string> nodes;
  std::vector<std::shared_ptr<grpc::ClientContext>> awaits;
  {
    std::lock_guard lock(mu_);
    if (failure_.ok()) failure_ = why;
    local = local_;
    nodes = nodes_;
    for (auto& [n, ctx] : awaits_) awaits.push_back(ctx);
  }
  if (local) local->Abort(why);
  for (const std::string& n : nodes) {
    if (n.empty()) continue;
    Peer* p = impl_->FindPeer(n);
    if (!p) continue;
    auto ctx = std::make_shared<grpc::ClientContext>();
    SetDeadline(*ctx, impl_->config.cluster.peer_timeout_ms);
    impl_->Authorize(*ctx, *p);
    auto req = std::make_shared<v1::AbortHalfRequest>();
    req->set_key(key_);
    req->set_code(static_cast<int>(why.code()));
    req->set_message(std::string(why.message()));
    auto resp = std::make_shared<v1::AbortHalfResponse>();
    p->stub->async()->AbortHalf(ctx.get(), req.get(), resp.get(),
                                [ctx, req, resp](grpc::Status) {});
  }
  // A peer that vanished never answers AwaitHalf: stop waiting.
  for (auto& ctx : awaits) ctx->TryCancel();
}

void CrossOp::HalfDone(Status s) {
  std::function<void(Status)> done;
  Status final;
  bool fail_others = false;
  {
    std::lock_guard lock(mu_);
    if (!s.ok() && failure_.ok()) {
      failure_ = s;
      fail_others = true;
    }
    --pending_;
    if (pending_ == 0 && setup_done_ && done_) {
      done = std::exchange(done_, nullptr);
      final = failure_;
    }
  }
  if (fail_others) Fail(s);
  if (done) Finish(std::move(done), std::move(final));
}

void CrossOp::SetUpDone() {
  std::function<void(Status)> done;
  Status final;
  {
    std::lock_guard lock(mu_);
    setup_done_ = true;
    if (pending_ == 0 && done_) {
      done = std::exchange(done_, nullptr);
      final = failure_;
    }
  }
  if (done) Finish(std::move(done), std::move(final));
}

void CrossOp::Finish(std::function<void(Status)> done, Status final) {
  {
    std::lock_guard lock(impl_->mu);
    impl_->ops.erase(key_);
  }
  done(std::move(final));
}

// ---- planning and set-up ----

Result<CrossPlan> Cluster::Impl::PlanCross(const NodeMemory& src, const NodeMemory& dst,
                                           const Layout& src_layout, const Layout& dst_layout,
                                           const Box& box, uint64_t field_bytes) {
  if (src.node == dst.node) {
    return absl::UnimplementedError(StrCat("both ends are on node '", src.node,
                                           "': ask that node to copy (its own clients do)"));
  }
  // The graph: both nodes' memories and channels, named "node:memory",
  // joined by the network edges between their SYS memories.
  CrossPlan plan;
  Topology& topo = plan.topo;
  std::map<std::string, uint32_t> node_ids;
  auto add_node = [&](const std::string& name) -> Status {
    if (name == self()) {
      node_ids[name] = config.runtime.node;
      const Topology& mine = node->runtime().topology();
      for (TopologyMemory m : mine.memories) {
        m.name = StrCat(name, ":", m.name);
        topo.memories.push_back(m);
      }
      for (const TopologyEdge& e : mine.edges) topo.edges.push_back(e);
      return OkStatus();
    }
    Peer* p = FindPeer(name);
    if (!p) return NotFound("no node '", name, "' in this cluster");
    std::lock_guard lock(mu);
    if (!p->up) {
      return Unavailable("peer '", name, "' is ", p->state,
                         p->last_error.empty() ? "" : ": " + p->last_error);
    }
    if (data->Link(name).incoming() == 0) {
      return Unavailable("peer '", name, "' is up but has not opened its data connections to ",
                         "this node yet");
    }
    node_ids[name] = p->node;
    for (TopologyMemory m : p->topology.memories) {
      m.name = StrCat(name, ":", m.name);
      topo.memories.push_back(m);
    }
    for (const TopologyEdge& e : p->topology.edges) topo.edges.push_back(e);
    return OkStatus();
  };
  ISO_RETURN_IF_ERROR(add_node(src.node));
  ISO_RETURN_IF_ERROR(add_node(dst.node));
  const uint32_t s_id = node_ids[src.node], d_id = node_ids[dst.node];
  const size_t n = topo.memories.size();
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = 0; b < n; ++b) {
      const TopologyMemory &ma = topo.memories[a], &mb = topo.memories[b];
      if (ma.id.node == s_id && mb.id.node == d_id && ma.kind == MemoryKind::kSys &&
          mb.kind == MemoryKind::kSys) {
        topo.edges.push_back({ma.id, mb.id, -1, ChannelKind::kRemoteMemcpy, "tcp",
                              ThroughputFunction::PerRequestOverhead(
                                  static_cast<double>(config.cluster.link_bytes_per_s), 50e-6)});
      }
    }
  }
  // An end's memory by name; "" is the node's first SYS memory.
  auto memory_of = [&](const NodeMemory& e) -> Result<MemoryId> {
    const uint32_t id = node_ids[e.node];
    for (const TopologyMemory& m : topo.memories) {
      if (m.id.node != id) continue;
      const std::string short_name = m.name.substr(e.node.size() + 1);
      if (e.memory.empty() ? m.kind == MemoryKind::kSys : short_name == e.memory) return m.id;
    }
    return NotFound("node '", e.node, "' has no memory '", e.memory, "'");
  };
  ISO_ASSIGN_OR_RETURN(MemoryId src_mem, memory_of(src));
  ISO_ASSIGN_OR_RETURN(MemoryId dst_mem, memory_of(dst));
  PlannerOptions po;
  const RuntimeConfig& rc = node->runtime().config();
  po.full_threshold = rc.full_planner_threshold;
  po.space_threshold = rc.space_threshold;
  po.cache_capacity = 0;
  Planner planner(topo, po);
  ISO_ASSIGN_OR_RETURN(
      plan.path, planner.Plan({src_mem, src_layout}, {dst_mem, dst_layout}, box, field_bytes));
  size_t crossings = 0;
  plan.net_hop = plan.path.edges.size();
  for (size_t h = 0; h < plan.path.edges.size(); ++h) {
    if (plan.path.edges[h].kind == ChannelKind::kRemoteMemcpy) {
      plan.net_hop = h;
      ++crossings;
    }
  }
  if (crossings != 1) {
    return FailedPrecondition("the plan ", plan.path.ToString(topo), " crosses the network ",
                              crossings, " times; one crossing is supported");
  }
  plan.chunk_target = config.cluster.request_bytes;
  plan.slot_limit = rc.space_threshold / static_cast<uint64_t>(rc.slots_per_buffer);
  return plan;
}

NodeMemory Cluster::Impl::NameOf(const CrossEnd& e) const {
  if (!e.node.empty()) return {e.node, e.memory};
  const TopologyMemory* m = node->runtime().topology().FindMemory(e.local.memory);
  return {self(), m ? m->name : ""};
}

Result<std::shared_ptr<CrossTransfer>> Cluster::Impl::Copy(CrossCopySpec spec,
                                                           std::function<void(Status)> done) {
  if (!(spec.src.shape.fields == spec.dst.shape.fields)) {
    return InvalidArgument("copy: source and destination field spaces differ");
  }
  ISO_RETURN_IF_ERROR(CheckCopyDimensions(spec.src.shape.bounds, spec.dst.shape.bounds, spec.box));
  const Box box = spec.box.value_or(spec.src.shape.bounds);
  ISO_RETURN_IF_ERROR(box.Validate("copy box"));
  if (!spec.src.shape.bounds.contains(box) || !spec.dst.shape.bounds.contains(box)) {
    return OutOfRange("copy box ", ToString(box), " lies outside an instance's index space");
  }
  ISO_ASSIGN_OR_RETURN(CrossPlan plan,
                       PlanCross(NameOf(spec.src), NameOf(spec.dst), spec.src.shape.layout,
                                 spec.dst.shape.layout, box, spec.src.shape.fields.total_bytes()));
  uint64_t key;
  {
    std::lock_guard lock(mu);
    key = (static_cast<uint64_t>(config.runtime.node) << 40) | (next_key++ & ((1ull << 40) - 1));
  }
  const uint64_t bytes = box.volume() * spec.src.shape.fields.total_bytes();
  auto op =
      std::make_shared<CrossOp>(this, key, plan.path.ToString(plan.topo), bytes, std::move(done));
  {
    std::lock_guard lock(mu);
    ops[key] = op;
  }
  Post([this, op, spec = std::move(spec), plan = std::move(plan)]() mutable {
    SetUp(op, std::move(spec), std::move(plan.path), plan.net_hop, plan.chunk_target,
          plan.slot_limit);
  });
  return std::static_pointer_cast<CrossTransfer>(op);
}

Result<PlanReport> Cluster::Impl::Explain(const std::string& src_memory, const Layout& src_layout,
                                          const std::string& dst_memory, const Layout& dst_layout,
                                          const Box& bounds, const FieldSpace& fields) {
  ISO_ASSIGN_OR_RETURN(CrossPlan plan, PlanCross(SplitNodeMemory(src_memory, self()),
                                                 SplitNodeMemory(dst_memory, self()), src_layout,
                                                 dst_layout, bounds, fields.total_bytes()));
  ISO_ASSIGN_OR_RETURN(ChunkGrid grid,
                       GridAlong(plan.path, bounds, fields, plan.chunk_target, plan.slot_limit));
  return ReportPlan(ExplainGrid(std::move(plan.path), grid, fields.total_bytes(),
                                node->runtime().config().slots_per_buffer),
                    plan.topo);
}

void Cluster::Impl::SetUp(std::shared_ptr<CrossOp> op, CrossCopySpec spec, Path path,
                          size_t net_hop, uint64_t chunk_target, uint64_t slot_limit) {
  SetUpHalves(op, std::move(spec), std::move(path), net_hop, chunk_target, slot_limit);
  op->SetUpDone();
}

void Cluster::Impl::SetUpHalves(const std::shared_ptr<CrossOp>& op, CrossCopySpec spec, Path path,
                                size_t net_hop, uint64_t chunk_target, uint64_t slot_limit) {
  const std::string src_node = spec.src.node.empty() ? self() : spec.src.node;
  const std::string dst_node = spec.dst.node.empty() ? self() : spec.dst.node;
  // The receiving half first: its credits are what lets the sender go.
  for (const bool sending : {false, true}) {
    if (op->failed()) break;
    const std::string& here = sending ? src_node : dst_node;
    const std::string& partner = sending ? dst_node : src_node;
    const CrossEnd& end = sending ? spec.src : spec.dst;
    const CrossEnd& other = sending ? spec.dst : spec.src;
    op->AddHalf(here == self() ? "" : here);
    if (here == self()) {
      RemotePart part{op->key(), path, net_hop, sending, partner, chunk_target, slot_limit};
      std::weak_ptr<CrossOp> weak = op;
      Status s = StartLocalHalf(op->key(), std::move(part), end, other.shape, spec.box,
                                spec.priority, spec.durable, self(), [weak](Status st) {
                                  if (auto o = weak.lock()) o->HalfDone(std::move(st));
                                });
      if (!s.ok()) {
        op->HalfDone(s);
        break;
      }
      std::optional<Transfer> t;
      {
        std::lock_guard lock(mu);
        if (auto h = halves.find(op->key()); h != halves.end()) t = h->second->transfer;
      }
      if (t) op->SetLocal(*t);  // not under mu: it may abort, whose completion takes mu
      continue;
    }
    Peer* p = FindPeer(here);
    v1::StartHalfRequest req;
    req.set_key(op->key());
    req.set_sending(sending);
    for (const PathNode& pn : path.nodes) {
      auto* ns = req.add_nodes();
      ns->set_node(pn.memory.node);
      ns->set_memory(pn.memory.memory);
      ns->set_layout(pn.layout.ToString());
    }
    for (const TopologyEdge& e : path.edges) {
      auto* es = req.add_edges();
      es->set_channel(e.channel_name);
      es->set_kind(std::string(ChannelKindName(e.kind)));
    }
    req.set_net_hop(static_cast<uint32_t>(net_hop));
    req.set_chunk_target(chunk_target);
    req.set_slot_limit(slot_limit);
    ToProto(spec.box.value_or(spec.src.shape.bounds), req.mutable_box());
    auto* local = req.mutable_local();
    local->set_allocation(end.allocation);
    local->set_offset(end.offset);
    local->set_memory(end.memory);
    local->set_file(end.file);
    ToProto(end.shape, local);
    ToProto(other.shape.bounds, req.mutable_other_bounds());
    req.set_other_layout(other.shape.layout.ToString());
    req.set_priority(spec.priority);
    req.set_durable(spec.durable);
    req.set_partner(partner);
    grpc::ClientContext ctx;
    SetDeadline(ctx, config.cluster.peer_timeout_ms);
    Authorize(ctx, *p);
    v1::StartHalfResponse resp;
    grpc::Status gs = p->stub->StartHalf(&ctx, req, &resp);
    if (!gs.ok()) {
      op->HalfDone(FromGrpc(gs, StrCat("node '", here, "' refused its half")));
      break;
    }
    if (op->failed()) op->Cancel();  // failed while the peer set its half up: end it there too
    auto actx = std::make_shared<grpc::ClientContext>();
    Authorize(*actx, *p);
    auto areq = std::make_shared<v1::AwaitHalfRequest>();
    areq->set_key(op->key());
    auto aresp = std::make_shared<v1::AwaitHalfResponse>();
    op->AddAwait(here, actx);
    std::weak_ptr<CrossOp> weak = op;
    p->stub->async()->AwaitHalf(
        actx.get(), areq.get(), aresp.get(), [weak, actx, areq, aresp, here](grpc::Status gs2) {
          auto o = weak.lock();
          if (!o) return;
          if (!gs2.ok()) {
            o->HalfDone(Unavailable(StrCat("node '", here, "': ", gs2.error_message())));
          } else {
            o->HalfDone(Status(static_cast<absl::StatusCode>(aresp->code()), aresp->message()));
          }
        });
  }
}

// ---- the peer service ----

namespace {

class PeerService final : public v1::IsometryPeer::CallbackService {
 public:
  explicit PeerService(Cluster::Impl* impl) : impl_(impl) {}

  grpc::ServerUnaryReactor* Hello(grpc::CallbackServerContext* ctx, const v1::PeerHello* req,
                                  v1::PeerWelcome* resp) override {
    Status s = CheckHello(*req);
    if (!s.ok()) {
      // Anyone who reaches the TCP port can send hellos: their names are
      // escaped and their lines limited per address.
      static LogLimiter limiter(5, std::chrono::seconds(10));
      const std::string from = ctx->peer();  // "ipv4:10.0.0.9:51234": key by host
      if (const auto v = limiter.Allow(std::string_view(from).substr(0, from.rfind(':'))); v.log) {
        if (v.suppressed) {
          spdlog::warn("suppressed {} similar peer hello lines from {}", v.suppressed,
                       ForLog(from));
        }
        spdlog::warn("peer hello from '{}' ({}) refused: {}", ForLog(req->node_name()),
                     ForLog(from), ForLog(s.ToString(), 512));
      }
      return Reply(ctx, s);
    }
    const std::string token = RandomHex(16);
    {
      std::lock_guard lock(impl_->mu);
      impl_->issued[req->node_name()] = token;
      impl_->peer_nodes[req->node_name()] = req->node();
    }
    resp->set_node_name(impl_->self());
    resp->set_node(impl_->config.runtime.node);
    resp->set_protocol_version(kPeerProtocolVersion);
    resp->set_token(token);
    resp->set_mac(
        Hmac(impl_->secret, {"welcome", impl_->self(), std::to_string(impl_->config.runtime.node),
                             req->nonce(), token}));
    resp->set_data_address(impl_->DataAddress());
    impl_->DescribeSelf(resp);
    return Reply(ctx, OkStatus());
  }

  grpc::ServerUnaryReactor* Ping(grpc::CallbackServerContext* ctx, const v1::PeerPing*,
                                 v1::PeerPong*) override {
    auto caller = Caller(ctx);
    return Reply(ctx, caller.ok() ? OkStatus() : caller.status());
  }

  grpc::ServerUnaryReactor* StartHalf(grpc::CallbackServerContext* ctx,
                                      const v1::StartHalfRequest* req,
                                      v1::StartHalfResponse*) override {
    auto caller = Caller(ctx);
    if (!caller.ok()) return Reply(ctx, caller.status());
    Status s = Start(*caller, *req);
    if (!s.ok()) {
      spdlog::warn("half {} for '{}' refused: {}", req->key(), ForLog(*caller),
                   ForLog(s.ToString(), 512));
    }
    return Reply(ctx, s);
  }

  grpc::ServerUnaryReactor* AwaitHalf(grpc::CallbackServerContext* ctx,
                                      const v1::AwaitHalfRequest* req,
                                      v1::AwaitHalfResponse* resp) override {
    auto caller = Caller(ctx);
    if (!caller.ok()) return Reply(ctx, caller.status());
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    std::unique_lock lock(impl_->mu);
    auto it = impl_->halves.find(req->key());
    if (it == impl_->halves.end()) {
      lock.unlock();
      r->Finish(ToGrpc(NotFound("no half ", req->key(), " on node '", impl_->self(), "'")));
      return r;
    }
    auto h = it->second;
    if (!h->transfer && !h->finished && !h->aborted.ok()) {
      const Status s = h->aborted;
      lock.unlock();
      resp->set_code(static_cast<int>(s.code()));
      resp->set_message(std::string(s.message()));
      r->Finish(grpc::Status::OK);
      return r;
    }
    auto finish = [r, resp](const Status& s) {
      resp->set_code(static_cast<int>(s.code()));
      resp->set_message(std::string(s.message()));
      r->Finish(grpc::Status::OK);
    };
    if (h->finished) {
      const Status s = h->status;
      lock.unlock();
      finish(s);
    } else {
      h->waiters.push_back(finish);
    }
    return r;
  }

  grpc::ServerUnaryReactor* AbortHalf(grpc::CallbackServerContext* ctx,
                                      const v1::AbortHalfRequest* req,
                                      v1::AbortHalfResponse*) override {
    auto caller = Caller(ctx);
    if (!caller.ok()) return Reply(ctx, caller.status());
    const Status why(net::ErrorCodeFromWire(req->code()),
                     StrCat("node '", *caller, "' ended the transfer: ", req->message()));
    std::optional<Transfer> t;
    {
      std::lock_guard lock(impl_->mu);
      auto& h = impl_->halves[req->key()];
      if (!h) {  // not started yet: a tombstone its start will find
        h = std::make_shared<Half>();
        h->key = req->key();
        h->initiator = *caller;
        h->finished_at = Clock::now();
      }
      if (h->aborted.ok()) h->aborted = why;
      t = h->transfer;
    }
    if (t) t->Abort(why);
    return Reply(ctx, OkStatus());
  }

 private:
  static grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* ctx, const Status& s) {
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    r->Finish(ToGrpc(s));
    return r;
  }

  Status CheckHello(const v1::PeerHello& req) const {
    if (req.protocol_version() != kPeerProtocolVersion) {
      return FailedPrecondition("peer protocol version ", req.protocol_version(),
                                "; this node speaks version ", kPeerProtocolVersion);
    }
    if (!impl_->FindPeer(req.node_name())) {
      return absl::PermissionDeniedError(
          StrCat("node '", req.node_name(), "' is not a [[peer]] of node '", impl_->self(), "'"));
    }
    const std::string expect =
        Hmac(impl_->secret,
             {"hello", req.node_name(), std::to_string(req.node()),
              std::to_string(req.protocol_version()), req.nonce(), std::to_string(req.unix_ms())});
    if (!SameSecret(expect, req.mac())) {
      return absl::UnauthenticatedError(
          "authentication failed: the hello's proof does not match this node's cluster secret "
          "(wrong secret?)");
    }
    if (std::llabs(UnixMs() - req.unix_ms()) > 5 * 60 * 1000) {
      return absl::UnauthenticatedError("hello is more than 5 minutes off this node's clock");
    }
    {
      // A hello is good once: a recorded one replayed within its 5 minutes
      // of validity is refused.
      std::lock_guard lock(impl_->mu);
      const auto now = Clock::now();
      for (auto it = impl_->nonces.begin(); it != impl_->nonces.end();) {
        it = now - it->second > std::chrono::minutes(6) ? impl_->nonces.erase(it) : std::next(it);
      }
      if (!impl_->nonces.emplace(req.nonce(), now).second) {
        return absl::UnauthenticatedError("replayed hello (its nonce was used before)");
      }
    }
    if (req.node() == impl_->config.runtime.node) {
      return FailedPrecondition("node id ", req.node(), " is this node's own runtime.node");
    }
    return OkStatus();
  }

  // The caller, by the token this node issued it.
  Result<std::string> Caller(grpc::CallbackServerContext* ctx) const {
    auto it = ctx->client_metadata().find(kTokenKey);
    if (it != ctx->client_metadata().end()) {
      const std::string token(it->second.data(), it->second.size());
      std::lock_guard lock(impl_->mu);
      if (const std::string* peer = impl_->PeerOfTokenLocked(token)) return *peer;
    }
    return absl::UnauthenticatedError("no valid peer token: say hello first");
  }

  Status Start(const std::string& caller, const v1::StartHalfRequest& req) {
    RemotePart part;
    part.key = req.key();
    part.sending = req.sending();
    part.net_hop = req.net_hop();
    part.chunk_target = req.chunk_target();
    part.slot_limit = req.slot_limit();
    if (!impl_->FindPeer(req.partner())) {
      return NotFound("node '", req.partner(), "' is not a peer of node '", impl_->self(), "'");
    }
    part.peer = req.partner();
    if (req.nodes_size() != req.edges_size() + 1 || req.edges_size() == 0) {
      return InvalidArgument("malformed path");
    }
    ISO_ASSIGN_OR_RETURN(Box box, BoxFromProto(req.box(), "box"));
    for (const auto& ns : req.nodes()) {
      ISO_ASSIGN_OR_RETURN(Layout l, Layout::Parse(ns.layout(), box.dims));
      part.path.nodes.push_back({MemoryId{ns.node(), ns.memory()}, l});
    }
    for (int i = 0; i < req.edges_size(); ++i) {
      auto kind = ParseChannelKind(req.edges(i).kind());
      if (!kind) return InvalidArgument("edge ", i, " has unknown kind");
      part.path.edges.push_back({part.path.nodes[static_cast<size_t>(i)].memory,
                                 part.path.nodes[static_cast<size_t>(i) + 1].memory, -1, *kind,
                                 req.edges(i).channel()});
    }
    ISO_ASSIGN_OR_RETURN(InstanceSpec local, InstanceSpecFromProto(req.local()));
    ISO_ASSIGN_OR_RETURN(CrossEnd end, impl_->node->ResolveForPeer(local));
    InstanceShape other;
    ISO_ASSIGN_OR_RETURN(other.bounds, BoxFromProto(req.other_bounds(), "other_bounds"));
    other.fields = local.shape.fields;
    ISO_ASSIGN_OR_RETURN(other.layout, Layout::Parse(req.other_layout(), other.bounds.dims));
    return impl_->StartLocalHalf(req.key(), std::move(part), end, other, box, req.priority(),
                                 req.durable(), caller, nullptr);
  }

  Cluster::Impl* const impl_;
};

}  // namespace

// ---- Cluster ----

Cluster::Cluster(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Cluster::~Cluster() {
  Stop();
  // The data plane first: its links' callbacks reach the rest of Impl.
  impl_->data.reset();
}

Result<std::unique_ptr<Cluster>> Cluster::Create(const Config& config) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  const ClusterConfig& cc = config.cluster;
  ISO_ASSIGN_OR_RETURN(impl->secret, LoadSecret(cc.secret_file));
  net::DataOptions o;
  o.listen = cc.data_listen;
  o.connections = cc.data_connections;
  o.checksum = cc.checksum;
  o.timeout_ms = cc.peer_timeout_ms;
  o.rate_limit_bytes_per_s = cc.rate_limit_bytes_per_s;
  if (const char* c = std::getenv("ISOMETRY_FAULT_CORRUPT_CHUNK")) {
    o.corrupt_chunk = std::strtoull(c, nullptr, 10);
    spdlog::warn("fault injection: chunk {} of every incoming transfer is corrupted on arrival",
                 *o.corrupt_chunk);
  }
  if (const char* v = std::getenv("ISOMETRY_FAULT_PEER_PROTOCOL")) {
    impl->protocol_version = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
    spdlog::warn("fault injection: hellos claim peer protocol version {}", impl->protocol_version);
  }
  ISO_ASSIGN_OR_RETURN(impl->data, net::DataPlane::Create(o));
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  for (const PeerConfig& pc : cc.peers) {
    auto p = std::make_unique<Peer>();
    p->config = pc;
    p->stub = v1::IsometryPeer::NewStub(
        grpc::CreateCustomChannel(pc.address, grpc::InsecureChannelCredentials(), args));
    impl->peers.push_back(std::move(p));
  }
  impl->service = std::make_unique<PeerService>(impl.get());
  impl->next_key = std::strtoull(RandomHex(5).c_str(), nullptr, 16) | 1;
  return std::unique_ptr<Cluster>(new Cluster(std::move(impl)));
}

ChannelContext Cluster::channel_context() { return {impl_->data.get()}; }

void Cluster::Start(Node* node) {
  Impl* impl = impl_.get();
  impl->node = node;
  impl->data->Start(
      [impl](uint32_t node_id, const std::string& token) -> Result<std::string> {
        std::lock_guard lock(impl->mu);
        const std::string* peer = impl->PeerOfTokenLocked(token);
        if (peer && impl->peer_nodes[*peer] == node_id) return *peer;
        return absl::UnauthenticatedError(
            StrCat("node ", node_id, " presented no valid token (say hello over gRPC first)"));
      },
      [impl](const std::string& peer, const Status& why, uint64_t generation) {
        // Not on the link's thread (MarkDown takes locks the link's callers
        // hold); a report about connections since replaced is dropped there.
        impl->Post([impl, peer, why, generation] { impl->MarkDown(peer, why, generation); });
      });
  {
    std::lock_guard lock(impl->mu);
    impl->worker = std::make_unique<net::Completer>();
  }
  for (auto& p : impl->peers) {
    Peer* raw = p.get();
    raw->loop = std::thread([impl, raw] { impl->PeerLoop(*raw); });
  }
}

void Cluster::Stop() {
  Impl* impl = impl_.get();
  {
    std::lock_guard lock(impl->mu);
    if (impl->stopping) return;
    impl->stopping = true;
  }
  impl->cv.notify_all();
  for (auto& p : impl->peers) {
    if (p->loop.joinable()) p->loop.join();
  }
  std::unique_ptr<net::Completer> worker;
  std::vector<std::optional<Transfer>> hs;
  std::vector<std::shared_ptr<CrossOp>> os;
  {
    std::lock_guard lock(impl->mu);
    worker.swap(impl->worker);
    for (auto& [key, h] : impl->halves) {
      if (!h->finished) hs.push_back(h->transfer);
    }
    for (auto& [key, w] : impl->ops) {
      if (auto o = w.lock()) os.push_back(o);
    }
  }
  worker.reset();  // runs what was posted before `stopping`, then joins
  // Nothing ends these halves once the links are gone: end them now, so
  // their AwaitHalf calls are answered before the peer server stops.
  const Status why = Unavailable("isometryd on node '", impl->self(), "' is stopping");
  for (auto& t : hs) {
    if (t) t->Abort(why);
  }
  for (auto& o : os) o->Fail(why);
  for (auto& p : impl->peers) {
    impl->data->Link(p->config.name).Fail(Unavailable("isometryd is stopping"));
  }
}

grpc::Service* Cluster::service() { return impl_->service.get(); }

bool Cluster::KnowsNode(const std::string& node) const { return impl_->FindPeer(node) != nullptr; }

Result<PlanReport> Cluster::Explain(const std::string& src_memory, const Layout& src_layout,
                                    const std::string& dst_memory, const Layout& dst_layout,
                                    const Box& bounds, const FieldSpace& fields) {
  return impl_->Explain(src_memory, src_layout, dst_memory, dst_layout, bounds, fields);
}

Result<std::shared_ptr<CrossTransfer>> Cluster::Copy(CrossCopySpec spec,
                                                     std::function<void(Status)> done) {
  return impl_->Copy(std::move(spec), std::move(done));
}

v1::ListPeersResponse Cluster::ListPeers() const {
  v1::ListPeersResponse out;
  out.set_node_name(impl_->self());
  std::lock_guard lock(impl_->mu);
  for (const auto& p : impl_->peers) {
    auto* pi = out.add_peers();
    pi->set_name(p->config.name);
    pi->set_address(p->config.address);
    pi->set_state(p->state);
    pi->set_node(p->node);
    pi->set_rtt_ms(p->rtt_ms);
    pi->set_last_error(p->last_error);
    pi->set_memories(static_cast<uint32_t>(p->topology.memories.size()));
    pi->set_data_address(p->data_address);
    net::PeerLink& link = impl_->data->Link(p->config.name);
    pi->set_data_out(static_cast<uint32_t>(link.outgoing()));
    pi->set_data_in(static_cast<uint32_t>(link.incoming()));
    pi->set_bytes_sent(link.bytes_sent());
    pi->set_bytes_received(link.bytes_received());
  }
  return out;
}

}  // namespace isometry
