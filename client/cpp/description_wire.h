// A client's description of an instance (a layout over an index space, or
// elements of a datatype) in the wire form the daemon reads.
#pragma once

#include "client/cpp/isometry_client.h"

namespace isometry::v1 {
class InstanceSpec;
class ExplainPlanRequest;
}  // namespace isometry::v1

namespace isometry::client {

// Fills bounds, fields and layout, or datatype (by handle when it has one)
// and count.
void DescribeTo(const Description& what, v1::InstanceSpec* spec);

// Fills the two ends of an ExplainPlan request. Datatypes travel whole (the
// request belongs to no session, so a handle would name nothing). Two
// layout ends must share bounds and fields: INVALID_ARGUMENT otherwise.
Status DescribeEnds(const Description& src, const Description& dst, v1::ExplainPlanRequest* req);

}  // namespace isometry::client
