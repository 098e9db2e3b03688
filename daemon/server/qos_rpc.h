// Traffic-class requests of the gRPC service (docs/guides/qos.md): proto
// in, node call, proto out.
#pragma once

#include "daemon/node/node.h"
#include "isometry.pb.h"

namespace isometry {

void ToProto(const QosReport& r, v1::GetQosResponse* out);
// What a copy runs at (its class may have lowered its priority), told in
// the Copy answer.
void SetTerms(const CopyTerms& terms, v1::CopyResponse* out);
// The operator's grant; PERMISSION_DENIED for anyone else.
Status SetSessionClassRpc(Node& node, bool is_operator, const v1::SetSessionClassRequest& req);

}  // namespace isometry
