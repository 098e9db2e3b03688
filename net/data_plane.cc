#include "net/data_plane.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <new>
#include <system_error>

#include "core/strings.h"
#include "core/thread_name.h"
#include "core/thread_nice.h"

namespace isometry::net {

Result<std::unique_ptr<DataPlane>> DataPlane::Create(const DataOptions& options) {
  if (options.connections < 1 || options.connections > 64) {
    return InvalidArgument("data connections per peer must be 1 to 64, not ", options.connections);
  }
  std::unique_ptr<DataPlane> p(new DataPlane(options));
  ISO_ASSIGN_OR_RETURN(auto bound, ListenOn(options.listen));
  p->listen_fd_ = std::move(bound.first);
  p->address_ = bound.second;
  return p;
}

DataPlane::~DataPlane() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  guard_cv_.SignalAll();
  if (guard_.joinable()) guard_.join();
  acceptor_.reset();  // stops the event loop, closes the hellos in progress
  listen_fd_.reset();
  std::map<std::string, std::unique_ptr<PeerLink>> links;
  {
    absl::MutexLock lock(&mu_);
    links.swap(links_);
  }
  links.clear();
}

Status DataPlane::Start(Authenticate check, LinkDown on_down) {
  on_down_ = std::move(on_down);
  HelloAcceptor::Options o;
  o.timeout_ms = options_.timeout_ms;
  o.max_pending = options_.max_handshakes;
  o.tls = options_.tls;
  o.checksum = options_.checksum;
  auto admitted = [this](const std::string& peer, std::unique_ptr<Wire> wire,
                         const HelloAcceptor::Settled& settled) -> Status {
    try {
      return Link(peer).AddIncoming(std::move(wire), settled.checksum, settled.express);
    } catch (const std::system_error& e) {  // the link's own thread
      return absl::ResourceExhaustedError(StrCat("cannot start a thread: ", e.what()));
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError("out of memory for its data link");
    }
  };
  ISO_ASSIGN_OR_RETURN(acceptor_,
                       HelloAcceptor::Start(std::move(listen_fd_), o, std::move(check), admitted));
  // Only where a thread may take a class's value is one ever lowered.
  if (ThreadNiceSupported()) {
    try {
      guard_ = std::thread([this] {
        NameThisThread("data:guard");
        Guard();
      });
    } catch (const std::system_error& e) {
      return absl::ResourceExhaustedError(
          StrCat("cannot start the data plane's guard thread: ", e.what()));
    }
  }
  spdlog::info(
      "data plane listening on {} ({} connection(s) per peer, checksums {}, {}, at most {} "
      "hello(s) at once)",
      address_, options_.connections, options_.checksum ? "on" : "off unless a peer asks",
      options_.tls ? "TLS" : "no TLS", options_.max_handshakes);
  return OkStatus();
}

PeerLink& DataPlane::Link(const std::string& peer) {
  absl::MutexLock lock(&mu_);
  auto& l = links_[peer];
  if (!l) {
    l = std::make_unique<PeerLink>(peer, options_, &completer_,
                                   [this, peer](const Status& why, uint64_t generation) {
                                     if (on_down_) on_down_(peer, why, generation);
                                   });
  }
  return *l;
}

std::vector<PeerLink*> DataPlane::Links() const {
  std::vector<PeerLink*> links;
  absl::MutexLock lock(&mu_);
  for (const auto& [peer, l] : links_) links.push_back(l.get());
  return links;  // links live as long as the plane
}

void DataPlane::AbandonEverywhere(uint64_t transfer, const Status& why) {
  for (PeerLink* l : Links()) l->Abandon(transfer, why);
}

void DataPlane::Guard() {
  const auto every = std::chrono::milliseconds(std::max<uint32_t>(options_.timeout_ms / 4, 10));
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      const absl::Time until = absl::Now() + absl::FromChrono(every);
      while (!stopping_ && !guard_cv_.WaitWithDeadline(&mu_, until)) {
      }
      if (stopping_) return;
    }
    for (PeerLink* l : Links()) l->LiftStarvedReaders(every);
  }
}

}  // namespace isometry::net
