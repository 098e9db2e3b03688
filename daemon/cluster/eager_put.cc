// Eager puts (cluster.eager_put_size): a small cross-node copy from this
// node's pool memory into a same-shaped allocation on a peer, one
// contiguous run at both ends, goes whole in one signed PutBytes call
// instead of two halves over the data link. A remote hashtable insert
// (docs/guides/active-access.md, "Active Access") is one such copy: its latency is one peer round
// trip, not a StartHalf, the data link and an AwaitHalf.
#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "core/log_escape.h"
#include "daemon/cluster/cluster_impl.h"
#include "daemon/node/copies.h"
#include "daemon/node/traffic_classes.h"
#include "daemon/server/convert.h"
#include "layout/datatype_form.h"

namespace isometry {

using cluster::Clock;

namespace cluster {

// An eager put's call as its callback, a cancel and a peer going down see
// it; shared, since the callback may outlive the put.
struct EagerCall {
  EagerCall(std::string peer, uint64_t bytes) : peer(std::move(peer)), bytes(bytes) {}
  const std::string peer;
  const uint64_t bytes;
  const std::shared_ptr<grpc::ClientContext> ctx = std::make_shared<grpc::ClientContext>();
  std::atomic<bool> cancelled{false};  // Cancel was called
  std::atomic<bool> ended{false};      // the call has answered
  absl::Mutex mu;
  // Set when the peer went down with the put in flight: how the put ends.
  std::optional<Status> down ABSL_GUARDED_BY(mu);
};

}  // namespace cluster

namespace {

using cluster::EagerCall;

constexpr uint64_t kMaxEagerPut = uint64_t{1} << 20;  // as cluster.eager_put_size
constexpr uint32_t kWatchAllowanceMs = 60000;

bool PoolKind(MemoryKind k) {
  return k == MemoryKind::kSys || k == MemoryKind::kReg || k == MemoryKind::kZcm;
}

// The one contiguous run `box` covers in `shape`: its offset from the
// instance's first byte and its length; none when it is several runs.
std::optional<std::pair<uint64_t, uint64_t>> OneRun(const InstanceShape& shape, const Box& box) {
  Result<CanonicalForm> form = LayoutForm(shape, box);
  if (!form.ok() || form->runs() != 1 || form->pieces.size() != 1) return std::nullopt;
  const FormPiece& p = form->pieces.front();
  if (p.offset < 0 || !p.body.empty()) return std::nullopt;
  if (!p.loops.empty()) return std::nullopt;
  return std::pair{static_cast<uint64_t>(p.offset), static_cast<uint64_t>(p.run)};
}

// What the put's call ending with `gs` means for the copy.
Status PutOutcome(const grpc::Status& gs, EagerCall& call, uint32_t wait_ms) {
  if (gs.ok()) return OkStatus();  // landed: done, cancelled meanwhile or not
  const std::string& node = call.peer;
  const uint64_t bytes = call.bytes;
  if (gs.error_code() == grpc::StatusCode::CANCELLED) {
    {
      absl::MutexLock lock(&call.mu);
      if (call.down) return *call.down;
    }
    if (call.cancelled) {
      return absl::CancelledError(StrCat("cancelled: node '", node, "' did not answer the put of ",
                                         bytes, " bytes within ", wait_ms,
                                         " ms of the cancel (it may have landed there)"));
    }
  }
  if (gs.error_code() == grpc::StatusCode::UNAVAILABLE) {
    // gRPC says only "Socket closed" when the peer died.
    return Unavailable(
        "node '", node, "' went away (its connection to this node was lost: ", gs.error_message(),
        ") with a put of ", bytes, " bytes in flight; whether it landed there is unknown");
  }
  return cluster::FromGrpc(gs, StrCat("node '", node, "'"));
}

bool SameShape(const InstanceShape& a, const InstanceShape& b) {
  return a.bounds == b.bounds && a.fields == b.fields && a.layout.ToString() == b.layout.ToString();
}

// An eager put as the initiator sees it: one call in flight. The peer
// lands the bytes as the call arrives, so cancelling the call could only
// hide what happened: a cancel waits for the answer (a put lands within a
// round trip) and ends the call only when none comes within the peer
// timeout.
class EagerPut final : public CrossTransfer {
 public:
  EagerPut(std::string path, std::string peer, uint64_t bytes, uint32_t answer_ms)
      : state(std::make_shared<EagerCall>(std::move(peer), bytes)),
        path_(std::move(path)),
        bytes_(bytes),
        answer_ms_(answer_ms) {}
  void Cancel() override {
    const bool again = state->cancelled.exchange(true);
    if (auto halves = fallback()) return halves->Cancel();
    if (again) return;
    alarm_.Set(std::chrono::system_clock::now() + std::chrono::milliseconds(answer_ms_),
               [ctx = state->ctx](bool fired) {
                 if (fired) ctx->TryCancel();
               });
  }
  void Abort(const Status& why) override {
    if (auto halves = fallback()) return halves->Abort(why);
    Cancel();
  }
  std::string PathText() const override {
    auto halves = fallback();
    return halves ? halves->PathText() : path_;
  }
  uint64_t bytes() const override { return bytes_; }
  std::chrono::steady_clock::time_point started() const override { return started_; }
  double predicted_bytes_per_s() const override {
    auto halves = fallback();
    return halves ? halves->predicted_bytes_per_s() : 0;
  }

