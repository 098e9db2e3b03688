#include "daemon/cluster/etcd_membership.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <map>

#include "core/log_escape.h"
#include "core/log_limiter.h"
#include "core/thread_name.h"
#include "etcd_v3.grpc.pb.h"

namespace isometry::cluster {

std::string EtcdRecord(uint32_t node, const std::string& address, const std::string& identity) {
  return StrCat("node=", node, "\naddress=", address, "\nidentity=", identity, "\n");
}

Result<PeerConfig> ParseEtcdRecord(std::string_view name, std::string_view value) {
  if (name.empty() || name.size() > 255 ||
      name.find_first_of(":/ \t\r\n") != std::string_view::npos) {
    return InvalidArgument("the key's node name '", ForLog(std::string(name)),
                           "' is empty, too long, or has ':', '/' or spaces");
  }
  if (value.size() > 4096) return InvalidArgument("the record is over 4 KiB");
  PeerConfig p;
  p.name = std::string(name);
  while (!value.empty()) {
    const size_t nl = value.find('\n');
    const std::string_view line = value.substr(0, nl);
    value.remove_prefix(nl == std::string_view::npos ? value.size() : nl + 1);
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    if (line.substr(0, eq) == "address") p.address = std::string(line.substr(eq + 1));
  }
  const size_t colon = p.address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == p.address.size() ||
      p.address.find_first_of(" \t\r") != std::string::npos) {
    return InvalidArgument("its address '", ForLog(p.address), "' is not host:port");
  }
  return p;
}

namespace {

using Clock = std::chrono::steady_clock;
inline constexpr size_t kMaxPeers = 1024;

// The address peers dial: cluster.etcd.advertise, else daemon.grpc_tcp
// with a wildcard host made loopback (like the data address).
std::string Advertised(const Config& config) {
  if (!config.cluster.etcd.advertise.empty()) return config.cluster.etcd.advertise;
  const std::string& g = config.daemon.grpc_tcp;
  const size_t colon = g.rfind(':');
  const std::string host = g.substr(0, colon);
  if (host.empty() || host == "0.0.0.0" || host == "[::]") {
    return StrCat("127.0.0.1", g.substr(colon));
  }
  return g;
}

// The end of a prefix range: the prefix with its last byte + 1.
std::string RangeEnd(std::string prefix) {
  while (!prefix.empty() && static_cast<unsigned char>(prefix.back()) == 0xff) prefix.pop_back();
  if (!prefix.empty()) prefix.back() = static_cast<char>(prefix.back() + 1);
  return prefix;
}

// One read of the prefix.
struct Listing {
  std::map<std::string, PeerConfig> peers;  // the other nodes' records
  bool own_found = false;                   // this node's key is there
  bool own_intact = false;                  // ... as written, under this node's lease
  std::string own_value;
};

class Membership final : public EtcdMembership {
 public:
  explicit Membership(Cluster::Impl* impl)
      : impl_(impl), cfg_(impl->config.cluster.etcd), key_(cfg_.prefix + impl->self()) {
    record_ = EtcdRecord(impl->config.runtime.node, Advertised(impl->config),
                         impl->tls ? impl->self() : "");
    for (const std::string& e : cfg_.endpoints) {
      channels_.push_back(grpc::CreateChannel(e, grpc::InsecureChannelCredentials()));
    }
  }
  ~Membership() override { Stop(); }

  void Start() override {
    absl::MutexLock lock(&mu_);
    if (thread_.joinable() || stopping_) return;
    thread_ = std::thread([this] {
      NameThisThread("iso-etcd");
      Run();
    });
  }

  void Stop() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }

  void Poke() override {
    absl::MutexLock lock(&mu_);
    poked_ = true;
  }

 private:
  const std::shared_ptr<grpc::Channel>& Channel() const { return channels_[current_]; }
  // An error moves to the next endpoint for the next call.
  Status Failed(const grpc::Status& s, std::string_view what) {
    Status out = FromGrpc(s, StrCat("etcd at ", cfg_.endpoints[current_], ": ", what));
    current_ = (current_ + 1) % channels_.size();
    return out;
  }
  void Deadline(grpc::ClientContext& ctx) const { SetDeadline(ctx, 2000); }

  // A fresh lease and this node's record under it.
  Status Register() {
    auto lease = etcdserverpb::Lease::NewStub(Channel());
    grpc::ClientContext gctx;
    Deadline(gctx);
    etcdserverpb::LeaseGrantRequest greq;
    greq.set_ttl(cfg_.lease_ttl_s);
    etcdserverpb::LeaseGrantResponse gresp;
    if (grpc::Status s = lease->LeaseGrant(&gctx, greq, &gresp); !s.ok()) {
      return Failed(s, "lease grant");
    }
    if (!gresp.error().empty() || gresp.id() == 0) {
      return Unavailable("etcd refused a lease: ", gresp.error());
    }
    ISO_RETURN_IF_ERROR(Put(gresp.id()));
    lease_ = gresp.id();
    spdlog::info("etcd: registered '{}' ({}) with a {} s lease", key_, cfg_.endpoints[current_],
                 gresp.ttl());
    return OkStatus();
  }

