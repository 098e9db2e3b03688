#include "channels/rdma/net_routes.h"

#include <set>
#include <variant>

#include "core/strings.h"
#include "net/rdma/credits.h"

namespace isometry::rdma {

NetRoutes::~NetRoutes() {
  std::map<std::string, std::unique_ptr<Entry>> attached;
  std::vector<std::unique_ptr<Entry>> retired;
  {
    absl::MutexLock lock(&mu_);
    attached.swap(attached_);
    retired.swap(retired_);
    routes_.clear();
  }
  // Each channel's destructor joins its thread, outside the lock.
}

void NetRoutes::Attach(const std::string& peer, std::unique_ptr<RdmaChannel> channel,
                       uint64_t slot_bytes, std::shared_ptr<const void> keep) {
  auto e = std::make_unique<Entry>();
  e->channel = std::move(channel);
  e->keep = std::move(keep);
  e->slot_bytes = slot_bytes;
  std::vector<std::unique_ptr<Entry>> gone;
  {
    absl::MutexLock lock(&mu_);
    std::unique_ptr<Entry>& slot = attached_[peer];
    if (slot) retired_.push_back(std::move(slot));
    slot = std::move(e);
    gone = SweepLocked();
  }
}

bool NetRoutes::Detach(const std::string& peer) {
  std::vector<std::unique_ptr<Entry>> gone;
  absl::MutexLock lock(&mu_);
  auto it = attached_.find(peer);
  if (it == attached_.end()) {
    gone = SweepLocked();
    return false;
  }
  retired_.push_back(std::move(it->second));
  attached_.erase(it);
  gone = SweepLocked();
  // `gone` is destroyed after the lock is released (declared before it).
  return true;
}

bool NetRoutes::Attached(const std::string& peer) const {
  absl::MutexLock lock(&mu_);
  return attached_.count(peer) != 0;
}

uint64_t NetRoutes::SlotBytes(const std::string& peer) const {
  absl::MutexLock lock(&mu_);
  auto it = attached_.find(peer);
  return it == attached_.end() ? 0 : it->second->slot_bytes;
}

Status NetRoutes::RouteLocked(const std::string& peer, uint64_t transfer, Entry* e,
                              RdmaRoute route) {
  if (routes_.count({peer, transfer}) != 0) {
    return absl::AlreadyExistsError(
        StrCat("copy ", transfer, " with peer '", peer, "' is routed over RDMA already"));
  }
  ISO_RETURN_IF_ERROR(e->channel->Route(transfer, route));
  routes_[{peer, transfer}] = Route{e, route.tag, route.sending};
  ++e->routes;
  return OkStatus();
}

Result<uint32_t> NetRoutes::RouteReceiving(const std::string& peer, uint64_t transfer,
                                           uint64_t chunks, uint64_t max_chunk_bytes,
                                           std::string* why) {
  RdmaChannel* on = nullptr;
  Result<uint32_t> tag = 0u;
  {
    absl::MutexLock lock(&mu_);
    tag = PickTagLocked(peer, transfer, chunks, max_chunk_bytes, why, &on);
  }
  // The tag must be open on the channel's thread before the peer's first
  // chunk can arrive (one under a tag not open breaks the link); the
  // sender learns it only once this returns. Not under mu_: the channel's
  // thread may be ending a copy, which unroutes it.
  if (on) on->AwaitRoutes();
  return tag;
}

Result<uint32_t> NetRoutes::PickTagLocked(const std::string& peer, uint64_t transfer,
                                          uint64_t chunks, uint64_t max_chunk_bytes,
                                          std::string* why, RdmaChannel** on) {
  auto it = attached_.find(peer);
  if (it == attached_.end()) {
    if (why) *why = StrCat("no RDMA link with peer '", peer, "' is connected");
    return 0u;
  }
  Entry* e = it->second.get();
  if (routes_.count({peer, transfer}) != 0) {
    return absl::AlreadyExistsError(
        StrCat("copy ", transfer, " with peer '", peer, "' is routed over RDMA already"));
  }
  if (max_chunk_bytes > e->slot_bytes) {
    if (why) {
      *why = StrCat("its chunks of up to ", max_chunk_bytes, " bytes exceed a ring slot (",
                    e->slot_bytes, " bytes, rdma.slot_kib)");
    }
    return 0u;
  }
  // The next tag after the last one given to this peer that no copy with
  // it uses (receiving here, or still sending there: a tag comes round
  // again only after 254 others).
  std::set<uint32_t> used;
  for (const auto& [key, r] : routes_) {
    if (key.first == peer && !r.sending) used.insert(r.tag);
  }
  uint32_t& last = last_tag_[peer];
  for (uint32_t i = 0; i < kMaxTag; ++i) {
    const uint32_t tag = (last + i) % kMaxTag + 1;
    if (used.count(tag) != 0) continue;
    Status s = RouteLocked(peer, transfer, e, RdmaRoute{tag, chunks, false});
    if (absl::IsAlreadyExists(s)) continue;  // the channel still holds it
    if (!s.ok()) return s;
    last = tag;
    *on = e->channel.get();  // lives while the route does
    return tag;
  }
  if (why) *why = StrCat("all ", kMaxTag, " RDMA tags with peer '", peer, "' are in use");
  return 0u;
}

Status NetRoutes::RouteSending(const std::string& peer, uint64_t transfer, uint32_t tag,
                               uint64_t chunks) {
  if (tag < 1 || tag > kMaxTag) {
    return InvalidArgument("RDMA tag ", tag, " of copy ", transfer, " is not 1..", kMaxTag);
  }
  absl::MutexLock lock(&mu_);
  auto it = attached_.find(peer);
  if (it == attached_.end()) {
    return Unavailable("copy ", transfer, ": peer '", peer, "' routed it over RDMA, but ",
                       kNoLinkHere);
  }
  return RouteLocked(peer, transfer, it->second.get(), RdmaRoute{tag, chunks, true});
}

void NetRoutes::Unroute(const std::string& peer, uint64_t transfer) {
  absl::MutexLock lock(&mu_);
  auto it = routes_.find({peer, transfer});
  if (it == routes_.end()) return;
  it->second.entry->channel->Unroute(transfer);
  --it->second.entry->routes;
  routes_.erase(it);
}

uint32_t NetRoutes::TagOf(const std::string& peer, uint64_t transfer) const {
  absl::MutexLock lock(&mu_);
  auto it = routes_.find({peer, transfer});
  return it == routes_.end() ? 0 : it->second.tag;
}

bool NetRoutes::Submit(const std::string& peer, uint64_t transfer, ChannelRequest& request,
                       RequestDone& done) {
  absl::MutexLock lock(&mu_);
  auto it = routes_.find({peer, transfer});
  if (it == routes_.end()) return false;
  it->second.entry->channel->Submit(std::move(request), std::move(done));
  return true;
}

void NetRoutes::Abandon(uint64_t transfer, const Status& why) {
  absl::MutexLock lock(&mu_);
  for (const auto& [key, r] : routes_) {
    if (key.second == transfer) r.entry->channel->AbandonTransfer(transfer, why);
  }
}

std::vector<std::unique_ptr<NetRoutes::Entry>> NetRoutes::SweepLocked() {
  std::vector<std::unique_ptr<Entry>> gone;
  for (auto it = retired_.begin(); it != retired_.end();) {
    if ((*it)->routes == 0) {
      gone.push_back(std::move(*it));
      it = retired_.erase(it);
    } else {
      ++it;
    }
  }
  return gone;
}

namespace {

class NetChannel final : public Channel {
 public:
  NetChannel(std::unique_ptr<Channel> tcp, std::shared_ptr<NetRoutes> routes)
      : tcp_(std::move(tcp)), routes_(std::move(routes)) {}

  const ChannelCaps& caps() const override { return tcp_->caps(); }

  void Submit(ChannelRequest request, RequestDone done) override {
    const NetHalf* half = std::get_if<NetHalf>(&request.dst);
    if (!half) half = std::get_if<NetHalf>(&request.src);
    // Copied: Submit moves the request.
    if (half) {
      const std::string peer = half->peer;
      const uint64_t transfer = half->transfer;
      if (routes_->Submit(peer, transfer, request, done)) return;
    }
    tcp_->Submit(std::move(request), std::move(done));
  }

  void Interrupt() override { tcp_->Interrupt(); }

  void AbandonTransfer(uint64_t transfer, const Status& why) override {
    routes_->Abandon(transfer, why);
    tcp_->AbandonTransfer(transfer, why);  // tells the other node (over TCP)
  }

 private:
  const std::unique_ptr<Channel> tcp_;
  const std::shared_ptr<NetRoutes> routes_;
};

}  // namespace

std::unique_ptr<Channel> MakeNetChannel(std::unique_ptr<Channel> tcp,
                                        std::shared_ptr<NetRoutes> routes) {
  return std::make_unique<NetChannel>(std::move(tcp), std::move(routes));
}

}  // namespace isometry::rdma
