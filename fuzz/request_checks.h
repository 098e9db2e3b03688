// What the daemon does with a request before it touches memory, without a
// daemon: proto -> domain conversion (daemon/server/convert.h), shape
// validation, chunking and copy compilation. Shared by the request and
// local-frame fuzzers. Each function aborts (a finding) when an accepted
// request breaks an invariant the daemon relies on; rejected requests must
// be INVALID_ARGUMENT / OUT_OF_RANGE / RESOURCE_EXHAUSTED with a message.
#pragma once

#include "isometry.pb.h"

namespace isometry::fuzz {

void CheckInstanceSpec(const v1::InstanceSpec& spec);
void CheckCopyRequest(const v1::CopyRequest& req);
void CheckExplainPlan(const v1::ExplainPlanRequest& req);
void CheckWriteRange(uint64_t offset, uint64_t length);
void CheckLocalRequest(const v1::LocalRequest& req);

}  // namespace isometry::fuzz