  // This node's record under `lease`. NotFound: etcd knows no such lease.
  Status Put(int64_t lease) {
    auto kv = etcdserverpb::KV::NewStub(Channel());
    grpc::ClientContext ctx;
    Deadline(ctx);
    etcdserverpb::PutRequest put;
    put.set_key(key_);
    put.set_value(record_);
    put.set_lease(lease);
    etcdserverpb::PutResponse resp;
    if (grpc::Status s = kv->Put(&ctx, put, &resp); !s.ok()) return Failed(s, "put");
    return OkStatus();
  }

  // This node's record went or was changed (by hand, or by anyone with
  // write access to etcd): written again, so that peers, and nodes that
  // join later, keep finding this node where it is.
  Status Reassert(const Listing& l) {
    if (l.own_intact || lease_ == 0) return OkStatus();
    static LogLimiter limiter(5, std::chrono::seconds(60));
    if (LogLimiter::Verdict v = limiter.Allow("own"); v.log) {
      spdlog::warn("etcd: this node's record '{}' {}; written again{}", key_,
                   l.own_found ? StrCat("was changed to '", ForLog(l.own_value, 256), "'")
                               : std::string("was deleted"),
                   v.suppressed ? StrCat(" (", v.suppressed, " more times since the last line)")
                                : std::string());
    }
    Status s = Put(lease_);
    if (absl::IsNotFound(s)) {  // its lease was revoked too
      lease_ = 0;
      s = Register();
    }
    return s;
  }

  // One renewal over a short stream; NotFound when the lease is gone
  // (expired while etcd could not be reached): register again.
  Status KeepAlive() {
    auto lease = etcdserverpb::Lease::NewStub(Channel());
    grpc::ClientContext ctx;
    Deadline(ctx);
    auto stream = lease->LeaseKeepAlive(&ctx);
    etcdserverpb::LeaseKeepAliveRequest req;
    req.set_id(lease_);
    etcdserverpb::LeaseKeepAliveResponse resp;
    const bool ok = stream->Write(req) && stream->WritesDone() && stream->Read(&resp);
    const grpc::Status s = stream->Finish();
    if (!ok || !s.ok()) {
      return Failed(s.ok() ? grpc::Status(grpc::UNAVAILABLE, "stream") : s, "lease keepalive");
    }
    if (resp.ttl() <= 0) return NotFound("etcd: this node's lease expired");
    return OkStatus();
  }

  void Revoke() {
    if (lease_ == 0) return;
    auto lease = etcdserverpb::Lease::NewStub(Channel());
    grpc::ClientContext ctx;
    Deadline(ctx);
    etcdserverpb::LeaseRevokeRequest req;
    req.set_id(lease_);
    etcdserverpb::LeaseRevokeResponse resp;
    if (grpc::Status s = lease->LeaseRevoke(&ctx, req, &resp); !s.ok()) {
      spdlog::warn("etcd: revoking this node's lease failed ({}); its record goes after {} s",
                   ForLog(s.error_message()), cfg_.lease_ttl_s);
      return;
    }
    spdlog::info("etcd: '{}' removed (lease revoked)", key_);
    lease_ = 0;
  }

  // The records under the prefix: the other nodes' as peers, and how this
  // node's own stands.
  Result<Listing> Read() {
    auto kv = etcdserverpb::KV::NewStub(Channel());
    grpc::ClientContext ctx;
    Deadline(ctx);
    etcdserverpb::RangeRequest req;
    req.set_key(cfg_.prefix);
    req.set_range_end(RangeEnd(cfg_.prefix));
    etcdserverpb::RangeResponse resp;
    if (grpc::Status s = kv->Range(&ctx, req, &resp); !s.ok()) return Failed(s, "range");
    Listing out;
    for (const etcdserverpb::KeyValue& e : resp.kvs()) {
      const std::string_view name = std::string_view(e.key()).substr(cfg_.prefix.size());
      if (name == impl_->self()) {
        out.own_found = true;
        out.own_intact = e.value() == record_ && e.lease() == lease_;
        out.own_value = e.value();
        continue;
      }
      Result<PeerConfig> p = ParseEtcdRecord(name, e.value());
      if (!p.ok()) {
        static LogLimiter limiter(5, std::chrono::seconds(60));
        if (limiter.Allow("record").log) {
          spdlog::warn("etcd: record '{}' ignored: {}", ForLog(e.key()),
                       ForLog(std::string(p.status().message())));
        }
        continue;
      }
      std::string key = p->name;
      out.peers.emplace(std::move(key), *std::move(p));
    }
    return out;
  }

