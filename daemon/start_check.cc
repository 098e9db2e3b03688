#include "daemon/start_check.h"

#include <grp.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "channels/added_channels.h"
#include "channels/channel_edges.h"
#include "channels/channel_factory.h"
#include "core/group.h"
#include "core/strings.h"
#include "core/unique_fd.h"
#include "daemon/cluster/secret.h"
#include "daemon/cpu_latency.h"
#include "net/rdma/rdma_probe.h"
#include "net/wire.h"

namespace isometry {

namespace {

// `dir` exists as a directory the daemon may write in, or the nearest
// existing ancestor is one (the daemon creates the rest at start).
Status CheckWritableDirectory(const char* key, const std::string& dir, std::string_view what) {
  std::filesystem::path p = std::filesystem::absolute(dir);
  bool exists_already = true;
  struct stat st {};
  while (::stat(p.c_str(), &st) != 0) {
    if (errno != ENOENT && errno != ENOTDIR) {  // ENOTDIR: a file on the way
      return ConfigKeyError(key, what, " '", dir, "': ", p.string(), ": ", ErrnoString(errno));
    }
    exists_already = false;
    if (!p.has_relative_path()) break;  // "/" itself is missing: cannot happen
    p = p.parent_path();
  }
  if (!S_ISDIR(st.st_mode)) {
    return ConfigKeyError(key, what, " '", dir, "': ", p.string(), " is not a directory");
  }
  if (::euidaccess(p.c_str(), W_OK | X_OK) != 0) {
    return ConfigKeyError(key, what, " '", dir, "': ",
                          exists_already
                              ? "the directory is not writable"
                              : StrCat("cannot be created: ", p.string(), " is not writable"),
                          " (", ErrnoString(errno), ")");
  }
  return OkStatus();
}

Status CheckSocketPath(const char* key, const std::string& path) {
  constexpr size_t kMax = sizeof(sockaddr_un{}.sun_path) - 1;
  if (path.size() > kMax) {
    return ConfigKeyError(key, "socket path '", path, "' is ", path.size(),
                          " bytes; unix socket paths may have at most ", kMax);
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode)) {
    // Start removes a stale socket there; anything else is not its to remove.
    return ConfigKeyError(key, "'", path, "' exists and is not a socket");
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return CheckWritableDirectory(key, dir.empty() ? "." : dir, "the socket's directory");
}

// "host:port" or "[v6]:port" that this machine can listen on. Binding to
// port 0 asks the kernel whether the host is one of its addresses without
// taking the real port (which a running daemon may hold).
Status CheckListenAddress(const char* key, const std::string& address) {
  const size_t colon = address.rfind(':');
  const std::string port = colon == std::string::npos ? "" : address.substr(colon + 1);
  std::string host = colon == std::string::npos ? "" : address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const bool numeric = !port.empty() && port.size() <= 5 &&
                       port.find_first_not_of("0123456789") == std::string::npos;
  if (host.empty() || !numeric || std::stoul(port) > 65535) {
    return ConfigKeyError(key, "address '", address,
                          "' is not host:port (e.g. \"127.0.0.1:7470\", \"[::1]:7470\")");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), "0", &hints, &found); rc != 0) {
    return ConfigKeyError(key, "address '", address, "': host '", host, "': ", gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owner(found, ::freeaddrinfo);
  int last_error = 0;
  for (const addrinfo* a = found; a; a = a->ai_next) {
    const UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) {
      last_error = errno;
      continue;
    }
    const int rc = ::bind(fd.get(), a->ai_addr, a->ai_addrlen);
    last_error = errno;
    if (rc == 0) return OkStatus();
  }
  return ConfigKeyError(key, "address '", address, "': cannot listen on host '", host,
                        "': ", ErrnoString(last_error),
                        last_error == EADDRNOTAVAIL ? " (not an address of this machine)" : "");
}

// The user the checks run as, for messages: "user isometry (uid 998)".
std::string DaemonUser() {
  const uid_t uid = ::geteuid();
  const auto name = UserNameOf(uid);
  return name ? StrCat("user ", *name, " (uid ", uid, ")") : StrCat("uid ", uid);
}

Status CheckDiskDirectory(const std::string& key, const MemoryConfig& m) {
  struct stat st {};
  if (::stat(m.directory.c_str(), &st) != 0) {
    return ConfigKeyError(key, "DSK memory '", m.name, "': directory '", m.directory,
                          "': ", ErrnoString(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    return ConfigKeyError(key, "DSK memory '", m.name, "': '", m.directory, "' is not a directory");
  }
  if (::euidaccess(m.directory.c_str(), X_OK) != 0) {
    return ConfigKeyError(key, "DSK memory '", m.name, "': directory '", m.directory,
                          "' cannot be searched by ", DaemonUser(), ": ", ErrnoString(errno));
  }
  // Every copy into the memory writes a file there: a directory the daemon
  // cannot write fails each of them later, so the start fails now. A
  // read-only file system (EROFS) is what systemd's ProtectSystem=strict
  // makes of it without ReadWritePaths=.
  if (::euidaccess(m.directory.c_str(), W_OK) != 0) {
    const int err = errno;
    return ConfigKeyError(key, "DSK memory '", m.name, "': directory '", m.directory,
                          "' is not writable by ", DaemonUser(), ": ", ErrnoString(err),
                          err == EROFS
                              ? " (a read-only file system: under systemd, add ReadWritePaths=" +
                                    m.directory + ", docs/operations/systemd.md)"
                              : " (give that user write access to it)");
  }
  return OkStatus();
}

}  // namespace

Status CheckStartable(const Config& config) {
  ISO_RETURN_IF_ERROR(config.Validate());
  ISO_RETURN_IF_ERROR(CheckChannelKinds(config.runtime));
  const DaemonConfig& d = config.daemon;
  ISO_RETURN_IF_ERROR(CheckSocketPath("daemon.local_socket", d.local_socket));
  ISO_RETURN_IF_ERROR(CheckSocketPath("daemon.grpc_socket", d.grpc_socket));
  ISO_RETURN_IF_ERROR(CheckWritableDirectory("daemon.state_dir", d.state_dir, "state_dir"));
  if (!d.socket_group.empty() && !GroupIdOf(d.socket_group)) {
    return ConfigKeyError("daemon.socket_group", "group '", d.socket_group,
                          "' does not exist (create it, or leave socket_group out to keep the "
                          "daemon's group)");
  }
  if (!d.grpc_tcp.empty()) ISO_RETURN_IF_ERROR(CheckListenAddress("daemon.grpc_tcp", d.grpc_tcp));
  if (config.metrics.enabled) {
    ISO_RETURN_IF_ERROR(CheckListenAddress("metrics.listen", config.metrics.listen));
  }
  if (d.cpu_latency_us) ISO_RETURN_IF_ERROR(CheckCpuLatencyDevice());
  for (size_t i = 0; i < config.runtime.memories.size(); ++i) {
    const MemoryConfig& m = config.runtime.memories[i];
    if (m.kind != MemoryKind::kDsk) continue;
    ISO_RETURN_IF_ERROR(CheckDiskDirectory(StrCat("memory[", i, "].directory"), m));
  }
  const ClusterConfig& c = config.cluster;
  if (c.clustered()) ISO_RETURN_IF_ERROR(CheckListenAddress("cluster.data_listen", c.data_listen));
  // Checked even on a node with no peers yet: a credential named in the
  // file is meant to be used, and a bad one should not wait for the day
  // the first [[peer]] is added.
  if (!c.secret_file.empty()) {
    if (Result<std::string> secret = LoadSecret(c.secret_file); !secret.ok()) {
      return ConfigKeyError("cluster.secret_file", secret.status().message());
    }
  }
  if (c.tls.enabled()) {
    auto tls =
        net::TlsContext::Create({c.tls.ca_file, c.tls.cert_file, c.tls.key_file}, c.node_name);
    if (!tls.ok()) return ConfigKeyError("cluster.tls", tls.status().message());
  }
  // rdma.enable = "on" needs a usable device (and every rdma.devices entry).
  ISO_RETURN_IF_ERROR(rdma::ChooseRdma(rdma::CachedRdmaProbe(), config.rdma).status());
  // FBM memories and gpu_* channels need a GPU; those added per device
  // must fit beside the file's (config/gpu_config.h).
  RuntimeConfig with_gpus = config.runtime;
  ISO_RETURN_IF_ERROR(ResolveGpus(with_gpus, config.gpu, DetectGpus()).status());
  ISO_RETURN_IF_ERROR(CheckChannelKinds(with_gpus));
  return OkStatus();
}

}  // namespace isometry
