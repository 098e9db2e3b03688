// isometryd: the Isometry node daemon.
//
// main() reads the command line and the configuration; Serve() brings the
// daemon up as a list of steps (each a function below that says what it
// needs), waits for a stop signal, drains and tears down in reverse order.
#include <fcntl.h>
#include <grpc/grpc.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <malloc.h>
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>

#include "config/config_parser.h"
#include "core/lock_checks.h"
#include "core/main_guard.h"
#include "core/random.h"
#include "core/strings.h"
#include "core/thread_slice.h"
#include "core/unique_fd.h"
#include "daemon/cluster/cluster.h"
#include "daemon/cluster/fault_injection.h"
#include "daemon/cpu_latency.h"
#include "daemon/node/copies.h"
#include "daemon/node/introspection.h"
#include "daemon/node/node.h"
#include "daemon/node/traffic_classes.h"
#include "daemon/ptrace_capability.h"
#include "daemon/server/grpc_service.h"
#include "daemon/server/local_server.h"
#include "daemon/server/metrics_http.h"
#include "daemon/server/metrics_snapshot.h"
#include "daemon/server/reflection_v1.h"
#include "daemon/server/task_limit.h"
#include "daemon/start_check.h"

using namespace isometry;

namespace {

constexpr char kClientService[] = "isometry.v1.Isometry";
// Concurrent calls one gRPC connection may have open (see StartGrpcServers).
constexpr int kMaxStreamsPerConnection = 4096;
// glibc's heap: blocks up to this size come from the heap, not mmap (gRPC's
// default largest message is 4 MiB)...
constexpr int kHeapMmapThreshold = 4 << 20;
// ...and a heap keeps this much free memory at its top (Main).
constexpr int kHeapTrimThreshold = 32 << 20;

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

// Signals are taken by sigtimedwait in the main thread only: they are
// blocked before any other thread starts, so every thread inherits the mask.
sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return signals;
}

// Peers: the data listener and the network channels exist before the node
// (its runtime owns the channels). Null without [[peer]].
Result<std::unique_ptr<Cluster>> CreateClusterIfPeers(const Config& config,
                                                      const FaultInjection& faults) {
  const ClusterConfig& c = config.cluster;
  if (!c.clustered()) {
    if (c.tls.enabled() || !c.secret_file.empty()) {
      spdlog::warn("[cluster] names {} but no [[peer]] and no etcd: this node runs alone",
                   c.tls.enabled() ? "TLS files" : "a secret file");
    }
    return std::unique_ptr<Cluster>();
  }
  return Cluster::Create(config, faults);
}

// The node, joined to the cluster layer before any server starts: clients
// and peers find the cluster layer ready.
Result<std::unique_ptr<Node>> CreateNode(const Config& config, Cluster* cluster) {
  auto node = Node::Create(config, cluster ? cluster->channel_context() : ChannelContext{});
  if (!node.ok()) return node;
  if (cluster) {
    (*node)->SetCrossCopier(cluster);
    cluster->Start(node->get());
  }
  return node;
}

// A fresh operator token per start, readable by the daemon's user only:
// whoever can read it (root, the isometry user) may cancel any transfer.
Result<std::string> WriteOperatorToken(const DaemonConfig& d) {
  const std::string token = RandomHex(16);
  const std::string path = d.state_dir + "/operator.token";
  ::unlink(path.c_str());
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return Internal("cannot write ", path, ": ", ErrnoString(errno));
  if (::write(fd.get(), token.data(), token.size()) != static_cast<ssize_t>(token.size())) {
    return Internal("cannot write ", path);
  }
  return token;
}

// The gRPC servers and what they serve; destroyed in reverse order of
// construction (servers before the services they call).
struct GrpcServers {
  std::unique_ptr<GrpcService> service;
  std::unique_ptr<ReflectionV1> reflection;
  std::unique_ptr<ReflectionV1> peer_reflection;
  std::unique_ptr<grpc::Server> server;       // the client API
  std::unique_ptr<grpc::Server> peer_server;  // the peer API (with peers only)
};

