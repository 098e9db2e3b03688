// The gRPC service's streams: ReadStream and WriteStream (one chunk in
// memory per stream, the range checked before any byte moves) and
// ReadAccessLog (one batch in memory).
#pragma once

#include <string>
#include <string_view>

#include "daemon/node/node.h"
#include "isometry.grpc.pb.h"

namespace isometry {

// Reactors that delete themselves when done (gRPC's OnDone). `node`
// outlives them.
grpc::ServerWriteReactor<v1::ReadChunk>* NewReadStream(const Node& node, SessionRef session,
                                                       const v1::ReadRequest& req);
grpc::ServerReadReactor<v1::WriteStreamRequest>* NewWriteStream(Node& node, SessionRef session);
// ReadAccessLog: batches of the watch's log as Node's WatchReader hands
// them out, each acknowledged once written; ends OK when the watch has
// ended and the log is drained, CANCELLED when the client goes away.
// Once the reader holds the log, the headers go out at once with
// kLogReaderOpenKey, so a client knows before any entry that its writes
// will be seen.
inline constexpr std::string_view kLogReaderOpenKey = "isometry-log-reader";
grpc::ServerWriteReactor<v1::AccessLogBatch>* NewAccessLogStream(
    grpc::CallbackServerContext* ctx, Node& node, SessionRef session,
    const v1::ReadAccessLogRequest& req);

}  // namespace isometry
