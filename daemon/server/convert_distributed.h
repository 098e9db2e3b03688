// Proto <-> domain translation of distributed instances and
// redistribution (issue #18), shared by the gRPC service and the local
// server. Malformed messages become INVALID_ARGUMENT naming the field.
#pragma once

#include "daemon/node/node.h"
#include "isometry.pb.h"

namespace isometry {

Result<redistribution::DistributionSpec> DistributionFromProto(const v1::DistributionSpec& d);
void ToProto(const redistribution::DistributionSpec& spec, v1::DistributionSpec* out);
Result<DistributedJoin> JoinFromProto(const v1::JoinDistributedRequest& req);
RedistributeGrants GrantsFromProto(const v1::RedistributeRequest& req);
void ToProto(const DistributedReport& r, v1::JoinDistributedResponse* out);

// The local server's Redistribute: starts it and, with req.wait, blocks
// the calling (per-connection) thread until it has ended; `out` then has
// the final TransferInfo, and the answer is the redistribution's status.
Status RedistributeLocal(Node& node, SessionRef session, const v1::RedistributeRequest& req,
                         v1::CopyResponse* out);

}  // namespace isometry
