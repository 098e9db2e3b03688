// isometryd: the Isometry node daemon.
#include <fcntl.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "config/config_parser.h"
#include "core/random.h"
#include "daemon/cluster/cluster.h"
#include "daemon/fault_injection.h"
#include "daemon/node/node.h"
#include "daemon/server/grpc_service.h"
#include "daemon/server/local_server.h"
#include "daemon/start_check.h"

using namespace isometry;

namespace {

void SetUpLogging(const std::string& level) {
  // Under systemd, journald stamps time and priority itself: plain lines.
  if (std::getenv("JOURNAL_STREAM")) spdlog::set_pattern("[%l] %v");
  spdlog::set_level(spdlog::level::from_str(level));
}

Status PrepareDirectories(const DaemonConfig& d) {
  std::error_code ec;
  std::filesystem::create_directories(d.state_dir, ec);
  if (ec) return Internal("cannot create state_dir '", d.state_dir, "': ", ec.message());
  return OkStatus();
}

// A fresh operator token per start, readable by the daemon's user only:
// whoever can read it (root, the isometry user) may cancel any transfer.
Result<std::string> WriteOperatorToken(const DaemonConfig& d) {
  const std::string token = RandomHex(16);
  const std::string path = d.state_dir + "/operator.token";
  ::unlink(path.c_str());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Internal("cannot write ", path, ": ", std::strerror(errno));
  const bool ok = ::write(fd, token.data(), token.size()) == static_cast<ssize_t>(token.size());
  ::close(fd);
  if (!ok) return Internal("cannot write ", path);
  return token;
}

int Serve(const Config& config) {
  SetUpLogging(config.daemon.log_level);
  if (Status s = PrepareDirectories(config.daemon); !s.ok()) {
    spdlog::error("{}", s.ToString());
    return 1;
  }
  // Signals are taken by sigtimedwait in this thread only: block them before
  // any other thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  // Peers: the data listener and the network channels exist before the
  // node (its runtime owns the channels).
  const FaultInjection faults = FaultInjectionFromEnvironment();
  std::unique_ptr<Cluster> cluster;
  if (!config.cluster.peers.empty()) {
    auto c = Cluster::Create(config, faults);
    if (!c.ok()) {
      spdlog::error("cannot start the cluster layer: {}", c.status().ToString());
      return 1;
    }
    cluster = *std::move(c);
  }
  auto node = Node::Create(config, cluster ? cluster->channel_context() : ChannelContext{});
  if (!node.ok()) {
    spdlog::error("cannot start: {}", node.status().ToString());
    return 1;
  }
  if (cluster) {
    // Before any server: clients and peers find the cluster layer ready.
    (*node)->SetCrossCopier(cluster.get());
    cluster->Start(node->get());
  }
  auto local = LocalServer::Start(**node);
  if (!local.ok()) {
    spdlog::error("cannot start the local socket: {}", local.status().ToString());
    return 1;
  }
  const DaemonConfig& d = config.daemon;
  if (Status s = PrepareSocketPath(d.grpc_socket); !s.ok()) {
    spdlog::error("{}", s.ToString());
    return 1;
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  auto token = WriteOperatorToken(d);
  if (!token.ok()) {
    spdlog::error("{}", token.status().ToString());
    return 1;
  }
  GrpcService::PeersProvider peers;
  if (cluster) peers = [c = cluster.get()] { return c->ListPeers(); };
  auto service = GrpcService::Make(**node, *token, peers);
  // The client API on the unix socket (permission-checked). With peers,
  // the TCP port serves only the peer API, whose calls carry a token won
  // with the cluster secret; without, it serves the client API (trusted
  // networks only, see README).
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + d.grpc_socket, grpc::InsecureServerCredentials());
  int tcp_port = 0;
  if (!d.grpc_tcp.empty() && !cluster) {
    builder.AddListeningPort(d.grpc_tcp, grpc::InsecureServerCredentials(), &tcp_port);
  }
  builder.SetMaxReceiveMessageSize(80 << 20);
  builder.SetMaxSendMessageSize(80 << 20);
  // One connection cannot open unbounded streams, and messages in flight
  // (up to 80 MiB each) cannot take unbounded memory: gRPC refuses with
  // RESOURCE_EXHAUSTED past these.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, 128);
  grpc::ResourceQuota quota("isometryd-grpc");
  quota.Resize(size_t{1} << 30);
  builder.SetResourceQuota(quota);
  builder.RegisterService(service->service());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  std::unique_ptr<grpc::Server> peer_server;
  if (server && cluster) {
    grpc::ServerBuilder pb;
    pb.AddListeningPort(d.grpc_tcp, grpc::InsecureServerCredentials(), &tcp_port);
    pb.SetMaxReceiveMessageSize(16 << 20);
    pb.RegisterService(cluster->service());
    peer_server = pb.BuildAndStart();
  }
  if (!server || (!d.grpc_tcp.empty() && tcp_port == 0)) {
    spdlog::error("cannot start the gRPC server on unix:{}{}", d.grpc_socket,
                  d.grpc_tcp.empty() ? "" : " and " + d.grpc_tcp);
    return 1;
  }
  if (Status s = ApplySocketPermissions(d.grpc_socket, d.socket_mode, d.socket_group); !s.ok()) {
    spdlog::error("{}", s.ToString());
    return 1;
  }
  spdlog::info(
      "gRPC on unix:{}{}", d.grpc_socket,
      d.grpc_tcp.empty() ? "" : (cluster ? "; peer API on tcp " : " and tcp ") + d.grpc_tcp);
  spdlog::info("isometryd {} ready: node {}, {} memories, {} channel(s)", ISOMETRY_VERSION,
               config.runtime.node, config.runtime.memories.size(), config.runtime.channels.size());
  sd_notify(0, "READY=1\nSTATUS=serving");

  uint64_t watchdog_usec = 0;
  const bool watchdog = sd_watchdog_enabled(0, &watchdog_usec) > 0;
  const auto tick =
      std::chrono::milliseconds(watchdog ? std::min<uint64_t>(250, watchdog_usec / 2000) : 250);
  int sig = 0;
  while (true) {
    timespec ts{0, static_cast<long>(tick.count()) * 1000000L};
    sig = sigtimedwait(&signals, nullptr, &ts);
    if (sig == SIGTERM || sig == SIGINT) break;
    if (sig == SIGHUP)
      spdlog::info("SIGHUP: configuration reload is not supported; restart to apply");
    (*node)->SampleThroughput();
    if (watchdog) sd_notify(0, "WATCHDOG=1");
  }
  spdlog::info("{}: stopping; in-flight transfers get {} ms to finish", strsignal(sig),
               d.shutdown_grace_ms);
  sd_notify(0, "STOPPING=1\nSTATUS=draining");
  const Node::DrainOutcome drained = (*node)->Drain(std::chrono::milliseconds(d.shutdown_grace_ms));
  if (drained.stuck > 0) {
    // Tearing down would wait for them: leave now. Pending DSK writes are
    // unnamed (O_TMPFILE) files, so nothing half-written is left behind.
    spdlog::error("stopped with {} transfer(s) abandoned", drained.stuck);
    ::unlink(d.grpc_socket.c_str());
    ::unlink(d.local_socket.c_str());
    spdlog::shutdown();
    std::_Exit(1);
  }
  if (cluster) cluster->Stop();
  service->Shutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (peer_server)
    peer_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  local->reset();
  server.reset();
  peer_server.reset();
  ::unlink(d.grpc_socket.c_str());
  node->reset();
  cluster.reset();
  if (drained.cancelled > 0) {
    spdlog::warn("stopped; {} transfer(s) were cancelled by the shutdown (exit status 1)",
                 drained.cancelled);
    return 1;
  }
  spdlog::info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "isometryd: the Isometry per-node data transfer daemon.\n"
      "Without --config it serves the embedded single-node default."};
  std::string config_path;
  bool print_default = false, check_only = false;
  std::string log_level;
  app.add_option("-c,--config", config_path, "TOML configuration file")->check(CLI::ExistingFile);
  app.add_flag("--print-default-config", print_default,
               "print the embedded default config and exit");
  app.add_flag("--check-config", check_only, "validate the configuration and exit (0 = valid)");
  app.add_option("--log-level", log_level, "override daemon.log_level")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  CLI11_PARSE(app, argc, argv);

  if (print_default) {
    std::cout << EmbeddedDefaultConfig();
    return 0;
  }
  auto config = config_path.empty() ? ParseConfig(EmbeddedDefaultConfig(), "<embedded default>")
                                    : LoadConfigFile(config_path);
  if (!config.ok()) {
    std::fprintf(stderr, "isometryd: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  if (!log_level.empty()) config->daemon.log_level = log_level;
  // The same checks for --check-config and for a start: what passes here
  // does not fail later for a reason these could have seen.
  if (Status s = config->origin.Locate(CheckStartable(*config)); !s.ok()) {
    std::fprintf(stderr, "isometryd: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (check_only) {
    std::printf("%s: valid (%zu memories, %zu channels)\n",
                config_path.empty() ? "<embedded default>" : config_path.c_str(),
                config->runtime.memories.size(), config->runtime.channels.size());
    return 0;
  }
  return Serve(*config);
}
