// The Cluster facade: creates the parts (daemon/cluster/cluster_impl.h
// lists them), starts and stops them, and answers for them.
#include "daemon/cluster/cluster.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <system_error>

#include "core/log_escape.h"
#include "core/random.h"
#include "core/thread_name.h"
#include "daemon/cluster/cluster_impl.h"
#include "daemon/cluster/cross_op.h"
#include "daemon/cluster/etcd_membership.h"
#include "daemon/cluster/peer_service.h"
#include "daemon/cluster/secret.h"
#include "daemon/cluster/tls_credentials.h"

namespace isometry {

using cluster::CrossOp;
using cluster::Peer;

// ---- Cluster ----

Cluster::Cluster(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Cluster::~Cluster() {
  Stop();
  // The data plane first: its links' callbacks reach the rest of Impl.
  impl_->data.reset();
}

Result<std::unique_ptr<Cluster>> Cluster::Create(const Config& config,
                                                 const FaultInjection& faults) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  const ClusterConfig& cc = config.cluster;
  if (!cc.secret_file.empty()) {
    ISO_ASSIGN_OR_RETURN(impl->secret, LoadSecret(cc.secret_file));
  }
  ISO_ASSIGN_OR_RETURN(cluster::PeerCredentials creds, cluster::MakePeerCredentials(cc));
  impl->tls = creds.data;
  impl->server_credentials = creds.server;
  net::DataOptions o;
  o.node_name = cc.node_name;
  o.tls = creds.data;
  o.corrupt_once = faults.corrupt_once;
  o.listen = cc.data_listen;
  o.connections = cc.data_connections;
  o.checksum = cc.checksum;
  o.timeout_ms = cc.peer_timeout_ms;
  o.max_handshakes = cc.data_max_handshakes;
  o.rate_limit_bytes_per_s = cc.rate_limit_bytes_per_s;
  o.unsent_limit_bytes = cc.unsent_limit_bytes;
  o.corrupt_chunk = faults.corrupt_chunk;
  o.drop_chunk = faults.drop_chunk;
  o.drop_after_chunk = faults.drop_after_chunk;
  o.drop_mid_chunk = faults.drop_mid_chunk;
  o.drop_stall_ms = faults.drop_stall_ms;
  if (faults.peer_protocol) impl->protocol_version = *faults.peer_protocol;
  impl->advertised_data_address = faults.data_address;
  impl->setup_delay_ms = faults.setup_delay_ms;
  ISO_ASSIGN_OR_RETURN(impl->data, net::DataPlane::Create(o));
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  // Also the longest a connection attempt (TCP and the HTTP/2 handshake)
  // may take: gRPC keeps the socket of a channel destroyed mid-handshake
  // (a probe to a stopped peer, peer_manager.cc) until the attempt times
  // out, for ever once the peer answers it. 20 s by default.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
              static_cast<int>(std::clamp<uint32_t>(cc.peer_timeout_ms, 100, 20000)));
  impl->channel_credentials = creds.channel;
  impl->channel_args = args;
  {
    absl::MutexLock lock(&impl->mu);
    absl::MutexLock peers_lock(&impl->peers_mu);
    for (const PeerConfig& pc : cc.peers) {
      impl->peers.push_back(impl->MakePeer(pc, "config"));
      impl->peers.back()->index = impl->peer_states.size();
      impl->peer_states.emplace_back();
    }
    impl->next_key = std::strtoull(RandomHex(5).c_str(), nullptr, 16) | 1;
  }
  impl->service = cluster::MakePeerService(impl.get());
  if (cc.etcd.enabled()) {
    ISO_ASSIGN_OR_RETURN(impl->etcd, cluster::EtcdMembership::Create(impl.get()));
  }
  return std::unique_ptr<Cluster>(new Cluster(std::move(impl)));
}

std::unique_ptr<Peer> Cluster::Impl::MakePeer(const PeerConfig& pc, std::string source) const {
  auto p = std::make_unique<Peer>();
  p->config = pc;
  p->source = std::move(source);
  grpc::ChannelArguments peer_args = channel_args;
  // A peer's certificate names the peer, not its address.
  if (tls) peer_args.SetSslTargetNameOverride(pc.name);
  p->stub = peer_api::IsometryPeer::NewStub(
      grpc::CreateCustomChannel(pc.address, channel_credentials, peer_args));
  p->credentials = channel_credentials;
  p->channel_args = peer_args;
  return p;
}

