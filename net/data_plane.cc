#include "net/data_plane.h"

#include <spdlog/spdlog.h>

#include <new>
#include <system_error>

#include "core/strings.h"

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

void DataPlane::AbandonEverywhere(uint64_t transfer, const Status& why) {
  std::vector<PeerLink*> links;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [peer, l] : links_) links.push_back(l.get());
  }
  for (PeerLink* l : links) l->Abandon(transfer, why);  // links live as long as the plane
}

}  // namespace isometry::net
