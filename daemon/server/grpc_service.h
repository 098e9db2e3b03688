// The gRPC service (isometry.v1.Isometry, callback API). It only
// translates: proto in, Node call, proto out. Nothing here blocks a gRPC
// thread on a transfer: waits complete from the transfer's completion path,
// and calls that translate a datatype run on a bounded pool of their own
// (translate_pool.h: daemon.translate_threads and the keys beside it).
#pragma once

#include <functional>
#include <memory>

#include "daemon/node/node.h"
#include "isometry.grpc.pb.h"

namespace isometry {

// The service object; register it with a grpc::ServerBuilder. Shutdown()
// ends every Attach stream (their sessions end with them).
class GrpcService {
 public:
  // `operator_token`: callers presenting it as "isometry-operator"
  // metadata may cancel any transfer.
  // `peers` answers ListPeers (absent: a single node).
  using PeersProvider = std::function<v1::ListPeersResponse()>;
  static std::unique_ptr<GrpcService> Make(Node& node, std::string operator_token,
                                           PeersProvider peers = nullptr);
  virtual ~GrpcService() = default;
  virtual grpc::Service* service() = 0;
  virtual void Shutdown() = 0;
};

}  // namespace isometry