Status Cluster::Impl::AddPeer(const PeerConfig& pc, std::string source) {
  if (pc.name == self() || FindPeer(pc.name)) {
    return absl::AlreadyExistsError(StrCat("node '", pc.name, "' is known already"));
  }
  std::unique_ptr<Peer> made = MakePeer(pc, std::move(source));
  Peer* p = made.get();
  absl::MutexLock lock(&mu);
  // Under mu: Stop, once `stopping` is set, sees every peer with a loop.
  if (stopping) return Unavailable("isometryd is stopping");
  p->index = peer_states.size();
  peer_states.emplace_back();
  {
    absl::MutexLock peers_lock(&peers_mu);
    peers.push_back(std::move(made));
  }
  ReapLoopsLocked();
  try {
    p->loop = std::thread([this, p] {
      NameThisThread("iso-peer");
      PeerLoop(*p);
      p->loop_ended = true;
    });
  } catch (const std::system_error& e) {
    p->removed = true;  // never seen: FindPeer skips it, Stop has nothing to join
    StateLocked(*p).state = "left";
    return absl::ResourceExhaustedError(
        StrCat("peer '", pc.name, "': cannot start its thread: ", e.what()));
  }
  spdlog::info("peer '{}' at {} joined ({})", ForLog(pc.name), ForLog(pc.address), p->source);
  return OkStatus();
}

void Cluster::Impl::ReapLoopsLocked() {
  if (stopping) return;
  absl::ReaderMutexLock lock(&peers_mu);
  for (auto& p : peers) {
    // loop_ended is its thread's last step: the join returns at once.
    if (p->removed && p->loop_ended && p->loop.joinable()) p->loop.join();
  }
}

void Cluster::Impl::RemovePeer(const std::string& name, const Status& why) {
  Peer* p = FindPeer(name);
  if (!p || p->source == "config") return;
  spdlog::info("peer '{}' left the cluster: {}", ForLog(name), ForLog(why.ToString(), 512));
  MarkDownPeer(*p, why, std::nullopt);
  p->removed = true;  // FindPeer no longer sees it; its loop ends
  absl::MutexLock lock(&mu);
  sessions.erase(name);  // its calls and data connections are refused from now on
  StateLocked(*p).state = "left";
  cv.SignalAll();
  ReapLoopsLocked();
}

ChannelContext Cluster::channel_context() {
  ChannelContext c;
  c.data_plane = impl_->data.get();
  // Each peer's network channel takes the copies routed over RDMA there.
  if (impl_->config.rdma.enable != RdmaEnable::kOff) c.rdma_routes = impl_->net_routes;
  return c;
}

void Cluster::Start(Node* node) {
  Impl* impl = impl_.get();
  impl->node = node;
  Status served = impl->data->Start(
      [impl](const net::DataPlane::HelloProof& hello) { return impl->DataPeer(hello); },
      [impl](const std::string& peer, const Status& why, uint64_t generation) {
        // Not on the link's thread (MarkDown takes locks the link's callers
        // hold); a report about connections since replaced is dropped there.
        impl->Post([impl, peer, why, generation] { impl->MarkDown(peer, why, generation); });
      });
  if (!served.ok()) {
    spdlog::error("no data port (peers cannot open data connections to this node): {}",
                  served.ToString());
  }
  {
    absl::MutexLock lock(&impl->mu);
    impl->worker = std::make_unique<net::Completer>();
  }
  for (Peer* raw : impl->PeerList()) {
    try {
      raw->loop = std::thread([impl, raw] {
        NameThisThread("iso-peer");
        impl->PeerLoop(*raw);
      });
    } catch (const std::system_error& e) {
      spdlog::error("peer '{}': cannot start its thread ({}): it stays down", raw->config.name,
                    e.what());
    }
  }
  if (impl->etcd) impl->etcd->Start();
}

