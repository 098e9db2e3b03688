#include "tools/bench/peers.h"

#include <absl/base/thread_annotations.h>
#include <absl/synchronization/mutex.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

extern char** environ;

namespace isometry::bench {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A peer step (a compile, a server and client pair, an MPI job) taking longer
// than this has hung.
constexpr auto kPeerTimeout = 60s;
// Time a launcher gets after SIGTERM to stop its ranks before SIGKILL.
constexpr auto kTermGrace = 3s;
// Iteration counts aim at 1 s at this nominal speed: shared memory at half
// or twice it gives runs of 0.5-2 s, long enough to time and short enough
// for many rounds.
constexpr double kNominalBytesPerS = 8e9;

struct Command {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH
  std::vector<std::string> env;   // "NAME=value", added to our environment
};

// A started process, leader of its own process group, whose stdout and
// stderr both go to the non-blocking pipe end `fd`.
struct Child {
  pid_t pid = -1;
  int fd = -1;
};

struct Outcome {
  bool timed_out = false;
  int status = 0;      // as from waitpid
  std::string output;  // stdout and stderr, interleaved
};

PeerResult Unavailable(std::string why) { return {false, 0, std::move(why)}; }

std::string Describe(const Command& c) {
  std::string s;
  for (const std::string& part : c.env) {
    s += part + " ";
  }
  for (const std::string& part : c.argv) {
    s += part + " ";
  }
  s.pop_back();  // argv is never empty
  return s;
}

// The end of a tool's output on one line, for `detail`.
std::string Tail(const std::string& output) {
  constexpr size_t kKeep = 400;
  std::string tail = output.substr(output.size() - std::min(output.size(), kKeep));
  while (!tail.empty() && std::isspace(static_cast<unsigned char>(tail.back()))) {
    tail.pop_back();
  }
  std::replace(tail.begin(), tail.end(), '\n', ' ');
  return tail;
}

std::optional<std::string> FindInPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string_view dirs = path ? path : "/usr/bin:/bin";
  while (!dirs.empty()) {
    const size_t colon = std::min(dirs.find(':'), dirs.size());
    const std::string candidate = std::string(dirs.substr(0, colon)) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    dirs.remove_prefix(std::min(colon + 1, dirs.size()));
  }
  return std::nullopt;
}

// Our environment with `overrides` ("NAME=value") replacing same-named entries.
std::vector<std::string> ChildEnv(const std::vector<std::string>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string_view entry(*e);
    const bool replaced =
        std::any_of(overrides.begin(), overrides.end(), [&](const std::string& o) {
          return entry.substr(0, entry.find('=') + 1) ==
                 std::string_view(o).substr(0, o.find('=') + 1);
        });
    if (!replaced) {
      env.emplace_back(entry);
    }
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (std::string& s : strings) {
    pointers.push_back(s.data());
  }
  pointers.push_back(nullptr);
  return pointers;
}

// Starts `c` in a process group of its own, so that a timeout can signal the
// launcher and its helpers together; stdin is /dev/null because mpirun would
// otherwise forward ours to rank 0. posix_spawn rather than fork: the caller
// may have threads, and it reports exec failures as its return value.
std::optional<Child> Spawn(const Command& c, std::string* error) {
  const std::optional<std::string> path = FindInPath(c.argv[0]);
  if (!path) {
    *error = c.argv[0] + " not found in PATH";
    return std::nullopt;
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    *error = "pipe: " + std::error_code(errno, std::generic_category()).message();
    return std::nullopt;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<std::string> args = c.argv, env = ChildEnv(c.env);
  const std::vector<char*> argv = Pointers(args), envp = Pointers(env);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, path->c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    *error =
        "cannot start " + *path + ": " + std::error_code(rc, std::generic_category()).message();
    return std::nullopt;
  }
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  return Child{pid, fds[0]};
}

// True once the child has exited. It stays a zombie (WNOWAIT) until Finish
// reaps it, so its pid, which names its process group, cannot be reused
// while we may still signal that group.
bool Exited(pid_t pid) {
  siginfo_t info{};
  if (waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    return true;
  }
  return info.si_pid == pid;
}

// Appends what can be read now; false once the pipe is at end of file.
bool Drain(int fd, std::string* out) {
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      out->append(buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return n < 0 && errno == EAGAIN;
    }
  }
}

// SIGTERM first: mpirun and mpiexec then stop their ranks, which run in
// process groups of their own; SIGKILL if the launcher does not exit.
void Terminate(pid_t pid) {
  kill(-pid, SIGTERM);
  const auto give_up = Clock::now() + kTermGrace;
  while (!Exited(pid) && Clock::now() < give_up) {
    std::this_thread::sleep_for(10ms);
  }
  kill(-pid, SIGKILL);
}

// Collects the child's output until it exits, or terminates it at `deadline`,
// and reaps it. Stops at the leader's exit rather than at end of file, as
// helpers the leader leaves behind may hold the pipe open.
Outcome Finish(const Child& child, Clock::time_point deadline) {
  Outcome out;
  bool open = true;
  while (!Exited(child.pid)) {
    if (Clock::now() >= deadline) {
      out.timed_out = true;
      Terminate(child.pid);
      break;
    }
    if (open) {
      pollfd p{child.fd, POLLIN, 0};
      poll(&p, 1, 20);
      open = Drain(child.fd, &out.output);
    } else {
      std::this_thread::sleep_for(20ms);
    }
  }
  Drain(child.fd, &out.output);
  close(child.fd);
  waitpid(child.pid, &out.status, 0);
  return out;
}

// Runs `c` to its end or to `deadline`; nullopt (and `error`) if it could not
// start.
std::optional<Outcome> Run(const Command& c, Clock::time_point deadline, std::string* error) {
  const std::optional<Child> child = Spawn(c, error);
  if (!child) {
    return std::nullopt;
  }
  return Finish(*child, deadline);
}

// Why a finished run failed, with the end of its output; empty on success.
std::string FailureOf(const Outcome& o) {
  std::string why;
  if (o.timed_out) {
    why = "timed out after " + std::to_string(kPeerTimeout.count()) + " s";
  } else if (WIFSIGNALED(o.status)) {
    why = "killed by signal " + std::to_string(WTERMSIG(o.status));
  } else if (WEXITSTATUS(o.status) != 0) {
    why = "exit status " + std::to_string(WEXITSTATUS(o.status));
  } else {
    return "";
  }
  return why + ": " + Tail(o.output);
}

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
