#include "tools/bench/peers.h"

#include <absl/base/thread_annotations.h>
#include <absl/synchronization/mutex.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <system_error>
#include <thread>
#include <vector>

#include "tools/bench/peer_process.h"

namespace isometry::bench {

namespace {

PeerResult Unavailable(std::string why) { return {false, 0, std::move(why)}; }

using Clock = PeerClock;
using namespace std::chrono_literals;

// Iteration counts aim at 1 s at this nominal speed: shared memory at half
// or twice it gives runs of 0.5-2 s, long enough to time and short enough
// for many rounds.
constexpr double kNominalBytesPerS = 8e9;

// Each of the two processes holds a send and a receive buffer; a size that
// does not fit would bring the OOM killer rather than a clean failure.
bool FitsInMemory(uint64_t bytes) {
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 &&
         bytes <= static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size) / 4;
}

uint64_t IterationsFor(uint64_t bytes) {
  return static_cast<uint64_t>(
      std::clamp(kNominalBytesPerS / static_cast<double>(bytes), 10.0, 1e6));
}

// The transports UCX chose towards the other process, from the lines that
// UCX_LOG_LEVEL=info prints per endpoint configuration, e.g.
//   ucp_worker.c:1763 UCX INFO ep_cfg[0]: tag(sysv/memory cma/memory)
// The endpoint a process has to itself ("tag(self/...") is skipped.
std::string UcxTagLanes(const std::string& output) {
  for (size_t at = output.find("tag("); at != std::string::npos; at = output.find("tag(", at + 1)) {
    const size_t end = output.find(')', at);
    if (end == std::string::npos) {
      break;
    }
    if (output.compare(at, 9, "tag(self/") != 0) {
      return output.substr(at, end + 1 - at);
    }
  }
  return "";
}

// --- UCX ---------------------------------------------------------------------

// A port that nothing uses now, found by binding to port 0 on loopback.
std::optional<uint16_t> FreeLoopbackPort() {
  const int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) {
    return std::nullopt;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const bool ok = bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  close(s);
  if (!ok) {
    return std::nullopt;
  }
  return ntohs(addr.sin_port);
}

// True once a socket listens on IPv4 TCP `port`. The perftest server's
// "Waiting for connection..." line cannot be awaited instead: its stdout is
// our pipe, so stdio holds the line back until the server exits.
bool Listening(uint16_t port) {
  std::ifstream tcp("/proc/net/tcp");
  char suffix[8];
  std::snprintf(suffix, sizeof suffix, ":%04X", port);
  std::string line;
  std::getline(tcp, line);  // column titles
  while (std::getline(tcp, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    if (state == "0A" && local.ends_with(suffix)) {
      return true;  // 0A: TCP_LISTEN
    }
  }
  return false;
}

bool AwaitListening(uint16_t port, pid_t server, Clock::time_point deadline) {
  while (Clock::now() < deadline && !Exited(server)) {
    if (Listening(port)) {
      return true;
    }
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// The client's "Final:" row, whose numbers are: iterations, 50th-percentile
// latency, average and overall overhead (us), average and overall bandwidth,
// average and overall message rate. Its "MB/s" are MiB/s: 64 MiB in
// 12332.451 us is printed as 5189.56. A *_lat test's latencies are one way
// (half the ping-pong's round trip).
struct UcxFinal {
  double median_latency_us = 0;
  double bandwidth_mib_s = 0;
};

std::optional<UcxFinal> ParseUcxFinal(const std::string& output) {
  const size_t at = output.rfind("Final:");
  if (at == std::string::npos) {
    return std::nullopt;
  }
  std::istringstream row(output.substr(at + std::strlen("Final:")));
  double field[6];
  for (double& f : field) {
    if (!(row >> f)) {
      return std::nullopt;
    }
  }
  return UcxFinal{field[1], field[5]};
}

// --- MPI ---------------------------------------------------------------------

struct Flavor {
  std::string name;
  std::string mpicc;
  Command launch;  // up to the program and its arguments
  std::string transport;
};

Flavor FlavorOf(MpiFlavor which) {
  if (which == MpiFlavor::kMpich) {
    // Debian's MPICH is ch4:ucx and moves large messages between local ranks
    // through UCX as well, so UCX is held to shared memory (else it also opens
    // TCP on every interface) and asked to log the transports it picks.
    // -iface lo keeps hydra's control traffic on loopback.
    return {
        "MPICH",
        "mpicc.mpich",
        {{"mpiexec.mpich", "-iface", "lo", "-n", "2"}, {"UCX_TLS=self,shm", "UCX_LOG_LEVEL=info"}},
        "ch4:ucx over UCX shared memory"};
  }
  // ob1 with the vader BTL is Open MPI's own shared-memory path (pml ucx would
  // hand the transfer to UCX, measured on its own). The benchmark runs as root
  // in containers, which mpirun refuses without the flag; --oversubscribe lets
  // 2 ranks run on a single core; oob_tcp_if_include=lo keeps mpirun's
  // bootstrap traffic on loopback.
  return {"Open MPI",
          "mpicc.openmpi",
          {{"mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-np", "2", "--mca", "pml",
            "ob1", "--mca", "btl", "self,vader", "--mca", "oob_tcp_if_include", "lo"},
           {}},
          "pml ob1, btl vader (shared memory)"};
}

// Where the MPI programs are built; removed at exit.
class BuildDir {
 public:
  BuildDir() {
    char path[] = "/tmp/isometry_bench_mpi_XXXXXX";
    if (mkdtemp(path)) {
      path_ = path;
    }
  }
  ~BuildDir() {
    std::error_code ignored;
    if (!path_.empty()) {
      std::filesystem::remove_all(path_, ignored);
    }
  }
  BuildDir(const BuildDir&) = delete;
  BuildDir& operator=(const BuildDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct Build {
  bool ok = false;
  std::string binary_or_error;
};

// Builds `source_dir`/`program`.c with the flavour's mpicc.
Build Compile(const Flavor& f, const std::string& program, const std::string& source_dir,
              const std::string& dir) {
  if (dir.empty()) {
    return {false, "cannot create a temporary directory"};
  }
  const std::string source = source_dir + "/" + program + ".c";
  if (access(source.c_str(), R_OK) != 0) {
    return {false, "cannot read " + source};
  }
  const std::string binary = dir + "/" + f.mpicc + "_" + program;
  const Command cc{{f.mpicc, "-O2", "-o", binary, source}, {}};
  std::string error;
  const std::optional<Outcome> o = Run(cc, Clock::now() + kPeerTimeout, &error);
  if (!o) {
    return {false, error};
  }
  if (const std::string why = FailureOf(*o); !why.empty()) {
    return {false, Describe(cc) + ": " + why};
  }
  return {true, binary};
}

// The value of "bytes_per_s=" in mpi_bandwidth's line.
std::optional<double> ParseMpiLine(const std::string& output) {
  const size_t at = output.find("bytes_per_s=");
  if (at == std::string::npos) {
    return std::nullopt;
  }
  const char* begin = output.c_str() + at + std::strlen("bytes_per_s=");
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  if (end == begin || !(v > 0)) {
    return std::nullopt;
  }
  return v;
}

// Compiles the program for `which` the first time it is asked for; later
// calls, failed ones included, get the first answer.
Build BuildOnce(MpiFlavor which, const Flavor& f, const std::string& program,
                const std::string& source_dir) {
  struct Builds {
    absl::Mutex mu;
    BuildDir dir ABSL_GUARDED_BY(mu);
    std::map<std::pair<MpiFlavor, std::string>, Build> built ABSL_GUARDED_BY(mu);
  };
  static Builds builds;
  absl::MutexLock lock(&builds.mu);
  const auto key = std::make_pair(which, program);
  if (auto it = builds.built.find(key); it != builds.built.end()) {
    return it->second;
  }
  return builds.built[key] = Compile(f, program, source_dir, builds.dir.path());
}

// Runs `args` after the flavour's launcher and parses mpi_*.c's
// "bytes_per_s=" line.
PeerResult RunMpi(const Flavor& f, const std::vector<std::string>& args) {
  Command run = f.launch;
  run.argv.insert(run.argv.end(), args.begin(), args.end());
  const std::string command = Describe(run);
  std::string error;
  const std::optional<Outcome> o = Run(run, Clock::now() + kPeerTimeout, &error);
  if (!o) {
    return Unavailable(f.name + ": " + error);
  }
  if (const std::string why = FailureOf(*o); !why.empty()) {
    return Unavailable(f.name + ": " + why + " [" + command + "]");
  }
  const std::optional<double> bandwidth = ParseMpiLine(o->output);
  if (!bandwidth) {
    return Unavailable(f.name + ": no bytes_per_s= in output [" + command +
                       "]: " + Tail(o->output));
  }
  const std::string lanes = UcxTagLanes(o->output);
  return {true, *bandwidth,
          command + " (transport: " + f.transport + (lanes.empty() ? "" : ", UCX " + lanes) + ")"};
}

}  // namespace

namespace {

// One `ucx_perftest -t test` pair (server and client on this node, UCX
// restricted to shared memory) of `bytes` messages: the client's output, or
// why it gave none. `commands` gets what ran.
std::optional<std::string> RunUcxPerftest(const std::string& test, uint64_t bytes,
                                          uint64_t iterations, std::string* commands,
                                          std::string* why) {
  const auto deadline = Clock::now() + kPeerTimeout;
  const std::optional<uint16_t> port = FreeLoopbackPort();
  if (!port) {
    *why = "UCX: no free TCP port on 127.0.0.1";
    return std::nullopt;
  }
  const std::vector<std::string> args = {"-t", test,
                                         "-s", std::to_string(bytes),
                                         "-n", std::to_string(iterations),
                                         "-w", std::to_string(WarmupFor(iterations)),
                                         "-p", std::to_string(*port)};
  // UCX_TLS=shm is enough: the processes swap UCX addresses over perftest's
  // own TCP connection (-p), not through a UCX transport, so no tcp or sockcm
  // transport is needed for wireup. The server listens on all addresses (it
  // has no option to bind one); the client reaches it on loopback.
  // UCX_LOG_LEVEL=info makes UCX print the transports it picked.
  const std::vector<std::string> env = {"UCX_TLS=shm", "UCX_LOG_LEVEL=info"};
  Command server{{"ucx_perftest"}, env}, client{{"ucx_perftest", "127.0.0.1"}, env};
  server.argv.insert(server.argv.end(), args.begin(), args.end());
  client.argv.insert(client.argv.end(), args.begin(), args.end());
  *commands = Describe(server) + " & " + Describe(client);

  std::string error;
  const std::optional<Child> s = Spawn(server, &error);
  if (!s) {
    *why = "UCX: " + error;
    return std::nullopt;
  }
  if (!AwaitListening(*port, s->pid, deadline)) {
    const Outcome so = Finish(*s, Clock::now());
    const std::string failure = FailureOf(so);
    *why = "UCX: server did not listen on port " + std::to_string(*port) + ", " +
           (failure.empty() ? "exited: " + Tail(so.output) : failure) + " [" + Describe(server) +
           "]";
    return std::nullopt;
  }
  const std::optional<Outcome> co = Run(client, deadline, &error);
  const std::string client_failure = co ? FailureOf(*co) : error;
  // Without a client that ran to the end, the server would wait for it forever.
  const Outcome so = Finish(*s, client_failure.empty() ? deadline : Clock::now());
  if (!client_failure.empty()) {
    *why = "UCX: client " + client_failure + " [" + *commands + "]";
    return std::nullopt;
  }
  if (const std::string failure = FailureOf(so); !failure.empty()) {
    *why = "UCX: server " + failure + " [" + *commands + "]";
    return std::nullopt;
  }
  return co->output;
}

}  // namespace

PeerResult UcxTagBwShm(uint64_t bytes) {
  if (bytes == 0 || !FitsInMemory(bytes)) {
    return Unavailable("UCX: size must be positive and at most a quarter of the memory");
  }
  std::string commands, why;
  const std::optional<std::string> out =
      RunUcxPerftest("tag_bw", bytes, IterationsFor(bytes), &commands, &why);
  if (!out) {
    return Unavailable(why);
  }
  const std::optional<UcxFinal> final_row = ParseUcxFinal(*out);
  if (!final_row) {
    return Unavailable("UCX: no Final: row [" + commands + "]: " + Tail(*out));
  }
  return {true, final_row->bandwidth_mib_s * 1048576.0,
          commands + " (transport: UCX " + UcxTagLanes(*out) + ")"};
}

PeerLatency UcxTagLatShm(uint64_t bytes, uint64_t iterations) {
  if (bytes == 0 || !FitsInMemory(bytes) || iterations == 0) {
    return {false, 0, "UCX: size and iterations must be positive"};
  }
  std::string commands, why;
  const std::optional<std::string> out =
      RunUcxPerftest("tag_lat", bytes, iterations, &commands, &why);
  if (!out) {
    return {false, 0, why};
  }
  const std::optional<UcxFinal> final_row = ParseUcxFinal(*out);
  if (!final_row || final_row->median_latency_us <= 0) {
    return {false, 0, "UCX: no Final: row [" + commands + "]: " + Tail(*out)};
  }
  return {true, final_row->median_latency_us,
          commands + " (transport: UCX " + UcxTagLanes(*out) + ")"};
}

PeerResult MpiSendBandwidth(MpiFlavor which, uint64_t bytes, const std::string& source_dir) {
  const Flavor f = FlavorOf(which);
  // MPI counts are int; mpi_bandwidth.c sends the message as one MPI_BYTE array.
  if (bytes == 0 || bytes > INT_MAX || !FitsInMemory(bytes)) {
    return Unavailable(f.name +
                       ": size must be 1..2^31-1 bytes and at most a quarter of the memory");
  }
  const Build build = BuildOnce(which, f, "mpi_bandwidth", source_dir);
  if (!build.ok) {
    return Unavailable(f.name + ": " + build.binary_or_error);
  }
  const uint64_t iterations = IterationsFor(bytes);
  return RunMpi(f, {build.binary_or_error, std::to_string(bytes), std::to_string(iterations),
                    std::to_string(WarmupFor(iterations))});
}

PeerResult MpiDatatypeBandwidth(MpiFlavor which, const std::string& kernel, int64_t block,
                                uint64_t iterations, const std::string& source_dir) {
  const Flavor f = FlavorOf(which);
  const Build build = BuildOnce(which, f, "mpi_datatype", source_dir);
  if (!build.ok) {
    return Unavailable(f.name + ": " + build.binary_or_error);
  }
  iterations = std::max<uint64_t>(iterations, 1);
  return RunMpi(f, {build.binary_or_error, kernel, std::to_string(iterations),
                    std::to_string(WarmupFor(iterations)), std::to_string(block)});
}

uint64_t WarmupFor(uint64_t iterations) { return std::max<uint64_t>(1, iterations / 10); }

}  // namespace isometry::bench
