// TLS set-up in one place for both halves of the peer protocol: the gRPC
// peer service (server and client credentials) and the data connections
// (an SSL_CTX), all from the files of [cluster.tls].
#pragma once

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>

#include "config/runtime_config.h"
#include "core/status.h"
#include "net/wire.h"

namespace isometry::cluster {

struct PeerCredentials {
  // Mutual TLS when [cluster.tls] is set, insecure otherwise. A client
  // checks the server's certificate against the peer's configured name
  // (the channel's target name is overridden with it).
  std::shared_ptr<grpc::ChannelCredentials> channel;
  std::shared_ptr<grpc::ServerCredentials> server;
  std::shared_ptr<const net::TlsContext> data;  // null without TLS
};

// Reads and checks the files (errors name the file and the key; the key's
// contents never appear in an error or the log).
Result<PeerCredentials> MakePeerCredentials(const ClusterConfig& cluster);

}  // namespace isometry::cluster
