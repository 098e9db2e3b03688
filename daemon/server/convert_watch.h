// Proto <-> domain translation of Active Access (issue #19), shared by the
// gRPC service and the local server.
#pragma once

#include "daemon/node/node.h"
#include "isometry.pb.h"

namespace isometry {

// INVALID_ARGUMENT for an unknown action, handler or full mode.
Result<WatchSpec> WatchSpecFromProto(const v1::WatchRequest& req);
void ToProto(const WatchReport& r, v1::WatchInfo* out);
// Moves the entries' data into `out`.
void ToProto(std::vector<LoggedAccess> entries, v1::AccessLogBatch* out);
// The status with every watch of the node.
void AddWatches(const std::vector<WatchReport>& watches, v1::StatusResponse* out);

}  // namespace isometry
