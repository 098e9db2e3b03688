// The gRPC service's byte streams (ReadStream, WriteStream): one chunk in
// memory per stream, the range checked before any byte moves.
#pragma once

#include <string>

#include "daemon/node/node.h"
#include "isometry.grpc.pb.h"

namespace isometry {

// Reactors that delete themselves when done (gRPC's OnDone). `node`
// outlives them.
grpc::ServerWriteReactor<v1::ReadChunk>* NewReadStream(const Node& node, std::string session,
                                                       const v1::ReadRequest& req);
grpc::ServerReadReactor<v1::WriteStreamRequest>* NewWriteStream(Node& node, std::string session);

}  // namespace isometry
