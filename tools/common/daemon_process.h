// Runs a private isometryd for tests and benchmarks: its own temporary
// directory, sockets and state; stopped with SIGTERM. The daemon also gets
// SIGTERM when the process that started it ends, however it ends (Ctrl-C,
// kill -9, ctest's timeout): none is left running. The kernel sends it when
// the *thread* that called Start() exits, so start daemons from a thread
// that outlives them (the main thread, a test's own thread).
#pragma once

#include <sys/types.h>

#include <string>

#include "core/status.h"

namespace isometry::tools {

class DaemonProcess {
 public:
  // Writes a config ([daemon] with private paths, then `extra_toml`) and
  // starts `binary`; returns once both sockets accept connections (an
  // error after 10 s, 60 s when calibrating). `calibrate`: measure
  // channels at start (off by default: tests need no figures and start
  // faster).
  static Result<DaemonProcess> Start(const std::string& binary, const std::string& extra_toml,
                                     const std::string& log_level = "warn", bool calibrate = false);
  DaemonProcess(DaemonProcess&& o) noexcept;
  DaemonProcess& operator=(DaemonProcess&&) = delete;
  DaemonProcess(const DaemonProcess&) = delete;
  ~DaemonProcess();  // SIGKILL if still running; removes the directory

  // SIGTERM and wait; the exit status (0 expected), or -1 after 10 s.
  int Stop();
  const std::string& local_socket() const { return local_; }
  const std::string& grpc_socket() const { return grpc_; }
  const std::string& dir() const { return dir_; }
  pid_t pid() const { return pid_; }

  // The daemon binary next to a tool in the build tree, or $ISOMETRYD.
  static std::string Locate(const char* argv0);

 private:
  DaemonProcess() = default;
  std::string dir_, local_, grpc_;
  pid_t pid_ = -1;
};

}  // namespace isometry::tools
