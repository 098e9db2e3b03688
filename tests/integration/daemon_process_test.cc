// tools::DaemonProcess, the private isometryd of the benchmarks and the C++
// tests: a daemon it started does not outlive the process that started it,
// and a binary that cannot run is named in the error.
#include "tools/common/daemon_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "integration/daemon_fixture.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {

// Running (or sleeping): not gone, not a zombie waiting for init.
bool Running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z' &&
         line[paren + 2] != 'X';
}

struct Started {
  pid_t pid = -1;
  char dir[200] = {};
};

}  // namespace

TEST_CASE("a daemon started by a process that is killed with SIGKILL exits too") {
  const char* bin = std::getenv("ISOMETRYD");
  REQUIRE(bin != nullptr);
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  // The starter: a forked child of this test (a benchmark, say) that
  // starts a daemon, reports it, and waits to be killed.
  const pid_t starter = fork();
  REQUIRE(starter >= 0);
  if (starter == 0) {
    close(pipe_fds[0]);
    Started s;
    auto d = tools::DaemonProcess::Start(bin, testing::kOneMemory);
    if (!d.ok()) {
      std::fprintf(stderr, "starter: %s\n", d.status().ToString().c_str());
    } else {
      s.pid = d->pid();
      std::snprintf(s.dir, sizeof s.dir, "%s", d->dir().c_str());
    }
    (void)!write(pipe_fds[1], &s, sizeof s);
    for (;;) pause();
  }
  close(pipe_fds[1]);
  Started s;
  const bool reported = read(pipe_fds[0], &s, sizeof s) == static_cast<ssize_t>(sizeof s);
  close(pipe_fds[0]);
  if (!reported || s.pid <= 0) {
    kill(starter, SIGKILL);
    waitpid(starter, nullptr, 0);
    FAIL("the starter could not start a daemon");
  }
  REQUIRE(Running(s.pid));
  // Killed as a benchmark is by Ctrl-C's harsher cousins: no handler runs,
  // no destructor stops the daemon.
  REQUIRE(kill(starter, SIGKILL) == 0);
  REQUIRE(waitpid(starter, nullptr, 0) == starter);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (Running(s.pid) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const bool left_running = Running(s.pid);
  if (left_running) kill(s.pid, SIGKILL);  // not left behind by a failing test
  std::error_code ec;
  std::filesystem::remove_all(s.dir, ec);
  CHECK_FALSE(left_running);
}

TEST_CASE("a daemon binary that cannot run is named with the reason") {
  auto d = tools::DaemonProcess::Start("/nonexistent/isometryd", testing::kOneMemory);
  REQUIRE_FALSE(d.ok());
  CHECK_THAT(d.status().ToString(), Catch::Contains("cannot start /nonexistent/isometryd") &&
                                        Catch::Contains("No such file"));
}

}  // namespace ISOMETRY_TEST_FILE