  // Whether known peer `name`, whose record went or now names `now`
  // (null: gone), stays: a peer that is up and answers a signed ping is
  // working, and a record anyone with write access to etcd could have
  // written never ends that (the peer re-asserts its own record).
  bool Keeps(const std::string& name, const PeerConfig& known, const PeerConfig* now) {
    const Status answers = impl_->SignedPing(name);
    if (!answers.ok()) return false;
    static LogLimiter limiter(5, std::chrono::seconds(60));
    if (LogLimiter::Verdict v = limiter.Allow(name); v.log) {
      spdlog::warn(
          "etcd: peer '{}' {}, but it answers at {} (authenticated): kept{}", ForLog(name),
          now ? StrCat("has a record naming ", ForLog(now->address)) : std::string("has no record"),
          ForLog(known.address),
          v.suppressed ? StrCat(" (", v.suppressed, " more times since the last line)")
                       : std::string());
    }
    return true;
  }

  // Peers in `now` and not known are added; those known and gone (or
  // moved to another address) leave, unless they answer where they are.
  void Apply(const std::map<std::string, PeerConfig>& now) {
    for (auto it = known_.begin(); it != known_.end();) {
      auto found = now.find(it->first);
      const PeerConfig* record = found == now.end() ? nullptr : &found->second;
      if ((record && record->address == it->second.address) ||
          Keeps(it->first, it->second, record)) {
        ++it;
        continue;
      }
      impl_->RemovePeer(
          it->first,
          Unavailable("peer '", it->first, "' left the cluster (etcd lease expired or revoked)"));
      it = known_.erase(it);
    }
    for (const auto& [name, p] : now) {
      if (known_.count(name)) continue;  // kept where it answers, or unchanged
      if (known_.size() >= kMaxPeers) {
        // Each peer has a thread: whoever can write to etcd must not be
        // able to make thousands.
        static LogLimiter limiter(1, std::chrono::seconds(60));
        if (limiter.Allow("full").log) {
          spdlog::warn("etcd: {} peers known; '{}' and any more are ignored", kMaxPeers,
                       ForLog(name));
        }
        break;
      }
      if (Status s = impl_->AddPeer(p, "etcd"); s.ok()) known_.emplace(name, p);
    }
  }

  void Run() {
    auto next_renew = Clock::now(), next_poll = Clock::now(), last_poll = Clock::time_point{};
    std::string logged;
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        const auto until = std::min(next_renew, next_poll);
        mu_.AwaitWithDeadline(
            absl::Condition(this, &Membership::Woken),
            absl::FromChrono(std::chrono::system_clock::now() + (until - Clock::now())));
        if (stopping_) break;
        if (poked_) {
          poked_ = false;
          next_poll = std::min(next_poll, last_poll + std::chrono::milliseconds(100));
          if (next_poll > Clock::now()) continue;
        }
      }
      Status s = OkStatus();
      if (Clock::now() >= next_renew) {
        s = lease_ == 0 ? Register() : KeepAlive();
        if (absl::IsNotFound(s)) {
          lease_ = 0;
          s = Register();
        }
        next_renew = Clock::now() + (s.ok() ? std::chrono::milliseconds(cfg_.lease_ttl_s * 1000 / 3)
                                            : std::chrono::milliseconds(500));
      }
      if (s.ok() && Clock::now() >= next_poll) {
        Result<Listing> now = Read();
        if (now.ok()) {
          s = Reassert(*now);
          Apply(now->peers);
        } else {
          s = now.status();
        }
        last_poll = Clock::now();
        next_poll = last_poll + std::chrono::milliseconds(cfg_.poll_ms);
      }
      if (!s.ok() && logged != s.message()) {
        spdlog::warn("etcd: {} (static peers and peers already known are unaffected)",
                     ForLog(s.ToString(), 512));
      }
      logged = s.ok() ? "" : std::string(s.message());
    }
    Revoke();
  }

  Cluster::Impl* const impl_;
  const EtcdConfig cfg_;
  const std::string key_;
  std::string record_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  // The thread's own (no lock): the endpoint in use, the lease, and the
  // peers this node added from etcd.
  size_t current_ = 0;
  int64_t lease_ = 0;
  std::map<std::string, PeerConfig> known_;

  bool Woken() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || poked_; }

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool poked_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace

Result<std::unique_ptr<EtcdMembership>> EtcdMembership::Create(Cluster::Impl* impl) {
  if (impl->config.cluster.etcd.endpoints.empty()) {
    return InvalidArgument("[cluster.etcd] has no endpoints");
  }
  return std::unique_ptr<EtcdMembership>(new Membership(impl));
}

}  // namespace isometry::cluster
