// Proto <-> domain translation shared by the gRPC service and the local
// server. Every From* function validates: a malformed message becomes an
// INVALID_ARGUMENT naming the field.
#pragma once

#include <grpcpp/support/status.h>

#include "daemon/node/node.h"
#include "isometry.pb.h"
#include "proto/datatype_wire.h"

namespace isometry {

Result<Box> BoxFromProto(const v1::Box& box, std::string_view what);
Result<FieldSpace> FieldsFromProto(const google::protobuf::RepeatedPtrField<v1::Field>& fields);
// A datatype in the spec may name the caller's registered handles through
// `registered` (none: handles are refused).
Result<InstanceSpec> InstanceSpecFromProto(const v1::InstanceSpec& spec,
                                           const wire::RegisteredDatatypes& registered = {});
Result<CopySpec> CopySpecFromProto(const v1::CopyRequest& req);
// An ExplainPlan request: a layout side needs bounds and fields (and is
// checked against them), a datatype side does not.
struct ExplainArgs {
  PlanSide src, dst;
  Box bounds;
  FieldSpace fields;
};
Result<ExplainArgs> ExplainFromProto(const v1::ExplainPlanRequest& req,
                                     const wire::RegisteredDatatypes& registered);
void ToProto(const DatatypeReport& r, v1::RegisterDatatypeResponse* out);

void ToProto(const Box& box, v1::Box* out);
// Bounds, fields and layout of a spec (the rest is left as it is).
void ToProto(const InstanceShape& shape, v1::InstanceSpec* out);
void ToProto(const TransferReport& r, v1::TransferInfo* out);
void ToProto(const MemoryReport& r, v1::Memory* out);
void ToProto(const SessionListing& r, v1::SessionInfo* out);
void ToProto(const AllocationListing& r, v1::AllocationInfo* out);
void ToProto(const ChannelReport& r, v1::ChannelInfo* out);
void ToProto(const PlanReport& r, v1::ExplainPlanResponse* out);
void ToProto(const TransferExplanation& e, v1::ExplainTransferResponse* out);
void ToProto(const NodeStatus& s, v1::StatusResponse* out);
void ToProto(const Calibration& cal, v1::CalibrateResponse* out);

grpc::Status ToGrpc(const Status& s);

}  // namespace isometry
