// A node's network data plane: the listening socket for peers' data
// connections and one PeerLink per peer (peer_link.h).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/unique_fd.h"
#include "net/hello_acceptor.h"
#include "net/peer_link.h"

namespace isometry::net {

class DataPlane {
 public:
  // What a connecting node sent to say who it is (frame.h, the hello).
  using HelloProof = net::HelloProof;
  // Says which peer a connecting node is, by its proof (made with the
  // session key of that peer's gRPC hello to this node); an error refuses
  // the connection and nothing else. With TLS the peer's certificate must
  // also name the peer it proves to be.
  // The answer's MAC covers the options the hello settled (frame.h).
  using Authenticate = std::function<Result<HelloAnswer>(const HelloProof& hello)>;
  // A link went down (a connection broke); `generation` is the link's
  // generation() when it did.
  using LinkDown =
      std::function<void(const std::string& peer, const Status& why, uint64_t generation)>;

  // Binds options.listen (so address() is known); Start() accepts.
  static Result<std::unique_ptr<DataPlane>> Create(const DataOptions& options);
  ~DataPlane();

  // Serves the data port (hello_acceptor.h); an error when its event loop
  // cannot start (then no peer can open a data connection here).
  Status Start(Authenticate check, LinkDown on_down);
  // The bound address, e.g. "0.0.0.0:41234".
  const std::string& address() const { return address_; }
  const DataOptions& options() const { return options_; }
  // The link of a peer, made on first use; valid while the plane lives.
  PeerLink& Link(const std::string& peer) ABSL_LOCKS_EXCLUDED(mu_);
  // PeerLink::Abandon on every link (a channel shared by several peers).
  void AbandonEverywhere(uint64_t transfer, const Status& why) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  explicit DataPlane(const DataOptions& options) : options_(options) {}
  std::vector<PeerLink*> Links() const ABSL_LOCKS_EXCLUDED(mu_);
  // The guard thread: every timeout_ms / 4, a data connection's reader
  // that has been receiving a chunk at its class's lowered nice value
  // (qos.class.nice) that long goes on at the daemon's own. On a node
  // whose CPUs other work keeps busy, such a reader (under SCHED_IDLE
  // above all) may get no CPU for seconds, and the sending node's kernel
  // drops a connection whose receive window stays shut for timeout_ms
  // (TCP_USER_TIMEOUT), failing every copy on the link.
  void Guard() ABSL_LOCKS_EXCLUDED(mu_);
  const DataOptions options_;
  UniqueFd listen_fd_;
  std::string address_;
  LinkDown on_down_;
  Completer completer_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<PeerLink>> links_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::CondVar guard_cv_;
  std::thread guard_;  // started by Start() where threads change their nice value
  // Last: destroyed first, so no hello is admitted into a dying plane.
  std::unique_ptr<HelloAcceptor> acceptor_;
};

}  // namespace isometry::net