void Cluster::Stop() {
  Impl* impl = impl_.get();
  {
    absl::MutexLock lock(&impl->mu);
    if (impl->stopping) return;
    impl->stopping = true;
  }
  impl->cv.SignalAll();
  // Revokes this node's lease: its peers see it leave now, not after the
  // TTL. Peers added after this are refused (`stopping`).
  if (impl->etcd) impl->etcd->Stop();
  std::vector<Peer*> all;
  {
    absl::ReaderMutexLock lock(&impl->peers_mu);
    for (auto& p : impl->peers) all.push_back(p.get());
  }
  for (Peer* p : all) {
    if (p->loop.joinable()) p->loop.join();
  }
  std::unique_ptr<net::Completer> worker;
  std::vector<std::optional<Transfer>> hs;
  std::vector<std::shared_ptr<CrossOp>> os;
  {
    absl::MutexLock lock(&impl->mu);
    worker.swap(impl->worker);
    for (auto& [key, h] : impl->halves) {
      if (!h->finished) hs.push_back(h->transfer);
    }
    for (auto& [key, w] : impl->ops) {
      if (auto o = w.lock()) os.push_back(o);
    }
  }
  impl->AwaitEagerPuts();  // their callbacks may reach impl (a declined put)
  worker.reset();          // runs what was posted before `stopping`, then joins
  // Nothing ends these halves once the links are gone: end them now, so
  // their AwaitHalf calls are answered before the peer server stops.
  const Status why = Unavailable("isometryd on node '", impl->self(), "' is stopping");
  for (auto& t : hs) {
    if (t) t->Abort(why);
  }
  for (auto& o : os) o->Fail(why);
  for (Peer* p : all) impl->FailPartsWith(p->config.name, why);  // redistributions
  for (Peer* p : all) {
    impl->data->Link(p->config.name).Fail(Unavailable("isometryd is stopping"));
  }
}

grpc::Service* Cluster::service() { return impl_->service.get(); }

const char* Cluster::service_name() { return peer_api::IsometryPeer::service_full_name(); }

std::shared_ptr<grpc::ServerCredentials> Cluster::server_credentials() const {
  return impl_->server_credentials;
}

bool Cluster::KnowsNode(const std::string& node) const { return impl_->FindPeer(node) != nullptr; }

FormExchangeStats Cluster::FormStats() const { return impl_->forms.Stats(); }

Result<PlanReport> Cluster::Explain(const std::string& src_memory, const Layout& src_layout,
                                    const std::string& dst_memory, const Layout& dst_layout,
                                    const Box& bounds, const FieldSpace& fields) {
  return impl_->Explain(src_memory, src_layout, dst_memory, dst_layout, bounds, fields);
}

Result<PlanReport> Cluster::ExplainForms(const std::string& src_memory,
                                         const std::string& dst_memory, const EndForm& src,
                                         const EndForm& dst) {
  return impl_->ExplainForms(src_memory, dst_memory, src, dst);
}

Result<std::vector<DistributedRanks>> Cluster::QueryDistributed(const std::string& key,
                                                                const std::string& grant_digest) {
  return impl_->QueryDistributed(key, grant_digest);
}

Result<std::shared_ptr<CrossTransfer>> Cluster::RunRedistributePart(
    const std::string& node, const RedistributePart& part,
    std::function<void(Status, uint64_t)> done) {
  return impl_->RunRedistributePart(node, part, std::move(done));
}

void Cluster::AnnounceDistributedEnded(const std::string& key, const std::set<std::string>& peers,
                                       const std::string& why) {
  impl_->AnnounceDistributedEnded(key, peers, why);
}

Result<std::shared_ptr<CrossTransfer>> Cluster::Copy(CrossCopySpec spec,
                                                     std::function<void(Status)> done) {
  return impl_->Copy(std::move(spec), std::move(done));
}

v1::ListPeersResponse Cluster::ListPeers() const {
  v1::ListPeersResponse out;
  out.set_node_name(impl_->self());
  const std::vector<Peer*> list = impl_->PeerList();
  absl::MutexLock lock(&impl_->mu);
  for (const Peer* p : list) {
    auto* pi = out.add_peers();
    pi->set_name(p->config.name);
    pi->set_source(p->source);
    pi->set_address(p->config.address);
    const cluster::PeerState& st = impl_->StateLocked(*p);
    pi->set_state(st.state);
    pi->set_node(st.node);
    pi->set_rtt_ms(st.rtt_ms);
    pi->set_last_error(st.last_error);
    pi->set_memories(static_cast<uint32_t>(st.topology.memories.size()));
    pi->set_data_address(st.data_address);
    net::PeerLink& link = impl_->data->Link(p->config.name);
    pi->set_data_out(static_cast<uint32_t>(link.outgoing()));
    pi->set_data_in(static_cast<uint32_t>(link.incoming()));
    pi->set_bytes_sent(link.bytes_sent());
    pi->set_express_bytes_sent(link.express_bytes_sent());
    pi->set_bytes_received(link.bytes_received());
    pi->set_resumes(link.resumes());
    pi->set_readers_lifted(link.readers_lifted());
    pi->set_eager_puts_declined(impl_->declined_puts.Count(p->config.name));
    pi->set_data_link(link.security());
    pi->set_network(st.network);
  }
  return out;
}

}  // namespace isometry