  // The peer declined the put: the copy went on as `halves` (a cancel
  // that came meanwhile reaches them too).
  void GoOnAs(const std::shared_ptr<CrossTransfer>& halves) {
    {
      absl::MutexLock lock(&mu_);
      fallback_ = halves;
    }
    if (state->cancelled) halves->Cancel();
  }

  const std::shared_ptr<EagerCall> state;
  const std::shared_ptr<peer_api::PutBytesRequest> req =
      std::make_shared<peer_api::PutBytesRequest>();

 private:
  const std::string path_;
  const uint64_t bytes_;
  const uint32_t answer_ms_;
  grpc::Alarm alarm_;  // destroyed with the put: the alarm then never fires
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::shared_ptr<CrossTransfer> fallback() const {
    absl::MutexLock lock(&mu_);
    return fallback_;
  }
  mutable absl::Mutex mu_;
  std::shared_ptr<CrossTransfer> fallback_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::optional<Result<std::shared_ptr<CrossTransfer>>> Cluster::Impl::TryEagerPut(
    const CrossCopySpec& spec, std::function<void(Status)>& done) {
  const uint64_t limit = config.cluster.eager_put_bytes;
  const CrossEnd& src = spec.src;
  const CrossEnd& dst = spec.dst;
  if (limit == 0 || !src.node.empty() || dst.node.empty() || !dst.file.empty() ||
      !dst.distributed.empty() || src.active || src.local.form || !src.local.base ||
      src.local.process || !src.local.file.empty() || !SameShape(src.shape, dst.shape)) {
    return std::nullopt;
  }
  const TopologyMemory* mem = node->runtime().topology().FindMemory(src.local.memory);
  if (!mem || !PoolKind(mem->kind)) return std::nullopt;
  if (declined_puts.Holds(dst.node, spec.qos_class)) return std::nullopt;  // through its caps
  // A put passes the data link and the network channel: a paced link
  // (cluster.rate_limit) or a class capped or paused on the network
  // (qos.class.caps.remote_memcpy) sends every byte through them.
  if (config.cluster.rate_limit_bytes_per_s > 0 ||
      node->runtime().QosCappedOnNetwork(spec.qos_class)) {
    return std::nullopt;
  }
  const Box box = spec.box.value_or(src.shape.bounds);
  if (!box.Validate("copy box").ok() || !src.shape.bounds.contains(box)) {
    return std::nullopt;  // the planned path says what is wrong
  }
  const std::optional<std::pair<uint64_t, uint64_t>> run = OneRun(src.shape, box);
  if (!run || run->second > limit || run->first + run->second > src.local.capacity) {
    return std::nullopt;
  }
  Peer* p = FindPeer(dst.node);
  if (!p) return std::nullopt;
  auto op = std::make_shared<EagerPut>(
      StrCat(MemoryName(src.local.memory), " -> ", dst.node, ":", dst.memory, " (one call)"),
      dst.node, run->second, config.cluster.peer_timeout_ms);
  {
    // Entered while the peer is up, so that its going down ends the put.
    absl::MutexLock lock(&mu);
    if (!StateLocked(*p).up) return std::nullopt;  // the planned path says why
    std::erase_if(eager_calls, [](const auto& kv) {
      const std::shared_ptr<EagerCall> c = kv.second.lock();
      return !c || c->ended;
    });
    eager_calls[next_eager_call++] = op->state;
  }
  peer_api::PutBytesRequest& req = *op->req;
  v1::InstanceSpec* local = req.mutable_local();
  local->set_allocation(dst.allocation);
  local->set_offset(dst.offset);
  local->set_memory(dst.memory);
  ToProto(dst.shape, local);
  ToProto(box, req.mutable_box());
  req.set_data(reinterpret_cast<const char*>(src.local.base + run->first), run->second);
  req.set_source_session(spec.source.session);
  req.set_source_transfer(spec.source.transfer);
  req.set_qos_class(spec.qos_class);
  // A watched end may hold the put while its log is full (block mode,
  // daemon.access_log_block_ms there): allow for that beyond the timeout.
  cluster::SetDeadline(*op->state->ctx, config.cluster.peer_timeout_ms + kWatchAllowanceMs);
  Authorize(*op->state->ctx, *p, "PutBytes", req);
  auto resp = std::make_shared<peer_api::PutBytesResponse>();
  p->stub->async()->PutBytes(
      op->state->ctx.get(), op->req.get(), resp.get(),
      [this, put = op, spec, resp, wait_ms = config.cluster.peer_timeout_ms,
       done = std::move(done)](const grpc::Status& gs) {
        EagerCall* state = put->state.get();  // the put keeps its call and request
        if (!gs.ok() || resp->declined().empty()) {
          state->ended = true;
          done(PutOutcome(gs, *state, wait_ms));
          return;
        }
        if (declined_puts.Remember(spec.dst.node, spec.qos_class)) {
          spdlog::info(
              "[cluster] node '{}' declined an eager put of class '{}' ({}): that class's small "
              "copies to it go as halves, through its caps, for the next {} s",
              ForLog(spec.dst.node), ForLog(spec.qos_class), ForLog(resp->declined(), 200),
              cluster::DeclinedPuts::kWindow.count());
        }
        // Planned anew on the worker, never on gRPC's thread; inline (to
        // fail) when the node is stopping.
        auto go_on = std::make_shared<std::function<void()>>([this, put, spec, done] {
          auto is_stopping = [this] {
            absl::MutexLock lock(&mu);
            return stopping;
          };
          if (is_stopping()) {
            done(Unavailable("isometryd on node '", self(), "' is stopping"));
          } else if (put->state->cancelled) {
            done(absl::CancelledError(
                StrCat("cancelled before node '", spec.dst.node, "' took any byte of it")));
          } else if (auto halves = CopyAsHalves(spec, done); !halves.ok()) {
            done(halves.status());
          } else {
            put->GoOnAs(*halves);
          }
        });
        if (!Post([go_on] { (*go_on)(); })) (*go_on)();
        absl::MutexLock lock(&mu);
        state->ended = true;  // last touch of this Impl (AwaitEagerPuts)
      });
  return std::static_pointer_cast<CrossTransfer>(op);
}

std::vector<std::shared_ptr<EagerCall>> Cluster::Impl::EagerPutsInFlight(const std::string& peer) {
  std::vector<std::shared_ptr<EagerCall>> calls;
  absl::MutexLock lock(&mu);
  for (const auto& [id, w] : eager_calls) {
    if (auto c = w.lock(); c && !c->ended && (peer.empty() || c->peer == peer)) {
      calls.push_back(std::move(c));
    }
  }
  return calls;
}

namespace {

// Ends `call` with `down`, the put's outcome, whatever its peer answers.
void EndEagerCall(EagerCall& call, Status down) {
  {
    absl::MutexLock lock(&call.mu);
    call.down = std::move(down);
  }
  call.ctx->TryCancel();  // its callback ends the put with `down`
}

}  // namespace

void Cluster::Impl::AwaitEagerPuts() {
  // Answers due within a round trip first; then the rest are ended.
  for (int waited_ms = 0; waited_ms < 5000 && !EagerPutsInFlight("").empty(); waited_ms += 5) {
    if (waited_ms == 1000) {
      for (const auto& c : EagerPutsInFlight("")) {
        EndEagerCall(*c, Unavailable("isometryd on node '", self(), "' stopped with a put of ",
                                     c->bytes, " bytes to node '", c->peer,
                                     "' in flight; whether it landed there is unknown"));
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void Cluster::Impl::FailEagerPutsTo(const std::string& name, const Status& why) {
  for (const auto& c : EagerPutsInFlight(name)) {
    EndEagerCall(*c, Unavailable("node '", name, "' went down (", why.message(), ") with a put of ",
                                 c->bytes, " bytes in flight; whether it landed there is unknown"));
  }
}

namespace {

// PutBytes' end on this node, checked, with the data written (into the
// allocation, or into the scratch buffer of a watched end).
Result<CrossEnd> LandPut(Node& node, const peer_api::PutBytesRequest& req, PeerAccess access) {
  ISO_ASSIGN_OR_RETURN(InstanceSpec spec, InstanceSpecFromProto(req.local()));
  if (spec.datatype || !spec.file.empty() || spec.private_range != 0) {
    return InvalidArgument("PutBytes: the end must be a published allocation's instance");
  }
  ISO_RETURN_IF_ERROR(spec.shape.Validate("instance"));
  ISO_ASSIGN_OR_RETURN(Box box, BoxFromProto(req.box(), "box"));
  ISO_RETURN_IF_ERROR(box.Validate("box"));
  if (!spec.shape.bounds.contains(box)) {
    return OutOfRange("PutBytes: box ", ToString(box), " lies outside the instance");
  }
  const std::optional<std::pair<uint64_t, uint64_t>> r = OneRun(spec.shape, box);
  if (!r || r->second != req.data().size() || r->second > kMaxEagerPut) {
    return InvalidArgument("PutBytes: ", req.data().size(),
                           " bytes that are not the box's one contiguous run (at most 1 MiB)");
  }
  access.sending = false;
  access.box = box;
  ISO_ASSIGN_OR_RETURN(CrossEnd end, node.copies().ResolveForPeer(spec, nullptr, &access));
  if (!end.local.base || r->first + r->second > end.local.capacity) {
    return OutOfRange("PutBytes: the run ends past the instance's storage");
  }
  if (!spec.memory.empty()) {
    ISO_ASSIGN_OR_RETURN(MemoryId m, node.runtime().FindMemory(spec.memory));
    if (m != end.local.memory) {
      return InvalidArgument("PutBytes: allocation ", spec.allocation, " is not in memory '",
                             spec.memory, "'");
    }
  }
  std::memcpy(end.local.base + r->first, req.data().data(), r->second);
  return end;
}

}  // namespace

void Cluster::Impl::ServePutBytes(const std::string& caller, const peer_api::PutBytesRequest& req,
                                  peer_api::PutBytesResponse* resp,
                                  std::function<void(Status)> done) {
  // The class this node runs the copy's halves in: capped (or paused) on
  // the network channel, its bytes go through that cap, not past it.
  const std::string mine = node->traffic_classes().QosForPeerHalf(caller, req.qos_class(), 0).first;
  if (node->runtime().QosCappedOnNetwork(mine)) {
    resp->set_declined(StrCat("its class '", mine, "' there is capped or paused on the network"));
    return done(OkStatus());
  }
  PeerAccess access;
  access.source = {req.source_session(), req.source_transfer()};
  {
    absl::MutexLock lock(&mu);
    if (auto s = sessions.find(caller); s != sessions.end()) access.node = s->second.node;
  }
  Result<CrossEnd> end = LandPut(*node, req, access);
  if (!end.ok()) {
    done(end.status());
  } else if (end->active) {
    // The watch applies and logs it; answered once its entries are out.
    end->active->Finish(
        OkStatus(), [keep = end->keep, done = std::move(done)](Status s) { done(std::move(s)); });
  } else {
    done(OkStatus());
  }
}

}  // namespace isometry