// The client API on the unix socket (permission-checked). With peers, the
// TCP port serves only the peer API, whose calls carry a token won with
// the cluster secret; without, it serves the client API (trusted networks
// only, see docs/operations/security.md, "Security model"). Each server answers health checks for
// "" and for the services it serves, and reflection (v1alpha from gRPC, v1 ours).
Result<GrpcServers> StartGrpcServers(const DaemonConfig& d, Node& node, Cluster* cluster,
                                     const std::string& operator_token) {
  GrpcServers g;
  GrpcService::PeersProvider peers;
  if (cluster) peers = [cluster] { return cluster->ListPeers(); };
  g.service = GrpcService::Make(node, operator_token, peers);
  g.reflection = ReflectionV1::Make({kClientService});

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
  // RESOURCE_EXHAUSTED past the quota. The stream bound is not refused but
  // queued in the client (HTTP/2): a call past it waits, silently, for
  // one to end, so it is far above what a client keeps open (a Wait per
  // transfer of a session: daemon.max_transfers_per_session, 1024 by
  // default). Each open call costs a reactor, not a thread.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, kMaxStreamsPerConnection);
  grpc::ResourceQuota quota("isometryd-grpc");
  quota.Resize(size_t{1} << 30);
  builder.SetResourceQuota(quota);
  builder.RegisterService(g.service->service());
  builder.RegisterService(g.reflection->service());
  g.server = builder.BuildAndStart();
  if (g.server && cluster) {
    g.peer_reflection = ReflectionV1::Make({Cluster::service_name()});
    grpc::ServerBuilder pb;
    pb.AddListeningPort(d.grpc_tcp, cluster->server_credentials(), &tcp_port);
    pb.SetMaxReceiveMessageSize(16 << 20);
    pb.RegisterService(cluster->service());
    pb.RegisterService(g.peer_reflection->service());
    g.peer_server = pb.BuildAndStart();
  }
  if (!g.server || (!d.grpc_tcp.empty() && tcp_port == 0)) {
    return Internal("cannot start the gRPC server on unix:", d.grpc_socket,
                    d.grpc_tcp.empty() ? "" : " and " + d.grpc_tcp);
  }
  g.server->GetHealthCheckService()->SetServingStatus(kClientService, true);
  if (g.peer_server) {
    g.peer_server->GetHealthCheckService()->SetServingStatus(Cluster::service_name(), true);
  }
  return g;
}

// GET /metrics with [metrics]; null without. It binds before the sockets
// are made, so a port in use stops the start before it touches a socket
// a running daemon may own.
Result<std::unique_ptr<MetricsHttpServer>> StartMetricsIfConfigured(const MetricsConfig& m,
                                                                    const Node& node,
                                                                    const Cluster* cluster) {
  if (!m.enabled) return std::unique_ptr<MetricsHttpServer>();
  MetricsPeersProvider peers;
  if (cluster) peers = [cluster] { return cluster->ListPeers(); };
  auto server = MetricsHttpServer::Start(
      m.listen, [&node, peers] { return RenderMetrics(TakeMetricsSnapshot(node, peers)); },
      {m.max_connections, std::chrono::milliseconds(m.request_timeout_ms)});
  if (server.ok()) spdlog::info("metrics on http://{}/metrics", m.listen);
  return server;
}

void AnnounceReady(const Config& config, bool with_peers) {
  const DaemonConfig& d = config.daemon;
  spdlog::info(
      "gRPC on unix:{}{}", d.grpc_socket,
      d.grpc_tcp.empty() ? "" : (with_peers ? "; peer API on tcp " : " and tcp ") + d.grpc_tcp);
  spdlog::info("isometryd {} ready: node {}, {} memories, {} channel(s)", ISOMETRY_VERSION,
               config.runtime.node, config.runtime.memories.size(), config.runtime.channels.size());
  // docs/operations/tuning.md, "Threads: names and slices".
  spdlog::info(ShortSliceSupported()
                   ? "threads a small copy waits on run with 100 us scheduler slices"
                   : "the threads a small copy waits on keep the default scheduler slice: the "
                     "kernel has no custom slices (Linux 6.12+), or the daemon runs under a "
                     "policy other than SCHED_OTHER or SCHED_BATCH");
  sd_notify(0, "READY=1\nSTATUS=serving");
}

