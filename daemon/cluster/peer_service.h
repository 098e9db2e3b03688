// Internal to daemon/cluster: the IsometryPeer gRPC service. It only
// translates (proto in, a call on Cluster::Impl, proto out); the peer
// manager and the halves do the work.
#pragma once

#include <memory>

#include "daemon/cluster/cluster_impl.h"

namespace isometry::cluster {

std::unique_ptr<peer_api::IsometryPeer::CallbackService> MakePeerService(Cluster::Impl* impl);

}  // namespace isometry::cluster
