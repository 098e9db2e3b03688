// A node's network data plane: the listening socket for peers' data
// connections and one PeerLink per peer (peer_link.h).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "channels/tcp/peer_link.h"
#include "core/unique_fd.h"

namespace isometry::net {

class DataPlane {
 public:
  // Says which peer a connecting node is: checks the token the node
  // presents (issued to it at the gRPC hello); an error refuses it.
  using TokenCheck = std::function<Result<std::string>(uint32_t node, const std::string& token)>;
  // A link went down (a connection broke); `generation` is the link's
  // generation() when it did.
  using LinkDown =
      std::function<void(const std::string& peer, const Status& why, uint64_t generation)>;

  // Binds options.listen (so address() is known); Start() accepts.
  static Result<std::unique_ptr<DataPlane>> Create(const DataOptions& options);
  ~DataPlane();

  void Start(TokenCheck check, LinkDown on_down);
  // The bound address, e.g. "0.0.0.0:41234".
  const std::string& address() const { return address_; }
  const DataOptions& options() const { return options_; }
  // The link of a peer, made on first use; valid while the plane lives.
  PeerLink& Link(const std::string& peer) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  explicit DataPlane(const DataOptions& options) : options_(options) {}
  void AcceptLoop();
  void Handshake(UniqueFd fd);
  void JoinHandshakes(bool all) ABSL_LOCKS_EXCLUDED(handshake_mu_);

  const DataOptions options_;
  UniqueFd listen_fd_;
  std::string address_;
  TokenCheck check_;
  LinkDown on_down_;
  Completer completer_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<PeerLink>> links_ ABSL_GUARDED_BY(mu_);
  std::thread acceptor_;
  // One thread per connection still saying hello (each bounded by
  // timeout_ms), so a silent connection never holds up the others.
  absl::Mutex handshake_mu_;
  std::vector<std::pair<std::thread, std::shared_ptr<std::atomic<bool>>>> handshakes_
      ABSL_GUARDED_BY(handshake_mu_);
};

}  // namespace isometry::net