// SIGHUP: reads the config file again and applies its [qos] (traffic
// classes; running transfers go on). A file that no longer parses or
// validates changes nothing. Other sections apply at the next start.
void ReloadOnHangup(const Config& running, Node& node) {
  if (running.origin.source == kEmbeddedDefaultSource) {
    spdlog::info("SIGHUP: running on the embedded default config; nothing to reload");
    return;
  }
  auto fresh = LoadConfigFile(running.origin.source);
  if (!fresh.ok()) {
    spdlog::error("SIGHUP: nothing reloaded: {}", std::string(fresh.status().message()));
    return;
  }
  node.traffic_classes().ReloadQos(fresh->qos);
  spdlog::info("SIGHUP: {} read again; [qos] applied, other sections apply at the next start",
               running.origin.source);
}

// Until SIGTERM or SIGINT (returned); meanwhile reloads [qos] on SIGHUP,
// samples throughput and pets systemd's watchdog when it has one.
int WaitForStopSignal(const sigset_t& signals, const Config& config, Node& node) {
  uint64_t watchdog_usec = 0;
  const bool watchdog = sd_watchdog_enabled(0, &watchdog_usec) > 0;
  const auto tick =
      std::chrono::milliseconds(watchdog ? std::min<uint64_t>(250, watchdog_usec / 2000) : 250);
  while (true) {
    timespec ts{0, static_cast<long>(tick.count()) * 1000000L};
    const int sig = sigtimedwait(&signals, nullptr, &ts);
    if (sig == SIGTERM || sig == SIGINT) return sig;
    if (sig == SIGHUP) ReloadOnHangup(config, node);
    node.introspection().SampleThroughput();
    if (watchdog) sd_notify(0, "WATCHDOG=1");
  }
}

// Transfers still stuck after the grace period: tearing down would wait for
// them, so the process leaves now. Pending DSK writes are unnamed
// (O_TMPFILE) files, so nothing half-written is left behind.
[[noreturn]] void AbandonStuck(const DaemonConfig& d, size_t stuck) {
  spdlog::error("stopped with {} transfer(s) abandoned", stuck);
  ::unlink(d.grpc_socket.c_str());
  ::unlink(d.local_socket.c_str());
  spdlog::shutdown();
  std::_Exit(1);
}

// The transfers a shutdown cancelled, named for the log: those in flight
// at the signal (`before`) that ended "cancelled", at most 8 named.
std::string NameCancelled(const Node& node, const std::vector<TransferReport>& before) {
  std::string names;
  size_t named = 0, more = 0;
  for (const TransferReport& r :
       node.copies().RecentTransfers(SessionRef(), /*is_operator=*/true)) {
    if (r.state != "cancelled") continue;
    const bool was_running = std::any_of(before.begin(), before.end(),
                                         [&r](const TransferReport& b) { return b.id == r.id; });
    if (!was_running) continue;
    if (named == 8) {
      ++more;
      continue;
    }
    names += StrCat(named++ ? ", " : "", r.id, " (client '", r.owner.client, "' session ",
                    r.owner.session, ", ", r.path.empty() ? "not started" : r.path, ")");
  }
  if (more > 0) names += StrCat(" and ", more, " more");
  return names;
}

