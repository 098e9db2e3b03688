#include "tools/common/daemon_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/strings.h"
#include "core/unique_fd.h"
#include "tools/common/daemon_config.h"

extern char** environ;

namespace isometry::tools {

namespace {

bool Accepts(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

}  // namespace

Result<DaemonProcess> DaemonProcess::Start(const std::string& binary, const std::string& extra_toml,
                                           const std::string& log_level, bool calibrate) {
  DaemonProcess d;
  char tmpl[] = "/tmp/isometry-XXXXXX";
  if (!mkdtemp(tmpl)) {
    return Internal("mkdtemp failed");
  }
  d.dir_ = tmpl;
  d.local_ = d.dir_ + "/local.sock";  // where DaemonSection puts them
  d.grpc_ = d.dir_ + "/grpc.sock";
  const std::string config = d.dir_ + "/isometryd.toml";
  const std::string log = d.dir_ + "/isometryd.log";
  std::ofstream(config) << DaemonSection({.dir = d.dir_,
                                          .log_level = log_level,
                                          .shutdown_grace_ms = 2000,
                                          .calibrate = calibrate})
                        << extra_toml;
  std::string flag = "-c";
  char* argv[] = {const_cast<char*>(binary.c_str()), flag.data(), const_cast<char*>(config.c_str()),
                  nullptr};
  // Opened before the child exists: between vfork and exec the child may
  // only make system calls (it borrows this process's memory while this
  // thread waits).
  UniqueFd log_fd(open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!log_fd.valid()) {
    return Unavailable("cannot create ", log, ": ", ErrnoString(errno));
  }
  // The child reports a failed exec here; a successful one closes it.
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return Unavailable("cannot start ", binary, ": ", ErrnoString(errno));
  }
  UniqueFd exec_error(pipe_fds[0]), exec_error_to(pipe_fds[1]);
  const pid_t parent = getpid();
  d.pid_ = vfork();
  if (d.pid_ == 0) {
    // The daemon ends with this process, however that ends (a benchmark
    // stopped with Ctrl-C or pkill, a test killed at ctest's timeout): the
    // kernel sends it SIGTERM, the signal Stop() sends. getppid() catches
    // a parent that went before the request was in place.
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) == 0 && getppid() == parent &&
        dup2(log_fd.get(), 1) == 1 && dup2(log_fd.get(), 2) == 2) {  // dup2 clears CLOEXEC
      execve(binary.c_str(), argv, environ);
    }
    const int e = errno;
    (void)!write(exec_error_to.get(), &e, sizeof e);
    _exit(127);
  }
  const int spawn_errno = errno;
  log_fd.reset();
  exec_error_to.reset();  // so that the read below ends at the child's exec
  int exec_errno = 0;
  const bool exec_failed = d.pid_ > 0 && read(exec_error.get(), &exec_errno, sizeof exec_errno) ==
                                             static_cast<ssize_t>(sizeof exec_errno);
  if (d.pid_ < 0 || exec_failed) {
    if (exec_failed) waitpid(std::exchange(d.pid_, -1), nullptr, 0);
    return Unavailable("cannot start ", binary, ": ",
                       ErrnoString(exec_failed ? exec_errno : spawn_errno));
  }
  // Calibrating at start measures every channel before the sockets open:
  // seconds on a quiet machine, many more under the sanitizers on a busy
  // one.
  const int waits = calibrate ? 6000 : 1000;
  for (int i = 0; i < waits; ++i) {
    if (Accepts(d.grpc_) && Accepts(d.local_)) {
      return d;  // both listening, not only created
    }
    int status;
    if (waitpid(d.pid_, &status, WNOHANG) == d.pid_) {
      d.pid_ = -1;
      return Unavailable("isometryd exited at start; see ", log);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return Unavailable("isometryd did not come up in ", waits / 100, " s; see ", log);
}

DaemonProcess::DaemonProcess(DaemonProcess&& o) noexcept
    : dir_(std::move(o.dir_)),
      local_(std::move(o.local_)),
      grpc_(std::move(o.grpc_)),
      pid_(std::exchange(o.pid_, -1)) {}

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

int DaemonProcess::Stop() {
  if (pid_ <= 0) {
    return -1;
  }
  kill(pid_, SIGTERM);
  for (int i = 0; i < 1000; ++i) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

std::string DaemonProcess::Locate(const char* argv0) {
  if (const char* env = std::getenv("ISOMETRYD")) {
    return env;
  }
  // tools/<tool>/<binary> in the build tree -> daemon/isometryd
  std::error_code ec;
  const auto self = std::filesystem::canonical(argv0, ec);
  if (!ec) {
    const auto candidate = self.parent_path().parent_path().parent_path() / "daemon" / "isometryd";
    if (std::filesystem::exists(candidate)) {
      return candidate.string();
    }
  }
  return "isometryd";
}

}  // namespace isometry::tools
