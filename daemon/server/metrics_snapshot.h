// Copies what the node and the cluster layer count into a MetricsSnapshot
// (daemon/server/metrics_text.h): the one place that knows where each
// number lives, so the HTTP side never reaches into the node.
//
// Thread-safety: may be called from any thread while the node lives; it
// takes the node's and the runtime's locks briefly, one at a time, so the
// numbers of different families may be a few microseconds apart.
#pragma once

#include <functional>

#include "daemon/node/node.h"
#include "daemon/server/metrics_text.h"
#include "isometry.pb.h"

namespace isometry {

// The peers as `isoctl peers` sees them; empty function: no peers.
using MetricsPeersProvider = std::function<v1::ListPeersResponse()>;

MetricsSnapshot TakeMetricsSnapshot(const Node& node, const MetricsPeersProvider& peers);

}  // namespace isometry