// Stops the servers and the cluster layer in the order the calls between
// them need: peers first, then the clients' streams and servers.
void StopServing(const DaemonConfig& d, Cluster* cluster, GrpcServers& grpc,
                 std::unique_ptr<LocalServer>& local, std::unique_ptr<MetricsHttpServer>& metrics) {
  metrics.reset();
  if (cluster) cluster->Stop();
  grpc.service->Shutdown();
  grpc.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (grpc.peer_server) {
    grpc.peer_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
  local.reset();
  grpc.server.reset();
  grpc.peer_server.reset();
  ::unlink(d.grpc_socket.c_str());
}

// Logs why the daemon cannot start; the exit status.
int Fail(const std::string& line) {
  spdlog::error("{}", line);
  return 1;
}

int Serve(const Config& config) {
  const DaemonConfig& d = config.daemon;
  SetUpLogging(d.log_level);
  if (Status s = PrepareDirectories(d); !s.ok()) return Fail(s.ToString());
  const sigset_t signals = BlockStopSignals();
  // Held until Serve returns (the kernel drops it at exit in any case).
  UniqueFd cpu_latency;
  if (d.cpu_latency_us) {
    auto held = HoldCpuLatency(*d.cpu_latency_us);
    if (!held.ok()) return Fail(config.origin.Locate(held.status()).ToString());
    cpu_latency = *std::move(held);
    spdlog::info("holding a CPU wake-up latency request of {} us ({}; daemon.cpu_latency_us)",
                 *d.cpu_latency_us, kCpuLatencyDevice);
  }

  LogPtraceLoss(config);
  const FaultInjection faults = FaultInjectionFromEnvironment();
  auto cluster = CreateClusterIfPeers(config, faults);
  if (!cluster.ok()) return Fail("cannot start the cluster layer: " + cluster.status().ToString());
  auto node = CreateNode(config, cluster->get());
  if (!node.ok()) return Fail("cannot start: " + node.status().ToString());
  auto metrics = StartMetricsIfConfigured(config.metrics, **node, cluster->get());
  if (!metrics.ok()) return Fail(std::string(metrics.status().message()));
  auto local = LocalServer::Start(**node);
  if (!local.ok()) return Fail("cannot start the local socket: " + local.status().ToString());
  if (Status s = PrepareSocketPath(d.grpc_socket); !s.ok()) return Fail(s.ToString());
  // A reference to gRPC's globals never given back: the servers' teardown
  // then leaves them for the exit. gRPC's global shutdown joins its
  // executor's threads, and one may sit in a 10 s poll: SIGTERM then took
  // 10-15 s (every time at the task limit, now and then without).
  grpc_init();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  auto token = WriteOperatorToken(d);
  if (!token.ok()) return Fail(token.status().ToString());
  auto grpc = StartGrpcServers(d, **node, cluster->get(), *token);
  if (!grpc.ok()) return Fail(std::string(grpc.status().message()));
  if (Status s = ApplySocketPermissions(d.grpc_socket, d.socket_mode, d.socket_group); !s.ok()) {
    return Fail(s.ToString());
  }
  AnnounceReady(config, *cluster != nullptr);

  const int sig = WaitForStopSignal(signals, config, **node);
  // sigdescr_np: strsignal's buffer is shared between threads.
  const char* why = sigdescr_np(sig);
  spdlog::info("{}: stopping; in-flight transfers get {} ms to finish", why ? why : "signal",
               d.shutdown_grace_ms);
  sd_notify(0, "STOPPING=1\nSTATUS=draining");
  const std::vector<TransferReport> in_flight = (*node)->copies().ListTransfers();
  const Node::DrainOutcome drained = (*node)->Drain(std::chrono::milliseconds(d.shutdown_grace_ms));
  if (drained.stuck > 0) AbandonStuck(d, drained.stuck);
  if (const uint64_t refused = ThreadsRefused(); refused > 0) {
    spdlog::warn(
        "{} thread start(s) were refused while serving (the task limit: TasksMax=, "
        "pids.max, RLIMIT_NPROC); each failed only what needed it",
        refused);
  }
  const std::string cancelled = drained.cancelled ? NameCancelled(**node, in_flight) : "";
  StopServing(d, cluster->get(), *grpc, *local, *metrics);
  node->reset();
  cluster->reset();
  // A stop asked for and carried out, cancelled work included, is a
  // success to systemd (`systemctl stop` leaves the unit inactive, not
  // failed); the clients saw CANCELLED and the line names the transfers.
  // Only transfers abandoned above (a channel that did not answer) exit 1.
  if (drained.cancelled > 0) {
    spdlog::warn("stopped; {} transfer(s) were cancelled by the shutdown: {}", drained.cancelled,
                 cancelled.empty() ? "(ended before they could be named)" : cancelled);
    return 0;
  }
  spdlog::info("stopped");
  return 0;
}

struct Options {
  std::string config_path;
  bool print_default = false;
  bool check_only = false;
  std::string log_level;
};

// The embedded default without --config; --log-level overrides the file.
Result<Config> LoadConfig(const Options& o) {
  auto config = o.config_path.empty() ? ParseConfig(EmbeddedDefaultConfig(), kEmbeddedDefaultSource)
                                      : LoadConfigFile(o.config_path);
  if (config.ok() && !o.log_level.empty()) config->daemon.log_level = o.log_level;
  return config;
}

// The same checks for --check-config and for a start: what passes here
// does not fail later for a reason these could have seen.
Status CheckConfig(const Config& config) { return config.origin.Locate(CheckStartable(config)); }

int ExitUsage(const Status& s) {
  std::fprintf(stderr, "isometryd: %s\n", std::string(s.message()).c_str());
  return 2;
}

int Main(int argc, char** argv) {
  SetLockOrderChecksForBuild();
  // No fastbins: with them, every allocation above glibc's small sizes
  // (a transfer's state is 1.5 KiB, one per copy) first merges all freed
  // small chunks (malloc_consolidate), a measurable part of each 4 KiB ring
  // copy (docs/benchmarks/design-measurements.md, "Locks and allocation").
  // Small blocks still come from the per-thread cache. Before any thread.
  mallopt(M_MXFAST, 0);  // NOLINT(concurrency-mt-unsafe)
  // Buffers of up to a few MiB (a gRPC Write or Read of 1 MiB, an eager
  // put, a peer's frames) are allocated and freed at every call. Past
  // glibc's thresholds each one is mapped fresh or its heap's top handed
  // back to the kernel, and the next call faults every page in again (a
  // 1 MiB Write: 256 pages a buffer): these keep them in the heap for
  // reuse. What stays is at most what the busiest moment used
  // (docs/benchmarks/design-measurements.md, "Locks and allocation").
  mallopt(M_MMAP_THRESHOLD, kHeapMmapThreshold);  // NOLINT(concurrency-mt-unsafe)
  mallopt(M_TRIM_THRESHOLD, kHeapTrimThreshold);  // NOLINT(concurrency-mt-unsafe)
  CLI::App app{
      "isometryd: the Isometry per-node data transfer daemon.\n"
      "Without --config it serves the embedded single-node default."};
  app.set_version_flag("--version", std::string("isometryd ") + ISOMETRY_VERSION);
  Options o;
  app.add_option("-c,--config", o.config_path, "TOML configuration file")->check(CLI::ExistingFile);
  app.add_flag("--print-default-config", o.print_default,
               "print the embedded default config and exit");
  app.add_flag("--check-config", o.check_only, "validate the configuration and exit (0 = valid)");
  app.add_option("--log-level", o.log_level, "override daemon.log_level")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  CLI11_PARSE(app, argc, argv);

  if (o.print_default) {
    std::cout << EmbeddedDefaultConfig();
    return 0;
  }
  auto config = LoadConfig(o);
  if (!config.ok()) return ExitUsage(config.status());
  if (Status s = CheckConfig(*config); !s.ok()) return ExitUsage(s);
  if (o.check_only) {
    std::printf("%s: valid (%zu memories, %zu channels)\n",
                o.config_path.empty() ? kEmbeddedDefaultSource : o.config_path.c_str(),
                config->runtime.memories.size(), config->runtime.channels.size());
    return 0;
  }
  return Serve(*config);
}

}  // namespace

int main(int argc, char** argv) { return isometry::RunMain("isometryd", 1, Main, argc, argv); }
