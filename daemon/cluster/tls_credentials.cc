#include "daemon/cluster/tls_credentials.h"

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "core/strings.h"

namespace isometry::cluster {

namespace {

Result<std::string> ReadPem(const std::string& key, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(key, " '", path, "' cannot be read: ", ErrnoString(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Result<PeerCredentials> MakePeerCredentials(const ClusterConfig& cluster) {
  PeerCredentials out;
  const TlsConfig& t = cluster.tls;
  if (!t.enabled()) {
    out.channel = grpc::InsecureChannelCredentials();
    out.server = grpc::InsecureServerCredentials();
    return out;
  }
  // The data plane's context checks the files thoroughly (key matches
  // certificate, certificate names this node, CA signed it): gRPC would
  // only fail later, at a handshake, with less to say.
  ISO_ASSIGN_OR_RETURN(
      out.data, net::TlsContext::Create({t.ca_file, t.cert_file, t.key_file}, cluster.node_name));
  ISO_ASSIGN_OR_RETURN(std::string ca, ReadPem("cluster.tls.ca_file", t.ca_file));
  ISO_ASSIGN_OR_RETURN(std::string cert, ReadPem("cluster.tls.cert_file", t.cert_file));
  ISO_ASSIGN_OR_RETURN(std::string key, ReadPem("cluster.tls.key_file", t.key_file));
  struct stat st {};
  if (::stat(t.key_file.c_str(), &st) == 0 && (st.st_mode & 0077)) {
    spdlog::warn(
        "cluster.tls.key_file '{}' is readable by group or others (mode {:o}); chmod 600 it",
        t.key_file, st.st_mode & 0777);
  }
  grpc::SslCredentialsOptions client;
  client.pem_root_certs = ca;
  client.pem_private_key = key;
  client.pem_cert_chain = cert;
  out.channel = grpc::SslCredentials(client);
  grpc::SslServerCredentialsOptions server(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  server.pem_root_certs = ca;
  server.pem_key_cert_pairs.push_back({key, cert});
  out.server = grpc::SslServerCredentials(server);
  return out;
}

}  // namespace isometry::cluster
