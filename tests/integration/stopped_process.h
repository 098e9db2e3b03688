// SIGSTOP a process and wait until it has stopped: kill() returns before
// the stop takes effect, and a thread still running on another core could
// take one more step that a test means to forbid.
#pragma once

#include <dirent.h>
#include <signal.h>
#include <sys/types.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

namespace isometry::testing {

// The state letter of /proc/<pid>/task/<tid>/stat ('T' stopped), or 0.
inline char TaskState(pid_t pid, const std::string& tid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + tid + "/stat");
  std::string line;
  std::getline(f, line);
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() ? line[paren + 2] : 0;
}

// Whether every thread of `pid` is stopped (or gone).
inline bool AllThreadsStopped(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return false;
  bool stopped = true;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const char s = TaskState(pid, e->d_name);
    if (s != 'T' && s != 't' && s != 0) stopped = false;
  }
  closedir(d);
  return stopped;
}

// Stops `pid` and returns once every one of its threads has.
inline void StopProcess(pid_t pid) {
  REQUIRE(::kill(pid, SIGSTOP) == 0);
  for (int i = 0; i < 5000; ++i) {
    if (AllThreadsStopped(pid)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  FAIL("process " << pid << " did not stop");
}

}  // namespace isometry::testing
